"""What the service closed stays closed (docs/design.md, "A region lost"): ``seat_shards``
lists the Redis shards that have served seats. A shard whose mark Redis lost (its data was
lost: a restart without persistence, a flushed or replaced node) but that is listed here
opens a recovery window for its licenses; one that is not is a new shard. At most 256
rows, written once each.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seat_shards",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(
            "first_seen_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
    )


def downgrade() -> None:
    op.drop_table("seat_shards")
