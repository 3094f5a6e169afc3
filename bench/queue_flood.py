"""Redis memory of a wait-queue flood (issue 31): one seat key joins ``--joins`` client ids
(default 5,000) to one full license's queue, each acquire carrying ``--metadata-bytes``
(default about 4 KB) of request metadata, as the adversarial run did.

Starts a private redis-server (loopback, nothing on disk) and, through the seat engine
(the real scripts), prints ``INFO memory`` ``used_memory`` and the key count (``DBSIZE``)
before the flood, after it, and after the tickets lapse (their deadlines moved into the
past, as 60 s without renewal would do) and the reaper's ticket sweep ran once (no
acquire on the license: nothing else prunes them). The outbox's events (one
``queue.joined`` and one ``queue.left`` a ticket) are counted apart: the reaper
publishes and deletes them within a minute.

The same-run baseline is the same flood without metadata: the ratio of the two floods'
bytes per ticket says how much of the request's metadata a ticket keeps (1.0x: none).
Runs against whatever ``seatlease`` is importable (``PYTHONPATH=<old tree>/shared`` for an
older revision: a revision without the queue bound or the reaper's sweep skips them).

Run: ``python3 bench/queue_flood.py`` (about 30 s).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys, outbox_key
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.redisconn import connect
from seatlease_cli.procs import start_redis


def used(redis: Any) -> int:
    time.sleep(0.05)
    return int(redis.info("memory")["used_memory"])


def outbox_length(redis: Any, license_id: str) -> int:
    return int(redis.xlen(outbox_key(LicenseKeys.of("bench", license_id).shard)))


def flood(redis: Any, license_id: str, joins: int, metadata_bytes: int) -> dict[str, Any]:
    """One license's flood; the numbers of each stage (outbox excluded, counted apart)."""
    policy: dict[str, Any] = {"queue": True, "queue_ticket_seconds": 60}
    if "queue_max" in LicensePolicy.model_fields:
        policy["queue_max"] = 10_000  # the API's maximum: the flood fits
    config = LicenseConfig(seats=1, lease_seconds=600, policy=LicensePolicy(**policy).redis_form())
    engine = SeatEngine(redis, lambda _t, _l: config)
    keys = LicenseKeys.of("bench", license_id)
    engine.acquire(SeatRequest("bench", license_id, "holder"))
    redis.delete(*keys.replies)
    metadata = {f"k{i:03d}": "v" * 90 for i in range(metadata_bytes // 100)}
    stream = outbox_key(keys.shard)
    redis.delete(stream)
    before, keys_before = used(redis), redis.dbsize()
    for n in range(joins):
        engine.acquire(
            SeatRequest(
                "bench",
                license_id,
                f"w{n:05d}",
                user=f"u{n:05d}",
                host="pc-7",
                queue=True,
                metadata=metadata,
            )
        )
    redis.delete(*keys.replies)  # replies live 90-180 s, not the flood's cost
    events_joined = outbox_length(redis, license_id)
    redis.delete(stream)
    after, keys_after = used(redis), redis.dbsize()
    row = {
        "metadata_bytes": len(json.dumps(metadata)),
        "used_before": before,
        "used_after_joins": after,
        "bytes_per_ticket": (after - before) / joins,
        "keys_before": keys_before,
        "keys_after_joins": keys_after,
        "queue_events_after_joins": events_joined,
    }
    # the tickets lapse; nothing calls on the license; the reaper runs once
    redis.zadd(keys.ticket_deadlines, {f"w{n:05d}": 1 for n in range(joins)})
    if hasattr(keys, "ticket_index") and hasattr(Reaper, "sweep_tickets"):
        redis.zadd(keys.ticket_index, {f"bench/{license_id}|w{n:05d}": 1 for n in range(joins)})
        reaper = Reaper(redis, publisher=None, budget_seconds=60)  # type: ignore[arg-type]
        swept = 0
        while True:  # one run sweeps TICKET_SWEEP_LIMIT a shard; count the runs
            lapsed = reaper.ticket_survey()[keys.shard]
            if not lapsed:
                break
            swept += reaper.sweep_tickets(keys.shard, lapsed)
        row["reaper_dropped"] = swept
    else:
        row["reaper_dropped"] = None  # this revision has no sweep: the tickets stay
    row["queue_events_after_sweep"] = outbox_length(redis, license_id)
    row["outbox_bytes_after_sweep"] = int(redis.memory_usage(stream) or 0)
    redis.delete(stream)
    row["used_after_sweep"] = used(redis)
    row["keys_after_sweep"] = redis.dbsize()
    row["tickets_left"] = int(redis.zcard(keys.queue))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--joins", type=int, default=5_000)
    parser.add_argument("--metadata-bytes", type=int, default=4_000)
    args = parser.parse_args(argv)
    server = start_redis()
    try:
        redis = connect(server.url)
        version = redis.info("server")["redis_version"]
        print(f"redis-server {version} on loopback, Python {platform.python_version()}")
        base = flood(redis, "plain", args.joins, 0)
        heavy = flood(redis, "heavy", args.joins, args.metadata_bytes)
        for name, row in (("no metadata (baseline)", base), ("request metadata", heavy)):
            print(f"\n{args.joins:,} joins, {name}: {row['metadata_bytes']:,} bytes of metadata")
            print(f"  used_memory {row['used_before']:,} -> {row['used_after_joins']:,} "
                  f"(+{row['used_after_joins'] - row['used_before']:,} B, "
                  f"{row['bytes_per_ticket']:,.0f} B a ticket); keys {row['keys_before']} -> "
                  f"{row['keys_after_joins']}")  # fmt: skip
            print(f"  outbox: {row['queue_events_after_joins']:,} queue.joined events (apart)")
            if row["reaper_dropped"] is None:
                print("  no reaper sweep in this revision: the lapsed tickets stay")
            else:
                print(f"  tickets lapsed, reaper sweep: {row['reaper_dropped']:,} dropped, "
                      f"{row['queue_events_after_sweep']:,} queue.left events "
                      f"({row['outbox_bytes_after_sweep']:,} B in the outbox)")  # fmt: skip
            print(f"  after: used_memory {row['used_after_sweep']:,} "
                  f"({row['used_after_sweep'] - row['used_before']:+,} B from before), keys "
                  f"{row['keys_after_sweep']}, tickets left {row['tickets_left']:,}")  # fmt: skip
        ratio = heavy["bytes_per_ticket"] / base["bytes_per_ticket"]
        print(f"\nbytes a ticket with metadata / without: {ratio:.2f}x (1.00x: none kept)")
        redis.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
