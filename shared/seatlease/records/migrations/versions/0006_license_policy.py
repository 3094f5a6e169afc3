"""License policy: licenses gain ``policy``, a JSON object (per-user limit, groups and
their reserved seats, deny list, the wait queue and its timers; seatlease.seats.policy checks
it), NULL for every existing license: no policy, acquire behaves as before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.add_column(sa.Column("policy", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.drop_column("policy")
