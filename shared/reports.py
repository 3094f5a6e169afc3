"""Usage reports over the audit log (``lease_events``): peak seats, denials, lease durations
and how leases ended. Plain SQL with window functions that runs on PostgreSQL and on
SQLite (3.25 or later); only the time-bucket and duration expressions differ.

Method
------
*Concurrency* is rebuilt from the event stream: every ``lease.acquired`` is +1 and every
``lease.released``/``lease.reclaimed``/``lease.revoked`` is -1, and a running
``SUM(delta) OVER (PARTITION BY license_id ORDER BY occurred_at, id)`` gives the number
of live leases right after each event. An ending counts only when its session's
``lease.acquired`` is in the log, so a log whose oldest rows were pruned cannot drive the
level below zero (the level is also clamped at 0 for display). The running sum covers
the whole history before ``until``, because the level at ``since`` depends on every
earlier event (on this machine's PostgreSQL, a tenant with 200,000 events: a whole-history
hourly report in 2.8 s, one day's in 1.1 s). Known limit: a lease whose ending never
reached the log (its Redis outbox lost with the Redis data) keeps counting;
``seats_used`` in each event is Redis's own count at that moment, to cross-check.

*Peak per hour/day*: events are grouped in UTC buckets (events before ``since`` form one
pseudo-bucket that only supplies the starting level). A bucket's peak is the larger of
the level carried into it (the level after the previous event) and the highest level
after any of its events. The database returns one row per bucket that has events (max
level, level after its last event, ``seats_total`` of its last event that carried one);
Python walks the buckets in order, so a bucket without events gets the level carried
through it. ``seats_total`` is the license's seat count as the events recorded it,
carried forward the same way. Buckets run from ``since`` (or a license's first event) to
``until`` (exclusive) or, without ``until``, to the tenant's last event in the window.
When ``since`` falls inside an hour/day, the first bucket only covers the part from
``since`` on.

*Denials* are ``lease.denied`` events, each the aggregated count of one reaper run (the
seat scripts only increment a counter, see DESIGN.md), summed per bucket: they are
attributed to the reaper run that flushed them (about a minute late at most).

*Lease durations* per license and client: leases acquired in the window, matched by
``session_id`` to their first ending event before ``until``; duration = ending time -
acquisition time, i.e. how long the seat was out of the pool (for a reclaimed lease: up
to its expiry plus the reaper's delay). Leases without an ending are counted as open.

*Endings* per license: counts of acquired, released, reclaimed (a crashed or vanished
client), revoked (an operator) and denied requests in the window.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, bindparam, text

from shared.clock import iso_utc, utc
from shared.store import transaction

ACQUIRED = "lease.acquired"
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")
DENIED = "lease.denied"
PERIODS: dict[str, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
BEFORE = "0000"  # the pseudo-bucket of events before ``since`` (sorts first)
_BUCKET_FORMAT = "%Y-%m-%dT%H:%M:%S"


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
                object.__setattr__(self, name, utc(value))
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")

    def where(self, alias: str = "e", *, since: bool = True, until: bool = True) -> str:
        """The SQL conditions of this window on table alias ``alias``."""
        parts = [f"{alias}.tenant_id = :tenant_id"]
        if self.license_id is not None:
            parts.append(f"{alias}.license_id = :license_id")
        if since and self.since is not None:
            parts.append(f"{alias}.occurred_at >= :since")
        if until and self.until is not None:
            parts.append(f"{alias}.occurred_at < :until")
        return " AND ".join(parts)

    def statement(self, sql: str, *, times: bool = False) -> Any:
        """``text(sql)`` with this window's parameters bound (as DateTime, so SQLite
        compares them in its stored format); ``times``: the result column
        ``occurred_at`` comes back as a datetime on SQLite too."""
        params: dict[str, Any] = {"tenant_id": self.tenant_id}
        stmt: Any = text(sql)
        if ":license_id" in sql:
            params["license_id"] = self.license_id
        for name in ("since", "until"):
            if f":{name}" in sql:
                stmt = stmt.bindparams(bindparam(name, type_=DateTime(timezone=True)))
                params[name] = getattr(self, name)
        stmt = stmt.bindparams(**params)
        return stmt.columns(occurred_at=DateTime(timezone=True)) if times else stmt


# -- result rows -------------------------------------------------------------------------


@dataclass
class PeriodUsage:
    license_id: str
    period_start: datetime
    peak_seats: int
    seats_total: int | None
    denials: int


@dataclass
class ClientDurations:
    license_id: str
    client_id: str
    leases: int  # ended leases
    total_seconds: float
    average_seconds: float | None
    max_seconds: float | None
    reclaimed: int
    open: int  # acquired in the window, not ended before its end


@dataclass
class LicenseOutcomes:
    license_id: str
    acquired: int
    released: int
    reclaimed: int
    revoked: int
    denials: int

    @property
    def reclaimed_percent(self) -> float | None:
        ended = self.released + self.reclaimed + self.revoked
        return round(100.0 * self.reclaimed / ended, 1) if ended else None


@dataclass
class Timeline:
    """Seats in use over time for one license: the level at the window's start, then
    the level (and recorded seat count) after each event; denials with their counts."""

    license_id: str
    start_level: int = 0
    start_total: int | None = None
    points: list[tuple[datetime, int, int | None]] = field(default_factory=list)
    denials: list[tuple[datetime, int]] = field(default_factory=list)


@dataclass
class UsageReport:
    window: Window
    period: str
    usage: list[PeriodUsage]
    durations: list[ClientDurations]
    outcomes: list[LicenseOutcomes]

    def as_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return iso_utc(value) if value else None

        return {
            "tenant_id": self.window.tenant_id,
            "license_id": self.window.license_id,
            "since": iso(self.window.since),
            "until": iso(self.window.until),
            "period": self.period,
            "usage": [{**asdict(u), "period_start": iso(u.period_start)} for u in self.usage],
            "durations": [asdict(d) for d in self.durations],
            "outcomes": [
                {**asdict(o), "reclaimed_percent": o.reclaimed_percent} for o in self.outcomes
            ],
        }


# -- dialect pieces ----------------------------------------------------------------------


def _bucket(conn: Connection, column: str, period: str) -> str:
    """SQL text of the UTC bucket start of ``column``, as 'YYYY-MM-DDTHH:00:00' text."""
    if conn.dialect.name == "postgresql":
        fmt = 'YYYY-MM-DD"T"HH24":00:00"' if period == "hour" else 'YYYY-MM-DD"T00:00:00"'
        return f"to_char({column} AT TIME ZONE 'UTC', '{fmt}')"
    if conn.dialect.name == "sqlite":  # SQLAlchemy stores UTC wall time as text
        fmt = "%Y-%m-%dT%H:00:00" if period == "hour" else "%Y-%m-%dT00:00:00"
        return f"strftime('{fmt}', {column})"
    raise NotImplementedError(f"usage reports support PostgreSQL and SQLite, not {conn.dialect}")


def _seconds_between(conn: Connection, start: str, end: str) -> str:
    if conn.dialect.name == "postgresql":
        return f"CAST(EXTRACT(EPOCH FROM ({end} - {start})) AS double precision)"
    return f"((julianday({end}) - julianday({start})) * 86400.0)"


def _floor(value: datetime, period: str) -> datetime:
    value = value.replace(minute=0, second=0, microsecond=0)
    return value.replace(hour=0) if period == "day" else value


def _types(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _levels_sql(window: Window) -> str:
    """CTEs ``ev`` (lease changes with their +1/-1) and ``running`` (live leases after
    each event), over the whole history up to ``until``."""
    return f"""
        WITH ev AS (
            SELECT e.id, e.license_id, e.occurred_at, e.seats_total,
                   CASE WHEN e.type = '{ACQUIRED}' THEN 1 ELSE -1 END AS delta
            FROM lease_events e
            WHERE {window.where("e", since=False)}
              AND (e.type = '{ACQUIRED}'
                   OR (e.type IN ({_types(ENDINGS)})
                       AND EXISTS (SELECT 1 FROM lease_events a
                                   WHERE a.session_id = e.session_id
                                     AND a.type = '{ACQUIRED}'
                                     AND a.tenant_id = e.tenant_id
                                     AND a.license_id = e.license_id)))
        ),
        running AS (
            SELECT id, license_id, occurred_at, seats_total,
                   SUM(delta) OVER (PARTITION BY license_id ORDER BY occurred_at, id
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS level
            FROM ev
        )"""


# -- the queries -------------------------------------------------------------------------


def peak_usage(
    window: Window, period: str = "hour", engine: Engine | None = None
) -> list[PeriodUsage]:
    """Peak concurrent seats, seats in force and denials per license and UTC period."""
    if period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}")
    with transaction(engine) as conn:
        bucket = _bucket(conn, "occurred_at", period)
        if window.since is not None:
            bucket = f"CASE WHEN occurred_at < :since THEN '{BEFORE}' ELSE {bucket} END"
        sql = f"""{_levels_sql(window)},
            bucketed AS (
                SELECT license_id, {bucket} AS bucket, level, seats_total, occurred_at, id
                FROM running
            ),
            numbered AS (
                SELECT license_id, bucket, level, seats_total,
                       ROW_NUMBER() OVER (PARTITION BY license_id, bucket
                                          ORDER BY occurred_at DESC, id DESC) AS rn_last,
                       ROW_NUMBER() OVER (PARTITION BY license_id, bucket
                                          ORDER BY CASE WHEN seats_total IS NULL THEN 1
                                                        ELSE 0 END,
                                                   occurred_at DESC, id DESC) AS rn_total
                FROM bucketed
            )
            SELECT license_id, bucket, MAX(level) AS peak,
                   MAX(CASE WHEN rn_last = 1 THEN level END) AS end_level,
                   MAX(CASE WHEN rn_total = 1 THEN seats_total END) AS seats_total
            FROM numbered
            GROUP BY license_id, bucket
            ORDER BY license_id, bucket"""
        levels = conn.execute(window.statement(sql)).all()
        denial_sql = f"""
            SELECT license_id, bucket, SUM(n) AS denials FROM (
                SELECT e.license_id, {_bucket(conn, "e.occurred_at", period)} AS bucket,
                       e."count" AS n
                FROM lease_events e
                WHERE {window.where("e")} AND e.type = '{DENIED}'
            ) d
            GROUP BY license_id, bucket"""
        denials = conn.execute(window.statement(denial_sql)).all()
    return _walk_buckets(window, period, levels, denials)


def _parse_bucket(bucket: str) -> datetime:
    return datetime.strptime(bucket, _BUCKET_FORMAT).replace(tzinfo=UTC)


def _walk_buckets(
    window: Window, period: str, levels: list[Any], denial_rows: list[Any]
) -> list[PeriodUsage]:
    step = PERIODS[period]
    by_license: dict[str, dict[str, Any]] = {}
    for row in levels:
        by_license.setdefault(row.license_id, {})[row.bucket] = row
    denials: dict[tuple[str, datetime], int] = {}
    for row in denial_rows:
        denials[(row.license_id, _parse_bucket(row.bucket))] = int(row.denials or 0)
        by_license.setdefault(row.license_id, {})
    in_window = [_parse_bucket(b) for rows in by_license.values() for b in rows if b != BEFORE]
    in_window += [when for _lic, when in denials]
    if window.until is not None:
        last = _floor(window.until - timedelta(microseconds=1), period)
    elif in_window:
        last = max(in_window)
    else:
        return []
    usage: list[PeriodUsage] = []
    for license_id in sorted(by_license):
        rows = by_license[license_id]
        before = rows.get(BEFORE)
        level = max(0, int(before.end_level)) if before else 0
        total = before.seats_total if before else None
        own = [_parse_bucket(b) for b in rows if b != BEFORE]
        own += [when for lic, when in denials if lic == license_id]
        if window.since is not None and (level > 0 or own):
            current = _floor(window.since, period)
        elif own:
            current = min(own)
        else:
            continue  # nothing held and nothing happened in the window
        while current <= last:
            row = rows.get(current.strftime(_BUCKET_FORMAT))
            peak = level
            if row is not None:
                peak = max(level, int(row.peak))
                level = max(0, int(row.end_level))
                if row.seats_total is not None:
                    total = int(row.seats_total)
            denied = denials.get((license_id, current), 0)
            usage.append(PeriodUsage(license_id, current, max(0, peak), total, denied))
            current += step
    return usage


def lease_durations(window: Window, engine: Engine | None = None) -> list[ClientDurations]:
    """Per license and client: leases acquired in the window and how long they held."""
    with transaction(engine) as conn:
        duration = _seconds_between(conn, "s.occurred_at", "x.occurred_at")
        sql = f"""
            WITH starts AS (
                SELECT e.license_id, e.client_id, e.session_id, e.occurred_at
                FROM lease_events e
                WHERE {window.where("e")} AND e.type = '{ACQUIRED}'
            ),
            ends AS (
                SELECT e.session_id, e.type, e.occurred_at,
                       ROW_NUMBER() OVER (PARTITION BY e.session_id
                                          ORDER BY e.occurred_at, e.id) AS rn
                FROM lease_events e
                WHERE {window.where("e", since=False)} AND e.type IN ({_types(ENDINGS)})
                  AND e.session_id IN (SELECT session_id FROM starts)
            )
            SELECT s.license_id, s.client_id,
                   COUNT(x.session_id) AS leases,
                   COALESCE(SUM({duration}), 0) AS total_seconds,
                   AVG({duration}) AS average_seconds,
                   MAX({duration}) AS max_seconds,
                   SUM(CASE WHEN x.type = 'lease.reclaimed' THEN 1 ELSE 0 END) AS reclaimed,
                   SUM(CASE WHEN x.session_id IS NULL THEN 1 ELSE 0 END) AS still_open
            FROM starts s
            LEFT JOIN ends x ON x.session_id = s.session_id AND x.rn = 1
            GROUP BY s.license_id, s.client_id
            ORDER BY s.license_id, s.client_id"""
        rows = conn.execute(window.statement(sql)).all()

    def secs(value: Any) -> float | None:
        return None if value is None else round(float(value), 3)

    return [
        ClientDurations(
            license_id=r.license_id,
            client_id=r.client_id or "-",
            leases=int(r.leases),
            total_seconds=secs(r.total_seconds) or 0.0,
            average_seconds=secs(r.average_seconds),
            max_seconds=secs(r.max_seconds),
            reclaimed=int(r.reclaimed or 0),
            open=int(r.still_open or 0),
        )
        for r in rows
    ]


def outcomes(window: Window, engine: Engine | None = None) -> list[LicenseOutcomes]:
    """Per license: acquired, released, reclaimed, revoked and denied in the window."""

    def count(kind: str) -> str:
        return f"SUM(CASE WHEN e.type = '{kind}' THEN 1 ELSE 0 END)"

    sql = f"""
        SELECT e.license_id,
               {count(ACQUIRED)} AS acquired,
               {count("lease.released")} AS released,
               {count("lease.reclaimed")} AS reclaimed,
               {count("lease.revoked")} AS revoked,
               SUM(CASE WHEN e.type = '{DENIED}' THEN e."count" ELSE 0 END) AS denials
        FROM lease_events e
        WHERE {window.where("e")}
        GROUP BY e.license_id
        ORDER BY e.license_id"""
    with transaction(engine) as conn:
        rows = conn.execute(window.statement(sql)).all()
    return [
        LicenseOutcomes(
            r.license_id,
            int(r.acquired or 0),
            int(r.released or 0),
            int(r.reclaimed or 0),
            int(r.revoked or 0),
            int(r.denials or 0),
        )
        for r in rows
    ]


def timelines(window: Window, engine: Engine | None = None) -> list[Timeline]:
    """Per license, seats in use after every event in the window (for charts)."""
    sql = f"""{_levels_sql(window)}
        SELECT license_id, occurred_at, level, seats_total
        FROM running ORDER BY license_id, occurred_at, id"""
    if window.since is not None:  # before since, only each license's last level matters
        sql = f"""{_levels_sql(window)},
            last_before AS (
                SELECT id, license_id, occurred_at, level, seats_total,
                       ROW_NUMBER() OVER (PARTITION BY license_id
                                          ORDER BY occurred_at DESC, id DESC) AS rn
                FROM running WHERE occurred_at < :since
            )
            SELECT license_id, occurred_at, level, seats_total FROM (
                SELECT id, license_id, occurred_at, level, seats_total
                FROM last_before WHERE rn = 1
                UNION ALL
                SELECT id, license_id, occurred_at, level, seats_total
                FROM running WHERE occurred_at >= :since
            ) t
            ORDER BY license_id, occurred_at, id"""
    denial_sql = f"""
        SELECT e.license_id, e.occurred_at, e."count" AS n FROM lease_events e
        WHERE {window.where("e")} AND e.type = '{DENIED}'
        ORDER BY e.license_id, e.occurred_at, e.id"""
    found: dict[str, Timeline] = {}
    with transaction(engine) as conn:
        for row in _stream(conn, window.statement(sql, times=True)):
            line = found.setdefault(row.license_id, Timeline(row.license_id))
            when, level = utc(row.occurred_at), max(0, int(row.level))
            total = None if row.seats_total is None else int(row.seats_total)
            if window.since is not None and when < window.since:
                line.start_level = level
                line.start_total = total if total is not None else line.start_total
            else:
                line.points.append((when, level, total))
        for row in conn.execute(window.statement(denial_sql, times=True)):
            line = found.setdefault(row.license_id, Timeline(row.license_id))
            line.denials.append((utc(row.occurred_at), int(row.n)))
    return [
        line
        for _id, line in sorted(found.items())
        if line.points or line.denials or line.start_level
    ]


def _stream(conn: Connection, statement: Any) -> Iterator[Any]:
    yield from conn.execution_options(yield_per=5000).execute(statement)


def usage_report(window: Window, period: str = "hour", engine: Engine | None = None) -> UsageReport:
    return UsageReport(
        window=window,
        period=period,
        usage=peak_usage(window, period, engine),
        durations=lease_durations(window, engine),
        outcomes=outcomes(window, engine),
    )
