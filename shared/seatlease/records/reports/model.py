"""The reports' shapes and bounds: the window, the rows they answer, the periods, the
limits, and the time helpers their queries share."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, DateTime, bindparam, text

from seatlease.clock import iso_utc, utc

ACQUIRED = "lease.acquired"
BORROWED = "lease.borrowed"
STARTS = (ACQUIRED, BORROWED)  # a lease's first event: a seat taken
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")
DENIED = "lease.denied"
PERIODS: dict[str, timedelta] = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
}
AUTO = "auto"  # exact steps, else the finest period that keeps a chart under AUTO_POINTS
AUTO_POINTS = 1_500
# The step function of seats in use, one point per change, from the raw events: what
# ``auto`` picks for a window of at most AUTO_POINTS changes.
EXACT = "exact"
HOUR = PERIODS["hour"]
DAY = PERIODS["day"]
MIN_TIME = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(2100, 1, 1, tzinfo=UTC)
MAX_PERIODS = 10_000  # buckets per license: 416 days by hour, 27 years by day
MAX_ROWS = 100_000  # licenses x buckets in one report (about 30 MB of JSON)
STATEMENT_TIMEOUT_MS = 4_000  # below the client's 5 s socket timeout: the server cancels


@dataclass(frozen=True)
class Window:
    """Which events a report covers: one tenant, optionally one license, and the time
    window ``[since, until)`` (either end open)."""

    tenant_id: str
    license_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                value = utc(value)
                if not MIN_TIME <= value <= MAX_TIME:
                    raise ValueError(
                        f"{name} must be between {MIN_TIME.date()} and {MAX_TIME.date()}"
                    )
                object.__setattr__(self, name, value)
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")

    def params(self, **extra: Any) -> dict[str, Any]:
        found = {"tenant_id": self.tenant_id, "license_id": self.license_id}
        return {**found, **extra}

    def scope(self, alias: str = "") -> str:
        """The SQL conditions on tenant (and license) for table alias ``alias``."""
        prefix = f"{alias}." if alias else ""
        sql = f"{prefix}tenant_id = :tenant_id"
        return sql + (f" AND {prefix}license_id = :license_id" if self.license_id else "")


# -- result rows -------------------------------------------------------------------------


@dataclass
class PeriodUsage:
    license_id: str
    period_start: datetime
    peak_seats: int
    seats_total: int | None
    denials: int
    seat_seconds: float = 0.0
    lost: int = 0
    # seat_seconds over the part of the period the report covers and that has elapsed
    # (from since, to until or now): the level a chart draws, beside the peak.
    average_seats: float = 0.0


@dataclass
class ClientDurations:
    license_id: str
    client_id: str
    leases: int  # leases acquired in the window whose ending is stored
    total_seconds: float
    average_seconds: float | None
    max_seconds: float | None
    reclaimed: int  # of ``leases``: ended by lease.reclaimed after a crash
    open: int  # acquired in the window, no ending stored
    ended_by_term: int = 0  # of ``leases``: ended by the license's term, not in reclaimed
    ended_by_idle: int = 0  # of ``leases``: reclaimed by the idle rule, not in reclaimed


@dataclass
class LicenseOutcomes:
    license_id: str
    acquired: int
    released: int
    reclaimed: int
    revoked: int
    denials: int
    # seats of leases that vanished without an ending event (closed as lease.lost): a
    # weight-4 lease counts 4 (Redis's count, which shows them gone, is in seats)
    lost: int = 0
    borrowed: int = 0  # leases started by a borrow (lease.borrowed), besides ``acquired``
    # lease.reclaimed events of the license's term (metadata.reason license_expired or
    # license_not_started): no client crashed, so not in ``reclaimed``
    ended_by_term: int = 0
    # lease.reclaimed events of the license's idle rule (metadata.reason idle: the client
    # said it was idle, was warned, and its seat was taken): no crash, not in ``reclaimed``
    ended_by_idle: int = 0

    @property
    def reclaimed_percent(self) -> float | None:
        """Crashes among the leases their clients or an operator ended: ``reclaimed /
        (released + reclaimed + revoked)`` x 100, one decimal; None when that is 0. Ends
        by the term (``ended_by_term``), idle reclaims (``ended_by_idle``) and lost
        leases are in neither part: a license whose leases all ended with its term has no
        percent, not 100 % crashed."""
        ended = self.released + self.reclaimed + self.revoked
        return round(100.0 * self.reclaimed / ended, 1) if ended else None


@dataclass
class Timeline:
    """Seats in use over time for one license, one point per period (downsampled on the
    server): the level at the window's start, then ``(period start, peak, seat count,
    average seats)``; denials as ``(period start, count)`` for the periods that had some;
    ``end``: where the last point stops (its period's end, ``until`` or now, whichever is
    first: a chart draws nothing after it); ``end_level``: the seats in use there.

    With the ``exact`` period, also ``steps``: ``(at, seats in use)`` at the window's
    start (or the license's first event) and at each change, the last one holding to
    ``end`` (the window's end or now, whichever is first), and ``denials`` at each
    ``lease.denied`` event's own time."""

    license_id: str
    start_level: int = 0
    start_total: int | None = None
    points: list[tuple[datetime, int, int | None, float]] = field(default_factory=list)
    denials: list[tuple[datetime, int]] = field(default_factory=list)
    end: datetime | None = None
    end_level: int = 0
    steps: list[tuple[datetime, int]] | None = None


@dataclass
class UsageReport:
    window: Window
    period: str  # "exact": steps in the timelines, the usage rows per ``usage_period``
    usage: list[PeriodUsage]
    durations: list[ClientDurations]
    outcomes: list[LicenseOutcomes]
    timelines: list[Timeline] = field(default_factory=list)  # not in as_dict: on request
    usage_period: str = ""  # the usage rows' period (the bucketed one under "exact")

    def as_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return iso_utc(value) if value else None

        return {
            "tenant_id": self.window.tenant_id,
            "license_id": self.window.license_id,
            "since": iso(self.window.since),
            "until": iso(self.window.until),
            "period": self.period,
            "usage_period": self.usage_period or self.period,
            "usage": [{**fields_of(u), "period_start": iso(u.period_start)} for u in self.usage],
            "durations": [fields_of(d) for d in self.durations],
            "outcomes": [
                {**fields_of(o), "reclaimed_percent": o.reclaimed_percent} for o in self.outcomes
            ],
            # Leases closed as lease.lost in the window (see the method: Redis's count at a
            # later event showed them gone without an ending event).
            "lost_leases": sum(o.lost for o in self.outcomes),
        }


def fields_of(row: Any) -> dict[str, Any]:
    """A flat dataclass as a dict (``dataclasses.asdict`` deep-copies: 10x slower)."""
    return {name: getattr(row, name) for name in row.__dataclass_fields__}


# -- time helpers ------------------------------------------------------------------------


def floor(value: datetime, period: str) -> datetime:
    value = value.replace(second=0, microsecond=0)
    if period == "minute":
        return value
    value = value.replace(minute=0)
    return value.replace(hour=0) if period == "day" else value


def ceil(value: datetime, period: str) -> datetime:
    start = floor(value, period)
    return start if start == value else start + PERIODS[period]


def ms(delta: timedelta) -> int:
    return round(delta / timedelta(milliseconds=1))


def as_time(value: Any) -> datetime:
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def bind_times(stmt: Any, *names: str) -> Any:
    """Bind ``names`` as timestamps (SQLite compares them in its stored text format)."""
    return stmt.bindparams(*(bindparam(n, type_=DateTime(timezone=True)) for n in names))


def limit_statements(conn: Connection) -> None:
    """Let the server cancel a runaway report (a 503, retryable) before the client's
    socket timeout cuts the connection."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))


def first_hour(conn: Connection, window: Window) -> datetime | None:
    """The first hour with events of the window's tenant (and license), from the hourly
    rollups (their primary key's order: one index probe per license)."""
    sql = f"SELECT MIN(hour) FROM usage_rollups WHERE {window.scope()}"
    first = conn.execute(text(sql), window.params()).scalar()
    return None if first is None else as_time(first)
