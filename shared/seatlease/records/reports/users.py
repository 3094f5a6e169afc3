"""Per license and user: leases, their seat time (weighted by each lease's seats) and the
wait queue's outcomes, summed by the database (``usage_leases.user_name`` and
``seats``, and the queue's partial index)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, text

from seatlease.records.reports.model import (
    Window,
    bind_times,
    limit_statements,
)
from seatlease.records.rollups import IDLE_END_TYPE, TERM_END_TYPE
from seatlease.records.store import transaction
from seatlease.records.tables import QUEUE_OUTCOMES

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
    # of the leases that ended: those the license's term ended (its end, or a start moved
    # later: a lease.reclaimed with that reason), not a crash
    ended_by_term: int = 0
    # of the leases that ended: those the license's idle rule reclaimed (reason idle)
    ended_by_idle: int = 0
    # of the leases that ended: each whole duration x its seats (a weight-4 lease held an
    # hour is 4 seat-hours); longest_seconds is a duration, unweighted
    seat_seconds: float = 0.0
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
    a negative duration counts as 0) and how many of those ended by the license's term
    or its idle rule,
    and the ``queue.granted`` / ``queue.left`` events in
    the window (``ix_lease_events_queue``) with their ``queued_ms`` (a number, ``true``
    as 1; anything else counts as 0). The work follows the leases and queue events of the
    window, with no row per event in Python: a year of a 10-million-event license stays
    well inside the reports' statement timeout (bench/user_report_scale.py measures it;
    docs/benchmarks.md has the latest run). Leases and events
    older than the retention are gone, so is their part of this breakdown (the
    per-license reports outlive them)."""
    found: dict[tuple[str, str | None], UserUsage] = {}

    def of(license_id: str, user: str | None) -> UserUsage:
        key = (license_id, user)
        if key not in found:
            found[key] = UserUsage(license_id, user)
        return found[key]

    with transaction(engine) as conn:
        limit_statements(conn)
        for r in _user_leases(conn, window):
            row = of(r.license_id, r.user_name)
            row.leases = int(r.leases)
            row.open_leases = int(r.open_leases)
            row.ended_by_term = int(r.ended_by_term or 0)
            row.ended_by_idle = int(r.ended_by_idle or 0)
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
    """Per license and user: leases acquired in the window, the open ones, and the
    seat-seconds (each duration x the lease's seats) and longest duration (seconds) of
    the others, and how many of those the license's term ended (``end_type``
    ``TERM_END_TYPE``: the audit insert keeps it so since migration 0015) or its idle
    rule reclaimed (``IDLE_END_TYPE``, since migration 0018)."""
    conds, names = _window_conds(window, "acquired_at")
    # An ending before since is not one the window reads (the lease counts as open).
    ended = "ended_at IS NOT NULL" + (" AND ended_at >= :since" if window.since else "")
    if conn.dialect.name == "postgresql":
        # Intervals summed exactly (microseconds), converted once per row of the result.
        held = f"CASE WHEN {ended} THEN GREATEST(ended_at - acquired_at, interval '0') END"
        total = f"extract(epoch FROM SUM({held} * seats))"
        longest = f"extract(epoch FROM MAX({held}))"
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
        total, longest = f"SUM({held} * seats) / 1000000.0", f"MAX({held}) / 1000000.0"
    sql = f"""
        SELECT license_id, user_name, COUNT(*) AS leases,
               SUM(CASE WHEN {ended} THEN 0 ELSE 1 END) AS open_leases,
               SUM(CASE WHEN {ended} AND end_type = '{TERM_END_TYPE}' THEN 1 ELSE 0 END)
                   AS ended_by_term,
               SUM(CASE WHEN {ended} AND end_type = '{IDLE_END_TYPE}' THEN 1 ELSE 0 END)
                   AS ended_by_idle,
               {total} AS total_s, {longest} AS longest_s
        FROM usage_leases
        WHERE {" AND ".join([window.scope(), "acquired_at IS NOT NULL", *conds])}
        GROUP BY license_id, user_name"""
    return list(conn.execute(bind_times(text(sql), *names), window.params(**_bounds(window))))


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
    return list(conn.execute(bind_times(text(sql), *names), window.params(**_bounds(window))))


def _bounds(window: Window) -> dict[str, Any]:
    return {"since": window.since, "until": window.until}
