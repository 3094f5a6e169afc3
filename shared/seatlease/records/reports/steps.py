"""Exact steps: the step function of seats in use, one point per change, from the raw
events of a report's window (the method is in the package's docstring, "Exact steps")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from seatlease import clock
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
    limit_statements,
)
from seatlease.records.store import transaction


def _exact_end(window: Window, now: datetime) -> datetime:
    """Where exact steps stop: the window's end or now, whichever is first."""
    return min(window.until or now, now)


def _change_rows_sql(window: Window, what: str, denials: bool = False) -> tuple[str, list[str]]:
    """``SELECT what FROM lease_events`` of the window up to ``_exact_end``: the events
    that carry Redis's seat count (and, with ``denials``, the ``lease.denied`` ones)."""
    conds = [window.scope(), "occurred_at < :hi"]
    names = ["hi"]
    if window.since is not None:
        conds.append("occurred_at >= :lo")
        names.append("lo")
    kinds = f"(seats_used IS NOT NULL OR type = '{DENIED}')" if denials else (
        "seats_used IS NOT NULL")  # fmt: skip
    conds.append(kinds)
    return f"SELECT {what} FROM lease_events WHERE {' AND '.join(conds)}", names


def count_events(conn: Connection, window: Window, now: datetime, limit: int) -> int:
    """The events of the window that carry a seat count, counted up to ``limit`` (a
    bounded probe of the (tenant, license, time) index, whatever the history's size)."""
    inner, names = _change_rows_sql(window, "1")
    sql = f"SELECT COUNT(*) FROM ({inner} LIMIT {int(limit)}) t"
    params = window.params(lo=window.since, hi=_exact_end(window, now))
    return int(conn.execute(bind_times(text(sql), *names), params).scalar() or 0)


def count_changes(window: Window, limit: int = MAX_ROWS + 1, engine: Engine | None = None) -> int:
    """How many changes of seats in use the window holds (events with Redis's count), at
    most ``limit``."""
    with transaction(engine) as conn:
        limit_statements(conn)
        return count_events(conn, window, clock.now(), limit)


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
    inner, names = _change_rows_sql(
        window, "license_id, occurred_at, seats_used, seats_total, type, count", denials=True
    )
    sql = f"{inner} ORDER BY license_id, occurred_at, length(event_id), event_id LIMIT :cap"
    params = window.params(lo=window.since, hi=end, cap=MAX_ROWS + 1)
    rows = list(conn.execute(bind_times(text(sql), *names), params))
    if len(rows) > MAX_ROWS:
        raise InvalidRequest(
            f"The exact steps would have more than {MAX_ROWS:,} changes (MAX_ROWS): use "
            "period=minute or narrow the window.",
            limit=MAX_ROWS,
        )
    by_license: dict[str, list[Any]] = {}
    for row in rows:
        by_license.setdefault(row.license_id, []).append(row)
    known = {line.license_id: line for line in lines}
    for license_id in by_license:
        if license_id not in known:  # only denials: no seats held, nothing bucketed
            known[license_id] = Timeline(license_id)
            lines.append(known[license_id])
    lines.sort(key=lambda line: line.license_id)
    for line in lines:
        events = by_license.get(line.license_id, [])
        if len(events) > MAX_PERIODS:
            raise InvalidRequest(
                f"The exact steps would have {len(events):,} changes for license "
                f"{line.license_id}; at most {MAX_PERIODS:,} (MAX_PERIODS): use "
                "period=minute or narrow the window.",
                limit=MAX_PERIODS,
            )
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
