"""Initial schema: tenants, api_keys, licenses, lease_events.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(128)


def upgrade() -> None:
    now = sa.func.now()
    op.create_table(
        "tenants",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.tenant_id"), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False, unique=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("label", sa.String(256), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.create_table(
        "licenses",
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.tenant_id"), primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("seats", sa.Integer, nullable=False),
        sa.Column("lease_seconds", sa.Integer, nullable=False, server_default="360"),
        sa.Column("max_lease_seconds", sa.Integer, nullable=False, server_default="3600"),
        sa.Column("overage_percent", sa.Integer, nullable=False, server_default="0"),
        sa.Column("suspended", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.CheckConstraint("seats >= 0", name="ck_licenses_seats"),
        sa.CheckConstraint("lease_seconds >= 1", name="ck_licenses_lease"),
        sa.CheckConstraint("max_lease_seconds >= lease_seconds", name="ck_licenses_max_lease"),
        sa.CheckConstraint("overage_percent BETWEEN 0 AND 1000", name="ck_licenses_overage"),
    )
    op.create_table(
        "lease_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("event_id", sa.String(64), nullable=False, unique=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("license_id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("client_id", ID, nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seats_used", sa.Integer, nullable=True),
        sa.Column("seats_total", sa.Integer, nullable=True),
        sa.Column("count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("metadata", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
    )
    op.create_index(
        "ix_lease_events_license_time", "lease_events", ["tenant_id", "license_id", "occurred_at"]
    )
    op.create_index("ix_lease_events_session", "lease_events", ["session_id"])


def downgrade() -> None:
    op.drop_table("lease_events")
    op.drop_table("licenses")
    op.drop_table("api_keys")
    op.drop_table("tenants")
