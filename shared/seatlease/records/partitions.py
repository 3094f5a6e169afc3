"""The monthly partitions of ``lease_events`` (PostgreSQL).

``lease_events`` is partitioned by month on ``occurred_at`` (``lease_events_YYYY_MM``, plus
``lease_events_default`` for a time no monthly partition covers). A unique constraint on
a partitioned table must include the partition key, so an event's identity is
``(event_id, occurred_at)``: a redelivered event is the same JSON, same time, so it is
still found. Events older than the pruned horizon (``audit_retention``) are not stored
again: their partition is gone, and storing them would count them twice in the rollups.
Partitions are created ahead (this month and the next ``AHEAD_MONTHS``) by migration
0003, by ``seatlease audit prune`` and by the audit insert path (once per process and
month); never by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, text

from seatlease.clock import utc

AHEAD_MONTHS = 3
PARTITION_LOCK = 7_220_331_001  # pg_advisory_xact_lock key: one partition creator at a time


def _month(value: datetime) -> datetime:
    return utc(value).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _next_month(month: datetime) -> datetime:
    return (
        month.replace(year=month.year + 1, month=1)
        if month.month == 12
        else (month.replace(month=month.month + 1))
    )


def partition_name(month: datetime) -> str:
    return f"lease_events_{month.year:04d}_{month.month:02d}"


def partitions(conn: Connection) -> dict[str, tuple[datetime, datetime] | None]:
    """The partitions of ``lease_events``: name -> (from, to), None for the default."""
    rows = conn.execute(
        text(
            """
            SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
            FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass('lease_events')"""
        )
    )
    found: dict[str, tuple[datetime, datetime] | None] = {}
    for row in rows:
        if row.bound == "DEFAULT":
            found[row.name] = None
            continue
        # FOR VALUES FROM ('2026-11-01 00:00:00+00') TO ('2026-12-01 00:00:00+00')
        lo, hi = (part.split("'")[1] for part in row.bound.split(" TO "))
        found[row.name] = (_pg_time(lo), _pg_time(hi))
    return found


def _pg_time(value: str) -> datetime:
    return utc(datetime.fromisoformat(value if value[-3] in "+-" else value + "+00:00"))


def ensure_partitions(conn: Connection, months: Sequence[datetime]) -> list[str]:
    """Create the monthly partitions of ``months`` that do not exist yet (rows of those
    months already in the default partition move into the new one). Returns the names
    created. Serialised by an advisory lock, so concurrent callers create each once."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PARTITION_LOCK})
    existing = partitions(conn)
    created = []
    for month in sorted({_month(m) for m in months}):
        name = partition_name(month)
        if name in existing:
            continue
        bounds = {"lo": month, "hi": _next_month(month)}
        strays = conn.execute(
            text(
                "SELECT 1 FROM lease_events_default WHERE occurred_at >= :lo "
                "AND occurred_at < :hi LIMIT 1"
            ),
            bounds,
        ).first()
        lo, hi = (f"'{v.isoformat()}'" for v in bounds.values())
        values = f"FOR VALUES FROM ({lo}) TO ({hi})"
        if strays is None:
            conn.execute(text(f"CREATE TABLE {name} PARTITION OF lease_events {values}"))
        else:  # rows of that month arrived before its partition: move them into it
            conn.execute(text(f"CREATE TABLE {name} (LIKE lease_events INCLUDING DEFAULTS)"))
            conn.execute(
                text(
                    f"WITH moved AS (DELETE FROM lease_events_default WHERE occurred_at >= :lo "
                    f"AND occurred_at < :hi RETURNING *) INSERT INTO {name} SELECT * FROM moved"
                ),
                bounds,
            )
            conn.execute(text(f"ALTER TABLE lease_events ATTACH PARTITION {name} {values}"))
        created.append(name)
    return created


def months_ahead(now: datetime, ahead: int = AHEAD_MONTHS) -> list[datetime]:
    month = _month(now)
    result = [month]
    for _ in range(ahead):
        month = _next_month(month)
        result.append(month)
    return result
