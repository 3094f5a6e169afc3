"""A weighted lease on a license with terms against a plain one, this revision against an
older one, interleaved.

``bench/redis_cost.py`` measures its terms row (``acquire (terms+w4)``) in its own batch,
so on a shared machine the load of the moment lands on one phase and not the other. This
runs four variants in the same redis-server, in small batches, rotating their order
every round, so every variant sees the same load:

- ``plain (old)`` / ``plain (new)``: a new lease on a license without terms (weight 1);
- ``terms+w4 (old)`` / ``terms+w4 (new)``: a new lease of weight 4 on redis_cost.py's
  license with terms (an end a year away, a 7-day grace, 8 entitlements, a max_version),
  asking for two entitlements and its version,

"old" being acquire.lua (with its preludes) of ``--old-rev`` (default e460b18, the commit
weighted seats landed in) and "new" this tree's, each on licenses it filled itself
(``--leases`` leases each, weighted as its own calls). Per batch, the server's own time
per call (``INFO commandstats``, ``usec_per_call`` of ``evalsha`` after ``CONFIG
RESETSTAT``); the medians of the per-round ratios over ``--rounds`` rounds are printed,
with the least disturbed estimate (minimum batch over minimum batch). Every reply is
checked to be an ``acquired`` of the weight asked.

Run: ``python3 bench/terms_ab.py`` (about a minute; a git checkout is needed to read the
old scripts).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine, acquire_call, new_request_id, new_session_id
from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import script_source
from seatlease_cli.procs import start_redis

REPO = Path(__file__).resolve().parent.parent
TENANT = "bench"
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
PIPELINE = 250
# as bench/redis_cost.py's terms license and its calls
ENTITLEMENTS = ("cloud", "design", "pro", "render", "render.gpu", "sim", "team", "viewer")
NEEDS = ("pro", "render")
VERSION = "2026.4"
WEIGHT = 4
TERM_ENDS = datetime.now(UTC) + timedelta(days=365)


def old_source(rev: str) -> str:
    """acquire.lua as scripts.py of ``rev`` assembled it (_lib, _ratelimit, _policy)."""
    parts = []
    for name in ("_lib", "_ratelimit", "_policy", "acquire"):
        path = f"shared/seatlease/seats/lua/{name}.lua"
        parts.append(subprocess.check_output(["git", "-C", str(REPO), "show", f"{rev}:{path}"],
                                             text=True))  # fmt: skip
    return "\n".join(parts)


def config(license_id: str) -> LicenseConfig:
    plain = LicenseConfig(seats=10_000_000, lease_seconds=3600, max_lease_seconds=3600)
    if license_id.startswith("plain"):
        return plain
    return replace(
        plain,
        expires_at=TERM_ENDS,
        grace_seconds=7 * 86400,
        entitlements=ENTITLEMENTS,
        max_version="2026.10",
    )


def run_batch(redis: Any, script: Any, license_id: str, clients: list[str]) -> None:
    terms = not license_id.startswith("plain")
    for start in range(0, len(clients), PIPELINE):
        pipe = redis.pipeline(transaction=False)
        for client_id in clients[start : start + PIPELINE]:
            extra: dict[str, Any] = (
                {"entitlements": NEEDS, "version": VERSION, "seats": WEIGHT} if terms else {}
            )
            keys, args = acquire_call(
                TENANT, license_id, client_id, metadata_json=META,
                request_id=new_request_id(), session_id=new_session_id(), **extra,
            )  # fmt: skip
            script(keys=keys, args=args, client=pipe)
        for reply in pipe.execute():
            weight = reply[-1] if terms else 1
            if reply[0] != "acquired" or weight != (WEIGHT if terms else 1):
                raise RuntimeError(f"{license_id}: {reply!r}")


def usec_per_call(redis: Any) -> float:
    stats = redis.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec_per_call", 0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--old-rev", default="e460b18")
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)
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
        variants = [(kind, rev) for kind in ("plain", "terms+w4") for rev in ("old", "new")]
        for kind, rev in variants:
            license_id = f"{kind}-{rev}"
            engine.cache_config(TENANT, license_id, config(license_id))
            fill = [f"fill-{i:06d}" for i in range(args.leases)]
            run_batch(redis, scripts[rev], license_id, fill)
        print(f"filled 4 licenses with {args.leases:,} leases each (terms+w4: of weight {WEIGHT})")
        times: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        for r in range(args.rounds):
            callers = [f"r{r:03d}-{i:06d}" for i in range(args.batch)]
            order = variants[r % 4 :] + variants[: r % 4]
            for kind, rev in order:
                redis.config_resetstat()
                run_batch(redis, scripts[rev], f"{kind}-{rev}", callers)
                times[(kind, rev)].append(usec_per_call(redis))
        print(f"\n{args.rounds} rounds of {args.batch} acquires per variant, order rotating")
        print("  variant            usec_per_call median   min")
        for kind, rev in variants:
            t = times[(kind, rev)]
            print(f"  {kind + ' (' + rev + ')':18} {statistics.median(t):12.2f} {min(t):10.2f}")

        def ratio(a: tuple[str, str], b: tuple[str, str]) -> tuple[float, float]:
            per_round = [x / y for x, y in zip(times[a], times[b], strict=True)]
            return statistics.median(per_round), min(times[a]) / min(times[b])

        print("\nratios (median of per-round ratios; min over min); target terms+w4 / plain 1.1x")
        for label, a, b in (
            ("terms+w4 / plain, old", ("terms+w4", "old"), ("plain", "old")),
            ("terms+w4 / plain, new", ("terms+w4", "new"), ("plain", "new")),
            ("terms+w4 new / old", ("terms+w4", "new"), ("terms+w4", "old")),
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
