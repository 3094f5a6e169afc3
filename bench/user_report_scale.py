"""The per-user report (``report.users``, ``seatlease report usage --by user``) at
production size: a year of a busy license, 10,000,000 events, all in the window.

Loads one tenant like ``bench/report_scale.py``'s ``big`` (one license of ``--clients``
(1,000) seats, ``--events`` (10,000,000) lease events over ``--days`` (365) ending at
``--end``, through the audit path's own insert statement, each statement's sessions in
time order as the audit function's messages come), with a ``user`` in every lease
event's metadata (``--users`` (250) users, four workstations each) and the wait queue's
events: a ``queue.granted`` every 10 minutes and a ``queue.left`` every hour, with their
``queued_ms``.

Then, per window, times through the admin action (``seatlease.admin``, what the admin
function and the CLI run; after a warm-up run, median of ``--repeat`` runs, the
candidates' runs alternating so that a neighbour's load falls on all alike):

- ``report.users``, the per-user report;
- the baseline: ``SELECT count(*)`` of the window's lease events through the same
  index, the least any report made from the window's events would do (the per-user
  report used to read them all into Python);
- ``report.usage`` over the same window (the per-license report, from the rollups), for
  scale;
- for a window under the old 500,000-event cap, the implementation this one replaced
  (``tests/test_report_users.py`` keeps it as the tests' oracle), with a check that both
  give the same rows.

Windows: the last 365 days (the whole history, about ``--events`` events), the last 30
days and the last 7 days, ending 17 minutes 20 seconds before ``--end`` (leases still
held at ``until`` end after it), and the last 30 days with no ``until``. Checks: each
per-user report at most ``--target`` (3.0) times its baseline and within the server's
statement timeout (``reports.STATEMENT_TIMEOUT_MS``: a slower one is a 503), and its
totals equal to counts taken from the raw events (leases = starts in the window, queue
figures = queue events in the window). Exit status 1 if a check fails.

``--insert-baseline REV`` also times, before the reports, the audit insert (1,000-event
messages, for a tenant of their own) of this code against that git revision's,
alternating: what keeping each lease's user costs the insert path.

Run: ``.venv/bin/python bench/user_report_scale.py`` (loading 10M events takes 4-8
minutes on 2 cores; ``--events 1000000`` for a quicker look; ``--keep`` leaves the
database and prints its URL, ``--database URL --end ISO`` times an already loaded one).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from seatlease import admin
from seatlease.records import db, partitions, reports, rollups, store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import private_database  # the tests' fresh-database helper
from report_scale import LICENSE, load  # the same history, through the same insert

TENANT = "big"
OLD_CAP = 500_000  # the events the old per-user report read at most


def user_metadata(clients: int, users: int) -> str:
    """The lease events' metadata (an SQL expression of the session number ``k``): the
    client's user, as the seat engine copies the acquire's metadata into every event of
    the lease."""
    per_user = max(1, clients // users)
    return (
        f"jsonb_build_object('host', 'ws-' || mod(k, {clients}), "
        f"'user', 'user-' || (mod(k, {clients}) / {per_user}))"
    )


def queue_events(tenant: str, start: datetime, days: int, users: int) -> str:
    """A ``queue.granted`` every 10 minutes and a ``queue.left`` every hour (at :05), each
    with its user and ``queued_ms``."""
    return f"""
        SELECT '{tenant}-q' || m || '-' || e.n AS event_id,
               CASE WHEN e.n = 1 THEN 'queue.granted' ELSE 'queue.left' END AS type,
               '{tenant}'::text AS tenant_id, '{LICENSE}'::text AS license_id,
               NULL::text AS session_id, 'ws-q' || mod(m, 7) AS client_id,
               TIMESTAMPTZ '{start.isoformat()}'
                   + make_interval(mins => m * 10 + CASE WHEN e.n = 1 THEN 3 ELSE 5 END)
                   AS occurred_at,
               NULL::int AS seats_used, NULL::int AS seats_total, 1 AS count,
               jsonb_build_object('user', 'user-' || mod(m, {users}),
                                  'queued_ms', mod(m * 7919, 600000)) AS metadata
        FROM generate_series(0, {days * 24 * 6 - 1}) AS m
        CROSS JOIN (VALUES (1), (2)) AS e(n)
        WHERE e.n = 1 OR mod(m, 6) = 0"""


def timed(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, tuple[float, Any]]:
    """Per candidate: median seconds of ``repeat`` runs (after one warm-up run each, the
    candidates alternating) and its last result."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            began = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - began)
    return {name: (statistics.median(times[name]), results[name]) for name in runs}


def window_counts(engine: Any, since: datetime, until: datetime | None) -> dict[str, Any]:
    """What the per-user report's totals must be, counted in SQL (one scan)."""
    cond = "AND occurred_at < :until" if until else ""
    sql = f"""
        SELECT count(*) FILTER (WHERE type IN ('lease.acquired', 'lease.borrowed')) AS leases,
               count(*) FILTER (WHERE type = 'queue.granted') AS served,
               count(*) FILTER (WHERE type = 'queue.left') AS left_,
               coalesce(sum((metadata->>'queued_ms')::bigint)
                        FILTER (WHERE type LIKE 'queue.%'), 0) AS queued_ms
        FROM lease_events
        WHERE tenant_id = :t AND license_id = :l AND occurred_at >= :since {cond}"""
    with engine.connect() as conn:
        row = conn.execute(
            text(sql), {"t": TENANT, "l": LICENSE, "since": since, "until": until}
        ).one()
    return row._asdict()


def same_row(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal, floats to a microsecond (the old report summed float seconds one by one)."""
    return old.keys() == new.keys() and all(
        abs(a - b) <= 1e-6 * max(1.0, abs(a))
        if isinstance(a, float) and isinstance(b, float)
        else a == b
        for a, b in ((old[k], new[k]) for k in old)
    )


def time_window(
    name: str, engine: Any, since: datetime, until: datetime | None, args: argparse.Namespace
) -> bool:
    """Times one window's reports (see the module's docstring); True if its checks pass.
    Windows under the old 500,000-event cap are also timed with the implementation this
    one replaced (tests/test_report_users.py keeps it as the tests' oracle)."""
    fields = {"tenant_id": TENANT, "license_id": LICENSE, "since": since.isoformat()}
    if until:
        fields["until"] = until.isoformat()
    users_req = admin.parse({"action": "report.users", **fields})
    usage_req = admin.parse({"action": "report.usage", "period": "auto", **fields})
    cond = "AND occurred_at < :until" if until else ""
    count_sql = text(
        "SELECT count(*) FROM lease_events WHERE tenant_id = :t AND license_id = :l "
        f"AND occurred_at >= :since {cond}"
    )
    params = {"t": TENANT, "l": LICENSE, "since": since, "until": until}

    def count() -> int:
        with db.get_engine().connect() as conn:
            return int(conn.execute(count_sql, params).scalar_one())

    runs: dict[str, Callable[[], Any]] = {
        "count(*)": count,
        "report.users": lambda: admin.execute(users_req),
        "report.usage": lambda: admin.execute(usage_req),
    }
    events = count()
    if events <= OLD_CAP:
        from test_report_users import old_user_usage

        window = users_req.window()  # type: ignore[attr-defined]
        runs["old report.users"] = lambda: old_user_usage(window, db.get_engine())
    results = timed(runs, args.repeat)
    base_s = results["count(*)"][0]
    users_s, (_status, body) = results["report.users"]
    rows = body["users"]
    ratio = users_s / base_s
    old = ""
    if "old report.users" in results:
        old_s, old_rows = results["old report.users"]
        same = len(old_rows) == len(rows) and all(
            same_row(vars(o), n) for o, n in zip(old_rows, rows, strict=False)
        )
        old = f", old {old_s * 1000:.0f} ms (x{old_s / users_s:.1f} the new; same rows: {same})"
    print(f"{name:18s} {events:>10,} events: count(*) {base_s * 1000:6.0f} ms, "
          f"report.users {users_s * 1000:6.0f} ms (x{ratio:.2f}), report.usage "
          f"{results['report.usage'][0] * 1000:5.0f} ms; {len(rows)} users, "
          f"{sum(r['leases'] for r in rows):,} leases, "
          f"{sum(r['open_leases'] for r in rows)} open{old}")  # fmt: skip
    want = {k: int(v) for k, v in window_counts(engine, since, until).items()}
    got = {
        "leases": sum(r["leases"] for r in rows),
        "served": sum(r["queue_served"] for r in rows),
        "left_": sum(r["queue_left"] for r in rows),
        "queued_ms": round(sum(r["queued_seconds_total"] for r in rows) * 1000),
    }
    if got != want:
        print(f"  totals differ: report {got}, SQL counts {want}")
    return got == want and ratio <= args.target and users_s < reports.STATEMENT_TIMEOUT_MS / 1000


def insert_cost(engine: Any, baseline: str, messages: int, rounds: int) -> None:
    """The audit insert's time per 1,000-event message, this code's statement (it keeps
    each lease's user in ``usage_leases``) against ``baseline``'s (a git revision), the
    two alternating message by message on one database. A message: 500 acquires (a user
    in each) and the releases of 500 leases acquired two messages earlier (their rows get
    their ending: the update path)."""
    source = subprocess.run(
        ["git", "show", f"{baseline}:shared/seatlease/records/rollups.py"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent,
    ).stdout  # fmt: skip
    before = sys.modules["rollups_before"] = types.ModuleType("rollups_before")
    exec(compile(source, f"{baseline}:rollups.py", "exec"), before.__dict__)
    statements = {
        "before": text(before.insert_statement()),
        "after": text(rollups.insert_statement()),
    }
    at = datetime.now(UTC).replace(microsecond=0)

    def message(variant: str, n: int) -> str:
        events = []
        for i in range(500):
            sid, old = f"{variant}-{n}-{i}", f"{variant}-{n - 2}-{i}"
            when = (at + timedelta(milliseconds=n * 1000 + i)).isoformat()
            events.append(
                {
                    "event_id": f"a-{sid}",
                    "type": "lease.acquired",
                    "tenant_id": "insert-cost",  # not the reports' tenant
                    "license_id": LICENSE,
                    "session_id": sid,
                    "client_id": f"ws-{i}",
                    "occurred_at": when,
                    "seats_used": 1,
                    "seats_total": 1000,
                    "count": 1,
                    "metadata": {"host": f"ws-{i}", "user": f"user-{i % 250}"},
                }
            )
            if n >= 2:
                events.append(
                    {
                        **events[-1],
                        "event_id": f"r-{old}",
                        "type": "lease.released",
                        "session_id": old,
                        "client_id": f"ws-{i}",
                    }
                )
        return rollups.as_json(events)

    for r in range(rounds):
        times: dict[str, list[float]] = {name: [] for name in statements}
        for n in range(messages):
            for name, statement in statements.items():
                payload = message(f"{name}{r}", n)
                with engine.begin() as conn:
                    began = time.perf_counter()
                    rollups.run_insert(conn, statement, {"events": payload})
                    times[name].append(time.perf_counter() - began)
        before_ms, after_ms = (statistics.median(times[k]) * 1000 for k in ("before", "after"))
        print(f"insert round {r + 1}: median per 1,000-event message {before_ms:.1f} ms before "
              f"({baseline}), {after_ms:.1f} ms after (x{after_ms / before_ms:.2f})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--users", type=int, default=250)
    parser.add_argument("--days", type=int, default=365)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    parser.add_argument("--end", default=today.isoformat())
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", type=float, default=3.0)
    parser.add_argument("--database", help="an already loaded database (skips the load)")
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument(
        "--insert-baseline",
        metavar="REV",
        help="also time the audit insert against this git revision's (e.g. ea13239)",
    )
    parser.add_argument("--insert-messages", type=int, default=60)
    args = parser.parse_args()
    args.keep = args.keep or args.load_only
    end = datetime.fromisoformat(args.end).astimezone(UTC)
    start = end - timedelta(days=args.days)
    if args.database:
        url, cleanup = args.database, db.reset
    else:
        url, cleanup = private_database()
    ok = True
    try:
        # No client socket timeout here (the functions' engine has 5 s): one bulk insert
        # statement runs longer than that. The reports run on the functions' own engine.
        engine = create_engine(url)
        os.environ["DATABASE_URL"] = url
        db.reset()
        with engine.connect() as conn:
            version = conn.execute(text("SHOW server_version")).scalar_one().split()[0]
        if not args.database:
            store.upgrade(engine)
            with engine.begin() as conn:
                month, months = start, []
                while month <= end + timedelta(days=31):
                    months.append(month)
                    month += timedelta(days=28)
                partitions.ensure_partitions(conn, months)
            store.create_tenant(TENANT)
            store.create_license(TENANT, LICENSE, args.clients)
            metadata = user_metadata(args.clients, args.users)
            took = load(engine, TENANT, args.events, args.clients, start, args.days, metadata, 10)
            with engine.begin() as conn:
                queue = queue_events(TENANT, start, args.days, args.users)
                rollups.run_insert(conn, text(rollups.insert_statement(queue)), {})
                conn.execute(text("ANALYZE"))
            print(f"loaded {args.events:,} lease events in {took:.1f} s = "
                  f"{args.events / took:,.0f} events/s through the rollup statement")  # fmt: skip
        if args.keep:
            print(f"database: {url}")
        if args.load_only:
            return 0
        if args.insert_baseline:
            insert_cost(engine, args.insert_baseline, args.insert_messages, 3)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT count(*) FROM lease_events")).scalar_one()
        print(f"PostgreSQL {version}, Python {platform.python_version()}, {args.days} days "
              f"ending {end:%Y-%m-%d}: {rows:,} lease_events rows, one license of "
              f"{args.clients} seats, {args.users} users")  # fmt: skip
        until = end - timedelta(minutes=17, seconds=20)
        windows = {
            "365 days": (end - timedelta(days=365, minutes=17), until),
            "30 days": (end - timedelta(days=30, minutes=17), until),
            "30 days, no until": (end - timedelta(days=30, minutes=17), None),
            "7 days": (end - timedelta(days=7, minutes=17), until),
        }
        for name, (since, upto) in windows.items():
            ok = time_window(name, engine, since, upto, args) and ok
    finally:
        if not (args.keep or args.database):
            cleanup()
    print(f"OK: every per-user report within {args.target}x its count(*)" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
