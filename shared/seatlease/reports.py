"""Usage reports: peak and average seats, seat-seconds, denials, lease durations, how
leases ended and leases lost, per license. They read the rollups the event insert keeps
(``seatlease.rollups``: per license and UTC minute or hour, per license, client and UTC
day) and touch finer data only at the window's edges: raw ``lease_events`` for the part
of a minute or hour the window cuts, ``usage_leases`` (one row per lease) for the part of
a day, so a report's cost follows the window's length, not the size of the history: a
year of hourly rollups is 8,760 rows per license, a day of minute rollups 1,440.

Method
------
*The level* (seats in use) is Redis's own count: every lease event carries
``seats_used``, the live leases right after it. The level at a moment is ``seats_used``
of the last event before it (0 before a license's first event). A bucket's *peak* is the
larger of the level carried into it and the highest ``seats_used`` of its events.
*Seat-seconds* integrate the level over the bucket (from the rollups' deltas: level at
each hour's start x its length, plus each event's +1/-1 until the hour's end).

*Lost leases* (issue 11): when Redis loses its data, the leases it held never get an
ending event. The log then expects more leases than Redis counts: at the next event of
that license, ``seats_used`` is lower than the level before it plus the acquires minus
the endings since. That difference is counted as leases *lost* (``lease.lost``) in the
bucket where an event showed it, and the level follows Redis's count from there on: a
lost lease is never counted as held beyond the next event of its license. Until that
next event the log cannot tell a lost lease from one still heartbeating (heartbeats are
not events); ``seatlease status`` shows Redis's live count. Same-millisecond events of
different Lua calls have no known order; the one with the larger event id counts as
last (within one call, event ids are numbered in order).

Buckets are UTC minutes, hours or days (``auto``: the finest that gives at most
``AUTO_POINTS`` buckets; minutes only within ``MINUTE_RETENTION``, the minute rollups'
life), from ``since`` (or a license's first event) to ``until`` (exclusive) or, without
``until``, to the tenant's last event in the window, and never past now: a bucket that
starts after now is not reported, the current one counts up to now. When ``since`` falls
inside a bucket, the first bucket covers the part from ``since`` on. A bucket's
*average* is its seat-seconds over that covered, elapsed part (``since`` or its start to
``until``, its end or now, whichever is first). A license appears when it has events in
the window or holds seats at its start. ``seats_total`` is the seat count the last event
recorded, carried forward.

*Denials* are ``lease.denied`` events, each the count of one reaper run (the seat
scripts only increment a counter), so they land in the bucket of that run.

*Lease durations* per license and client: leases acquired in the window; a lease whose
ending is stored counts with its whole duration (ending - acquisition: how long the seat
was out of the pool), even if it ended after ``until``; the others are *open*.

*Endings* per license: acquired and borrowed (the two ways a lease starts), released,
reclaimed (a crashed or vanished client), revoked (an operator), denied requests and
lost leases in the window. Lease durations count borrowed leases like acquired ones.

*Per user* (``user_usage``): per license and user (the acquire's ``metadata.user``),
leases acquired in the window with the durations of those whose first ending is stored,
summed by the database from ``usage_leases`` (its ``user_name``), and the wait queue's
outcomes in the window from ``lease_events`` (a partial index holds them alone).

Bounds: a report covers at most ``MAX_PERIODS`` buckets per license and ``MAX_ROWS``
license-buckets (a 400 naming the limit otherwise), and times between ``MIN_TIME`` and
``MAX_TIME``. Raw events and leases older than the retention (``seatlease audit prune``)
are gone: a window edge inside such an hour (or day, for durations) reads only whole
hours (days) from the rollups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, bindparam, text

from seatlease import clock
from seatlease.clock import EPOCH, iso_utc, utc
from seatlease.errors import InvalidRequest
from seatlease.rollups import MINUTE_RETENTION
from seatlease.store import transaction
from seatlease.tables import QUEUE_OUTCOMES

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
AUTO = "auto"  # the finest period that keeps a chart under AUTO_POINTS points
AUTO_POINTS = 1_500
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
    reclaimed: int
    open: int  # acquired in the window, no ending stored


@dataclass
class LicenseOutcomes:
    license_id: str
    acquired: int
    released: int
    reclaimed: int
    revoked: int
    denials: int
    lost: int = 0  # leases that vanished without an ending event (closed as lease.lost)
    borrowed: int = 0  # leases started by a borrow (lease.borrowed), besides ``acquired``

    @property
    def reclaimed_percent(self) -> float | None:
        ended = self.released + self.reclaimed + self.revoked
        return round(100.0 * self.reclaimed / ended, 1) if ended else None


@dataclass
class Timeline:
    """Seats in use over time for one license, one point per period (downsampled on the
    server): the level at the window's start, then ``(period start, peak, seat count,
    average seats)``; denials as ``(period start, count)`` for the periods that had some;
    ``end``: where the last point stops (its period's end, ``until`` or now, whichever is
    first: a chart draws nothing after it)."""

    license_id: str
    start_level: int = 0
    start_total: int | None = None
    points: list[tuple[datetime, int, int | None, float]] = field(default_factory=list)
    denials: list[tuple[datetime, int]] = field(default_factory=list)
    end: datetime | None = None


@dataclass
class UsageReport:
    window: Window
    period: str
    usage: list[PeriodUsage]
    durations: list[ClientDurations]
    outcomes: list[LicenseOutcomes]
    timelines: list[Timeline] = field(default_factory=list)  # not in as_dict: on request

    def as_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return iso_utc(value) if value else None

        return {
            "tenant_id": self.window.tenant_id,
            "license_id": self.window.license_id,
            "since": iso(self.window.since),
            "until": iso(self.window.until),
            "period": self.period,
            "usage": [{**_fields(u), "period_start": iso(u.period_start)} for u in self.usage],
            "durations": [_fields(d) for d in self.durations],
            "outcomes": [
                {**_fields(o), "reclaimed_percent": o.reclaimed_percent} for o in self.outcomes
            ],
            # Leases closed as lease.lost in the window (see the method: Redis's count at a
            # later event showed them gone without an ending event).
            "lost_leases": sum(o.lost for o in self.outcomes),
        }


def _fields(row: Any) -> dict[str, Any]:
    """A flat dataclass as a dict (``dataclasses.asdict`` deep-copies: 10x slower)."""
    return {name: getattr(row, name) for name in row.__dataclass_fields__}


# -- time helpers ------------------------------------------------------------------------


def _floor(value: datetime, period: str) -> datetime:
    value = value.replace(second=0, microsecond=0)
    if period == "minute":
        return value
    value = value.replace(minute=0)
    return value.replace(hour=0) if period == "day" else value


def _ceil(value: datetime, period: str) -> datetime:
    floor = _floor(value, period)
    return floor if floor == value else floor + PERIODS[period]


def _ms(delta: timedelta) -> int:
    return round(delta / timedelta(milliseconds=1))


def _time(value: Any) -> datetime:
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _times(stmt: Any, *names: str) -> Any:
    """Bind ``names`` as timestamps (SQLite compares them in its stored text format)."""
    return stmt.bindparams(*(bindparam(n, type_=DateTime(timezone=True)) for n in names))


def _limit_statements(conn: Connection) -> None:
    """Let the server cancel a runaway report (a 503, retryable) before the client's
    socket timeout cuts the connection."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))


# -- segments: aggregates of one license over [start, end) -------------------------------


@dataclass
class _Segment:
    start: datetime
    end: datetime
    acquired: int = 0
    borrowed: int = 0
    released: int = 0
    reclaimed: int = 0
    revoked: int = 0
    denials: int = 0
    net: int = 0
    dsec_ms: int = 0  # sum of delta x ms until ``end``
    max_used: int | None = None
    last_used: int | None = None
    last_total: int | None = None


@dataclass
class _License:
    license_id: str
    level: int = 0  # at the window's start
    total: int | None = None
    segments: list[_Segment] = field(default_factory=list)


# The rollup tables a report reads, by the unit of their rows: minute periods read the
# minute rollups, hour and day periods the hourly ones.
ROLLUPS = {"minute": "usage_minute_rollups", "hour": "usage_rollups"}


def _unit(period: str) -> str:
    return "minute" if period == "minute" else "hour"


class _Bounds:
    """The window cut into whole units (minutes or hours, from the rollups) and edges
    (from raw events)."""

    def __init__(self, window: Window, unit: str) -> None:
        self.window = window
        self.unit = unit
        since, until = window.since, window.until
        # Whole units [h0, h1): from the rollups.
        self.h0 = _ceil(since, unit) if since else None
        self.h1 = _floor(until, unit) if until else None
        # Raw ranges: (segment from, segment to).
        self.edges: list[tuple[datetime, datetime]] = []
        if since and until and _floor(since, unit) == _floor(until, unit):
            self.edges.append((since, until))
            self.h0 = self.h1 = None
            self.empty_middle = True
            return
        self.empty_middle = False
        if since and since != self.h0:
            self.edges.append((since, self.h0))  # type: ignore[arg-type]
        if until and until != self.h1:
            self.edges.append((self.h1, until))  # type: ignore[arg-type]


def _collect(window: Window, conn: Connection, unit: str = "hour") -> dict[str, _License]:
    """Per license: the level (and seat count) at the window's start and the segments
    inside the window (whole ``unit``s from its rollups, raw events at the edges),
    sorted."""
    bounds = _Bounds(window, unit)
    found: dict[str, _License] = {}

    def lic(license_id: str) -> _License:
        return found.setdefault(license_id, _License(license_id))

    if window.since is not None:  # the level at since: the last event before it
        start_hour = _floor(window.since, "hour")
        sql = f"""
            SELECT license_id, last_used, last_total FROM (
                SELECT license_id, last_used, last_total,
                       ROW_NUMBER() OVER (PARTITION BY license_id ORDER BY hour DESC) AS rn
                FROM usage_rollups
                WHERE {window.scope()} AND hour < :start AND last_used IS NOT NULL
            ) t WHERE rn = 1"""
        rows = conn.execute(_times(text(sql), "start"), window.params(start=start_hour))
        for row in rows:
            lic(row.license_id).level = max(0, int(row.last_used))
            lic(row.license_id).total = row.last_total
        if start_hour < window.since:  # then the hour's last event before since
            for row in _last_events(conn, window, start_hour, window.since):
                lic(row.license_id).level = max(0, int(row.seats_used))
                lic(row.license_id).total = row.seats_total
    if not bounds.empty_middle:
        conds = [window.scope()]
        names = []
        if bounds.h0 is not None:
            conds.append(f"{unit} >= :h0")
            names.append("h0")
        if bounds.h1 is not None:
            conds.append(f"{unit} < :h1")
            names.append("h1")
        # One text per license, parsed here: pg8000 spends ~30 us on each row it decodes
        # (timestamps through strptime), ten times the database's work for a year of hours.
        postgres = conn.dialect.name == "postgresql"
        epoch = f"CAST(extract(epoch FROM {unit}) AS bigint)" if postgres else (
            f"CAST(strftime('%s', {unit}) AS INTEGER)")  # fmt: skip
        fields = [epoch, "acquired", "borrowed", "released", "reclaimed", "revoked", "denials",
                  "net", "dsec_ms", "max_used", "last_used", "last_total"]  # fmt: skip
        table = ROLLUPS[unit]
        if postgres:
            packed = "concat_ws(',', " + ", ".join(f"coalesce(CAST({f} AS text), '')"
                                                   for f in fields) + ")"  # fmt: skip
            agg = f"string_agg({packed}, ';' ORDER BY {unit})"
            source = table
        else:
            packed = " || ',' || ".join(f"coalesce({f}, '')" for f in fields)
            agg = f"group_concat({packed}, ';')"
            source = f"(SELECT * FROM {table} WHERE {' AND '.join(conds)} ORDER BY {unit})"
        sql = f"""
            SELECT license_id, {agg} AS packed FROM {source}
            WHERE {" AND ".join(conds)} GROUP BY license_id"""
        params = window.params(h0=bounds.h0, h1=bounds.h1)
        length = PERIODS[unit]
        for row in conn.execute(_times(text(sql), *names), params):
            segments = lic(row.license_id).segments
            for item in row.packed.split(";"):
                v = [int(x) if x else None for x in item.split(",")]
                start = EPOCH + timedelta(seconds=v[0])  # type: ignore[arg-type]
                segments.append(_Segment(start, start + length, *v[1:]))  # type: ignore[arg-type]
    for seg_from, seg_to in bounds.edges:
        # Aggregated by the database (a busy hour is thousands of events): the same
        # columns the insert keeps per unit, over the window's part of the unit.
        lasts = {r.license_id: r for r in _last_events(conn, window, seg_from, seg_to)}
        for row in _edge_events(conn, window, seg_from, seg_to):
            last = lasts.get(row.license_id)
            lic(row.license_id).segments.append(
                _Segment(
                    seg_from,
                    seg_to,
                    int(row.acquired),
                    int(row.borrowed),
                    int(row.released),
                    int(row.reclaimed),
                    int(row.revoked),
                    int(row.denials or 0),
                    int(row.net or 0),
                    int(row.dsec_ms or 0),
                    row.max_used,
                    None if last is None else int(last.seats_used),
                    None if last is None else last.seats_total,
                )
            )
    for line in found.values():
        line.segments.sort(key=lambda s: s.start)
    return found


def _edge_events(conn: Connection, window: Window, lo: datetime, hi: datetime) -> list[Any]:
    """Per license, the events of ``[lo, hi)`` folded as the insert folds an hour."""
    if conn.dialect.name == "postgresql":
        to_end = "round(extract(epoch FROM CAST(:hi AS timestamptz) - occurred_at) * 1000)"
    else:
        to_end = "round((julianday(:hi) - julianday(occurred_at)) * 86400000)"
    endings = ", ".join(f"'{t}'" for t in ENDINGS)
    starts = ", ".join(f"'{t}'" for t in STARTS)
    delta = f"(CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END)"

    def count(kind: str) -> str:
        return f"SUM(CASE WHEN type = '{kind}' THEN 1 ELSE 0 END)"

    sql = f"""
        SELECT license_id, {count(ACQUIRED)} AS acquired, {count(BORROWED)} AS borrowed,
               {count("lease.released")} AS released,
               {count("lease.reclaimed")} AS reclaimed, {count("lease.revoked")} AS revoked,
               SUM(CASE WHEN type = '{DENIED}' THEN "count" ELSE 0 END) AS denials,
               SUM({delta}) AS net, SUM({delta} * {to_end}) AS dsec_ms,
               MAX(seats_used) AS max_used
        FROM lease_events
        WHERE {window.scope()} AND occurred_at >= :lo AND occurred_at < :hi
        GROUP BY license_id"""
    return list(conn.execute(_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))


def _last_events(conn: Connection, window: Window, lo: datetime, hi: datetime) -> list[Any]:
    """Per license, the last event of ``[lo, hi)`` that carries Redis's seat count."""
    sql = f"""
        SELECT license_id, seats_used, seats_total FROM (
            SELECT license_id, seats_used, seats_total,
                   ROW_NUMBER() OVER (PARTITION BY license_id ORDER BY occurred_at DESC,
                                      length(event_id) DESC, event_id DESC) AS rn
            FROM lease_events
            WHERE {window.scope()} AND occurred_at >= :lo AND occurred_at < :hi
              AND seats_used IS NOT NULL
        ) t WHERE rn = 1"""
    return list(conn.execute(_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))


# -- buckets -----------------------------------------------------------------------------


@dataclass
class _Computed:
    usage: list[PeriodUsage]
    outcomes: list[LicenseOutcomes]
    timelines: list[Timeline]


def _compute(window: Window, period: str, engine: Engine | None) -> _Computed:
    if period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}")
    step = PERIODS[period]
    now = clock.now()
    if window.since is not None and window.until is not None:  # refuse before any work
        _check_periods(-(-(window.until - _floor(window.since, period)) // step), period)
    with transaction(engine) as conn:
        _limit_statements(conn)
        if period == "minute":
            _check_minutes(conn, window, now)
        licenses = _collect(window, conn, _unit(period))
    starts: dict[str, datetime] = {}
    for line in licenses.values():
        if window.since is not None and (line.level > 0 or line.segments):
            starts[line.license_id] = _floor(window.since, period)
        elif line.segments:
            starts[line.license_id] = _floor(line.segments[0].start, period)
    if window.until is not None:
        last = _floor(window.until - timedelta(microseconds=1), period)
    else:
        ends = [s.start for line in licenses.values() for s in line.segments]
        if not ends:  # nothing happened since: only the seats held at the start, no buckets
            held = [
                Timeline(lid, line.level, line.total)
                for lid, line in sorted(licenses.items())
                if line.level > 0
            ]
            return _Computed([], [], held)
        last = _floor(max(ends), period)
    last = min(last, _floor(now, period))  # a period that starts after now is not reported
    starts = {lid: first for lid, first in starts.items() if first <= last}
    periods = {lid: (last - first) // step + 1 for lid, first in starts.items()}
    _check_periods(max(periods.values(), default=0), period)
    if sum(periods.values()) > MAX_ROWS:
        raise InvalidRequest(
            f"The report would have {sum(periods.values()):,} rows ({len(periods)} licenses); "
            f"at most {MAX_ROWS:,} (MAX_ROWS): narrow the window or choose one license.",
            limit=MAX_ROWS,
        )
    result = _Computed([], [], [])
    for license_id in sorted(starts):
        _walk(window, licenses[license_id], starts[license_id], last, period, result, now)
    return result


def minute_horizon(now: datetime) -> datetime:
    """The earliest time minute periods may start: the minute rollups older than
    ``MINUTE_RETENTION`` are pruned (``seatlease audit prune``)."""
    return now - MINUTE_RETENTION


def _check_minutes(conn: Connection, window: Window, now: datetime) -> None:
    """Minute periods only where the minute rollups are kept: a window from a ``since``
    within the retention, or without ``since`` a history that starts within it."""
    horizon = minute_horizon(now)
    start = window.since if window.since is not None else _first_hour(conn, window)
    if start is not None and start < horizon:
        raise InvalidRequest(
            f"Minute periods cover the last {MINUTE_RETENTION.days} days only (minute "
            f"rollups are kept that long): since must be {iso_utc(horizon)} or later; use "
            "period=hour for older windows.",
            limit=iso_utc(horizon),
        )


def _first_hour(conn: Connection, window: Window) -> datetime | None:
    """The first hour with events of the window's tenant (and license), from the hourly
    rollups (their primary key's order: one index probe per license)."""
    sql = f"SELECT MIN(hour) FROM usage_rollups WHERE {window.scope()}"
    first = conn.execute(text(sql), window.params()).scalar()
    return None if first is None else _time(first)


def resolve_period(window: Window, period: str, engine: Engine | None = None) -> str:
    """``auto``: the finest period that gives at most ``AUTO_POINTS`` periods from the
    window's start (``since``, else the first event) to its end (``until``, else now;
    never after now), minutes only within their retention; other periods as they are."""
    if period != AUTO:
        return period
    now = clock.now()
    start = window.since
    if start is None:
        with transaction(engine) as conn:
            _limit_statements(conn)
            start = _first_hour(conn, window)
        if start is None:
            return "hour"  # no events: nothing to size
    end = min(window.until or now, now)
    span = max(end - start, timedelta(0))
    for name, step in PERIODS.items():
        if name == "minute" and start < minute_horizon(now):
            continue
        if span / step <= AUTO_POINTS:
            return name
    return "day"


def _check_periods(count: int, period: str) -> None:
    if count > MAX_PERIODS:
        coarser = {"minute": "hour", "hour": "day"}.get(period)
        hint = f"use period={coarser} or narrow the window" if coarser else "narrow the window"
        raise InvalidRequest(
            f"The report would have {count:,} {period}s per license; at most "
            f"{MAX_PERIODS:,} (MAX_PERIODS): {hint}.",
            limit=MAX_PERIODS,
        )


def _walk(
    window: Window,
    line: _License,
    first: datetime,
    last: datetime,
    period: str,
    out: _Computed,
    now: datetime,
) -> None:
    """One license's buckets: the level carried through, each segment in turn. Seat time
    stops at ``now``: the current period's seats count until now, not to the period's
    end (its rollup sums each delta to the rollup's end; the level held is taken back for
    the part still to come, ``level x (hi - cursor)`` with ``hi`` before ``cursor``). The
    average divides by the same part: from ``since`` (or the period's start) to ``until``
    (or the period's end) or now, whichever is first."""
    step = PERIODS[period]
    level, total = line.level, line.total
    timeline = Timeline(line.license_id, level, total)
    counts = LicenseOutcomes(line.license_id, 0, 0, 0, 0, 0, 0)
    segments, i = line.segments, 0
    bucket = first
    while bucket <= last:
        end = bucket + step
        lo = max(bucket, window.since) if window.since else bucket
        hi = max(lo, min(end, window.until or end, now))
        peak, seat_ms, denials, lost, cursor = level, 0, 0, 0, lo
        while i < len(segments) and segments[i].start < end:
            seg = segments[i]
            seat_ms += level * _ms(seg.start - cursor) + level * _ms(seg.end - seg.start)
            seat_ms += seg.dsec_ms
            if seg.max_used is not None:
                peak = max(peak, seg.max_used)
            after = seg.last_used if seg.last_used is not None else max(0, level + seg.net)
            lost += max(0, level + seg.net - after)
            level = after
            total = seg.last_total if seg.last_total is not None else total
            denials += seg.denials
            counts.acquired += seg.acquired
            counts.borrowed += seg.borrowed
            counts.released += seg.released
            counts.reclaimed += seg.reclaimed
            counts.revoked += seg.revoked
            counts.denials += seg.denials
            cursor = seg.end
            i += 1
        seat_ms += level * _ms(hi - cursor)
        peak = max(0, peak)
        seat_seconds = round(max(0, seat_ms) / 1000, 3)
        elapsed = (hi - lo).total_seconds()
        average = round(seat_seconds / elapsed, 4) if elapsed > 0 else 0.0
        out.usage.append(
            PeriodUsage(
                line.license_id,
                bucket,
                peak,
                total,
                denials,
                seat_seconds,
                lost,
                average,
            )
        )
        timeline.points.append((bucket, peak, total, average))
        timeline.end = hi
        if denials:
            timeline.denials.append((bucket, denials))
        counts.lost += lost
        bucket = end
    if line.segments:
        out.outcomes.append(counts)
    out.timelines.append(timeline)


# -- the report's parts ------------------------------------------------------------------


def peak_usage(
    window: Window, period: str = "hour", engine: Engine | None = None
) -> list[PeriodUsage]:
    """Peak concurrent seats, seats in force, seat-seconds, denials and lost leases per
    license and UTC period."""
    return _compute(window, resolve_period(window, period, engine), engine).usage


def outcomes(window: Window, engine: Engine | None = None) -> list[LicenseOutcomes]:
    """Per license: acquired, released, reclaimed, revoked, denied and lost in the window."""
    return _compute(window, "day", engine).outcomes


def timelines(window: Window, engine: Engine | None = None, period: str = "hour") -> list[Timeline]:
    """Per license, the peak seats in use per period (for charts)."""
    return _compute(window, resolve_period(window, period, engine), engine).timelines


def lease_durations(window: Window, engine: Engine | None = None) -> list[ClientDurations]:
    """Per license and client: leases acquired in the window and how long they held
    (whole UTC days from ``usage_client_rollups``, the window's partial days from
    ``usage_leases``)."""
    since, until = window.since, window.until
    d0 = _ceil(since, "day") if since else None
    d1 = _floor(until, "day") if until else None
    acc: dict[tuple[str, str], list[Any]] = {}  # acquired, ended, reclaimed, total_ms, max_ms

    def add(
        key: tuple[str, str], acquired: int, ended: int, recl: int, total: int, top: Any
    ) -> None:
        row = acc.setdefault(key, [0, 0, 0, 0, None])
        row[0] += acquired
        row[1] += ended
        row[2] += recl
        row[3] += total
        if top is not None:
            row[4] = top if row[4] is None else max(row[4], top)

    edges: list[tuple[datetime, datetime]] = []
    whole = True
    if since and until and (d0 is None or d1 is None or d0 >= d1):
        edges.append((since, until))
        whole = False
    else:
        if since and since != d0:
            edges.append((since, d0))  # type: ignore[arg-type]
        if until and until != d1:
            edges.append((d1, until))  # type: ignore[arg-type]
    with transaction(engine) as conn:
        _limit_statements(conn)
        if whole:
            conds, names = [window.scope()], []
            if d0 is not None:
                conds.append("day >= :d0")
                names.append("d0")
            if d1 is not None:
                conds.append("day < :d1")
                names.append("d1")
            sql = f"""
                SELECT license_id, client_id, SUM(acquired) AS acquired, SUM(ended) AS ended,
                       SUM(reclaimed) AS reclaimed, SUM(total_ms) AS total_ms,
                       MAX(max_ms) AS max_ms
                FROM usage_client_rollups WHERE {" AND ".join(conds)}
                GROUP BY license_id, client_id"""
            for r in conn.execute(_times(text(sql), *names), window.params(d0=d0, d1=d1)):
                add(
                    (r.license_id, r.client_id),
                    int(r.acquired),
                    int(r.ended),
                    int(r.reclaimed),
                    int(r.total_ms or 0),
                    r.max_ms,
                )
        for lo, hi in edges:
            for r in _edge_leases(conn, window, lo, hi):
                top = None if r.max_ms is None else int(r.max_ms)
                add((r.license_id, r.client_id), int(r.acquired), int(r.ended),
                    int(r.reclaimed or 0), int(r.total_ms or 0), top)  # fmt: skip
    result = []
    for (license_id, client_id), (acquired, ended, recl, total_ms, max_ms) in sorted(acc.items()):
        result.append(
            ClientDurations(
                license_id=license_id,
                client_id=client_id or "-",
                leases=ended,
                total_seconds=round(total_ms / 1000, 3),
                average_seconds=round(total_ms / 1000 / ended, 3) if ended else None,
                max_seconds=None if max_ms is None else round(int(max_ms) / 1000, 3),
                reclaimed=recl,
                open=acquired - ended,
            )
        )
    return result


def _edge_leases(conn: Connection, window: Window, lo: datetime, hi: datetime) -> list[Any]:
    """Per license and client, the leases acquired in ``[lo, hi)`` (part of a day) from
    ``usage_leases`` (the rows the rollups were counted from), aggregated by the
    database: a busy day is tens of thousands of leases."""
    if conn.dialect.name == "postgresql":
        ms = "round(extract(epoch FROM ended_at - acquired_at) * 1000)"
    else:
        ms = "round((julianday(ended_at) - julianday(acquired_at)) * 86400000)"
    sql = f"""
        SELECT license_id, coalesce(client_id, '') AS client_id, COUNT(*) AS acquired,
               COUNT(ended_at) AS ended,
               SUM(CASE WHEN end_type = 'lease.reclaimed' THEN 1 ELSE 0 END) AS reclaimed,
               COALESCE(SUM({ms}), 0) AS total_ms, MAX({ms}) AS max_ms
        FROM usage_leases
        WHERE {window.scope()} AND acquired_at >= :lo AND acquired_at < :hi
        GROUP BY license_id, coalesce(client_id, '')"""
    return list(conn.execute(_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))


def usage_report(window: Window, period: str = "hour", engine: Engine | None = None) -> UsageReport:
    """The whole report; ``period`` may be ``auto`` (``resolve_period``), the report says
    which period it chose."""
    period = resolve_period(window, period, engine)
    computed = _compute(window, period, engine)
    report = UsageReport(
        window=window,
        period=period,
        usage=computed.usage,
        durations=lease_durations(window, engine),
        outcomes=computed.outcomes,
    )
    report.timelines = computed.timelines  # the same walk: a chart costs no second one
    return report


# -- per user (license policy: `user` on acquire, the wait queue) ------------------------

_USER_QUEUE = ("queue.granted", "queue.left")


@dataclass
class UserUsage:
    """One user's leases of one license in the window (``user`` is the ``user`` the
    client sent with acquire, ``None`` for leases without one), and its time in the
    license's wait queue: ``queue_served`` waits that ended with a seat, ``queue_left``
    the places that ran out, ``queued_seconds_*`` over both."""

    license_id: str
    user: str | None
    leases: int = 0
    open_leases: int = 0  # acquired in the window, no ending stored yet
    seat_seconds: float = 0.0  # of the leases that ended (their whole durations)
    longest_seconds: float | None = None
    queue_served: int = 0
    queue_left: int = 0
    queued_seconds_total: float = 0.0
    queued_seconds_max: float | None = None


def user_usage(window: Window, engine: Engine | None = None) -> list[UserUsage]:
    """Leases and queue waits per license and user, summed by the database: the leases
    acquired (or borrowed) in ``[since, until)`` from ``usage_leases`` (one row per lease,
    its two ends paired by the audit insert in whatever order they arrived, its user the
    acquire's ``metadata.user`` when that is a string), with the durations of those whose
    first ending is stored (even after ``until``; an ending before ``since`` is not read,
    a negative duration counts as 0), and the ``queue.granted`` / ``queue.left`` events in
    the window (``ix_lease_events_queue``) with their ``queued_ms`` (a number, ``true``
    as 1; anything else counts as 0). The work follows the leases and queue events of the
    window, with no row per event in Python: a year of a 10-million-event license takes
    1.2-1.9 s on the 2-core development machine (docs/benchmarks.md). Leases and events
    older than the retention are gone, so is their part of this breakdown (the
    per-license reports outlive them)."""
    found: dict[tuple[str, str | None], UserUsage] = {}

    def of(license_id: str, user: str | None) -> UserUsage:
        key = (license_id, user)
        if key not in found:
            found[key] = UserUsage(license_id, user)
        return found[key]

    with transaction(engine) as conn:
        _limit_statements(conn)
        for r in _user_leases(conn, window):
            row = of(r.license_id, r.user_name)
            row.leases = int(r.leases)
            row.open_leases = int(r.open_leases)
            row.seat_seconds = float(r.total_s or 0)
            row.longest_seconds = None if r.longest_s is None else float(r.longest_s)
        for r in _user_queue(conn, window):
            row = of(r.license_id, r.user_name)
            row.queue_served = int(r.served)
            row.queue_left = int(r.left_)
            row.queued_seconds_total = float(r.queued_ms or 0) / 1000
            row.queued_seconds_max = max(0.0, float(r.queued_max or 0) / 1000)
    return sorted(found.values(), key=lambda r: (r.license_id, r.user or "", r.user is not None))


def _window_conds(window: Window, column: str) -> tuple[list[str], list[str]]:
    """``column`` in ``[since, until)``: the SQL conditions and the names to bind."""
    conds, names = [], []
    if window.since is not None:
        conds.append(f"{column} >= :since")
        names.append("since")
    if window.until is not None:
        conds.append(f"{column} < :until")
        names.append("until")
    return conds, names


def _user_leases(conn: Connection, window: Window) -> list[Any]:
    """Per license and user: leases acquired in the window, the open ones, and the total
    and longest duration (seconds) of the others."""
    conds, names = _window_conds(window, "acquired_at")
    # An ending before since is not one the window reads (the lease counts as open).
    ended = "ended_at IS NOT NULL" + (" AND ended_at >= :since" if window.since else "")
    if conn.dialect.name == "postgresql":
        # Intervals summed exactly (microseconds), converted once per row of the result.
        held = f"CASE WHEN {ended} THEN GREATEST(ended_at - acquired_at, interval '0') END"
        total, longest = f"extract(epoch FROM SUM({held}))", f"extract(epoch FROM MAX({held}))"
    else:
        # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff': whole seconds, then the microseconds
        # (julianday's float is about 40 us off at today's dates, and strftime rounds a
        # time with its fraction to the nearest second).
        us = (
            "((CAST(strftime('%s', substr(ended_at, 1, 19)) AS INTEGER)"
            " - CAST(strftime('%s', substr(acquired_at, 1, 19)) AS INTEGER)) * 1000000"
            " + CAST(substr(ended_at, 21, 6) AS INTEGER)"
            " - CAST(substr(acquired_at, 21, 6) AS INTEGER))"
        )
        held = f"CASE WHEN {ended} THEN max(0, {us}) END"
        total, longest = f"SUM({held}) / 1000000.0", f"MAX({held}) / 1000000.0"
    sql = f"""
        SELECT license_id, user_name, COUNT(*) AS leases,
               SUM(CASE WHEN {ended} THEN 0 ELSE 1 END) AS open_leases,
               {total} AS total_s, {longest} AS longest_s
        FROM usage_leases
        WHERE {" AND ".join([window.scope(), "acquired_at IS NOT NULL", *conds])}
        GROUP BY license_id, user_name"""
    return list(conn.execute(_times(text(sql), *names), window.params(**_bounds(window))))


def _user_queue(conn: Connection, window: Window) -> list[Any]:
    """Per license and user (the queue event's ``metadata.user``): the queue's outcomes
    in the window and their ``queued_ms`` (sum and largest)."""
    conds, names = _window_conds(window, "occurred_at")
    if conn.dialect.name == "postgresql":
        user = "CASE WHEN jsonb_typeof(metadata->'user') = 'string' THEN metadata->>'user' END"
        queued = (
            "CASE jsonb_typeof(metadata->'queued_ms') "
            "WHEN 'number' THEN (metadata->>'queued_ms')::float8 "
            "WHEN 'boolean' THEN CASE WHEN metadata->>'queued_ms' = 'true' THEN 1 ELSE 0 END "
            "ELSE 0 END"
        )
    else:
        user = (
            "CASE WHEN json_type(metadata, '$.user') = 'text' "
            "THEN json_extract(metadata, '$.user') END"
        )
        queued = (
            "CASE json_type(metadata, '$.queued_ms') "
            "WHEN 'integer' THEN json_extract(metadata, '$.queued_ms') "
            "WHEN 'real' THEN json_extract(metadata, '$.queued_ms') "
            "WHEN 'true' THEN 1 ELSE 0 END"
        )
    sql = f"""
        SELECT license_id, user_name, SUM(served) AS served, SUM(left_) AS left_,
               SUM(queued) AS queued_ms, MAX(queued) AS queued_max
        FROM (
            SELECT license_id, {user} AS user_name,
                   CASE WHEN type = 'queue.granted' THEN 1 ELSE 0 END AS served,
                   CASE WHEN type = 'queue.left' THEN 1 ELSE 0 END AS left_,
                   {queued} AS queued
            FROM lease_events
            WHERE {" AND ".join([window.scope(), QUEUE_OUTCOMES, *conds])}
        ) q
        GROUP BY license_id, user_name"""
    return list(conn.execute(_times(text(sql), *names), window.params(**_bounds(window))))


def _bounds(window: Window) -> dict[str, Any]:
    return {"since": window.since, "until": window.until}
