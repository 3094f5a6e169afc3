"""Per-tenant rate limits: tenants gain ``rate_limit_per_second`` (calls per second on
acquire, heartbeat and release; 0 is no limit, at most 1,000,000), 500 for every
existing tenant (the default sized in docs/operations.md, "Capacity").

Batch operations: a plain ``ALTER TABLE`` on PostgreSQL (a constant default rewrites
nothing); on SQLite, which cannot add a CHECK constraint, a copy of the table.

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("rate_limit_per_second", sa.Integer, nullable=False, server_default="500")
        )
        batch.create_check_constraint(
            "ck_tenants_rate_limit", "rate_limit_per_second BETWEEN 0 AND 1000000"
        )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_constraint("ck_tenants_rate_limit", type_="check")
        batch.drop_column("rate_limit_per_second")
