"""The license policy's cost on acquire, this revision against an older one, interleaved.

``bench/redis_cost.py`` measures each phase in its own batch, so on a shared machine the
load of the moment lands on one phase and not the other (its per-round policy ratios
spread from 0.8x to 1.9x). This runs four variants in the same redis-server, in small
batches, rotating their order every round, so every variant sees the same load:

- ``plain (old)`` / ``plain (new)``: a new lease on a license without a policy;
- ``policy (old)`` / ``policy (new)``: a new lease on a license with ``redis_cost.py``'s
  full policy (at most 2 leases per user, the caller's user holding one; two groups of
  50 users with 10 reserved seats each; the queue on, empty),

"old" being acquire.lua (with its preludes) of ``--old-rev`` (default 53ff978, before
issue 29) and "new" this tree's, each on licenses it filled itself (``--leases`` leases
each, one per user). Per batch, the server's own time per call (``INFO commandstats``,
``usec_per_call`` of ``evalsha`` after ``CONFIG RESETSTAT``); per round the ratios
policy / plain of each revision and new / old; the medians over ``--rounds`` rounds are
printed, with the least disturbed estimate (minimum batch over minimum batch).

Run: ``python3 bench/policy_ab.py`` (about two minutes; a git checkout is needed to read
the old scripts).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Any

from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine, acquire_call, new_request_id, new_session_id
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import script_source
from seatlease_cli.procs import start_redis

REPO = Path(__file__).resolve().parent.parent
TENANT = "bench"
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
PIPELINE = 250


def old_source(rev: str) -> str:
    """acquire.lua as scripts.py of ``rev`` assembled it (_lib, _ratelimit, _policy)."""
    parts = []
    for name in ("_lib", "_ratelimit", "_policy", "acquire"):
        path = f"shared/seatlease/seats/lua/{name}.lua"
        parts.append(subprocess.check_output(["git", "-C", str(REPO), "show", f"{rev}:{path}"],
                                             text=True))  # fmt: skip
    return "\n".join(parts)


def policy() -> LicensePolicy:
    return LicensePolicy(
        max_per_user=2,
        groups={
            "design": [f"designer-{i}" for i in range(50)],
            "render": [f"renderer-{i}" for i in range(50)],
        },
        reserve={"design": 10, "render": 10},
        queue=True,
        queue_ticket_seconds=3600,
    )


def config(license_id: str) -> LicenseConfig:
    form = policy().redis_form() if license_id.startswith("policy") else ""
    return LicenseConfig(seats=10_000_000, lease_seconds=3600, max_lease_seconds=3600, policy=form)


def run_batch(redis: Any, script: Any, license_id: str, clients: list[tuple[str, str]]) -> None:
    for start in range(0, len(clients), PIPELINE):
        pipe = redis.pipeline(transaction=False)
        for client_id, user in clients[start : start + PIPELINE]:
            keys, args = acquire_call(
                TENANT, license_id, client_id, metadata_json=META,
                request_id=new_request_id(), session_id=new_session_id(), user=user,
            )  # fmt: skip
            script(keys=keys, args=args, client=pipe)
        for reply in pipe.execute():
            if reply[0] != "acquired":
                raise RuntimeError(f"{license_id}: {reply!r}")


def usec_per_call(redis: Any) -> float:
    stats = redis.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec_per_call", 0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--old-rev", default="53ff978")
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args(argv)
    if args.rounds * args.batch > args.leases:
        parser.error("--rounds x --batch must be at most --leases (one caller a filled user)")
    server = start_redis()
    try:
        redis = connect(server.url, socket_timeout=120)
        version = redis.info("server")["redis_version"]
        print(f"redis-server {version} on loopback, Python {platform.python_version()}")
        scripts = {
            "old": redis.register_script(old_source(args.old_rev)),
            "new": redis.register_script(script_source("acquire")),
        }
        engine = SeatEngine(redis, lambda _t, license_id: config(license_id))
        variants = [(kind, rev) for kind in ("plain", "policy") for rev in ("old", "new")]
        for kind, rev in variants:
            license_id = f"{kind}-{rev}"
            engine.cache_config(TENANT, license_id, config(license_id))
            fill = [(f"fill-{i:06d}", f"user-{i:06d}") for i in range(args.leases)]
            run_batch(redis, scripts[rev], license_id, fill)
        print(f"filled 4 licenses with {args.leases:,} leases each (one per user)")
        times: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        for r in range(args.rounds):
            # each caller's user already holds one lease (the per-user limit is 2)
            callers = [
                (f"r{r:03d}-{i:06d}", f"user-{r * args.batch + i:06d}") for i in range(args.batch)
            ]
            order = variants[r % 4 :] + variants[: r % 4]
            for kind, rev in order:
                redis.config_resetstat()
                run_batch(redis, scripts[rev], f"{kind}-{rev}", callers)
                times[(kind, rev)].append(usec_per_call(redis))
        print(f"\n{args.rounds} rounds of {args.batch} acquires per variant, order rotating")
        print("  variant          usec_per_call median   min")
        for kind, rev in variants:
            t = times[(kind, rev)]
            print(f"  {kind + ' (' + rev + ')':16} {statistics.median(t):12.2f} {min(t):10.2f}")

        def ratio(a: tuple[str, str], b: tuple[str, str]) -> tuple[float, float]:
            per_round = [x / y for x, y in zip(times[a], times[b], strict=True)]
            return statistics.median(per_round), min(times[a]) / min(times[b])

        print("\nratios (median of per-round ratios; min over min)")
        for label, a, b in (
            ("policy / plain, old", ("policy", "old"), ("plain", "old")),
            ("policy / plain, new", ("policy", "new"), ("plain", "new")),
            ("policy new / policy old", ("policy", "new"), ("policy", "old")),
            ("plain new / plain old", ("plain", "new"), ("plain", "old")),
        ):
            median, floor = ratio(a, b)
            print(f"  {label:26} {median:6.2f}x   {floor:6.2f}x")
        redis.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
