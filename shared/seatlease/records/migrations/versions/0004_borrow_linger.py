"""Borrowing and linger: licenses gain ``max_borrow_seconds`` (0 to 30 days) and
``linger_seconds`` (0 to one day), both 0 (off) for every existing license.

Batch operations: on PostgreSQL they are plain ``ALTER TABLE``s (adding a column with a
constant default rewrites nothing); SQLite cannot add a CHECK constraint to a table, so
there the table is copied into a new one with the columns and constraints.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

CHECKS = {
    "ck_licenses_max_borrow": "max_borrow_seconds BETWEEN 0 AND 2592000",
    "ck_licenses_linger": "linger_seconds BETWEEN 0 AND 86400",
}


def upgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.add_column(
            sa.Column("max_borrow_seconds", sa.Integer, nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("linger_seconds", sa.Integer, nullable=False, server_default="0")
        )
        for name, condition in CHECKS.items():
            batch.create_check_constraint(name, condition)


def downgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        for name in CHECKS:
            batch.drop_constraint(name, type_="check")
        batch.drop_column("linger_seconds")
        batch.drop_column("max_borrow_seconds")
