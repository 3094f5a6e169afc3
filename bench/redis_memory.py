"""Redis memory per item, as ``INFO memory`` (``used_memory``) grows: the numbers behind
docs/operations.md's capacity table and ``seatlease.seats.capacity``.

Starts a private redis-server (loopback, nothing on disk) and, through the seat engine
(the real scripts), measures:

- a live lease: ``--leases`` acquires with metadata ``{"user": ..., "host": ...}`` over
  licenses of 100 leases each, less what their replies and outbox events took (both are
  deleted before the lease state is measured; neither lives long);
- an outbox event (a ``lease.acquired`` waiting for the reaper);
- a reply (idempotency store): on a busy license (its reply hash a hash table:
  heartbeats, then acquires, each with a fresh request id) and on small licenses (ten
  replies each: their hashes stay listpacks);
- the reply store before 2026-11-24 for comparison (a string key per reply, its JSON,
  with a TTL), written here the way the scripts wrote it;
- a queued ticket: ``--tickets`` clients waiting in one full license's queue (metadata
  ``{"user": ..., "host": ...}``), less their replies and ``queue.joined`` events;
- a weighted lease: ``--weighted`` leases of 8 seats and of 100,000 seats (their weight
  and its mark in the record, and the license's sum of extra seats), less the same number
  of one-seat leases: per lease, whatever its weight (before 2026-11-28 each extra seat
  was a member of the license's ``units`` ZSET: 141 B a seat);
- a refused client (right-sizing, ``lua/_refusals.lua``): ``--refused`` (1,000, the cap
  a license and minute) distinct clients refused on a full license, their first refusal
  in a minute (the note, its minute's counters, its place in the indexes), then each
  refused again in the same minute (a retry: only its count), then again in the next
  minute (waits for it: a second entry in the same note).

- an ended lease's note (``lua/_lib.lua``'s ``note_end``): ``--ended`` leases released
  before their deadline, the notes' key's ``MEMORY USAGE`` per note; and the license's
  longest-recent-lease string (``lmax``);
- a refused client whose request's ``metadata.user`` is 4,000 bytes (the note keeps 128).

Run: ``python3 bench/redis_memory.py`` (about three minutes: two of them wait for the
next minute).
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import sys
import time

from seatlease.errors import NoSeatsAvailable
from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import SHARDS, LicenseKeys, outbox_key
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.redisconn import connect
from seatlease_cli.procs import start_redis

METADATA = {"user": "ann", "host": "pc-7"}


def used(redis) -> int:
    time.sleep(0.05)
    return int(redis.info("memory")["used_memory"])


def drop_replies(redis, licenses: list[str]) -> None:
    pipe = redis.pipeline(transaction=False)
    for license_id in licenses:
        pipe.delete(*LicenseKeys.of("bench", license_id).replies)
    pipe.execute()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--leases", type=int, default=50_000)
    parser.add_argument("--replies", type=int, default=30_000)
    parser.add_argument("--tickets", type=int, default=10_000)
    parser.add_argument("--weighted", type=int, default=10_000)
    parser.add_argument("--refused", type=int, default=1_000)
    parser.add_argument("--ended", type=int, default=10_000)
    args = parser.parse_args(argv)
    server = start_redis()
    rows: list[tuple[str, float]] = []
    try:
        redis = connect(server.url)
        config = LicenseConfig(seats=1_000_000, lease_seconds=3600, max_lease_seconds=3600)
        waiting = LicensePolicy(queue=True, queue_ticket_seconds=3600, queue_max=10_000)
        queued = LicenseConfig(
            seats=1, lease_seconds=3600, max_lease_seconds=3600, policy=waiting.redis_form()
        )
        engine = SeatEngine(
            redis, lambda _tenant, license_id: queued if license_id == "queued" else config
        )
        licenses = [f"lic-{n}" for n in range(max(1, args.leases // 100))]
        for license_id in licenses:  # config caches and scripts first
            engine.cache_config("bench", license_id, config)
        print(f"Python {platform.python_version()}, Redis {server.url}")

        before = used(redis)
        for n in range(args.leases):
            engine.acquire(
                SeatRequest("bench", licenses[n % len(licenses)], f"ws-{n:06d}", metadata=METADATA)
            )
        drop_replies(redis, licenses)
        with_outbox = used(redis)
        redis.delete(*(outbox_key(s) for s in range(SHARDS)))
        leases_only = used(redis)
        rows.append(("live lease (metadata user + host)", (leases_only - before) / args.leases))
        rows.append(
            ("outbox event waiting for the reaper", (with_outbox - leases_only) / args.leases)
        )

        busy = engine.acquire(SeatRequest("bench", "busy", "ws-busy", metadata=METADATA))
        before = used(redis)
        half = args.replies // 2
        for _ in range(half):
            engine.heartbeat("bench", "busy", busy.session_id)
        for _ in range(args.replies - half):
            engine.acquire(SeatRequest("bench", "busy", "ws-busy", metadata=METADATA))
        rows.append(("reply, busy license (hash table)", (used(redis) - before) / args.replies))

        small = licenses[: args.replies // 10]
        before = used(redis)
        for k, license_id in enumerate(small):
            for _ in range(10):  # its first client's lease, renewed (no new state)
                engine.acquire(SeatRequest("bench", license_id, f"ws-{k:06d}", metadata=METADATA))
        rows.append(
            ("reply, small licenses (listpack)", (used(redis) - before) / (10 * len(small)))
        )

        reply = ["acquired", busy.session_id, busy.expires_at_ms, 3_600_000, 1, 1_000_000,
                 1_000_000, busy.now_ms, 0]  # fmt: skip
        before = used(redis)
        pipe = redis.pipeline(transaction=False)
        for n in range(args.replies):
            key = f"sl:{{17}}:bench/busy:reply:acquire:ws-busy:{secrets.token_hex(16)}"
            pipe.set(key, json.dumps(reply, separators=(",", ":")), px=300_000)
            if n % 1000 == 999:
                pipe.execute()
        pipe.execute()
        rows.append(
            ("reply, before 2026-11-24 (string key)", (used(redis) - before) / args.replies)
        )
        engine.cache_config("bench", "queued", queued)
        engine.acquire(
            SeatRequest("bench", "queued", "holder", metadata=METADATA)
        )  # the license is full
        drop_replies(redis, ["queued"])
        redis.delete(*(outbox_key(s) for s in range(SHARDS)))
        before = used(redis)
        for n in range(args.tickets):
            engine.acquire(
                SeatRequest(
                    "bench", "queued", f"wait-{n:06d}", user=f"u{n:06d}", host="pc-7", queue=True
                )
            )
        drop_replies(redis, ["queued"])
        redis.delete(*(outbox_key(s) for s in range(SHARDS)))
        rows.append(("queued ticket (user + host)", (used(redis) - before) / args.tickets))

        # weighted leases (8 and 100,000 seats) against one-seat leases, 100 a license
        sizes = {}
        config = LicenseConfig(seats=100_000 * 100, lease_seconds=3600)
        for weight in (1, 8, 100_000):
            names = [f"w{weight}-{n}" for n in range(max(1, args.weighted // 100))]
            for license_id in names:
                engine.cache_config("bench", license_id, config)
            before = used(redis)
            for n in range(args.weighted):
                engine.acquire(
                    SeatRequest(
                        "bench", names[n % len(names)], f"ws-{n:06d}", metadata=METADATA,
                        seats=weight,
                    )
                )  # fmt: skip
            drop_replies(redis, names)
            redis.delete(*(outbox_key(s) for s in range(SHARDS)))
            sizes[weight] = (used(redis) - before) / args.weighted
        rows.append(("weighted lease of 8 seats, over one seat", sizes[8] - sizes[1]))
        rows.append(("weighted lease of 100,000, over one seat", sizes[100_000] - sizes[1]))

        # what the service ended (lua/_lib.lua's note_end): a lease released before its
        # deadline is noted until its tokens expire; MEMORY USAGE of the notes' key, a note
        # (a session id and a score) at a time; and the longest recent lease, a string per
        # license that granted in the last hour
        ending = LicenseConfig(seats=args.ended, lease_seconds=3600, max_lease_seconds=3600)
        engine.cache_config("bench", "ending", ending)
        engine.config_loader = lambda _t, _l: ending
        held = [
            engine.acquire(SeatRequest("bench", "ending", f"e-{n:06d}")).session_id
            for n in range(args.ended)
        ]
        for sid in held:
            engine.release("bench", "ending", sid)
        keys = LicenseKeys.of("bench", "ending")
        assert redis.zcard(keys.ended) == args.ended
        rows.append(("ended lease's note (until its tokens expire)",
                     redis.memory_usage(keys.ended, samples=0) / args.ended))  # fmt: skip
        rows.append(("longest recent lease, per license", redis.memory_usage(keys.lmax)))

        # refused clients: notes until the reaper judges them (never flushed here)
        full = LicenseConfig(seats=1, lease_seconds=3600, max_lease_seconds=3600)
        engine.config_loader = lambda _t, _l: full
        for license_id in ("full", "full-long"):
            engine.cache_config("bench", license_id, full)
            engine.acquire(SeatRequest("bench", license_id, "holder", metadata=METADATA))

        def refuse_all(license_id: str = "full", metadata: dict = METADATA) -> float:
            before = used(redis)
            for n in range(args.refused):
                try:
                    engine.acquire(
                        SeatRequest("bench", license_id, f"r-{n:06d}", metadata=metadata)
                    )
                except NoSeatsAvailable:
                    pass
            drop_replies(redis, [license_id])
            return (used(redis) - before) / args.refused

        # all in one minute: start just after a minute begins
        time.sleep(60.5 - (engine.server_time_ms() / 1000) % 60)
        rows.append(("refused client, first in its minute", refuse_all()))
        rows.append(("refused client, its retry in the minute", refuse_all()))
        time.sleep(60.5 - (engine.server_time_ms() / 1000) % 60)
        rows.append(("refused client, its next minute", refuse_all()))
        # a caller's metadata.user of 4,000 bytes: the note keeps 128 of them (on a license
        # of its own: "full" has its minute's 1,000 clients kept already)
        long_user = {"user": "ü" * 2000, "host": "pc-7"}
        rows.append(("refused client, a 4 KB metadata user", refuse_all("full-long", long_user)))
        redis.close()
    finally:
        server.stop()
    for label, size in rows:
        print(f"  {label:<40} {size:6.0f} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
