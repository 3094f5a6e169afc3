"""What the seat calls cost as functions of the seat library (FCALL, as the product calls
them: seats/scripts.py) against the same scripts by EVALSHA (as they were called before).

Every EVALSHA runs the script's top level again: `_lib.lua` and the preludes define their
local functions on every call (Redis forbids globals, so nothing survives a call). The
library (Redis 7.0: ``FUNCTION LOAD`` once, ``FCALL`` per call) runs its top level once
per load. This bench calls acquire, heartbeat and release both ways on one private
redis-server, interleaved round by round: server ``usec_per_call`` of ``evalsha`` against
``fcall``, same keys, same arguments, the same hot license of ``--hot`` leases.

Run: ``python3 bench/fcall_ab.py`` (about 1 minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from typing import Any

import redis_cost as rc  # the bench's loading and measuring helpers

from seatlease.seats.ids import new_request_id
from seatlease.seats.protocol.calls import acquire_call, heartbeat_call, release_call
from seatlease.seats.scripts import LIBRARY_SCRIPTS, SeatLibrary

SCRIPTS = LIBRARY_SCRIPTS


def by_evalsha(library: SeatLibrary) -> dict[str, Any]:
    """The library's scripts as EVALSHA scripts (redis-py ``Script``), as before it."""
    return {name: library.script(name) for name in SCRIPTS}


def session_ids(eng: Any, client_ids: list[str]) -> list[str]:
    """The sessions the acquires of ``client_ids`` made on the hot license."""
    keys = rc.keys.LicenseKeys.of(rc.TENANT, rc.HOT)
    return [s for s in eng.redis.hmget(keys.clients, client_ids) if s]


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
        scripts = {"fcall": eng.scripts.__dict__, "evalsha": by_evalsha(eng.scripts.library)}
        rc.fill_license(eng, rc.HOT, args.hot, "client")

        def acquire(via: str) -> Callable[[Any, str], None]:
            def queue(pipe: Any, client_id: str) -> None:
                ks, av = acquire_call(
                    rc.TENANT, rc.HOT, client_id, metadata_json=rc.META,
                    request_id=new_request_id(),
                )  # fmt: skip
                scripts[via]["acquire"](keys=ks, args=av, client=pipe)

            return queue

        def heartbeat(via: str) -> Callable[[Any, str], None]:
            def queue(pipe: Any, sid: str) -> None:
                ks, av = heartbeat_call(rc.TENANT, rc.HOT, sid, request_id=new_request_id())
                scripts[via]["heartbeat"](keys=ks, args=av, client=pipe)

            return queue

        def release(via: str) -> Callable[[Any, str], None]:
            def queue(pipe: Any, sid: str) -> None:
                ks, av = release_call(rc.TENANT, rc.HOT, sid, request_id=new_request_id())
                scripts[via]["release"](keys=ks, args=av, client=pipe)

            return queue

        usec: dict[tuple[str, str], list[float]] = {
            (op, via): [] for op in SCRIPTS for via in ("evalsha", "fcall")
        }
        for round_no in range(args.rounds):
            ways = ["evalsha", "fcall"] if round_no % 2 == 0 else ["fcall", "evalsha"]
            made: dict[str, list[str]] = {}
            for via in ways:  # new clients each time: every acquire makes a lease
                items = [f"{via}{round_no}-{i}" for i in range(args.ops)]
                queue = acquire(via)
                phase = rc.measure(
                    client, "acquire", via,
                    lambda i=items, q=queue: rc.run_batched(client, i, q, "acquired"),
                )  # fmt: skip
                usec["acquire", via].append(phase.usec)
                made[via] = items
            sessions = {via: session_ids(eng, made[via]) for via in ways}
            for op, queue_of, status in (
                ("heartbeat", heartbeat, "ok"),
                ("release", release, "released"),
            ):
                for via in ways:
                    batch, queue = sessions[via], queue_of(via)
                    phase = rc.measure(
                        client, op, via,
                        lambda b=batch, q=queue, s=status: rc.run_batched(client, b, q, s),
                    )  # fmt: skip
                    usec[op, via].append(phase.usec)
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
