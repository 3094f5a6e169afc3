"""Usage reports against history size: the same reports over 100,000 and 10,000,000 events.

Creates a private PostgreSQL database (on the machine's server at 127.0.0.1:5432 if it
answers, else a private initdb cluster), migrated, and loads two tenants with one license
of ``--clients`` (1,000) seats each, over the same ``--days`` (365) ending at ``--end``:

- ``small``: ``--small`` (100,000) events;
- ``big``: ``--events`` (10,000,000) events.

Each client holds its seat in turn: client ``c`` starts a lease every period ``P`` (so
that the tenant's events fill the days), ``c``'s leases start ``c x P / clients`` into the
period and last half a period less a millisecond, so about half the seats are in use and
every event's ``seats_used`` is Redis's exact count; plus one ``lease.denied`` per hour.
Events are generated in the database in bulk (``generate_series``) and stored through the
audit path's own statement (``seatlease.records.rollups.insert_statement`` with a generated source
instead of the JSON array): the same insert, the same rollups.

Then, per tenant, times ``report.usage`` through the admin action (``seatlease.admin``,
what the admin function and the CLI run; after a warm-up run, median of ``--repeat``
runs, the two tenants' runs alternating) for a minute
report over the last 24 hours (from the minute rollups, issue 19), an hourly report over
the last 30 days and a daily report over the last 365 days (windows that start mid-hour
and mid-minute, so the raw edges are read too), each with and without ``timelines``, and
the peak Python memory of one report (tracemalloc), and ``report.sizing`` over the
last 365 days (351 days from the hourly rollups, 14 from the minute rollups) and the last
14 days, with 10 refused minutes of 20 clients and 30 queue tickets a day. Checks:
each report of ``big`` at most 1 s and at most 2x the same report of ``small``, peak
memory at most 100 MB, and the two tenants' reports equal in shape (periods, licenses).
Exit status 1 if a check fails.

Run: ``.venv/bin/python bench/report_scale.py`` (loading 10M events takes a few minutes
on 2 cores; ``--events 1000000`` for a quicker look).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from seatlease import admin
from seatlease.records import db, partitions, rollups, store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from procs import private_database  # the tests' fresh-database helper

LICENSE = "cad"
CHUNK_SESSIONS = 250_000  # sessions (2 events each) per insert statement
HOST_METADATA = """'{"host": "ws"}'::jsonb"""


def source(
    tenant: str,
    clients: int,
    period_ms: int,
    start: datetime,
    metadata: str = "",
    session_digits: int = 0,
) -> str:
    """A SELECT of the events of sessions ``:lo <= k < :hi`` (client ``k % clients``, its
    ``k / clients``-th lease): the acquire, and its release half a period later.
    ``metadata``: an SQL expression of ``k`` for both events' metadata (jsonb); by default
    ``{"host": "ws"}``. ``session_digits``: session ids with ``k`` zero-padded to that many
    digits, so that each statement's ``usage_leases`` rows (inserted in session id order)
    go in time order, as the audit function's do (its messages arrive in about that
    order); 0: ``k`` as it is."""
    k = f"lpad(k::text, {session_digits}, '0')" if session_digits else "k"
    step = period_ms // clients
    hold = (clients // 2) * step - 1  # ends 1 ms before the next client's start
    return f"""
        SELECT '{tenant}-' || k || CASE WHEN e.n = 1 THEN '-a' ELSE '-r' END AS event_id,
               CASE WHEN e.n = 1 THEN 'lease.acquired' ELSE 'lease.released' END AS type,
               '{tenant}'::text AS tenant_id, '{LICENSE}'::text AS license_id,
               '{tenant}-s' || {k} AS session_id, 'ws-' || mod(k, {clients}) AS client_id,
               TIMESTAMPTZ '{start.isoformat()}'
                   + make_interval(secs => ((k / {clients}) * {period_ms}::bigint
                                            + mod(k, {clients}) * {step}
                                            + CASE WHEN e.n = 1 THEN 0 ELSE {hold} END)
                                           / 1000.0) AS occurred_at,
               CASE WHEN e.n = 2 THEN {clients // 2 - 1}
                    WHEN k < {clients // 2} THEN k + 1
                    ELSE {clients // 2} END AS seats_used,
               {clients}::int AS seats_total, 1 AS count,
               {metadata or HOST_METADATA} AS metadata, 1 AS seats
        FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint) - 1) AS k
        CROSS JOIN (VALUES (1), (2)) AS e(n)"""


def denials(tenant: str, start: datetime, days: int) -> str:
    return f"""
        SELECT '{tenant}-d' || h AS event_id, 'lease.denied' AS type, '{tenant}'::text AS tenant_id,
               '{LICENSE}'::text AS license_id, NULL::text AS session_id,
               NULL::text AS client_id,
               TIMESTAMPTZ '{start.isoformat()}' + make_interval(hours => h::int, mins => 30)
                   AS occurred_at,
               NULL::int AS seats_used, NULL::int AS seats_total, 3 AS count,
               NULL::jsonb AS metadata, 1 AS seats
        FROM generate_series(0, {days * 24 - 1}) AS h"""


REFUSED_MINUTES = 10  # a day's busy minutes that turn clients away (14:00 to 14:09 UTC)
REFUSED_CLIENTS = 20  # distinct clients turned away in each of them
QUEUE_TICKETS = 30  # tickets a day ending in the queue (granted or left)


def refusals(tenant: str, start: datetime, days: int) -> str:
    """The reaper's lease.refused events: REFUSED_CLIENTS clients in each of
    REFUSED_MINUTES minutes a day (a quarter served in the minute, a fifth true denials),
    and QUEUE_TICKETS queue outcomes a day with their waits: what the sizing report reads
    besides the rollups."""
    minute = (f"TIMESTAMPTZ '{start.isoformat()}' + make_interval(days => d::int, "
              "hours => 14, mins => m::int)")  # fmt: skip
    return f"""
        SELECT '{tenant}-r-' || d || '-' || m || '-' || c AS event_id,
               'lease.refused' AS type, '{tenant}'::text AS tenant_id,
               '{LICENSE}'::text AS license_id, NULL::text AS session_id,
               'turned-away-' || c AS client_id,
               {minute} + interval '11 minutes' AS occurred_at,
               NULL::int AS seats_used, NULL::int AS seats_total, 3 AS count,
               jsonb_build_object(
                   'minute', to_char(({minute}) AT TIME ZONE 'UTC',
                                     'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                   'served', c % 4 = 0, 'true_denial', c % 5 = 0, 'waiting', false)
                   AS metadata, 1 AS seats
        FROM generate_series(0, {days - 1}) AS d,
             generate_series(0, {REFUSED_MINUTES - 1}) AS m,
             generate_series(0, {REFUSED_CLIENTS - 1}) AS c
        UNION ALL
        SELECT '{tenant}-q-' || d || '-' || t, CASE WHEN t % 3 = 0 THEN 'queue.left'
               ELSE 'queue.granted' END, '{tenant}', '{LICENSE}', NULL, 'waiter-' || t,
               TIMESTAMPTZ '{start.isoformat()}' + make_interval(days => d::int,
                                                                   hours => 15, mins => t::int),
               NULL, NULL, 1, jsonb_build_object('queued_ms', 1000 * (1 + (t * 37) % 600)), 1
        FROM generate_series(0, {days - 1}) AS d, generate_series(0, {QUEUE_TICKETS - 1}) AS t"""


def load(
    engine: Any,
    tenant: str,
    events: int,
    clients: int,
    start: datetime,
    days: int,
    metadata: str = "",
    session_digits: int = 0,
) -> float:
    sessions = events // 2
    span_ms = days * 86_400_000
    per_client = max(1, sessions // clients)
    period_ms = (span_ms // per_client) // clients * clients
    statement = text(
        rollups.insert_statement(
            source(tenant, clients, period_ms, start, metadata, session_digits)
        )
    )
    began = time.perf_counter()
    for lo in range(0, sessions, CHUNK_SESSIONS):
        with engine.begin() as conn:
            # Bulk-load settings for this transaction only: sorts in memory, and no
            # flush wait at commit (a crash of the benchmark loses nothing of value).
            conn.execute(text("SET LOCAL work_mem = '256MB'"))
            conn.execute(text("SET LOCAL synchronous_commit = off"))
            rollups.run_insert(
                conn, statement, {"lo": lo, "hi": min(sessions, lo + CHUNK_SESSIONS)}
            )
    with engine.begin() as conn:
        rollups.run_insert(conn, text(rollups.insert_statement(denials(tenant, start, days))), {})
        rollups.run_insert(conn, text(rollups.insert_statement(refusals(tenant, start, days))), {})
        conn.execute(text("ANALYZE"))
    return time.perf_counter() - began


def timed(
    requests: dict[str, dict[str, Any]], repeat: int
) -> dict[str, tuple[float, float, dict[str, Any]]]:
    """Per tenant: median seconds of ``repeat`` runs, then peak MB of one more run under
    tracemalloc. The tenants' runs alternate, after one warm-up run each, so that a
    neighbour's load on the machine (or a cold cache) falls on both alike."""
    parsed = {tenant: admin.parse(request) for tenant, request in requests.items()}
    times: dict[str, list[float]] = {tenant: [] for tenant in parsed}
    bodies: dict[str, dict[str, Any]] = {}
    for request in parsed.values():
        admin.execute(request)
    for _ in range(repeat):
        for tenant, request in parsed.items():
            began = time.perf_counter()
            _status, bodies[tenant] = admin.execute(request)
            times[tenant].append(time.perf_counter() - began)
    results = {}
    for tenant, request in parsed.items():
        tracemalloc.start()
        admin.execute(request)
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        results[tenant] = (statistics.median(times[tenant]), peak, bodies[tenant])
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--days", type=int, default=365)
    # Today's midnight by default: minute periods cover the last 14 days only.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    parser.add_argument("--end", default=today.isoformat())
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    end = datetime.fromisoformat(args.end).astimezone(UTC)
    start = end - timedelta(days=args.days)
    url, cleanup = private_database()
    ok = True
    try:
        # No client socket timeout here (the functions' engine has 5 s): one bulk insert
        # statement runs longer than that.
        engine = create_engine(url)
        store.upgrade(engine)
        with engine.begin() as conn:
            month, months = start, []
            while month <= end:
                months.append(month)
                month += timedelta(days=28)
            partitions.ensure_partitions(conn, months)
        os.environ["DATABASE_URL"] = url
        db.reset()
        version = ".".join(map(str, engine.dialect.server_version_info or ()))
        print(f"PostgreSQL {version}, Python {platform.python_version()}, {args.days} days "
              f"ending {end:%Y-%m-%d}, one license of {args.clients} seats per tenant")  # fmt: skip
        sizes = {"small": args.small, "big": args.events}
        for tenant, events in sizes.items():
            store.create_tenant(tenant)
            store.create_license(tenant, LICENSE, args.clients)
            took = load(engine, tenant, events, args.clients, start, args.days)
            print(f"loaded {tenant}: {events:,} events in {took:.1f} s = "
                  f"{events / took:,.0f} events/s through the rollup statement")  # fmt: skip
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT count(*) FROM lease_events")).scalar_one()
            hours = conn.execute(text("SELECT count(*) FROM usage_rollups")).scalar_one()
            minutes = conn.execute(text("SELECT count(*) FROM usage_minute_rollups")).scalar_one()
            days = conn.execute(text("SELECT count(*) FROM usage_client_rollups")).scalar_one()
            size = conn.execute(
                text("SELECT pg_size_pretty(pg_total_relation_size('usage_rollups') + "
                     "pg_total_relation_size('usage_minute_rollups') + "
                     "pg_total_relation_size('usage_client_rollups'))")
            ).scalar_one()  # fmt: skip
        print(f"database: {rows:,} lease_events rows; rollups: {minutes:,} minute, {hours:,} "
              f"hourly, {days:,} client-daily rows ({size})")  # fmt: skip
        # Windows that start and end mid-hour (and mid-minute): the raw edges are read too.
        reports = {
            "minutes, 24 hours": {
                "period": "minute",
                "since": end - timedelta(hours=24, minutes=17, seconds=20),
            },
            "hourly, 30 days": {"period": "hour", "since": end - timedelta(days=30, minutes=17)},
            "daily, 365 days": {"period": "day", "since": end - timedelta(days=365, minutes=17)},
        }
        for name, spec in reports.items():
            for timelines in (False, True):
                requests = {
                    tenant: {
                        "action": "report.usage", "tenant_id": tenant, "license_id": LICENSE,
                        "period": spec["period"], "timelines": timelines,
                        "since": spec["since"].isoformat(),
                        "until": (end - timedelta(minutes=17, seconds=20)).isoformat(),
                    }
                    for tenant in sizes
                }  # fmt: skip
                results = timed(requests, args.repeat)
                (small_s, _small_mb, small_body), (big_s, big_mb, big_body) = results.values()
                ratio = big_s / small_s
                label = name + (" + timelines" if timelines else "")
                print(f"{label:32s} small {small_s * 1000:7.1f} ms, big {big_s * 1000:7.1f} ms "
                      f"(x{ratio:.2f}); peak memory {big_mb:.1f} MB; "
                      f"{len(big_body['usage'])} periods, "
                      f"{len(big_body['durations'])} clients")  # fmt: skip
                same_shape = len(small_body["usage"]) == len(big_body["usage"])
                ok = ok and big_s <= 1.0 and ratio <= 2.0 and big_mb <= 100 and same_shape
        # The sizing report (issue 41): the rollups, the refused minutes and the queue's
        # waits; a year is 351 days of hours and 14 days of minutes.
        for name, since in (("sizing, 365 days", end - timedelta(days=365)),
                            ("sizing, 14 days", end - timedelta(days=13, hours=23))):  # fmt: skip
            requests = {
                tenant: {"action": "report.sizing", "tenant_id": tenant, "license_id": LICENSE,
                         "since": since.isoformat(), "until": end.isoformat()}
                for tenant in sizes
            }  # fmt: skip
            results = timed(requests, args.repeat)
            (small_s, _small_mb, small_body), (big_s, big_mb, big_body) = results.values()
            ratio = big_s / small_s
            line = big_body["licenses"][0]
            print(f"{name:32s} small {small_s * 1000:7.1f} ms, big {big_s * 1000:7.1f} ms "
                  f"(x{ratio:.2f}); peak memory {big_mb:.1f} MB; {line['busy_minutes']:,} "
                  f"busy minutes, {line['refused_clients']} clients refused, recommended "
                  f"{line['recommended_seats']}, {line['queue_wait_seconds']['tickets']:,} "
                  "queue tickets")  # fmt: skip
            # (no 2x check here: the walk follows the rollup rows, and a small history has
            # few of them where a busy one has a row every minute)
            ok = ok and big_s <= 1.0 and big_mb <= 100
    finally:
        cleanup()
    print("OK: every report within 1 s, 2x the small history and 100 MB" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
