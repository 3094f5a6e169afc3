"""A burst of webhook events to a slow and a fast endpoint (issue 51): is the fast one's
latency unchanged by the slow one?

Each phase queues ``--events`` (10,000) ``lease.acquired`` events of one tenant at once
(``seatlease.webhooks.store.enqueue``, in the audit's shape, as the webhooks function
queues a Pub/Sub message's), then runs ``deliver_due`` in a loop, as the webhooks
function's instances do, until the fast endpoint has all of them. The phases:

- ``alone``: the tenant has the fast endpoint only (the same-run baseline);
- ``with_slow``: the tenant has the fast endpoint and a slow one, which answers 200 after
  ``--slow-seconds`` (5 s; under the 10 s send timeout), so every event is also owed to
  the slow one and its deliveries are due the whole time.

The fast endpoint's latency of an event is when the receiver got it minus when the
burst was queued: its p50, p95 and the last (the burst drained). The ratio with_slow /
alone is the result (1.0x: the slow endpoint costs the fast one nothing). The phases
alternate in ``--rounds`` (2), the order swapped each round; the medians are printed.
After a with_slow phase the slow endpoint is deleted (its waiting deliveries with it)
and its sends in flight allowed to end, so the next alone phase is alone; after every
phase the webhook tables are vacuumed, so that no phase pays for another's rows.

Real parts only: PostgreSQL (a database of its own on ``--database-url``'s server,
dropped after), the delivery code's HTTP sends, a receiver in a process of its own
(http.server, threaded) so that its work does not share the sender's interpreter.

Run: ``python3 bench/webhooks_burst.py`` (about 8 minutes on the development machine:
one endpoint drains at about 230 events/s); ``--events 500 --rounds 1`` for a quick look.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DATABASE = os.environ.get(
    "SEATLEASE_TEST_PG", "postgresql+pg8000://postgres@127.0.0.1:5432/postgres"
)


# -- the receiver (its own process) -------------------------------------------------------


def serve(port_pipe: Any, slow_seconds: float) -> None:
    """``/fast/<tenant>`` answers 200 at once, ``/slow/<tenant>`` after ``slow_seconds``;
    each POST's arrival time recorded per path; ``GET /results/<tenant>`` gives them."""
    got: dict[str, list[float]] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            came = time.time()
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                got.setdefault(self.path, []).append(came)
            if self.path.startswith("/slow/"):
                time.sleep(slow_seconds)
            self._answer(b"")

        def do_GET(self) -> None:
            tenant = self.path.rsplit("/", 1)[-1]
            with lock:
                found = {kind: list(got.get(f"/{kind}/{tenant}", ())) for kind in ("fast", "slow")}
            self._answer(json.dumps(found).encode())

        def _answer(self, body: bytes) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_pipe.send(server.server_address[1])
    server.serve_forever()


def received(port: int, tenant: str) -> dict[str, list[float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/results/{tenant}", timeout=30) as r:
        return json.loads(r.read())


# -- one phase -----------------------------------------------------------------------------


def events_of(tenant: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "event_id": f"{tenant}-{n:06d}",
            "type": "lease.acquired",
            "tenant_id": tenant,
            "license_id": "cad",
            "session_id": f"s{n}",
            "client_id": f"c{n}",
            "occurred_at": "2026-11-29T08:00:00.000Z",
            "seats_used": 1,
            "seats_total": count,
            "metadata": {"user": f"user{n}"},
        }
        for n in range(count)
    ]


def quiet_database() -> None:
    """Vacuum and analyse the webhook tables between phases, so that no phase pays for
    an earlier one's leftovers (a with_slow phase deletes the slow endpoint's waiting
    deliveries: autovacuum would clean them up during the next phase)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(os.environ["DATABASE_URL"], isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM (ANALYZE) webhook_deliveries, webhook_attempts"))
    finally:
        engine.dispose()


def phase(kind: str, round_no: int, args: argparse.Namespace, port: int) -> dict[str, Any]:
    from seatlease.records import store as records
    from seatlease.webhooks import deliver, store

    tenant = f"burst{round_no}{kind.replace('_', '')}"
    records.create_tenant(tenant, f"burst {kind}")
    store.create_endpoint(tenant, f"http://127.0.0.1:{port}/fast/{tenant}")
    slow_id = None
    if kind == "with_slow":
        slow, _ = store.create_endpoint(tenant, f"http://127.0.0.1:{port}/slow/{tenant}")
        slow_id = slow["id"]
    events = events_of(tenant, args.events)
    queued_at = time.time()
    queued = store.enqueue(events)
    enqueue_seconds = time.time() - queued_at
    expected = args.events * (2 if slow_id else 1)
    assert queued == expected, (queued, expected)
    runs = 0
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        deliver.deliver_due(budget_seconds=args.run_seconds)
        runs += 1
        if len(received(port, tenant)["fast"]) >= args.events:
            break
    got = received(port, tenant)
    fast = sorted(at - queued_at for at in got["fast"])
    if slow_id:
        store.delete_endpoint(tenant, slow_id)
        time.sleep(args.slow_seconds + 1)  # its sends in flight end before the next phase
    quiet_database()
    if len(fast) < args.events:
        raise SystemExit(f"{kind}: the fast endpoint got {len(fast)} of {args.events}")
    return {
        "phase": kind,
        "round": round_no,
        "enqueue_s": round(enqueue_seconds, 2),
        "fast_p50_s": round(fast[len(fast) // 2], 2),
        "fast_p95_s": round(fast[int(len(fast) * 0.95)], 2),
        "fast_last_s": round(fast[-1], 2),
        "fast_per_s": round(len(fast) / fast[-1], 1),
        "slow_got": len(got["slow"]),
        "deliver_runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--slow-seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--run-seconds", type=float, default=10.0, help="deliver_due's budget")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="per phase")
    parser.add_argument(
        "--database-url",
        default=DEFAULT_DATABASE,
        help="a PostgreSQL server's admin URL: a bench database is made there",
    )
    args = parser.parse_args()

    from sqlalchemy import create_engine, text

    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from seatlease import logs

    logs.configure(os.environ["LOG_LEVEL"], stream="stderr")
    from seatlease.webhooks.crypto import new_key

    os.environ["WEBHOOK_KEY"] = new_key()
    os.environ["SEATLEASE_LOCAL"] = "1"  # the receiver is on 127.0.0.1
    name = f"seatlease_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(args.database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    os.environ["DATABASE_URL"] = args.database_url.rsplit("/", 1)[0] + "/" + name
    os.environ.pop("CLOUD_SQL_INSTANCE", None)
    parent, child = multiprocessing.Pipe()
    receiver = multiprocessing.Process(target=serve, args=(child, args.slow_seconds), daemon=True)
    receiver.start()
    port = parent.recv()
    from seatlease.records import db, store

    rows: list[dict[str, Any]] = []
    try:
        store.upgrade()
        print(f"# webhooks_burst {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
              f"python {platform.python_version()} {platform.machine()} cpus {os.cpu_count()} "
              f"events {args.events} slow {args.slow_seconds}s", flush=True)  # fmt: skip
        for round_no in range(1, args.rounds + 1):
            order = ["alone", "with_slow"] if round_no % 2 else ["with_slow", "alone"]
            for kind in order:
                row = phase(kind, round_no, args, port)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        receiver.terminate()
        db.reset()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    def median(kind: str, field: str) -> float:
        return statistics.median(r[field] for r in rows if r["phase"] == kind)

    for field in ("fast_p50_s", "fast_p95_s", "fast_last_s"):
        alone, mixed = median("alone", field), median("with_slow", field)
        print(f"{field}: alone {alone:.2f} s, with the slow endpoint {mixed:.2f} s, "
              f"ratio {mixed / alone:.2f}x")  # fmt: skip
    print(f"slow endpoint meanwhile: {median('with_slow', 'slow_got'):.0f} deliveries")


if __name__ == "__main__":
    sys.exit(main())
