"""Webhooks (issue 51): ``webhook_endpoints`` (a tenant's receivers, their encrypted
signing secrets and whether they are failing), ``webhook_deliveries`` (one event for one
endpoint: its payload, attempts, next attempt, state and the claim of the worker sending
it) and ``webhook_attempts`` (each attempt's time, HTTP status, latency and error).
seatlease.webhooks.store and .deliver use them.

New tables only: nothing existing is rewritten or scanned, so the upgrade takes no time at
any size. The downgrade drops them (their deliveries and log go with them).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

ID = sa.String(128)
WEBHOOK_ID = sa.String(64)
ROW_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # autoincrement on both
PENDING = "state = 'pending'"
CLAIMED = "claim IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", WEBHOOK_ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("event_types", sa.JSON, nullable=False),
        sa.Column("license_ids", sa.JSON, nullable=False),
        sa.Column("secret_enc", sa.Text, nullable=False),
        sa.Column("old_secret_enc", sa.Text, nullable=True),
        sa.Column("old_secret_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("state", sa.String(16), nullable=False, server_default="ok"),
        sa.Column("failing_reason", sa.Text, nullable=True),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('ok', 'failing')", name="ck_webhook_endpoints_state"),
    )
    op.create_index("ix_webhook_endpoints_tenant_id", "webhook_endpoints", ["tenant_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column(
            "endpoint_id",
            WEBHOOK_ID,
            sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("license_id", ID, nullable=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="pending"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("claim", sa.String(32), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_deliveries_event"),
        sa.CheckConstraint(
            "state IN ('pending', 'delivered', 'failed', 'final')",
            name="ck_webhook_deliveries_state",
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["endpoint_id", "next_attempt_at"],
        postgresql_where=sa.text(PENDING),
        sqlite_where=sa.text(PENDING),
    )
    op.create_index(
        "ix_webhook_deliveries_claimed",
        "webhook_deliveries",
        ["endpoint_id", "claimed_until"],
        postgresql_where=sa.text(CLAIMED),
        sqlite_where=sa.text(CLAIMED),
    )
    op.create_index(
        "ix_webhook_deliveries_endpoint_created",
        "webhook_deliveries",
        ["endpoint_id", "created_at"],
    )
    op.create_index(
        "ix_webhook_deliveries_tenant_created",
        "webhook_deliveries",
        ["tenant_id", "created_at"],
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column(
            "delivery_id",
            ROW_ID,
            sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("endpoint_id", WEBHOOK_ID, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("latency_ms", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id"])


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
