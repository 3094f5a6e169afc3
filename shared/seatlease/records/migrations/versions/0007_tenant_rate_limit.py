"""Per-tenant rate limits: tenants gain ``rate_limit_per_second`` (calls per second on
acquire, heartbeat and release; 0 is no limit, at most 1,000,000), 500 for every
existing tenant (the default sized in docs/operations.md, "Capacity").

A plain ``ALTER TABLE`` on PostgreSQL (a constant default rewrites nothing) and on SQLite
(the CHECK as the new column's own constraint: a batch copy would drop ``tenants``, which
other tables reference).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


COLUMN = "rate_limit_per_second"
CHECK = f"{COLUMN} BETWEEN 0 AND 1000000"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Copying the table (batch mode) would drop `tenants`, which api_keys and
        # licenses reference; SQLite adds a column with its own CHECK in place.
        op.execute(
            f"ALTER TABLE tenants ADD COLUMN {COLUMN} INTEGER NOT NULL DEFAULT 500 "
            f"CONSTRAINT ck_tenants_rate_limit CHECK ({CHECK})"
        )
        return
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column(COLUMN, sa.Integer, nullable=False, server_default="500"))
        batch.create_check_constraint("ck_tenants_rate_limit", CHECK)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"ALTER TABLE tenants DROP COLUMN {COLUMN}")
        return
    with op.batch_alter_table("tenants") as batch:
        batch.drop_constraint("ck_tenants_rate_limit", type_="check")
        batch.drop_column(COLUMN)
