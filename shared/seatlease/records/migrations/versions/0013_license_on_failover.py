"""A region lost (docs/design.md, "A region lost"): ``licenses.on_failover`` says what a
license does in a failover's recovery window, while the holders the new primary lost come
back with their tokens: ``hold`` (the default: no new seat until then, so none is granted
twice) or ``grant`` (availability first: new seats are granted within the license's
limit, the answer and the event saying so, and the license may run over its seats by the
holders who come back).

``ADD COLUMN ... NOT NULL DEFAULT 'hold'`` records the default in the catalogue on
PostgreSQL 11 and later (no rewrite); the CHECK constraint reads the licenses once (a
table of one row per license, small).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.add_column(
            sa.Column("on_failover", sa.String(8), nullable=False, server_default="hold")
        )
        batch.create_check_constraint("ck_licenses_on_failover", "on_failover IN ('hold', 'grant')")


def downgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.drop_constraint("ck_licenses_on_failover", type_="check")
        batch.drop_column("on_failover")
