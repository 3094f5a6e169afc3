"""Right-sizing: how many seats each license needed, from the seats in use, the clients
refused and the queue's waits (``seatlease report sizing``, the portal's sizing line).

Definitions (docs/design.md, "Right-sizing")
--------------------------------------------
*Busy minutes*: the minutes in which a license had a seat in use or refused someone.

*Demand* of a minute = the peak seats in use in it (weighted leases count their weight)
+ the seats asked by the distinct clients refused (or waiting in the queue) in it and
not served in it (``usage_refusals``: one row per client and minute, judged by the
reaper: ``served`` when granted before the minute ended, or less than 60 s after its wait
began: a wait across a minute boundary is one episode). A client retrying twelve times
in a minute is one client; a client refused then granted within the minute asked for
nothing unmet.

*True denial*: a client refused and not granted within the true-denial window
(``TRUE_DENIAL_MINUTES``, 10) of its last refusal, and not refused again within it: it
gave up (one give-up, one true denial, however many minutes it kept trying).

*Recommended seats* at share p (``p95``, ``p99``, ``p100``): the fewest seats at which
the demand would have been met in at least that share of the busy minutes (``p100``:
every one, the largest demand). *Verdict*: ``undersized`` when ``p99`` is above the
seats sold (more than 1 % of the busy minutes turned someone away), ``oversized`` when
``p100`` is below them (even the busiest minute left seats unused), else ``right``.

Where the minutes come from
---------------------------
Within the minute rollups' retention (``MINUTE_RETENTION``, 14 days) every minute is
exact. Before it, the hourly rollups stand for their minutes: an hour whose peak was P
counts ``ceil(seat-seconds / 60 / P)`` minutes at P (the fewest minutes its seat time
fills at its peak; its quieter minutes are left out, which can only raise the
percentiles: the recommendation errs towards more seats) and each refused minute in it
counts at P + its unmet seats; ``estimated`` says so. Stretches with no event hold the
level they started with, minute for minute, in either part.

*Idle seat-hours*, the seats *idle reclaim* and *sharing would have saved* (issue 50):
over the window's last 14 days at most, from the leases and the idle rule's warnings
(``reports/savings.py`` defines them and says what they cost).

Cost follows the rows, not the minutes: a walk over each license's rollup rows (an
unchanged level between rows is one stretch), its refused minutes and its queue waits.
A year of a license with 10 million events reads 8,760 hourly rows and 20,160 minute
rows at most (``bench/report_scale.py``)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text

from seatlease import clock
from seatlease.clock import iso_utc
from seatlease.errors import InvalidRequest
from seatlease.records.reports.model import (
    AUTO_POINTS,
    PERIODS,
    Window,
    as_time,
    bind_times,
    ceil,
    first_hour,
    floor,
    limit_statements,
    ms,
)
from seatlease.records.reports.savings import Savings, savings, savings_start
from seatlease.records.reports.usage import _collect, _License, minute_horizon
from seatlease.records.store import transaction

SHARES = {"p95": 0.95, "p99": 0.99, "p100": 1.0}
MAX_DAYS = 1830  # five years of hourly rows per license (43,800)
MINUTE = timedelta(minutes=1)


@dataclass
class QueueWaits:
    """Ended wait-queue tickets' waits in seconds (nearest rank), granted or left."""

    tickets: int = 0
    p50: float | None = None
    p95: float | None = None
    max: float | None = None


@dataclass
class LicenseSizing:
    license_id: str
    seats: int | None  # sold (the license's seats now; else the last the log recorded)
    busy_minutes: int
    peak_in_use: int
    refused_clients: int  # distinct clients refused in the window
    turned_away_clients: int  # of them, refused in some minute and not served in it
    refused_clients_lower_bound: bool  # a minute refused more clients than were kept
    unmet_minutes: int  # minutes in which someone was refused and not served
    true_denials: int
    queue_wait_seconds: QueueWaits
    recommended_seats: dict[str, int]
    verdict: str  # undersized | right | oversized
    sentence: str
    demand: list[tuple[datetime, int]] = field(default_factory=list)  # per demand_period
    estimated: bool = False  # minutes before the minute rollups' retention, from hours
    # What the idle rule and sharing would have saved (issue 50; reports/savings.py
    # defines them), over [savings_since, end): the window's last 14 days at most.
    idle_seat_hours: float = 0.0
    idle_reclaim_would_save: int = 0
    sharing_would_save: int = 0
    savings_since: datetime | None = None
    savings_sentence: str = ""

    def as_dict(self) -> dict[str, Any]:
        waits = self.queue_wait_seconds
        return {
            "license_id": self.license_id,
            "seats": self.seats,
            "busy_minutes": self.busy_minutes,
            "peak_in_use": self.peak_in_use,
            "refused_clients": self.refused_clients,
            "turned_away_clients": self.turned_away_clients,
            "refused_clients_lower_bound": self.refused_clients_lower_bound,
            "unmet_minutes": self.unmet_minutes,
            "true_denials": self.true_denials,
            "queue_wait_seconds": {
                "tickets": waits.tickets,
                "p50": waits.p50,
                "p95": waits.p95,
                "max": waits.max,
            },
            "recommended_seats": self.recommended_seats,
            "verdict": self.verdict,
            "sentence": self.sentence,
            "estimated": self.estimated,
            "idle_seat_hours": self.idle_seat_hours,
            "idle_reclaim_would_save": self.idle_reclaim_would_save,
            "sharing_would_save": self.sharing_would_save,
            "savings_since": iso_utc(self.savings_since) if self.savings_since else None,
            "savings_sentence": self.savings_sentence,
            "demand": [[iso_utc(at), value] for at, value in self.demand],
        }


@dataclass
class SizingReport:
    window: Window
    start: datetime | None  # the covered part: since (or the first event) ...
    end: datetime | None  # ... to until or now, whichever is first
    demand_period: str
    licenses: list[LicenseSizing]

    def as_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return iso_utc(value) if value else None

        return {
            "tenant_id": self.window.tenant_id,
            "license_id": self.window.license_id,
            "since": iso(self.window.since),
            "until": iso(self.window.until),
            "start": iso(self.start),
            "end": iso(self.end),
            "demand_period": self.demand_period,
            "licenses": [line.as_dict() for line in self.licenses],
        }


# -- the pure part: pieces of time at one demand, and the fewest seats ------------------


@dataclass
class Piece:
    """``minutes`` busy minutes within ``[start, end)`` at ``demand`` seats."""

    start: datetime
    end: datetime
    demand: int
    minutes: float


def fewest_seats(pieces: list[Piece], share: float) -> int:
    """The fewest seats meeting the demand in at least ``share`` of the busy minutes."""
    busy = sorted((p.demand, p.minutes) for p in pieces if p.minutes > 0)
    total = sum(m for _, m in busy)
    if total <= 0:
        return 0
    met = 0.0
    for demand, minutes in busy:
        met += minutes
        if met >= share * total - 1e-9:
            return demand
    return busy[-1][0]


def verdict_of(recommended: dict[str, int], seats: int) -> str:
    if recommended["p99"] > seats:
        return "undersized"
    if recommended["p100"] < seats:
        return "oversized"
    return "right"


def sentence_of(s: LicenseSizing) -> str:
    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    if s.busy_minutes == 0:
        return "Not used in this window: no seat was in use and no client was refused."
    p99, p100 = s.recommended_seats["p99"], s.recommended_seats["p100"]
    if s.turned_away_clients:
        more = "+" if s.refused_clients_lower_bound else ""
        were = "was" if s.turned_away_clients == 1 and not more else "were"
        return (
            f"{s.turned_away_clients:,}{more} client{'' if s.turned_away_clients == 1 else 's'} "
            f"{were} turned away in {plural(s.unmet_minutes, 'minute')}; "
            f"{plural(p99, 'seat')} would have served 99 % of the busy minutes"
            + (f" ({p100:,} every one)." if p100 != p99 else ".")
        )
    of = f" of {s.seats:,}" if s.seats is not None else ""
    return (
        f"No client was turned away; at most {s.peak_in_use:,}{of} seats were in use: "
        f"{plural(p100, 'seat')} would have served every busy minute."
    )


def savings_sentence_of(s: LicenseSizing) -> str:
    """What the three savings numbers mean, in words (empty when the window had no
    part to read them from)."""
    if s.savings_since is None:
        return ""

    def seats(n: int) -> str:
        return f"{n:,} seat{'' if n == 1 else 's'}"

    hours = f"{s.idle_seat_hours:,.1f}".removesuffix(".0")
    return (
        f"Since {iso_utc(s.savings_since)}: {hours} seat-hours were held by programs their "
        f"users had left idle (warned by the idle rule); reclaiming idle seats at once "
        f"would have saved {seats(s.idle_reclaim_would_save)} at the peak, and letting "
        f"one user's sessions share one seat {seats(s.sharing_would_save)}."
    )


# -- the walk over the rollups -----------------------------------------------------------


def _minutes(delta: timedelta) -> float:
    return delta / MINUTE


def walk_pieces(line: _License, first: datetime, end: datetime, unit: str) -> list[Piece]:
    """The busy time of one license over ``[first, end)`` from its rollup rows: a piece
    per row (a minute, or an hour's minutes at its peak) and per stretch between rows at
    a level above 0."""
    pieces: list[Piece] = []
    level, cursor = line.level, first
    for seg in line.segments:
        if seg.start >= end:
            break
        if seg.start > cursor and level > 0:
            pieces.append(Piece(cursor, seg.start, level, _minutes(seg.start - cursor)))
        peak = max(level, seg.max_used if seg.max_used is not None else 0)
        stop = min(seg.end, end)
        if peak > 0:
            if unit == "minute":
                minutes = 1.0
            else:  # the fewest minutes its seat time fills at its peak (the docstring)
                seat_ms = level * ms(seg.end - seg.start) + seg.dsec_ms
                whole = max(1, math.ceil(_minutes(stop - seg.start)))
                minutes = float(min(whole, max(1, math.ceil(seat_ms / 60_000 / peak))))
            pieces.append(Piece(seg.start, stop, peak, minutes))
        level = seg.last_used if seg.last_used is not None else max(0, level + seg.net)
        cursor = seg.end
    if cursor < end and level > 0:
        pieces.append(Piece(cursor, end, level, _minutes(end - cursor)))
    return pieces


def add_refusals(pieces: list[Piece], refused: list[tuple[datetime, int]]) -> list[Piece]:
    """Each refused minute ``(minute, unmet seats)`` becomes a busy minute of its own at
    the seats in use then + its unmet seats, taken out of the piece it falls in."""
    pieces = sorted(pieces, key=lambda p: p.start)
    starts = [p.start for p in pieces]
    added: list[Piece] = []
    for minute, unmet in refused:
        i = bisect.bisect_right(starts, minute) - 1
        base = 0
        if i >= 0 and pieces[i].start <= minute < pieces[i].end:
            base = pieces[i].demand
            pieces[i].minutes = max(0.0, pieces[i].minutes - 1)
        added.append(Piece(minute, minute + MINUTE, base + unmet, 1.0))
    return pieces + added


def chart(
    pieces: list[Piece], start: datetime, end: datetime, period: str
) -> list[tuple[datetime, int]]:
    """The largest demand per ``period`` from ``start`` to ``end`` (0 where none)."""
    step = PERIODS[period]
    first = floor(start, period)
    count = max(0, math.ceil((end - first) / step))
    values = [0] * count
    for p in pieces:
        if p.minutes <= 0 or p.demand <= 0:
            continue
        i = max(0, int((floor(p.start, period) - first) / step))
        while i < count and first + i * step < p.end:
            values[i] = max(values[i], p.demand)
            i += 1
    return [(first + i * step, v) for i, v in enumerate(values)]


def chart_period(start: datetime, end: datetime, horizon: datetime) -> str:
    span = end - start
    if start >= horizon and span / MINUTE <= AUTO_POINTS:
        return "minute"
    return "hour" if span / PERIODS["hour"] <= AUTO_POINTS else "day"


# -- the report --------------------------------------------------------------------------


def sizing_report(window: Window, engine: Engine | None = None) -> SizingReport:
    now = clock.now()
    horizon = ceil(minute_horizon(now), "hour")  # minutes from here on are exact
    with transaction(engine) as conn:
        limit_statements(conn)
        sold = _seats_sold(conn, window)
        start = window.since if window.since is not None else first_hour(conn, window)
        end = min(window.until or now, now)
        if start is None or start >= end:
            lines = [_empty(lid, seats) for lid, seats in sorted(sold.items())]
            return SizingReport(window, start, None, "hour", lines)
        if end - start > timedelta(days=MAX_DAYS):
            raise InvalidRequest(
                f"Invalid request: since: the sizing report covers at most {MAX_DAYS:,} "
                "days; move since later (or until earlier).",
                details=[{"field": "since", "problem": f"at most {MAX_DAYS} days before until"}],
                limit=MAX_DAYS,
            )
        parts = [(start, end, "minute")] if start >= horizon else (
            [(start, end, "hour")] if end <= horizon
            else [(start, horizon, "hour"), (horizon, end, "minute")])  # fmt: skip
        pieces: dict[str, list[Piece]] = {}
        estimated: set[str] = set()
        totals: dict[str, int | None] = {}
        for lo, hi, unit in parts:
            part = Window(window.tenant_id, window.license_id, lo, hi)
            for lid, line in _collect(part, conn, unit).items():
                if line.total is not None or lid not in totals:
                    totals[lid] = line.total if line.total is not None else totals.get(lid)
                for seg in line.segments:
                    if seg.last_total is not None:
                        totals[lid] = seg.last_total
                found = walk_pieces(line, lo, hi, unit)
                pieces.setdefault(lid, []).extend(found)
                if unit == "hour" and found:
                    estimated.add(lid)
        refused = _refused_minutes(conn, window, start, end)
        counts = _refused_counts(conn, window, start, end)
        waits = _queue_waits(conn, window, start, end)
        names = sorted(set(sold) | set(pieces) | set(refused) | set(counts))
        saved = savings(conn, window, start, end, names)
    period = chart_period(start, end, horizon)
    lines = []
    for lid in names:
        seats = sold.get(lid, totals.get(lid))
        with_refusals = add_refusals(pieces.get(lid, []), refused.get(lid, []))
        c = counts.get(lid, {})
        line = LicenseSizing(
            license_id=lid,
            seats=seats,
            busy_minutes=round(sum(p.minutes for p in with_refusals)),
            peak_in_use=max((p.demand for p in pieces.get(lid, [])), default=0),
            refused_clients=c.get("clients", 0),
            turned_away_clients=c.get("turned_away", 0),
            refused_clients_lower_bound=c.get("lower_bound", False),
            unmet_minutes=sum(1 for _, unmet in refused.get(lid, []) if unmet > 0),
            true_denials=c.get("true_denials", 0),
            queue_wait_seconds=waits.get(lid, QueueWaits()),
            recommended_seats={
                name: fewest_seats(with_refusals, share) for name, share in SHARES.items()
            },
            verdict="right",
            sentence="",
            demand=chart(with_refusals, start, end, period),
            estimated=lid in estimated,
        )
        line.verdict = verdict_of(line.recommended_seats, seats or 0)
        line.sentence = sentence_of(line)
        found = saved.get(lid, Savings())
        line.idle_seat_hours = found.idle_seat_hours
        line.idle_reclaim_would_save = found.idle_reclaim_would_save
        line.sharing_would_save = found.sharing_would_save
        line.savings_since = savings_start(start, end)
        line.savings_sentence = savings_sentence_of(line)
        lines.append(line)
    return SizingReport(window, start, end, period, lines)


def _empty(license_id: str, seats: int) -> LicenseSizing:
    line = LicenseSizing(license_id, seats, 0, 0, 0, 0, False, 0, 0, QueueWaits(),
                         dict.fromkeys(SHARES, 0), "right", "")  # fmt: skip
    line.verdict = verdict_of(line.recommended_seats, seats)
    line.sentence = sentence_of(line)
    return line


def _seats_sold(conn: Connection, window: Window) -> dict[str, int]:
    sql = f"SELECT license_id, seats FROM licenses WHERE {window.scope()}"
    return {row.license_id: int(row.seats) for row in conn.execute(text(sql), window.params())}


def _refused_minutes(
    conn: Connection, window: Window, start: datetime, end: datetime
) -> dict[str, list[tuple[datetime, int]]]:
    """Per license, each minute that refused a client: the seats asked by the clients
    not served in it (the row of clients past the cap has none to count)."""
    sql = f"""
        SELECT license_id, minute,
               SUM(CASE WHEN NOT served AND client_id <> '' THEN seats ELSE 0 END) AS unmet
        FROM usage_refusals
        WHERE {window.scope()} AND minute >= :lo AND minute < :hi
        GROUP BY license_id, minute ORDER BY license_id, minute"""
    found: dict[str, list[tuple[datetime, int]]] = {}
    params = window.params(lo=floor(start, "minute"), hi=end)
    for row in conn.execute(bind_times(text(sql), "lo", "hi"), params):
        found.setdefault(row.license_id, []).append((as_time(row.minute), int(row.unmet)))
    return found


def _refused_counts(
    conn: Connection, window: Window, start: datetime, end: datetime
) -> dict[str, dict[str, Any]]:
    sql = f"""
        SELECT license_id,
               COUNT(DISTINCT CASE WHEN client_id <> '' THEN client_id END) AS clients,
               COUNT(DISTINCT CASE WHEN client_id <> '' AND NOT served THEN client_id END)
                   AS turned_away,
               SUM(CASE WHEN true_denial THEN 1 ELSE 0 END) AS true_denials,
               MAX(CASE WHEN lower_bound THEN 1 ELSE 0 END) AS lower_bound
        FROM usage_refusals
        WHERE {window.scope()} AND minute >= :lo AND minute < :hi
        GROUP BY license_id"""
    params = window.params(lo=floor(start, "minute"), hi=end)
    return {
        row.license_id: {
            "clients": int(row.clients),
            "turned_away": int(row.turned_away),
            "true_denials": int(row.true_denials or 0),
            "lower_bound": bool(row.lower_bound),
        }
        for row in conn.execute(bind_times(text(sql), "lo", "hi"), params)
    }


def _queue_waits(
    conn: Connection, window: Window, start: datetime, end: datetime
) -> dict[str, QueueWaits]:
    """Per license, the waits of the tickets that ended in the window (nearest rank)."""
    params = window.params(lo=start, hi=end)
    where = f"{window.scope()} AND ended_at >= :lo AND ended_at < :hi"
    if conn.dialect.name == "postgresql":
        sql = f"""
            SELECT license_id, COUNT(*) AS n, MAX(waited_ms) AS top,
                   percentile_disc(0.5) WITHIN GROUP (ORDER BY waited_ms) AS p50,
                   percentile_disc(0.95) WITHIN GROUP (ORDER BY waited_ms) AS p95
            FROM usage_queue_waits WHERE {where} GROUP BY license_id"""
        return {
            row.license_id: QueueWaits(int(row.n), row.p50 / 1000, row.p95 / 1000, row.top / 1000)
            for row in conn.execute(bind_times(text(sql), "lo", "hi"), params)
        }
    sql = f"""SELECT license_id, waited_ms FROM usage_queue_waits WHERE {where}
              ORDER BY license_id, waited_ms"""
    by: dict[str, list[int]] = {}
    for row in conn.execute(bind_times(text(sql), "lo", "hi"), params):
        by.setdefault(row.license_id, []).append(int(row.waited_ms))

    def rank(values: list[int], share: float) -> float:
        return values[max(0, math.ceil(share * len(values)) - 1)] / 1000

    return {lid: QueueWaits(len(v), rank(v, 0.5), rank(v, 0.95), v[-1] / 1000)
            for lid, v in by.items()}  # fmt: skip
