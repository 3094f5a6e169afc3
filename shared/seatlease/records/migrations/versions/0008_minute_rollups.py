"""Minute rollups (issue 19): ``usage_minute_rollups``, the columns of ``usage_rollups``
per license and UTC minute, so that reports can have minute periods. Kept for
``rollups.MINUTE_RETENTION`` (14 days; ``seatlease audit prune`` deletes older rows), so
they are filled here from the stored events of that span, by the fold the audit insert
ran at this revision: a frozen copy of it in ``seatlease.records.migrations._frozen_0008`` (a
migration never imports the live ``seatlease.records.rollups``).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from seatlease.records.migrations import _frozen_0008 as frozen

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.String(128)
COPY_BATCH = 100_000


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "usage_minute_rollups",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("minute", tz, primary_key=True),
        *(sa.Column(c, sa.Integer, nullable=False, server_default="0")
          for c in ("acquired", "borrowed", "released", "reclaimed", "revoked")),
        sa.Column("denials", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("net", sa.Integer, nullable=False, server_default="0"),
        sa.Column("dsec_ms", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("max_used", sa.Integer, nullable=True),
        sa.Column("last_at", tz, nullable=True),
        sa.Column("last_id", sa.String(64), nullable=True),
        sa.Column("last_used", sa.Integer, nullable=True),
        sa.Column("last_total", sa.Integer, nullable=True),
    )  # fmt: skip
    bind = op.get_bind()
    since = datetime.now(UTC).replace(second=0, microsecond=0) - frozen.MINUTE_RETENTION
    columns = ", ".join(frozen.EVENT_COLUMNS)
    if bind.dialect.name == "postgresql":
        # One statement per day of events: the same CTEs as the audit insert's.
        statement = sa.text(
            frozen.minute_backfill_statement(
                f"SELECT {columns} FROM lease_events WHERE occurred_at >= :lo AND occurred_at < :hi"
            )
        )
        for day in range(frozen.MINUTE_RETENTION.days + 2):
            lo = since + day * frozen.DAY
            frozen.run_insert(bind, statement, {"lo": lo, "hi": lo + frozen.DAY})
        return
    events = sa.table(
        "lease_events",
        *(sa.column(c) for c in ("id", *frozen.EVENT_COLUMNS) if c != "occurred_at"),
        sa.column("occurred_at", tz),
    )
    last = 0
    while True:
        query = (
            sa.select(events)
            .where(events.c.id > last, events.c.occurred_at >= since)
            .order_by(events.c.id)
            .limit(COPY_BATCH)
        )
        rows = [dict(r) for r in bind.execute(query).mappings()]
        if not rows:
            break
        last = rows[-1]["id"]
        for row in rows:
            row["occurred_at"] = frozen.utc(row["occurred_at"])
        frozen.fold_minutes(bind, rows)


def downgrade() -> None:
    op.drop_table("usage_minute_rollups")
