"""Idle sweep cost of the reaper: 1,000 vs 1,000,000 live leases, against a SCAN sweep.

Starts a private redis-server (loopback, nothing on disk) and loads live leases through
the engine's registered acquire script (``SeatEngine.scripts.acquire`` queued in
pipelines, two loader processes), ``--per-license`` (4) leases per license, so 1,000,000
leases are 250,000 licenses and 1,000,000 Redis keys (config, lease ZSET, session and
client hashes per license): the size of docs/design.md's anchor ("SCAN 10 s+ at 1M keys").
Leases last an hour, so nothing expires; the outboxes are trimmed after loading, so the
sweep is idle (the state the reaper is in almost every minute).

At each size (first ``--small``, then topped up to ``--large``) it times, ``--repeat``
times each, interleaved:

- ``Reaper.run()``: a whole reaper run with a real ``Publisher`` (it has nothing to
  publish, so it never connects): one pipelined survey of all 256 shards (ZRANGEBYSCORE
  of the deadline index, HLEN of the denials, XLEN of the outbox), then the outbox
  lengths again for the report;
- the survey step alone;
- a SCAN sweep of the same data, as a SCAN-based reaper does it: ``SCAN MATCH
  sl:*:leases COUNT 1000`` over the whole keyspace and, per page, a pipelined
  ``ZRANGEBYSCORE key -inf now`` of every lease ZSET found (what a reaper without the
  deadline index must do to find expired leases).

For each it reports the median and p90 wall time and the Redis server time per sweep
(``INFO commandstats`` deltas: the server's own cost, free of client noise). The check:
median ``Reaper.run()`` at the large size / at the small size below ``--target`` (1.5).

Run: ``python3 bench/sweep_cost.py`` (about 2 minutes on 2 shared cores; loading 1M
leases is most of it). ``--large 100000`` for a quick look. Bounded: loading stops at
``--max-seconds``. Exit 0 (2 with ``--strict`` if the target is missed), 1 on error.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seatlease.clock import server_time_ms
from seatlease.events.pubsub import Publisher
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import CONFIG_TTL_SECONDS
from seatlease.seats.ids import new_request_id, new_session_id
from seatlease.seats.protocol.calls import acquire_call
from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import SeatScripts
from seatlease_cli.procs import start_redis

TENANT = "bench"
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
PIPELINE_LICENSES = 250  # licenses per pipeline round trip while loading
LOAD_WORKERS = 2


# -- loading leases (also used by reclaim_throughput.py) --------------------------------


def cfg_mapping(seats: int, lease_seconds: int) -> dict[str, int]:
    """The cached license configuration, as SeatEngine.cache_config writes it."""
    return {
        "exists": 1,
        "seats": seats,
        "lease_seconds": lease_seconds,
        "max_lease_seconds": max(3600, lease_seconds),
        "overage_percent": 0,
        "suspended": 0,
    }


def _load_worker(job: tuple[str, list[str], int, int, float]) -> int:
    """Acquire ``per_license`` leases on each license through the registered acquire
    script, queued in pipelines; every reply must be 'acquired'."""
    url, licenses, per_license, lease_seconds, deadline = job
    client = connect(url, socket_timeout=120)
    scripts = SeatScripts(client)
    scripts.library.load()  # (its calls are queued in pipelines)
    loaded = 0
    for start in range(0, len(licenses), PIPELINE_LICENSES):
        if time.monotonic() > deadline:
            break
        pipe = client.pipeline(transaction=False)
        for license_id in licenses[start : start + PIPELINE_LICENSES]:
            k = keys.LicenseKeys.of(TENANT, license_id)
            pipe.hset(k.cfg, mapping=cfg_mapping(per_license * 10, lease_seconds))
            pipe.expire(k.cfg, CONFIG_TTL_SECONDS)
            prefix = secrets.token_hex(8)
            for i in range(per_license):
                key_list, args = acquire_call(
                    TENANT, license_id, f"c{i:04d}", lease_seconds=lease_seconds,
                    metadata_json=META, request_id=new_request_id(),
                    session_id=new_session_id(), event_prefix=prefix + f"{i:x}",
                )  # fmt: skip
                scripts.acquire(keys=key_list, args=args, client=pipe)
        for reply in pipe.execute():
            if isinstance(reply, list):
                if reply[0] != "acquired":
                    raise RuntimeError(f"loading: unexpected acquire reply {reply!r}")
                loaded += 1
    client.close()
    return loaded


def load_leases(
    url: str, first: int, count: int, per_license: int, lease_seconds: int, max_seconds: float
) -> int:
    """``count`` leases on licenses numbered from ``first // per_license`` on."""
    licenses = [
        f"lic-{i:07d}"
        for i in range(first // per_license, (first + count + per_license - 1) // per_license)
    ]
    deadline = time.monotonic() + max_seconds
    workers = LOAD_WORKERS if len(licenses) >= 2 * PIPELINE_LICENSES else 1
    jobs = [
        (url, licenses[w::workers], per_license, lease_seconds, deadline) for w in range(workers)
    ]
    if workers == 1:
        return _load_worker(jobs[0])
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return sum(pool.map(_load_worker, jobs))


def empty_outboxes(client: Any) -> None:
    """The acquired events of the load: the reaper would have drained them long ago."""
    pipe = client.pipeline(transaction=False)
    for shard in range(keys.SHARDS):
        pipe.delete(keys.outbox_key(shard), keys.denials_key(shard))
    pipe.execute()


# -- the sweeps ------------------------------------------------------------------------


def scan_sweep(client: Any) -> int:
    """A SCAN-based reaper's way: SCAN the keyspace for lease sets, then look into each."""
    now = server_time_ms(client)
    expired = 0
    cursor = 0
    while True:
        cursor, found = client.scan(cursor, match=f"{keys.PREFIX}:*:leases", count=1000)
        if found:
            pipe = client.pipeline(transaction=False)
            for key in found:
                pipe.zrangebyscore(key, "-inf", now)
            expired += sum(len(r) for r in pipe.execute())
        if cursor == 0:
            return expired


def commandstats(client: Any) -> dict[str, tuple[int, int]]:
    """Redis command -> (calls, usec) so far, without the benchmark's own INFO/CONFIG."""
    return {
        k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for k, v in client.info("commandstats").items()
        if k.removeprefix("cmdstat_") not in ("info", "config", "ping", "time")
    }


@dataclass
class Target:
    """One Redis server holding one data set, and the sweeps to time on it."""

    leases: int
    client: Any
    sweeps: dict[str, Callable[[], Any]]
    walls: dict[str, list[float]] = field(default_factory=dict)
    server: dict[str, list[float]] = field(default_factory=dict)
    per_command: dict[str, dict[str, float]] = field(default_factory=dict)


def idle_run(reaper: Reaper) -> Callable[[], None]:
    def run() -> None:
        report = reaper.run()
        if report.reclaimed or report.published or report.denials:
            raise RuntimeError(f"the sweep was not idle: {report}")

    return run


def time_one(target: Target, name: str) -> None:
    before = commandstats(target.client)
    started = time.perf_counter()
    target.sweeps[name]()
    target.walls.setdefault(name, []).append((time.perf_counter() - started) * 1000)
    after = commandstats(target.client)
    target.server.setdefault(name, []).append(
        sum(usec - before.get(cmd, (0, 0))[1] for cmd, (_c, usec) in after.items()) / 1000
    )
    calls = target.per_command.setdefault(name, {})
    for cmd, (count, usec) in after.items():
        done = count - before.get(cmd, (0, 0))[0]
        if done:
            calls[cmd] = calls.get(cmd, 0.0) + (usec - before.get(cmd, (0, 0))[1]) / done


def measure(targets: list[Target], name: str, repeat: int) -> None:
    """``repeat`` sweeps on every target, alternating between them, so that the other
    processes' load on this shared machine hits both sizes alike."""
    for _ in range(repeat):
        for target in targets:
            time_one(target, name)


def summary(target: Target, name: str) -> dict[str, Any]:
    walls = sorted(target.walls[name])
    return {
        "name": name,
        "leases": target.leases,
        "median_ms": statistics.median(walls),
        "p90_ms": walls[min(len(walls) - 1, int(len(walls) * 0.9))],
        "server_ms": statistics.median(target.server[name]),
        "usec_per_call": {
            cmd: total / len(walls) for cmd, total in target.per_command[name].items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--per-license", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=100, help="timed runs per size")
    parser.add_argument("--scans", type=int, default=5, help="timed SCAN sweeps per size")
    parser.add_argument("--target", type=float, default=1.5)
    parser.add_argument("--max-seconds", type=float, default=200.0, help="bound on loading")
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    started = time.monotonic()
    servers = [start_redis(), start_redis()]
    targets: list[Target] = []
    try:
        for server, size in zip(servers, (args.small, args.large), strict=True):
            client = connect(server.url, socket_timeout=120)
            t0 = time.monotonic()
            loaded = load_leases(server.url, 0, size, args.per_license, 3600, args.max_seconds)
            empty_outboxes(client)
            memory = client.info("memory")["used_memory_human"]
            print(
                f"{loaded:,} live leases ({client.dbsize():,} keys, {memory}) loaded in "
                f"{time.monotonic() - t0:.0f} s",
                flush=True,
            )
            if loaded < size:
                print(f"loading stopped at --max-seconds: {loaded:,} of {size:,}")
            reaper = Reaper(client, Publisher("seatlease-bench", "unused"), budget_seconds=45)
            sweeps = {
                "Reaper.run()": idle_run(reaper),
                "survey step": reaper.survey,
                "SCAN sweep": lambda c=client: scan_sweep(c),
            }
            targets.append(Target(loaded, client, sweeps))
        version = targets[0].client.info("server")["redis_version"]
        print(f"redis-server {version} x2 on loopback, Python {platform.python_version()}")
        measure(targets, "Reaper.run()", args.repeat)
        measure(targets, "survey step", args.repeat)
        measure(targets, "SCAN sweep", args.scans)
        rows = [summary(t, name) for name in targets[0].sweeps for t in targets]
        for row in rows:
            print(
                f"  {row['name']:<14} {row['leases']:>10,} leases  median "
                f"{row['median_ms']:9.2f} ms  p90 {row['p90_ms']:9.2f} ms  redis server "
                f"{row['server_ms']:9.2f} ms"
            )
        print("\nredis server time per call, by command (usec):")
        for row in rows:
            parts = ", ".join(
                f"{cmd} {usec:.2f}" for cmd, usec in sorted(row["usec_per_call"].items())
            )
            print(f"  {row['name']:<14} {row['leases']:>10,}: {parts}")
        ok = report(rows, targets[0].leases, targets[1].leases, args.target)
        print(f"\ntotal {time.monotonic() - started:.0f} s")
    finally:
        for target in targets:
            target.client.close()
        for server in servers:
            server.stop()
    return 2 if args.strict and not ok else 0


def report(rows: list[dict[str, Any]], small: int, large: int, target: float) -> bool:
    by = {(r["name"], r["leases"]): r for r in rows}
    print(f"\n{'sweep':<14} {'ratio ' + f'{large:,}/{small:,}':>22} {'(server time)':>16}")
    ok = True
    for name in ("Reaper.run()", "survey step", "SCAN sweep"):
        lo, hi = by[(name, small)], by[(name, large)]
        ratio = hi["median_ms"] / lo["median_ms"]
        server = hi["server_ms"] / lo["server_ms"] if lo["server_ms"] else float("nan")
        print(f"{name:<14} {ratio:>22.2f} {server:>16.2f}")
        if name == "Reaper.run()":
            ok = ratio < target
    scan, run = by[("SCAN sweep", large)], by[("Reaper.run()", large)]
    print(
        f"\nat {large:,} leases the SCAN sweep takes {scan['median_ms'] / run['median_ms']:.0f}x "
        f"a whole reaper run ({scan['median_ms']:.0f} ms vs {run['median_ms']:.1f} ms)"
    )
    print(f"{'PASS' if ok else 'FAIL'}: Reaper.run() ratio below {target}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
