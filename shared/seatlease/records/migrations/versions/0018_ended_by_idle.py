"""Idle reclaims counted apart, and the idle warnings found without a scan (issue 50):
``usage_rollups``, ``usage_minute_rollups`` and ``usage_client_rollups`` gain
``ended_by_idle`` (integer, NOT NULL, default 0), ``lease_events`` a partial index
``ix_lease_events_idle`` of the ``lease.idle`` and ``lease.active`` events alone, and
``usage_leases`` a partial index ``ix_usage_leases_user`` of the leases with a user.

The audit insert (seatlease.records.rollups) counts in ``ended_by_idle`` a
``lease.reclaimed`` whose ``metadata.reason`` is ``idle`` (the license's idle rule took
the seat of a client that said it was idle, after warning it: no client crashed), and no
longer in ``reclaimed``, exactly as ``ended_by_term`` (migration 0015); such a lease's
``usage_leases.end_type`` is ``lease.reclaimed:idle`` (a value of the existing column).
The sizing report reads the idle warnings (``lease.idle``: the lease was warned, idle
since ``occurred_at - metadata.idle_seconds``; ``lease.active``: the warning was
cancelled) through the index: only licenses with an idle rule have such events, so it
costs the other events no entry, as ``ix_lease_events_queue`` (migration 0010); and it
asks ``ix_usage_leases_user`` whether a license's leases have users at all before it
sweeps them for what sharing would have saved (records/reports/savings.py).

No table is rewritten or scanned for the columns (``ADD COLUMN ... NOT NULL DEFAULT
<constant>``: a catalogue change on PostgreSQL 11 and later, in place on SQLite). Each
index is built by reading its table once (``lease_events`` on PostgreSQL partition by
partition; no event of those types exists before this release, so that one is empty;
``usage_leases`` holds a row per lease of the audit retention).
Nothing is backfilled: no idle reclaim existed before this release.

The downgrade gives the older release what it counted: ``ended_by_idle`` back into
``reclaimed``, ``lease.reclaimed:idle`` back to ``lease.reclaimed``, then the indexes
and the columns dropped.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TABLES = ("usage_rollups", "usage_minute_rollups", "usage_client_rollups")
IDLE_END_TYPE = "lease.reclaimed:idle"  # frozen: rollups.IDLE_END_TYPE as of 0018
IDLE_EVENTS = "type IN ('lease.idle', 'lease.active')"  # frozen: sizing's idle events
WITH_USER = "user_name IS NOT NULL"


def upgrade() -> None:
    for table in TABLES:
        # Plain ALTER TABLE (not batch: SQLite needs no copy for an added column).
        op.add_column(
            table, sa.Column("ended_by_idle", sa.Integer, nullable=False, server_default="0")
        )
    op.create_index(
        "ix_lease_events_idle",
        "lease_events",
        ["tenant_id", "license_id", "occurred_at"],
        postgresql_where=sa.text(IDLE_EVENTS),
        sqlite_where=sa.text(IDLE_EVENTS),
    )
    op.create_index(
        "ix_usage_leases_user",
        "usage_leases",
        ["tenant_id", "license_id", "acquired_at"],
        postgresql_where=sa.text(WITH_USER),
        sqlite_where=sa.text(WITH_USER),
    )


def downgrade() -> None:
    op.drop_index("ix_usage_leases_user", "usage_leases")
    op.drop_index("ix_lease_events_idle", "lease_events")
    op.execute(
        f"UPDATE usage_leases SET end_type = 'lease.reclaimed' WHERE end_type = '{IDLE_END_TYPE}'"
    )
    for table in reversed(TABLES):
        op.execute(
            f"UPDATE {table} SET reclaimed = reclaimed + ended_by_idle WHERE ended_by_idle > 0"
        )
        with op.batch_alter_table(table) as batch:
            batch.drop_column("ended_by_idle")
