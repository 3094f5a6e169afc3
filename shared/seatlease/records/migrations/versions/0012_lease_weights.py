"""Weighted seats: ``lease_events`` and ``usage_leases`` gain ``seats`` (integer, NOT
NULL, default 1), each event's (each lease's) weight: a lease may count as several seats
("a render node counts as 4"). The audit insert writes it from the event's ``seats``;
the usage reports weight seat-seconds by it.

Every row stored before this revision is a lease of one seat (weights did not exist), so
the default is the right value for all of them: nothing is backfilled. That matters at
production size: a year of a busy license is millions of ``lease_events`` rows. On
PostgreSQL 11 and later, ``ADD COLUMN ... NOT NULL DEFAULT <constant>`` only records the
default in the catalogue (existing rows read it from there): no table rewrite, no scan,
only a brief ACCESS EXCLUSIVE lock; on the partitioned ``lease_events`` it is added to
every monthly partition the same way, and partitions created later inherit it. No CHECK
constraint (``seats >= 1``) either: adding one scans every row, and the audit function
already refuses an event whose ``seats`` is below 1. SQLite adds a column in place too
(``ALTER TABLE ... ADD COLUMN``, no copy).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLES = ("lease_events", "usage_leases")


def upgrade() -> None:
    for table in TABLES:
        # Plain ALTER TABLE (not batch: SQLite needs no copy for an added column).
        op.add_column(table, sa.Column("seats", sa.Integer, nullable=False, server_default="1"))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("seats")
