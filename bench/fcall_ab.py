"""What the seat scripts would cost as a Redis function library instead of EVALSHA.

Every EVALSHA runs the script's top level again: `_lib.lua` and the preludes define their
local functions on every call (Redis forbids globals, so nothing survives a call). A
function library (Redis 7.0: ``FUNCTION LOAD`` once, ``FCALL`` per call) runs its top
level once per load. This bench loads acquire.lua and heartbeat.lua, as they are, into one
library (each script's body becomes a registered function whose parameters are named
``KEYS`` and ``ARGV``) and measures both ways on one private redis-server, interleaved
round by round: server ``usec_per_call`` of ``evalsha`` against ``fcall``, same keys, same
arguments, the same hot license of ``--hot`` leases.

This is a measurement, not the product: the library here is loaded without the care a
deployment needs (every primary, a failover's new one included, must hold it before the
first call; a version per release, so that two releases never call each other's code),
and `_lib.lua`'s per-call counters (the event sequence, the formatted time) are not reset
between calls, which is harmless to the cost and to these calls' replies.

Run: ``python3 bench/fcall_ab.py`` (about 1 minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

import redis_cost as rc  # the bench's loading and measuring helpers

from seatlease.seats.engine import acquire_call, heartbeat_call, new_request_id
from seatlease.seats.scripts import PRELUDES

LIBRARY = "seatlease_ab"
SCRIPTS = ("acquire", "heartbeat")


def library_source(names: tuple[str, ...] = SCRIPTS) -> str:
    """The scripts' Lua as one function library: `_lib.lua`, their preludes, and each
    script's body registered as ``<name>_ab``. A library's top level may not touch Lua's
    standard libraries (Redis 7.0 loads it without them), so `_lib.lua`'s one top-level
    alias of ``string.format`` becomes a call through it."""
    lua = resources.files("seatlease.seats") / "lua"
    lib = (lua / "_lib.lua").read_text()
    alias = "local format = string.format"
    if alias not in lib:
        raise RuntimeError(f"_lib.lua changed: {alias!r} not found")
    parts = [
        f"#!lua name={LIBRARY}",
        lib.replace(alias, "local function format(...) return string.format(...) end"),
    ]
    preludes: list[str] = []
    for name in names:
        preludes += [p for p in PRELUDES.get(name, ()) if p not in preludes]
    parts += [(lua / f"{part}.lua").read_text() for part in preludes]
    for name in names:
        body = (lua / f"{name}.lua").read_text()
        parts.append(f"redis.register_function('{name}_ab', function(KEYS, ARGV)\n{body}\nend)")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--hot", type=int, default=10_000, help="live leases on the license")
    parser.add_argument("--ops", type=int, default=3_000, help="calls per phase and round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    server = rc.start_redis()
    try:
        eng = rc.new_engine(server.url)
        client = eng.redis
        client.function_load(library_source(), replace=True)
        sessions = list(rc.fill_license(eng, rc.HOT, args.hot, "client").values())

        def acquire(via: str) -> Callable[[Any, str], None]:
            def queue(pipe: Any, client_id: str) -> None:
                ks, av = acquire_call(
                    rc.TENANT, rc.HOT, client_id, metadata_json=rc.META,
                    request_id=new_request_id(),
                )  # fmt: skip
                if via == "evalsha":
                    eng.scripts.acquire(keys=ks, args=av, client=pipe)
                else:
                    pipe.fcall("acquire_ab", len(ks), *ks, *av)

            return queue

        def heartbeat(via: str) -> Callable[[Any, str], None]:
            def queue(pipe: Any, sid: str) -> None:
                ks, av = heartbeat_call(rc.TENANT, rc.HOT, sid, request_id=new_request_id())
                if via == "evalsha":
                    eng.scripts.heartbeat(keys=ks, args=av, client=pipe)
                else:
                    pipe.fcall("heartbeat_ab", len(ks), *ks, *av)

            return queue

        usec: dict[tuple[str, str], list[float]] = {
            (op, via): [] for op in SCRIPTS for via in ("evalsha", "fcall")
        }
        for round_no in range(args.rounds):
            ways = ["evalsha", "fcall"] if round_no % 2 == 0 else ["fcall", "evalsha"]
            for via in ways:  # new clients each time: every acquire makes a lease
                items = [f"{via}{round_no}-{i}" for i in range(args.ops)]
                queue = acquire(via)
                phase = rc.measure(
                    client, "acquire", via,
                    lambda i=items, q=queue: rc.run_batched(client, i, q, "acquired"),
                )  # fmt: skip
                usec["acquire", via].append(phase.usec)
            for via in ways:
                batch, queue = sessions[: args.ops], heartbeat(via)
                phase = rc.measure(
                    client, "heartbeat", via,
                    lambda b=batch, q=queue: rc.run_batched(client, b, q, "ok"),
                )  # fmt: skip
                usec["heartbeat", via].append(phase.usec)
        print(
            f"redis-server {client.info('server')['redis_version']}, {args.hot:,} leases, "
            f"{args.rounds} rounds of {args.ops:,} calls each way (server usec_per_call)"
        )
        for op in SCRIPTS:
            evalsha, fcall = usec[op, "evalsha"], usec[op, "fcall"]
            ratios = [f / e for e, f in zip(evalsha, fcall, strict=True)]
            print(
                f"  {op:<10} evalsha {statistics.median(evalsha):6.2f} us "
                f"(min {min(evalsha):.2f}), fcall {statistics.median(fcall):6.2f} us "
                f"(min {min(fcall):.2f}): "
                f"fcall/evalsha {statistics.median(ratios):.2f} "
                f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})"
            )
        client.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
