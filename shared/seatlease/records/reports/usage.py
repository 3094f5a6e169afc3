"""Usage per license and period from the rollups, with the window's edges from the raw
events and leases (the method is in the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text

from seatlease import clock
from seatlease.clock import EPOCH, iso_utc
from seatlease.errors import InvalidRequest
from seatlease.records.reports.durations import lease_durations
from seatlease.records.reports.model import (
    ACQUIRED,
    AUTO,
    AUTO_POINTS,
    BORROWED,
    DENIED,
    ENDINGS,
    EXACT,
    MAX_PERIODS,
    MAX_ROWS,
    PERIODS,
    STARTS,
    LicenseOutcomes,
    PeriodUsage,
    Timeline,
    UsageReport,
    Window,
    bind_times,
    ceil,
    first_hour,
    floor,
    limit_statements,
    ms,
)
from seatlease.records.reports.steps import estimate_changes, exact_horizon, exact_steps
from seatlease.records.rollups import MINUTE_RETENTION, RECLAIMED, idle_end_sql, term_end_sql
from seatlease.records.store import transaction

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
    net: int = 0  # seats taken minus seats given back (weighted, as the level)
    dsec_ms: int = 0  # sum of delta (a lease's seats, +/-) x ms until ``end``
    max_used: int | None = None
    last_used: int | None = None
    last_total: int | None = None
    ended_by_term: int = 0  # lease.reclaimed of the term, not in ``reclaimed``
    ended_by_idle: int = 0  # lease.reclaimed for idleness, not in ``reclaimed``


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
        self.h0 = ceil(since, unit) if since else None
        self.h1 = floor(until, unit) if until else None
        # Raw ranges: (segment from, segment to).
        self.edges: list[tuple[datetime, datetime]] = []
        if since and until and floor(since, unit) == floor(until, unit):
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
        start_hour = floor(window.since, "hour")
        sql = f"""
            SELECT license_id, last_used, last_total FROM (
                SELECT license_id, last_used, last_total,
                       ROW_NUMBER() OVER (PARTITION BY license_id ORDER BY hour DESC) AS rn
                FROM usage_rollups
                WHERE {window.scope()} AND hour < :start AND last_used IS NOT NULL
            ) t WHERE rn = 1"""
        rows = conn.execute(bind_times(text(sql), "start"), window.params(start=start_hour))
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
        # One text per license, parsed here: pg8000 decodes every row in Python
        # (timestamps through strptime), many times the database's work for a year of hours.
        postgres = conn.dialect.name == "postgresql"
        epoch = f"CAST(extract(epoch FROM {unit}) AS bigint)" if postgres else (
            f"CAST(strftime('%s', {unit}) AS INTEGER)")  # fmt: skip
        # (in _Segment's order)
        fields = [epoch, "acquired", "borrowed", "released", "reclaimed", "revoked", "denials",
                  "net", "dsec_ms", "max_used", "last_used", "last_total",
                  "ended_by_term", "ended_by_idle"]  # fmt: skip
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
        for row in conn.execute(bind_times(text(sql), *names), params):
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
                    int(row.ended_by_term or 0),
                    int(row.ended_by_idle or 0),
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
    ends, starts = ", ".join(f"'{t}'" for t in ENDINGS), ", ".join(f"'{t}'" for t in STARTS)
    # Weighted like the rollups' columns: a lease moves the level by its seats.
    delta = f"(CASE WHEN type IN ({starts}) THEN seats WHEN type IN ({ends}) THEN -seats END)"

    def count(kind: str) -> str:
        return f"SUM(CASE WHEN type = '{kind}' THEN 1 ELSE 0 END)"

    # A lease.reclaimed of the license's term, or for idleness, counts apart, as in the
    # rollups.
    term, idle = term_end_sql(conn.dialect.name), idle_end_sql(conn.dialect.name)
    sql = f"""
        SELECT license_id, {count(ACQUIRED)} AS acquired, {count(BORROWED)} AS borrowed,
               {count("lease.released")} AS released,
               SUM(CASE WHEN type = '{RECLAIMED}' AND NOT {term} AND NOT {idle} THEN 1
                        ELSE 0 END) AS reclaimed,
               SUM(CASE WHEN {term} THEN 1 ELSE 0 END) AS ended_by_term,
               SUM(CASE WHEN {idle} THEN 1 ELSE 0 END) AS ended_by_idle,
               {count("lease.revoked")} AS revoked,
               SUM(CASE WHEN type = '{DENIED}' THEN "count" ELSE 0 END) AS denials,
               SUM({delta}) AS net, SUM({delta} * {to_end}) AS dsec_ms,
               MAX(seats_used) AS max_used
        FROM lease_events
        WHERE {window.scope()} AND occurred_at >= :lo AND occurred_at < :hi
        GROUP BY license_id"""
    return list(conn.execute(bind_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))


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
    return list(conn.execute(bind_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))


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
        _check_periods(-(-(window.until - floor(window.since, period)) // step), period)
    with transaction(engine) as conn:
        limit_statements(conn)
        if period == "minute":
            _check_minutes(conn, window, now)
        licenses = _collect(window, conn, _unit(period))
    starts: dict[str, datetime] = {}
    for line in licenses.values():
        if window.since is not None and (line.level > 0 or line.segments):
            starts[line.license_id] = floor(window.since, period)
        elif line.segments:
            starts[line.license_id] = floor(line.segments[0].start, period)
    if window.until is not None:
        last = floor(window.until - timedelta(microseconds=1), period)
    else:
        ends = [s.start for line in licenses.values() for s in line.segments]
        if not ends:  # nothing happened since: only the seats held at the start, no buckets
            held = [
                Timeline(lid, line.level, line.total)
                for lid, line in sorted(licenses.items())
                if line.level > 0
            ]
            return _Computed([], [], held)
        last = floor(max(ends), period)
    last = min(last, floor(now, period))  # a period that starts after now is not reported
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
    start = window.since if window.since is not None else first_hour(conn, window)
    if start is not None and start < horizon:
        raise InvalidRequest(
            f"Minute periods cover the last {MINUTE_RETENTION.days} days only (minute "
            f"rollups are kept that long): since must be {iso_utc(horizon)} or later; use "
            "period=hour for older windows.",
            limit=iso_utc(horizon),
        )


def resolve_period(window: Window, period: str, engine: Engine | None = None) -> str:
    """``auto``: ``exact`` when the window holds at most ``AUTO_POINTS`` changes of seats
    in use (``estimate_changes``, from the hourly rollups) and its raw events are all
    kept, else the bucketed period ``bucket_period`` picks; other periods as they are."""
    if period != AUTO:
        return period
    now = clock.now()
    with transaction(engine) as conn:
        limit_statements(conn)
        if exact_horizon(conn, window) is None:
            if estimate_changes(conn, window, now) <= AUTO_POINTS:
                return EXACT
    return bucket_period(window, engine)


def bucket_period(window: Window, engine: Engine | None = None) -> str:
    """The finest period that gives at most ``AUTO_POINTS`` periods from the window's
    start (``since``, else the first event) to its end (``until``, else now; never after
    now), minutes only within their retention."""
    now = clock.now()
    start = window.since
    if start is None:
        with transaction(engine) as conn:
            limit_statements(conn)
            start = first_hour(conn, window)
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
            seat_ms += level * ms(seg.start - cursor) + level * ms(seg.end - seg.start)
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
            counts.ended_by_term += seg.ended_by_term
            counts.ended_by_idle += seg.ended_by_idle
            counts.revoked += seg.revoked
            counts.denials += seg.denials
            cursor = seg.end
            i += 1
        seat_ms += level * ms(hi - cursor)
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
        timeline.end_level = level
        if denials:
            timeline.denials.append((bucket, denials))
        counts.lost += lost
        bucket = end
    if line.segments:
        out.outcomes.append(counts)
    timeline.end_level = level
    out.timelines.append(timeline)


# -- the report's parts ------------------------------------------------------------------


def peak_usage(
    window: Window, period: str = "hour", engine: Engine | None = None
) -> list[PeriodUsage]:
    """Peak concurrent seats, seats in force, seat-seconds, denials and lost leases per
    license and UTC period."""
    return _compute(window, resolve_period(window, period, engine), engine).usage


def outcomes(window: Window, engine: Engine | None = None) -> list[LicenseOutcomes]:
    """Per license: acquired, released, reclaimed, ended by the term or for idleness,
    revoked, denied and lost in the window."""
    return _compute(window, "day", engine).outcomes


def timelines(window: Window, engine: Engine | None = None, period: str = "hour") -> list[Timeline]:
    """Per license, the peak seats in use per period (for charts); with ``exact`` (or
    ``auto`` picking it), also the steps."""
    return usage_report(window, period, engine).timelines


def usage_report(window: Window, period: str = "hour", engine: Engine | None = None) -> UsageReport:
    """The whole report; ``period`` may be ``auto`` (``resolve_period``), the report says
    which period it chose. ``exact``: the usage rows per the period ``bucket_period``
    picks (``usage_period``), and each timeline's steps from the raw events (``auto``
    takes that period instead when the steps pass the bounds)."""
    requested = period
    period = resolve_period(window, period, engine)
    usage_period = bucket_period(window, engine) if period == EXACT else period
    now = clock.now()
    if period == EXACT:  # refuse before any work
        with transaction(engine) as conn:
            limit_statements(conn)
            horizon = exact_horizon(conn, window)
        if horizon is not None:
            raise InvalidRequest(
                f"Exact steps need the raw events, kept from {iso_utc(horizon)} on "
                "(seatlease audit prune): since must be that or later; use period=hour "
                "for older windows.",
                limit=iso_utc(horizon),
            )
    computed = _compute(window, usage_period, engine)
    if period == EXACT:
        try:
            with transaction(engine) as conn:
                limit_statements(conn)
                exact_steps(conn, window, now, computed.timelines)
        except InvalidRequest:
            if requested != AUTO:
                raise
            period = usage_period  # more changes than the rollups counted: periods after all
    report = UsageReport(
        window=window,
        period=period,
        usage=computed.usage,
        durations=lease_durations(window, engine),
        outcomes=computed.outcomes,
        usage_period=usage_period,
    )
    report.timelines = computed.timelines  # the same walk: a chart costs no second one
    return report


# -- per user (license policy: `user` on acquire, the wait queue) ------------------------
