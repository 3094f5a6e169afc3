"""Exact steps: the step function of seats in use, one point per change, from the raw
events of a report's window (the method is in the package's docstring, "Exact steps")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, text

from seatlease.errors import InvalidRequest
from seatlease.records.reports.model import (
    DENIED,
    MAX_PERIODS,
    MAX_ROWS,
    Timeline,
    Window,
    as_time,
    bind_times,
    first_hour,
    floor,
)


def _exact_end(window: Window, now: datetime) -> datetime:
    """Where exact steps stop: the window's end or now, whichever is first."""
    return min(window.until or now, now)


def estimate_changes(conn: Connection, window: Window, now: datetime) -> int:
    """How many changes of seats in use the window holds, from the hourly rollups (leases
    started and ended in the window's hours, counted whole: at least the window's own):
    one row per license and hour, never the raw events, whatever the history's size."""
    conds = [window.scope(), "hour < :hi"]
    names = ["hi"]
    if window.since is not None:
        conds.append("hour >= :lo")
        names.append("lo")
    sql = f"""
        SELECT COALESCE(SUM(acquired + borrowed + released + reclaimed + ended_by_term
                            + ended_by_idle + revoked), 0)
        FROM usage_rollups WHERE {" AND ".join(conds)}"""
    lo = floor(window.since, "hour") if window.since is not None else None
    params = window.params(lo=lo, hi=_exact_end(window, now))
    return int(conn.execute(bind_times(text(sql), *names), params).scalar() or 0)


def _pruned_before(conn: Connection) -> datetime | None:
    sql = "SELECT pruned_before FROM audit_retention WHERE id = 1"
    found = conn.execute(text(sql)).scalar()
    return None if found is None else as_time(found)


def exact_horizon(conn: Connection, window: Window) -> datetime | None:
    """Where the raw events start when the window starts before it (None: exact steps
    can be drawn): ``seatlease audit prune`` deletes older raw events."""
    pruned = _pruned_before(conn)
    if pruned is None:
        return None
    start = window.since if window.since is not None else first_hour(conn, window)
    return pruned if start is not None and start < pruned else None


def exact_steps(conn: Connection, window: Window, now: datetime, lines: list[Timeline]) -> None:
    """Give each timeline its ``steps`` and its denials at their own time, from the
    window's events (at most ``MAX_PERIODS`` changes per license and ``MAX_ROWS`` in all,
    else ``InvalidRequest`` naming the limit)."""
    end = _exact_end(window, now)
    ids = sorted({line.license_id for line in lines})  # every license with a segment
    if not ids:
        return
    conds = [window.scope(), "license_id IN :ids", "occurred_at < :hi",
             f"(seats_used IS NOT NULL OR type = '{DENIED}')"]  # fmt: skip
    names = ["hi"]
    if window.since is not None:
        conds.append("occurred_at >= :lo")
        names.append("lo")
    # One index range per license (tenant, license, time) and only the window's monthly
    # partitions; LIMIT: never more rows than the bound allows.
    sql = f"""
        SELECT license_id, occurred_at, seats_used, seats_total, type, count
        FROM lease_events WHERE {" AND ".join(conds)}
        ORDER BY license_id, occurred_at, length(event_id), event_id LIMIT :cap"""
    stmt = bind_times(text(sql), *names).bindparams(bindparam("ids", expanding=True))
    params = window.params(lo=window.since, hi=end, cap=MAX_ROWS + 1, ids=ids)
    rows = list(conn.execute(stmt, params))
    if len(rows) > MAX_ROWS:
        raise InvalidRequest(
            f"The exact steps would have more than {MAX_ROWS:,} changes (MAX_ROWS): use "
            "period=minute or narrow the window.",
            limit=MAX_ROWS,
        )
    by_license: dict[str, list[Any]] = {}
    for row in rows:
        by_license.setdefault(row.license_id, []).append(row)
    for license_id, events in by_license.items():  # every bound checked before any change
        if len(events) > MAX_PERIODS:
            raise InvalidRequest(
                f"The exact steps would have {len(events):,} changes for license "
                f"{license_id}; at most {MAX_PERIODS:,} (MAX_PERIODS): use "
                "period=minute or narrow the window.",
                limit=MAX_PERIODS,
            )
    for line in lines:
        events = by_license.get(line.license_id, [])
        level = line.start_level if window.since is not None else 0
        first = window.since if window.since is not None else (
            as_time(events[0].occurred_at) if events else end)  # fmt: skip
        steps: list[tuple[datetime, int]] = [(first, level)]
        denials: list[tuple[datetime, int]] = []
        for row in events:
            at = as_time(row.occurred_at)
            if row.type == DENIED:
                denials.append((at, int(row.count or 0)))
                continue
            seats = max(0, int(row.seats_used))
            if line.start_total is None and row.seats_total is not None:
                line.start_total = int(row.seats_total)
            if seats == steps[-1][1]:
                continue
            if at == steps[-1][0]:
                steps[-1] = (at, seats)  # same instant: the last event's count
                if len(steps) > 1 and steps[-2][1] == seats:
                    steps.pop()
            else:
                steps.append((at, seats))
        line.steps = steps
        line.denials = denials
        line.end = end
        line.end_level = steps[-1][1]
