"""Right-sizing (docs/design.md, "Right-sizing"): ``usage_refusals``, one row per
license, UTC minute and refused client, filled by the audit insert from ``lease.refused``
events (seatlease.records.rollups), and ``usage_queue_waits``, one row per ended
wait-queue ticket with how long it waited. New tables: nothing existing is rewritten or
scanned, so the upgrade takes no time at any size (no backfill: the waits of tickets
ended before it are in the raw events only).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_refusals",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("license_id", sa.String(128), primary_key=True),
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("client_id", sa.String(128), primary_key=True),
        sa.Column("user_name", sa.Text, nullable=True),
        sa.Column("seats", sa.Integer, nullable=False, server_default="1"),
        sa.Column("refusals", sa.Integer, nullable=False, server_default="1"),
        sa.Column("served", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("true_denial", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("waiting", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("lower_bound", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "usage_queue_waits",
        sa.Column("event_id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("license_id", sa.String(128), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("waited_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_usage_queue_waits_license",
        "usage_queue_waits",
        ["tenant_id", "license_id", "ended_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_usage_queue_waits_license", table_name="usage_queue_waits")
    op.drop_table("usage_queue_waits")
    op.drop_table("usage_refusals")
