"""API keys have a scope: ``seat`` (takes seats: acquire, heartbeat, release) or ``admin``
(the tenant's portal: sees and frees its own seats, manages its seat keys). Every key
issued before this revision is a seat key, which is what it was used as. The portal's
actions are recorded in ``portal_actions``, with the admin key's prefix.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("scope", sa.String(16), nullable=False, server_default="seat"))
        batch.create_check_constraint("ck_api_keys_scope", "scope IN ('seat', 'admin')")
    op.create_table(
        "portal_actions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("key_prefix", sa.String(16), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("license_id", sa.String(128), nullable=True),
        sa.Column("session_id", sa.String(128), nullable=True),
        sa.Column("target_prefix", sa.String(16), nullable=True),
    )
    op.create_index("ix_portal_actions_tenant_at", "portal_actions", ["tenant_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_portal_actions_tenant_at", "portal_actions")
    op.drop_table("portal_actions")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("ck_api_keys_scope", type_="check")
        batch.drop_column("scope")
