"""Usage rollups count borrowed leases: ``usage_rollups.borrowed``. A ``lease.borrowed``
event (0004) starts a lease like ``lease.acquired`` (a seat taken); the rollups now count
it as a start (+1 to the level's deltas, paired with its ending in ``usage_leases``) and
on its own. Rollups written between 0004 and this revision counted a borrow only through
``seats_used`` (the peak and the level were right; seat-seconds of those hours missed the
borrowed seat).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_rollups") as batch:
        batch.add_column(sa.Column("borrowed", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage_rollups") as batch:
        batch.drop_column("borrowed")
