"""Alerts the service computes (issue 51): ``license.nearly_full`` and
``license.capacity_ok``, ``license.denials``, ``license.term_ending``. ``run_alerts`` runs
every minute (the ``webhooks_retry`` function, from Cloud Scheduler; the local stack's
loop) and hands what it finds to the webhook store (``store.enqueue``) as events of the
audit's shape, so endpoints filter and receive them as any lease event.

Where each comes from
---------------------
- *Nearly full*: seats in use per UTC minute from ``usage_minute_rollups``. A minute's
  peak is the larger of the level it started at (``last_used`` of the latest earlier row:
  a minute with no event holds that level) and its ``max_used`` (the highest
  ``seats_used`` any event of it reported: Redis's own count, never rebuilt from deltas).
  ``full_minutes`` minutes in a row whose peak is at least ``full_percent`` % of the
  seats sold (``licenses.seats``, rounded up to whole seats) send ``license.nearly_full``
  once; the first minute after that whose peak is below sends ``license.capacity_ok``:
  one episode. Only minutes older than ``settle()`` (``ALERT_SETTLE_SECONDS``, 60) are
  judged: the audit trail arrives through Pub/Sub, a few seconds late.
- *Denials*: true denials (``usage_refusals.true_denial``: a refused client that gave up,
  the right-sizing report's count) per UTC hour; an hour with at least ``denials`` sends
  ``license.denials``. An hour is judged once the reaper has judged its last minute
  (``TRUE_DENIAL_MINUTES`` after it) and the audit stored it (``settle()`` more).
- *Term ending*: ``licenses.expires_at``: 30, 7 and 1 days before it and at it, once each
  per end (the metadata says the grace and when it ends). A notice already due when the
  end was set or moved (a license made 5 days before its end) sends only the latest one
  due (7 days), never a stale 30-day one; a renewal moves the end and its notices start
  again. The "at the end" notice is not sent more than ``TERM_LATE`` after the end.

Once and bounded
----------------
``license_alert_state`` keeps, per license, where each check stopped (minutes judged,
hours counted, notices told) and the open episode, so a run reads only the rows that are
new since the last: about one minute row and no refusal row per license a minute. A
license whose checks stopped long ago (the scheduler was off) is judged over its last
``full_minutes`` + ``CATCH_UP`` minutes and ``DENIAL_HOURS_BACK`` hours only: an alert
about last week is noise. Every alert's ``event_id`` is derived from the license, the
kind and the episode's start / the hour / the end and its step, so a re-run (a crash
between the enqueue and the state's commit, two runs at once) hands the same ids again
and the webhook store keeps one delivery per id.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, and_, or_, select, tuple_

from seatlease import clock
from seatlease.clock import iso_utc
from seatlease.logs import log
from seatlease.records.db import transaction
from seatlease.records.tables import (
    license_alert_state,
    license_alerts,
    licenses,
    usage_minute_rollups,
    usage_refusals,
)

NEARLY_FULL = "license.nearly_full"
CAPACITY_OK = "license.capacity_ok"
DENIALS = "license.denials"
TERM_ENDING = "license.term_ending"
ALERT_TYPES = (NEARLY_FULL, CAPACITY_OK, DENIALS, TERM_ENDING)

MINUTE = timedelta(minutes=1)
DENIAL_WINDOW = timedelta(hours=1)
TERM_STEPS_DAYS = (30, 7, 1, 0)  # before the end, in days; 0: at the end
TERM_LATE = timedelta(days=7)
CATCH_UP = timedelta(hours=1)  # judged beyond full_minutes after a long pause
DENIAL_HOURS_BACK = 24
DEFAULT_SETTLE_SECONDS = 60
DEFAULT_TRUE_DENIAL_MINUTES = 10  # the reaper's (seatlease.events.reaper), same env
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Sink = Callable[[list[dict[str, Any]]], Any]


def settle() -> timedelta:
    """How old a minute must be before it is judged: ``ALERT_SETTLE_SECONDS`` (0 to 600,
    default 60) covers the audit trail's Pub/Sub delay."""
    raw = os.environ.get("ALERT_SETTLE_SECONDS", "").strip()
    try:
        seconds = int(raw) if raw else DEFAULT_SETTLE_SECONDS
    except ValueError:
        seconds = DEFAULT_SETTLE_SECONDS
    return timedelta(seconds=min(max(seconds, 0), 600))


def denial_delay() -> timedelta:
    """An hour's refusals are all stored this long after it: the reaper judges a minute
    ``TRUE_DENIAL_MINUTES`` after it, and the audit stores the verdict."""
    raw = os.environ.get("TRUE_DENIAL_MINUTES", "").strip()
    try:
        minutes = float(raw) if raw else DEFAULT_TRUE_DENIAL_MINUTES
    except ValueError:
        minutes = DEFAULT_TRUE_DENIAL_MINUTES
    return timedelta(minutes=min(max(minutes, 1), 60)) + settle()


def alert_id(tenant_id: str, license_id: str, kind: str, key: str) -> str:
    """``alert-<kind>-<digest>``: the same license, kind and key always give the same id
    (at most 64 characters, whatever the ids' lengths)."""
    digest = hashlib.sha256(f"{tenant_id}\x00{license_id}\x00{kind}\x00{key}".encode())
    return f"alert-{kind}-{digest.hexdigest()[:40]}"


def floor_to(moment: datetime, step: timedelta) -> datetime:
    moment = clock.utc(moment)
    return EPOCH + ((moment - EPOCH) // step) * step


def _event(
    lic: dict[str, Any],
    etype: str,
    kind: str,
    key: str,
    at: datetime,
    metadata: dict[str, Any],
    seats_used: int | None = None,
) -> dict[str, Any]:
    return {
        "event_id": alert_id(lic["tenant_id"], lic["license_id"], kind, key),
        "type": etype,
        "tenant_id": lic["tenant_id"],
        "license_id": lic["license_id"],
        "session_id": None,
        "client_id": None,
        "occurred_at": iso_utc(at),
        "seats_used": seats_used,
        "seats_total": lic["seats"],
        "metadata": metadata,
    }


# -- nearly full ---------------------------------------------------------------------


def full_threshold(seats: int, percent: int) -> int:
    """Seats in use at which a license is "nearly full": ``percent`` % of ``seats``,
    rounded up (80 % of 4 seats: 4), at least one seat."""
    return max(1, math.ceil(seats * percent / 100))


def minute_peaks(
    rows: list[Any], level: int, start: datetime, end: datetime
) -> Iterable[tuple[datetime, datetime, int, int]]:
    """Stretches of ``[start, end)`` at one peak: ``(first minute, end, peak, level
    after)``: each row's minute (``rows``: minute, max_used, last_used, in order), and the
    gaps between rows (no event: the level ``level`` it started at holds)."""
    at = start
    for minute, max_used, last_used in rows:
        minute = clock.utc(minute)
        if minute < start or minute >= end:
            continue
        if minute > at:
            yield at, minute, level, level
        peak = max(level, max_used if max_used is not None else level)
        if last_used is not None:
            level = int(last_used)
        yield minute, minute + MINUTE, peak, level
        at = minute + MINUTE
    if at < end:
        yield at, end, level, level


def full_start(lic: dict[str, Any], state: dict[str, Any], end: datetime) -> datetime | None:
    """Where the nearly-full check of ``lic`` starts (None: nothing to judge). The first
    run, or checks that stopped long ago, judge the last ``full_minutes`` + ``CATCH_UP``
    only, the current run of full minutes anew, from a level read again."""
    if not lic["full_percent"] or lic["seats"] <= 0:
        state.update(full_checked_to=end, full_run_start=None, full_level=None)
        state.update(full_episode_start=None, full_episode_peak=None)
        return None
    earliest = end - timedelta(minutes=lic["full_minutes"]) - CATCH_UP
    start = state["full_checked_to"]
    if start is None or clock.utc(start) < earliest:
        state.update(full_checked_to=earliest, full_run_start=None, full_level=None)
        return earliest
    start = clock.utc(start)
    return start if start < end else None


def nearly_full(
    lic: dict[str, Any], state: dict[str, Any], end: datetime, rows: list[Any], level: int
) -> list[dict[str, Any]]:
    """The episodes' starts and ends in the minutes from ``state["full_checked_to"]`` to
    ``end`` (``rows``: their minute rollups; ``level``: seats in use at the start);
    updates ``state``."""
    percent, needed = lic["full_percent"], timedelta(minutes=lic["full_minutes"])
    threshold = full_threshold(lic["seats"], percent)
    start = clock.utc(state["full_checked_to"])
    events: list[dict[str, Any]] = []
    run = state["full_run_start"] and clock.utc(state["full_run_start"])
    episode = state["full_episode_start"] and clock.utc(state["full_episode_start"])
    peak_seen = state["full_episode_peak"] or 0
    meta = {"full_percent": percent, "full_minutes": lic["full_minutes"],
            "threshold_seats": threshold, "seats": lic["seats"]}  # fmt: skip
    for first, stop, peak, after in minute_peaks(rows, level, start, end):
        level = after
        if peak < threshold:
            if episode is not None:
                ended = {"since": iso_utc(episode), "ended_at": iso_utc(first),
                         "full_minutes_total": (first - episode) // MINUTE,
                         "peak_in_use": peak_seen}  # fmt: skip
                ok = _event(lic, CAPACITY_OK, "ok", iso_utc(episode), first, {**meta, **ended})
                events.append({**ok, "seats_used": after})
            run, episode, peak_seen = None, None, 0
            continue
        peak_seen = peak if run is None else max(peak_seen, peak)
        run = run or first
        met = run + needed  # the end of the M-th full minute in a row
        if episode is None and met <= stop:
            episode = run
            said = {"since": iso_utc(run), "peak_in_use": peak_seen}
            full = _event(lic, NEARLY_FULL, "full", iso_utc(run), met, {**meta, **said})
            events.append({**full, "seats_used": after})
    state.update(full_checked_to=end, full_run_start=run, full_episode_start=episode)
    state.update(full_episode_peak=peak_seen if run is not None else None, full_level=level)
    return events


# -- true denials --------------------------------------------------------------------


def denials_start(lic: dict[str, Any], state: dict[str, Any], ready: datetime) -> datetime | None:
    """The first hour of ``lic`` to count (None: none complete and not counted)."""
    earliest = ready - DENIAL_HOURS_BACK * DENIAL_WINDOW
    start = state["denials_checked_to"]
    start = earliest if start is None else max(clock.utc(start), earliest)
    state["denials_checked_to"] = max(start, ready)
    return start if lic["denials"] and start < ready else None


def denials(lic: dict[str, Any], rows: list[Any]) -> list[dict[str, Any]]:
    """The hours with at least ``denials`` true denials (``rows``: minute, client_id of
    each true denial in the hours to count)."""
    hours: dict[datetime, list[str]] = {}
    for minute, client_id in rows:
        hours.setdefault(floor_to(minute, DENIAL_WINDOW), []).append(client_id)
    events = []
    for hour, clients in sorted(hours.items()):
        if len(clients) < lic["denials"]:
            continue
        meta = {
            "true_denials": len(clients),
            "clients": len({c for c in clients if c}),
            "threshold": lic["denials"],
            "window_start": iso_utc(hour),
            "window_end": iso_utc(hour + DENIAL_WINDOW),
            "window_minutes": DENIAL_WINDOW // MINUTE,
            # a minute refused more clients than Redis keeps: a row of client '' counts
            # one for them all
            "lower_bound": "" in clients,
        }
        events.append(_event(lic, DENIALS, "denials", iso_utc(hour), hour + DENIAL_WINDOW, meta))
    return events


# -- the term ------------------------------------------------------------------------


def term_ending(lic: dict[str, Any], state: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The latest notice due before (or at) the license's end, unless already told."""
    if lic["expires_at"] is None:
        state.update(term_end=None, term_notified_days=None)
        return []
    end = clock.utc(lic["expires_at"])
    if state["term_end"] is None or clock.utc(state["term_end"]) != end:
        state.update(term_end=end, term_notified_days=None)  # a new end: new notices
    due = [d for d in TERM_STEPS_DAYS if now >= end - timedelta(days=d)]
    if not due:
        return []
    days = min(due)
    told = state["term_notified_days"]
    if told is not None and told <= days:
        return []
    state["term_notified_days"] = days
    if days == 0 and now > end + TERM_LATE:
        return []  # long over: no news to anyone
    grace = int(lic["grace_seconds"] or 0)
    meta = {
        "days_before": days,
        "expires_at": iso_utc(end),
        "grace_seconds": grace,
        "grace_ends_at": iso_utc(clock.later(end, grace)),
        "on_expiry": lic["on_expiry"],
    }
    at = end - timedelta(days=days)
    return [_event(lic, TERM_ENDING, f"term{days}", iso_utc(end), at, meta)]


# -- the run: a few statements for every license at once -----------------------------

KEY_FIELDS = ("tenant_id", "license_id")
STATE_FIELDS = tuple(c.name for c in license_alert_state.c if c.name not in KEY_FIELDS)
CHUNK = 500  # keys per IN list and rows per upsert


def _candidates(conn: Connection, now: datetime) -> list[dict[str, Any]]:
    """Licenses with an alert set, or a term ending within 30 days (or lately ended),
    each with its settings and its state (all None for a license not judged yet)."""
    lic, a, s = licenses.c, license_alerts.c, license_alert_state.c
    horizon = now + timedelta(days=max(TERM_STEPS_DAYS))
    stmt = (
        select(
            lic.tenant_id,
            lic.license_id,
            lic.seats,
            lic.expires_at,
            lic.grace_seconds,
            lic.on_expiry,
            a.full_percent,
            a.full_minutes,
            a.denials,
            *[s[f] for f in STATE_FIELDS],
            s.tenant_id.label("has_state"),
        )
        .select_from(
            licenses.outerjoin(
                license_alerts, and_(a.tenant_id == lic.tenant_id, a.license_id == lic.license_id)
            ).outerjoin(
                license_alert_state,
                and_(s.tenant_id == lic.tenant_id, s.license_id == lic.license_id),
            )
        )
        .where(
            or_(
                a.full_percent > 0,
                a.denials > 0,
                and_(lic.expires_at <= horizon, lic.expires_at >= now - TERM_LATE),
            )
        )
        .order_by(lic.tenant_id, lic.license_id)
    )
    found = []
    for row in conn.execute(stmt).mappings():
        row = dict(row)
        row["full_percent"] = row["full_percent"] or 0
        row["full_minutes"] = row["full_minutes"] or 1
        row["denials"] = row["denials"] or 0
        found.append(row)
    return found


def _chunks(keys: list[tuple[str, str]]) -> Iterable[list[tuple[str, str]]]:
    for i in range(0, len(keys), CHUNK):
        yield keys[i : i + CHUNK]


def _levels(conn: Connection, keys: list[tuple[str, str]], start: datetime) -> dict:
    """Seats in use at ``start`` of each license: its latest earlier row's ``last_used``
    (a probe of the primary key backwards each, in one statement)."""
    a, r = license_alerts.c, usage_minute_rollups.c
    latest = (
        select(r.last_used)
        .where(r.tenant_id == a.tenant_id, r.license_id == a.license_id)
        .where(r.minute < start, r.last_used.is_not(None))
        .order_by(r.minute.desc())
        .limit(1)
        .scalar_subquery()
    )
    found: dict[tuple[str, str], int] = {}
    for chunk in _chunks(keys):
        stmt = select(a.tenant_id, a.license_id, latest).where(
            tuple_(a.tenant_id, a.license_id).in_(chunk)
        )
        found.update({(t, lic): int(v or 0) for t, lic, v in conn.execute(stmt)})
    return found


def _rows(
    conn: Connection,
    table: Any,
    columns: list[Any],
    keys: list[tuple[str, str]],
    lo: datetime,
    hi: datetime,
    *where: Any,
) -> dict[tuple[str, str], list[Any]]:
    """``columns`` of ``table``'s rows of ``keys`` with ``lo <= minute < hi``, by license,
    in minute order."""
    c = table.c
    found: dict[tuple[str, str], list[Any]] = {}
    for chunk in _chunks(keys):
        stmt = (
            select(c.tenant_id, c.license_id, *columns)
            .where(tuple_(c.tenant_id, c.license_id).in_(chunk), c.minute >= lo, c.minute < hi)
            .where(*where)
            .order_by(c.tenant_id, c.license_id, c.minute)
        )
        for row in conn.execute(stmt):
            found.setdefault((row[0], row[1]), []).append(tuple(row[2:]))
    return found


def _by_start(starts: dict[tuple[str, str], datetime]) -> dict[datetime, list]:
    groups: dict[datetime, list[tuple[str, str]]] = {}
    for key, start in starts.items():
        groups.setdefault(start, []).append(key)
    return groups


def _judge(conn: Connection, lics: list[dict[str, Any]], now: datetime) -> list[dict]:
    """Every license's alerts; updates each one's state (in ``lic["state"]``)."""
    end = floor_to(now - settle(), MINUTE)
    ready = floor_to(now - denial_delay(), DENIAL_WINDOW)
    full_starts, denial_starts = {}, {}
    for lic in lics:
        key = (lic["tenant_id"], lic["license_id"])
        if (start := full_start(lic, lic["state"], end)) is not None:
            full_starts[key] = start
        if (start := denials_start(lic, lic["state"], ready)) is not None:
            denial_starts[key] = start
    # licenses judged alike (every minute, the usual case) share one statement
    minute_rows, levels, denial_rows = {}, {}, {}
    r, u = usage_minute_rollups, usage_refusals
    for start, keys in _by_start(full_starts).items():
        cols = [r.c.minute, r.c.max_used, r.c.last_used]
        minute_rows.update(_rows(conn, r, cols, keys, start, end))
        by_key = {(lic["tenant_id"], lic["license_id"]): lic for lic in lics}
        unknown = [k for k in keys if by_key[k]["state"]["full_level"] is None]
        if unknown:
            levels.update(_levels(conn, unknown, start))
    for start, keys in _by_start(denial_starts).items():
        cols = [u.c.minute, u.c.client_id]
        denial_rows.update(_rows(conn, u, cols, keys, start, ready, u.c.true_denial.is_(True)))
    events: list[dict[str, Any]] = []
    for lic in lics:
        key, state = (lic["tenant_id"], lic["license_id"]), lic["state"]
        if key in full_starts:
            level = state["full_level"]
            level = levels.get(key, 0) if level is None else level
            events += nearly_full(lic, state, end, minute_rows.get(key, []), level)
        if key in denial_starts:
            events += denials(lic, denial_rows.get(key, []))
        events += term_ending(lic, state, now)
    return events


def _save(conn: Connection, changed: list[dict[str, Any]]) -> None:
    """Upsert the states that changed (a few statements of ``CHUNK`` rows). Never back:
    a row a later run already saved (a later ``full_checked_to``: every run sets it to
    its own end) stays as it is."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as upsert
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert
    stored = license_alert_state.c.full_checked_to
    for i in range(0, len(changed), CHUNK):
        stmt = upsert(license_alert_state).values(changed[i : i + CHUNK])
        newer = stmt.excluded.full_checked_to
        stmt = stmt.on_conflict_do_update(
            index_elements=list(KEY_FIELDS),
            set_={f: stmt.excluded[f] for f in STATE_FIELDS},
            where=or_(stored.is_(None), newer.is_(None), newer >= stored),
        )
        conn.execute(stmt)


def _default_sink(engine: Engine | None) -> Sink:
    from seatlease.webhooks import store as webhook_store

    return lambda events: webhook_store.enqueue(events, engine=engine)


def run_alerts(
    now: datetime | None = None, *, engine: Engine | None = None, sink: Sink | None = None
) -> int:
    """Judge every license with an alert set or a term ending soon, hand the alerts found
    to ``sink`` (default: the webhook store's ``enqueue``), then record what was said.
    Returns the alerts handed over.

    Three steps, each with its own connection, none held across another: the scheduler's
    function has a pool of one connection (terraform: webhooks-retry), and the sink takes
    one of its own. Two runs at once (a slow run overlapping the next minute's) judge the
    same minutes alike, hand the same ids (one delivery each) and save the same state;
    ``_save`` never moves a state back."""
    now = clock.utc(now or clock.now())
    sink = sink or _default_sink(engine)
    with transaction(engine) as conn:
        lics = _candidates(conn, now)
        for lic in lics:
            lic["state"] = {f: lic[f] for f in STATE_FIELDS}
        before = [dict(lic["state"]) for lic in lics]
        events = _judge(conn, lics, now)
    if events:
        # before the state is saved: a crash in between hands the same ids again
        sink(events)
    changed = [
        {"tenant_id": lic["tenant_id"], "license_id": lic["license_id"], **lic["state"]}
        for lic, old in zip(lics, before, strict=True)
        if lic["state"] != old or lic["has_state"] is None
    ]
    if changed:
        with transaction(engine) as conn:
            _save(conn, changed)
    if events:
        log("INFO", "alerts: sent", alerts=len(events), licenses=len(lics))
    return len(events)
