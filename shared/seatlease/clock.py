"""Time, in one place: the Redis server's clock (every lease deadline is on it; function
instances' clocks differ) and the RFC 3339 UTC form the HTTP contract and events use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def server_time_ms(redis: Any) -> int:
    """Milliseconds on the Redis server's clock (a cluster client answers per node: any
    one node's clock will do)."""
    reply = redis.time()
    if isinstance(reply, dict):
        reply = next(iter(reply.values()))
    return int(reply[0]) * 1000 + int(reply[1]) // 1000


def now() -> datetime:
    """This process's clock, aware UTC (timestamps of rows and reports; lease deadlines
    use ``server_time_ms``). Tests replace it to fix "now"."""
    return datetime.now(UTC)


def utc(value: datetime) -> datetime:
    """An aware UTC datetime (naive values are taken as UTC, as SQLite returns them)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso_utc(value: datetime) -> str:
    """``2026-11-22T12:00:00Z`` (fractional seconds kept when present)."""
    return utc(value).isoformat().replace("+00:00", "Z")


# The last moment a datetime can hold (a license's end is range-checked to lie before it:
# seatlease.licenses.LATEST_TIME; these clamp what was stored before that check).
_LAST = datetime.max.replace(tzinfo=UTC)
_LAST_MS = (_LAST - EPOCH) // timedelta(milliseconds=1)


def later(value: datetime, seconds: int) -> datetime:
    """``value`` + ``seconds``, at most the last moment a datetime holds (never an
    OverflowError: one stored term must not take a view of every license down)."""
    aware = utc(value)
    if _LAST - aware < timedelta(seconds=seconds):
        return _LAST
    return aware + timedelta(seconds=seconds)


def rfc3339(ms: int) -> str:
    """``2026-11-22T12:00:00.000Z`` for milliseconds since the epoch."""
    # Integer arithmetic: fromtimestamp(ms / 1000) rounds far-future milliseconds wrong.
    moment = EPOCH + timedelta(milliseconds=max(0, min(ms, _LAST_MS)))
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"
