"""Idle seats and shared seats (docs/design.md, "Idle seats", "Shared seats"): licenses
gain ``idle_timeout_seconds`` (0: off, else 60 to 604800), ``idle_reclaim``
(``when_needed`` or ``always``), ``share`` (``none``, ``user``, ``host`` or
``user_host``) and ``share_limit`` (sessions a shared seat, 0 to 10000; 0: no limit).
Every existing license reads as off: 0, ``when_needed``, ``none``, 0.

The bounds are written out here, not imported from ``seatlease.licenses``: a migration
keeps the rules it was written with (tests/test_migration_backfill.py).

Batch operations, as 0004 and 0013: on PostgreSQL plain ``ALTER TABLE``s (a constant
default is recorded in the catalogue, no rewrite); on SQLite, which cannot add a CHECK
constraint to a table, a copy of the table with the columns and constraints.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

CHECKS = {
    "ck_licenses_idle_timeout": (
        "idle_timeout_seconds = 0 OR idle_timeout_seconds BETWEEN 60 AND 604800"
    ),
    "ck_licenses_idle_reclaim": "idle_reclaim IN ('when_needed', 'always')",
    "ck_licenses_share": "share IN ('none', 'user', 'host', 'user_host')",
    "ck_licenses_share_limit": "share_limit BETWEEN 0 AND 10000",
}


def upgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.add_column(
            sa.Column("idle_timeout_seconds", sa.Integer, nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("idle_reclaim", sa.String(16), nullable=False, server_default="when_needed")
        )
        batch.add_column(sa.Column("share", sa.String(16), nullable=False, server_default="none"))
        batch.add_column(sa.Column("share_limit", sa.Integer, nullable=False, server_default="0"))
        for name, condition in CHECKS.items():
            batch.create_check_constraint(name, condition)


def downgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        for name in CHECKS:
            batch.drop_constraint(name, type_="check")
        batch.drop_column("share_limit")
        batch.drop_column("share")
        batch.drop_column("idle_reclaim")
        batch.drop_column("idle_timeout_seconds")
