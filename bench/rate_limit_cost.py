"""What a tenant's rate limit costs an acquire: the same acquire with the limit checked
(``rate_limit`` high enough never to refuse, so every call pays the check: one GET and
one SET of the tenant's budget key inside the script) against no limit (0: the check
is skipped), in the same run.

Starts a private redis-server (loopback, nothing on disk) and a license with 1,000,000
seats and 3600 s leases, so every acquire is a new lease. Rounds alternate the two modes
(so drift in the machine's load hits both); each phase makes ``--calls`` acquires through
the seat engine (redis-py, one EVALSHA each) and reports:

- calls per second, as the engine's caller sees them (client and server);
- the server's own time per EVALSHA (``INFO commandstats`` after ``CONFIG RESETSTAT``).

Then the same through the acquire function itself, as Cloud Functions runs it
(``functions_framework.create_app``, called in process through Flask's test client, no
network): body parsing, the API key, the tenant's limit lookup, the seat call, the
signed token and the log line. Two tenants on a SQLite database, one with the highest
rate limit (never refuses, every call pays the check) and one with none (0), alternating.

The ratios are medians of the per-round ratios ``with / without`` for throughput and
``without / with`` for server time: 1.0 is free. Target at least ``--target`` (0.90)
for throughput, on both paths. Run: ``python3 bench/rate_limit_cost.py`` (about two
minutes).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.redisconn import connect
from seatlease_cli.procs import start_redis

NEVER_REFUSES = 1_000_000  # calls per second: far above what one client can send


def phase(engine: SeatEngine, redis, calls: int, rate: int, tag: str) -> tuple[float, float]:
    """(calls per second, server microseconds per EVALSHA) of ``calls`` new leases."""
    redis.config_resetstat()
    started = time.perf_counter()
    for n in range(calls):
        engine.acquire(SeatRequest("bench", "cad", f"{tag}-{n}", rate_limit=rate))
    elapsed = time.perf_counter() - started
    stats = redis.info("commandstats")["cmdstat_evalsha"]
    return calls / elapsed, float(stats["usec_per_call"])


def function_phases(redis_url: str, calls: int, rounds: int) -> list[float]:
    """Per round, acquires per second through the acquire function: limit checked over
    none (see the module's docstring)."""
    import functions_framework

    from seatlease.api import signingkeys
    from seatlease.records import db, store

    work = Path(tempfile.mkdtemp(prefix="seatlease-bench-rate-"))
    try:
        signingkeys.next_key_file(work / "keys")
        os.environ.update(
            REDIS_URL=redis_url,
            DATABASE_URL=f"sqlite:///{work}/bench.db",
            SIGNING_KEYS_DIR=str(work / "keys"),
            SEATLEASE_ISSUER="http://127.0.0.1",
            LOG_LEVEL="WARNING",  # the request lines would time the terminal
        )
        db.reset()
        store.upgrade()
        keys = {}
        for tenant, limit in (("limited", NEVER_REFUSES), ("unlimited", 0)):
            store.create_tenant(tenant, rate_limit_per_second=limit)
            store.create_license(tenant, "cad", 1_000_000, lease_seconds=3600)
            keys[tenant] = store.create_api_key(tenant).key
        source = Path(__file__).resolve().parent.parent / "functions" / "acquire" / "main.py"
        client = functions_framework.create_app("acquire", str(source)).test_client()
        logging.getLogger().setLevel(logging.WARNING)

        def phase(tenant: str, tag: str) -> float:
            headers = {"Authorization": f"Bearer {keys[tenant]}"}
            started = time.perf_counter()
            for n in range(calls):
                body = {"license_id": "cad", "client_id": f"{tag}-{n}"}
                answer = client.post("/", json=body, headers=headers)
                if answer.status_code != 201:
                    raise RuntimeError(f"{tenant}: {answer.status_code} {answer.get_json()}")
            return calls / (time.perf_counter() - started)

        phase("limited", "warm")
        phase("unlimited", "warm")
        ratios = []
        for round_no in range(1, rounds + 1):
            off = phase("unlimited", f"off{round_no}")
            on = phase("limited", f"on{round_no}")
            ratios.append(on / off)
            print(f" function round {round_no}: no limit {off:,.0f}/s, limit checked {on:,.0f}/s")
        return ratios
    finally:
        db.reset()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--calls", type=int, default=5000, help="acquires per phase")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--function-calls", type=int, default=1500, help="0: skip")
    parser.add_argument("--target", type=float, default=0.90)
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    server = start_redis()
    try:
        redis = connect(server.url)
        config = LicenseConfig(seats=1_000_000, lease_seconds=3600, max_lease_seconds=3600)
        engine = SeatEngine(redis, lambda _tenant, _license: config)
        engine.acquire(
            SeatRequest("bench", "cad", "warm-up", rate_limit=NEVER_REFUSES)
        )  # cache, script
        print(f"Python {platform.python_version()}, Redis {server.url}, {args.calls} acquires")
        throughput, server_time = [], []
        for round_no in range(1, args.rounds + 1):
            off = phase(engine, redis, args.calls, 0, f"off{round_no}")
            on = phase(engine, redis, args.calls, NEVER_REFUSES, f"on{round_no}")
            throughput.append(on[0] / off[0])
            server_time.append(off[1] / on[1])
            print(
                f" round {round_no}: no limit {off[0]:,.0f}/s ({off[1]:.2f} us in Redis), "
                f"limit checked {on[0]:,.0f}/s ({on[1]:.2f} us in Redis)"
            )
        redis.close()
        function = []
        if args.function_calls:
            function = function_phases(server.url, args.function_calls, args.rounds)
    finally:
        server.stop()
    ratio, server_ratio = statistics.median(throughput), statistics.median(server_time)
    verdict = "PASS" if ratio >= args.target else f"FAIL (target {args.target:.2f})"
    print(
        f"median of {args.rounds} rounds: acquire with the limit checked / without = "
        f"{ratio:.2f} calls per second: {verdict}; Redis time per call without / with = "
        f"{server_ratio:.2f}"
    )
    ok = ratio >= args.target
    if function:
        function_ratio = statistics.median(function)
        ok = ok and function_ratio >= args.target
        verdict = "PASS" if function_ratio >= args.target else f"FAIL (target {args.target:.2f})"
        print(
            f"median of {args.rounds} rounds: acquire function with the limit checked / "
            f"without = {function_ratio:.2f} calls per second: {verdict}"
        )
    return 2 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
