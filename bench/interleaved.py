"""The interleaved A/B of acquire.lua that bench/policy_ab.py and bench/terms_ab.py share:
two kinds of license (a plain one and the one under study), each served by acquire.lua of
an older revision and by this tree's, four variants in one redis-server, in small batches
whose order rotates every round, so every variant sees the same load of a shared machine.

Per batch, the server's own time per call (``INFO commandstats``, ``usec_per_call`` of
``evalsha`` after ``CONFIG RESETSTAT``). ``report`` prints the medians and minima of each
variant and the ratios asked for (median of the per-round ratios; minimum over minimum).
A script gives the kinds' configurations, its batch of calls, and the callers of the fill
and of each round.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine
from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import script_source
from seatlease_cli.procs import start_redis

REPO = Path(__file__).resolve().parent.parent
TENANT = "bench"
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
PIPELINE = 250

Variant = tuple[str, str]  # (kind, "old" | "new"); its license is "<kind>-<rev>"
# run_batch(redis, script, license_id, callers): the acquires of one batch, pipelined
BatchRunner = Callable[[Any, Any, str, Sequence[Any]], None]


def old_source(rev: str) -> str:
    """acquire.lua as scripts.py of ``rev`` assembled it (_lib, _ratelimit, _policy)."""
    parts = []
    for name in ("_lib", "_ratelimit", "_policy", "acquire"):
        path = f"shared/seatlease/seats/lua/{name}.lua"
        parts.append(subprocess.check_output(["git", "-C", str(REPO), "show", f"{rev}:{path}"],
                                             text=True))  # fmt: skip
    return "\n".join(parts)


def usec_per_call(redis: Any) -> float:
    stats = redis.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec_per_call", 0.0))


def interleave(
    *,
    old_rev: str,
    kinds: tuple[str, str],
    config: Callable[[str], LicenseConfig],
    run_batch: BatchRunner,
    fill: Sequence[Any],
    fill_note: str,
    callers: Callable[[int], Sequence[Any]],
    rounds: int,
    batch: int,
) -> dict[Variant, list[float]]:
    """Fills the four variants' licenses with ``fill``'s callers, then runs ``rounds``
    rounds of ``callers(round)`` on each variant, order rotating; returns each variant's
    time per call, one a round (printed with the medians and minima)."""
    server = start_redis()
    try:
        redis = connect(server.url, socket_timeout=120)
        version = redis.info("server")["redis_version"]
        print(f"redis-server {version} on loopback, Python {platform.python_version()}")
        scripts = {
            "old": redis.register_script(old_source(old_rev)),
            "new": redis.register_script(script_source("acquire")),
        }
        engine = SeatEngine(redis, lambda _t, license_id: config(license_id))
        variants = [(kind, rev) for kind in kinds for rev in ("old", "new")]
        for kind, rev in variants:
            license_id = f"{kind}-{rev}"
            engine.cache_config(TENANT, license_id, config(license_id))
            run_batch(redis, scripts[rev], license_id, fill)
        print(f"filled 4 licenses with {len(fill):,} leases each ({fill_note})")
        times: dict[Variant, list[float]] = {v: [] for v in variants}
        for r in range(rounds):
            them = callers(r)
            order = variants[r % 4 :] + variants[: r % 4]
            for kind, rev in order:
                redis.config_resetstat()
                run_batch(redis, scripts[rev], f"{kind}-{rev}", them)
                times[(kind, rev)].append(usec_per_call(redis))
        redis.close()
    finally:
        server.stop()
    width = max(len(f"{kind} ({rev})") for kind, rev in variants)
    print(f"\n{rounds} rounds of {batch} acquires per variant, order rotating")
    print(f"  {'variant':{width}}   usec_per_call median   min")
    for kind, rev in variants:
        t = times[(kind, rev)]
        print(f"  {kind + ' (' + rev + ')':{width}} {statistics.median(t):14.2f} {min(t):10.2f}")
    return times


def report(
    times: dict[Variant, list[float]],
    ratios: Sequence[tuple[str, Variant, Variant]],
    heading: str = "",
) -> None:
    """Each ``(label, a, b)`` as a / b: the median of the per-round ratios, and the least
    disturbed estimate (a's minimum batch over b's)."""
    print(f"\nratios (median of per-round ratios; min over min){heading}")
    for label, a, b in ratios:
        per_round = [x / y for x, y in zip(times[a], times[b], strict=True)]
        median, floor = statistics.median(per_round), min(times[a]) / min(times[b])
        print(f"  {label:26} {median:6.2f}x   {floor:6.2f}x")
