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

The ratios are medians of the per-round ratios ``with / without`` for throughput and
``without / with`` for server time: 1.0 is free. Target at least ``--target`` (0.90)
for throughput. Run: ``python3 bench/rate_limit_cost.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from seatlease.engine import SeatEngine
from seatlease.licenses import LicenseConfig
from seatlease.redisconn import connect
from seatlease_cli.procs import start_redis

NEVER_REFUSES = 1_000_000  # calls per second: far above what one client can send


def phase(engine: SeatEngine, redis, calls: int, rate: int, tag: str) -> tuple[float, float]:
    """(calls per second, server microseconds per EVALSHA) of ``calls`` new leases."""
    redis.config_resetstat()
    started = time.perf_counter()
    for n in range(calls):
        engine.acquire("bench", "cad", f"{tag}-{n}", rate_limit=rate)
    elapsed = time.perf_counter() - started
    stats = redis.info("commandstats")["cmdstat_evalsha"]
    return calls / elapsed, float(stats["usec_per_call"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--calls", type=int, default=5000, help="acquires per phase")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--target", type=float, default=0.90)
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    server = start_redis()
    try:
        redis = connect(server.url)
        config = LicenseConfig(seats=1_000_000, lease_seconds=3600, max_lease_seconds=3600)
        engine = SeatEngine(redis, lambda _tenant, _license: config)
        engine.acquire("bench", "cad", "warm-up", rate_limit=NEVER_REFUSES)  # cache, script
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
    finally:
        server.stop()
    ratio, server_ratio = statistics.median(throughput), statistics.median(server_time)
    verdict = "PASS" if ratio >= args.target else f"FAIL (target {args.target:.2f})"
    print(
        f"median of {args.rounds} rounds: acquire with the limit checked / without = "
        f"{ratio:.2f} calls per second: {verdict}; Redis time per call without / with = "
        f"{server_ratio:.2f}"
    )
    return 2 if args.strict and ratio < args.target else 0


if __name__ == "__main__":
    sys.exit(main())
