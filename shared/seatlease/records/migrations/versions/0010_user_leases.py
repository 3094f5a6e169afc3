"""The per-user report at any size: ``usage_leases.user_name`` (each lease's user: the
acquire's ``metadata.user`` when it is a string), filled by the audit insert from now on
and here from the stored acquires, and ``ix_lease_events_queue``, a partial index of the
wait queue's outcomes (``queue.granted``, ``queue.left``).

The per-user report read every raw event of its window into Python and paired each
lease's two ends there, so it refused windows of more than 500,000 events. It now sums
``usage_leases`` (one row per lease, both ends already paired by the audit insert) by
license and user, and reads only the queue's outcomes from ``lease_events``
(bench/NOTEBOOK.md, "The per-user report at production size": a year of a 10,000,000-event
license).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

STARTS = "type IN ('lease.acquired', 'lease.borrowed')"
QUEUE_OUTCOMES = "type IN ('queue.granted', 'queue.left')"


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("usage_leases") as batch:
        batch.add_column(sa.Column("user_name", sa.Text, nullable=True))
    # Each lease's user is that of the acquire its acquired_at is from (the first one by
    # time, then event id, as the audit insert takes it); leases without a user stay NULL.
    if bind.dialect.name == "postgresql":
        user = "CASE WHEN jsonb_typeof(e.metadata->'user') = 'string' THEN e.metadata->>'user' END"
        op.execute(
            f"""
            UPDATE usage_leases l SET user_name = s.user_name
            FROM (
                SELECT DISTINCT ON (e.session_id) e.session_id, {user} AS user_name
                FROM lease_events e JOIN usage_leases u
                  ON u.session_id = e.session_id AND u.tenant_id = e.tenant_id
                 AND u.license_id = e.license_id AND u.acquired_at = e.occurred_at
                WHERE e.{STARTS} AND jsonb_typeof(e.metadata->'user') = 'string'
                ORDER BY e.session_id, e.event_id
            ) s
            WHERE l.session_id = s.session_id"""
        )
    else:
        # Through the (tenant, license, time) index: lease_events has none on session_id.
        user = (
            "CASE WHEN json_type(e.metadata, '$.user') = 'text' "
            "THEN json_extract(e.metadata, '$.user') END"
        )
        op.execute(
            f"""
            UPDATE usage_leases SET user_name = (
                SELECT {user} FROM lease_events e
                WHERE e.tenant_id = usage_leases.tenant_id
                  AND e.license_id = usage_leases.license_id
                  AND e.occurred_at = usage_leases.acquired_at
                  AND e.session_id = usage_leases.session_id AND e.{STARTS}
                ORDER BY e.event_id LIMIT 1)
            WHERE acquired_at IS NOT NULL"""
        )
    op.create_index(
        "ix_lease_events_queue",
        "lease_events",
        ["tenant_id", "license_id", "occurred_at"],
        postgresql_where=sa.text(QUEUE_OUTCOMES),
        sqlite_where=sa.text(QUEUE_OUTCOMES),
    )


def downgrade() -> None:
    op.drop_index("ix_lease_events_queue", "lease_events")
    with op.batch_alter_table("usage_leases") as batch:
        batch.drop_column("user_name")
