"""Ends by the license's term counted apart (issue 42): ``usage_rollups``,
``usage_minute_rollups`` and ``usage_client_rollups`` gain ``ended_by_term`` (integer,
NOT NULL, default 0). The audit insert (seatlease.records.rollups) counts there a
``lease.reclaimed`` whose ``metadata.reason`` is ``license_expired`` or
``license_not_started`` (the license's end, or a start moved later, ended the lease: no
client crashed), and no longer in ``reclaimed``; it stores such a lease's
``usage_leases.end_type`` as ``lease.reclaimed:term`` (a value of the existing column:
no column there). The reports read both (``ended_by_term`` beside ``reclaimed``, and
``reclaimed_percent`` of crashes only).

No table is rewritten or scanned: on PostgreSQL 11 and later ``ADD COLUMN ... NOT NULL
DEFAULT <constant>`` only records the default in the catalogue (existing rows read it
from there), with a brief ACCESS EXCLUSIVE lock; SQLite adds a column in place
(``ALTER TABLE ... ADD COLUMN``, no copy).

**Rows written before this revision stay as they are**: nothing is backfilled, so an
expiry stored before the upgrade stays counted as ``reclaimed`` in the rollups (and as
``lease.reclaimed`` in ``usage_leases``: its lease duration's ``reclaimed`` and the
per-user report's ``ended_by_term`` do not see it). Only the part of a window that the
reports read from the raw events (a minute or hour the window cuts) sees those older
expiries as ``ended_by_term``. A backfill from the raw events would have to read every
stored ``lease.reclaimed`` (``lease_events`` has no index on the type) while the
rollups are being written; license terms exist only since 0011, so few such events
predate this revision.

The downgrade gives the older release what it counted: ``ended_by_term`` back into
``reclaimed`` (rows with some only), ``lease.reclaimed:term`` back to
``lease.reclaimed``, then the columns dropped (SQLite copies each table for that).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLES = ("usage_rollups", "usage_minute_rollups", "usage_client_rollups")
TERM_END_TYPE = "lease.reclaimed:term"  # frozen: rollups.TERM_END_TYPE as of 0015


def upgrade() -> None:
    for table in TABLES:
        # Plain ALTER TABLE (not batch: SQLite needs no copy for an added column).
        op.add_column(
            table, sa.Column("ended_by_term", sa.Integer, nullable=False, server_default="0")
        )


def downgrade() -> None:
    op.execute(
        f"UPDATE usage_leases SET end_type = 'lease.reclaimed' WHERE end_type = '{TERM_END_TYPE}'"
    )
    for table in reversed(TABLES):
        op.execute(
            f"UPDATE {table} SET reclaimed = reclaimed + ended_by_term WHERE ended_by_term > 0"
        )
        with op.batch_alter_table(table) as batch:
            batch.drop_column("ended_by_term")
