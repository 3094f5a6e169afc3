"""Lease durations per license and client (the method is in the package's docstring,
"Lease durations"): whole UTC days from ``usage_client_rollups``, the window's partial
days from ``usage_leases``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from seatlease.records.reports.model import (
    ClientDurations,
    Window,
    bind_times,
    ceil,
    floor,
    limit_statements,
)
from seatlease.records.rollups import IDLE_END_TYPE, RECLAIMED, TERM_END_TYPE
from seatlease.records.store import transaction


def lease_durations(window: Window, engine: Engine | None = None) -> list[ClientDurations]:
    """Per license and client: leases acquired in the window and how long they held
    (whole UTC days from ``usage_client_rollups``, the window's partial days from
    ``usage_leases``); of those ended, the ones reclaimed after a crash and the ones
    ended by the license's term and the ones its idle rule reclaimed, apart."""
    since, until = window.since, window.until
    d0 = ceil(since, "day") if since else None
    d1 = floor(until, "day") if until else None
    # acquired, ended, reclaimed, total_ms, max_ms, ended_by_term, ended_by_idle
    acc: dict[tuple[str, str], list[Any]] = {}

    def add(key: tuple[str, str], r: Any) -> None:
        row = acc.setdefault(key, [0, 0, 0, 0, None, 0, 0])
        row[0] += int(r.acquired)
        row[1] += int(r.ended)
        row[2] += int(r.reclaimed or 0)
        row[3] += int(r.total_ms or 0)
        if r.max_ms is not None:
            top = int(r.max_ms)
            row[4] = top if row[4] is None else max(row[4], top)
        row[5] += int(r.ended_by_term or 0)
        row[6] += int(r.ended_by_idle or 0)

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
        limit_statements(conn)
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
                       SUM(reclaimed) AS reclaimed, SUM(ended_by_term) AS ended_by_term,
                       SUM(ended_by_idle) AS ended_by_idle,
                       SUM(total_ms) AS total_ms, MAX(max_ms) AS max_ms
                FROM usage_client_rollups WHERE {" AND ".join(conds)}
                GROUP BY license_id, client_id"""
            for r in conn.execute(bind_times(text(sql), *names), window.params(d0=d0, d1=d1)):
                add((r.license_id, r.client_id), r)
        for lo, hi in edges:
            for r in _edge_leases(conn, window, lo, hi):
                add((r.license_id, r.client_id), r)
    result = []
    for (license_id, client_id), row in sorted(acc.items()):
        acquired, ended, recl, total_ms, max_ms, by_term, by_idle = row
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
                ended_by_term=by_term,
                ended_by_idle=by_idle,
            )
        )
    return result


def _edge_leases(conn: Connection, window: Window, lo: datetime, hi: datetime) -> list[Any]:
    """Per license and client, the leases acquired in ``[lo, hi)`` (part of a day) from
    ``usage_leases`` (the rows the rollups were counted from: its ``end_type`` tells a
    crash, ``lease.reclaimed``, from an end by the term, ``TERM_END_TYPE``), aggregated
    by the database: a busy day is tens of thousands of leases."""
    if conn.dialect.name == "postgresql":
        duration_sql = "round(extract(epoch FROM ended_at - acquired_at) * 1000)"
    else:
        duration_sql = "round((julianday(ended_at) - julianday(acquired_at)) * 86400000)"
    sql = f"""
        SELECT license_id, coalesce(client_id, '') AS client_id, COUNT(*) AS acquired,
               COUNT(ended_at) AS ended,
               SUM(CASE WHEN end_type = '{RECLAIMED}' THEN 1 ELSE 0 END) AS reclaimed,
               SUM(CASE WHEN end_type = '{TERM_END_TYPE}' THEN 1 ELSE 0 END) AS ended_by_term,
               SUM(CASE WHEN end_type = '{IDLE_END_TYPE}' THEN 1 ELSE 0 END) AS ended_by_idle,
               COALESCE(SUM({duration_sql}), 0) AS total_ms, MAX({duration_sql}) AS max_ms
        FROM usage_leases
        WHERE {window.scope()} AND acquired_at >= :lo AND acquired_at < :hi
        GROUP BY license_id, coalesce(client_id, '')"""
    return list(conn.execute(bind_times(text(sql), "lo", "hi"), window.params(lo=lo, hi=hi)))
