"""Reclaiming a crash wave: ``--leases`` (100,000) expired leases through the whole chain.

Starts a private redis-server, the Pub/Sub emulator and a private PostgreSQL database
(on the machine's server at 127.0.0.1:5432 if it answers, else a private initdb cluster),
all on loopback. Loads the expired leases with pipelines as the exact structures
acquire.lua writes, ``--per-license`` (10) per license, then
measures three stages one after the other:

1. **reclaim (Redis)**: the reaper's sweep and batched ``reclaim.lua`` calls of
   shared/seatlease/events/reaper.py on a pool of ``REAPER_CONCURRENCY`` (16) threads, until
   no expired lease is left; leases reclaimed per second, and server-side microseconds per
   reclaim.lua call (100 leases per call) from ``INFO commandstats``;
2. **publish (Pub/Sub emulator)**: ``Reaper.run()`` drains the 100,000 ``lease.reclaimed``
   events from the outboxes (XRANGE, publish up to 1,000 events per message, wait for every
   confirmation, XDEL); events published per second;
3. **audit (PostgreSQL)**: every message pulled from a subscription and delivered to the
   audit function (functions/audit/main.py through functions-framework's test client, as
   a binary-mode CloudEvent), ``--audit-workers`` (2) at a time as Pub/Sub push spreads a
   backlog over instances: validation plus one call of the idempotent insert function
   (``INSERT ... SELECT FROM jsonb_to_recordset ... ON CONFLICT DO NOTHING`` with the
   rollups) per message; rows inserted per second. Then every message again (Pub/Sub
   redelivery): duplicates per second, zero rows added.

``--end-to-end`` instead runs the three at once, as deployed: ``Reaper.run()`` (which
publishes while it reclaims a wave) beside ``--audit-workers`` audit instances, each a
process of its own pulling and delivering; it times the wave from the first reaper run
to the last audit row (issue 12: under 60 s for ``--leases 1000000``).

Checks on the way: every lease reclaimed once, every event published once, exactly one
row per event. Run: ``python3 bench/reclaim_throughput.py`` (about 1.5 minutes on 2 shared
cores; ``--leases 1000000 --end-to-end`` about 2 minutes with the loading). Exit status
1 if a check fails.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import secrets
import statistics
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import text

from seatlease.clock import server_time_ms
from seatlease.events.pubsub import EVENTS_PER_MESSAGE, Publisher
from seatlease.events.reaper import Reaper
from seatlease.records import db
from seatlease.seats import keys
from seatlease.seats.redisconn import connect
from seatlease_cli.procs import start_pubsub_emulator, start_redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from procs import private_database  # the tests' fresh-database helper

REPO = Path(__file__).resolve().parent.parent
PROJECT = "seatlease-bench"
TENANT = "bench"
LICENSES_PER_PIPELINE = 500
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))


def load_leases(
    client: Any, *, licenses: int, per_license: int, deadline_ms: int, lease_seconds: int
) -> int:
    """``licenses`` x ``per_license`` leases, all with ``deadline_ms``, written with
    pipelines as exactly the structures acquire.lua writes (layout in
    shared/seatlease/seats/lua/_lib.lua: config hash, lease ZSET, session and client hashes,
    the shard's deadline index), far faster than one EVALSHA per lease. Returns the count."""
    cfg = {
        "exists": 1,
        "seats": per_license * 2,
        "lease_seconds": lease_seconds,
        "max_lease_seconds": lease_seconds,
        "overage_percent": 0,
        "suspended": 0,
    }
    acquired = deadline_ms - lease_seconds * 1000
    written = 0
    for start in range(0, licenses, LICENSES_PER_PIPELINE):
        pipe = client.pipeline(transaction=False)
        by_shard: dict[int, dict[str, int]] = defaultdict(dict)
        for n in range(start, min(start + LICENSES_PER_PIPELINE, licenses)):
            license_id = f"lic-{n:07d}"
            k = keys.LicenseKeys.build(TENANT, license_id)
            sids = [secrets.token_urlsafe(18) for _ in range(per_license)]
            clients = [f"ws-{n:07d}-{i:03d}" for i in range(per_license)]
            record = {"a": acquired, "l": lease_seconds * 1000, "m": META}
            pipe.hset(k.cfg, mapping=cfg)
            pipe.zadd(k.leases, dict.fromkeys(sids, deadline_ms))
            pipe.hset(
                k.sessions,
                mapping={
                    sid: json.dumps({"c": c, **record}, separators=(",", ":"))
                    for sid, c in zip(sids, clients, strict=True)
                },
            )
            pipe.hset(k.clients, mapping=dict(zip(clients, sids, strict=True)))
            lk = keys.license_key(TENANT, license_id)
            by_shard[k.shard].update({f"{lk}|{sid}": deadline_ms for sid in sids})
            written += per_license
        for shard, members in by_shard.items():
            pipe.zadd(keys.deadlines_key(shard), members)
        pipe.execute()
    return written


def reclaim_all(reaper: Reaper, concurrency: int) -> int:
    """The reaper's sweep and reclaim steps, repeated until nothing is expired."""
    total = 0
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        while True:
            candidates, _denials, _backlog = reaper.survey()
            busy = [s for s in range(keys.SHARDS) if candidates[s]]
            if not busy:
                return total
            total += sum(pool.map(reaper.reclaim, busy, [candidates[s] for s in busy]))


def pull_all(subscriber: Any, subscription: str, events: int) -> list[Any]:
    """Every message of the subscription (acknowledged), until ``events`` events."""
    messages: list[Any] = []
    seen = 0
    deadline = time.monotonic() + 120
    while seen < events and time.monotonic() < deadline:
        resp = subscriber.pull(
            request={
                "subscription": subscription,
                # Messages carry up to 1,000 events (~350 KB): stay under gRPC's 4 MB reply.
                "max_messages": 8,
                "return_immediately": True,
            },
            timeout=30,
        )
        if not resp.received_messages:
            time.sleep(0.1)
            continue
        for received in resp.received_messages:
            messages.append(received.message)
            seen += int(received.message.attributes.get("events", "0"))
        subscriber.acknowledge(
            subscription=subscription, ack_ids=[m.ack_id for m in resp.received_messages]
        )
    return messages


def deliver(client: Any, message: Any, topic_path: str) -> int:
    """One message to the audit function as Pub/Sub (Eventarc) delivers it: a binary-mode
    CloudEvent whose data is the messagePublished payload."""
    resp = client.post(
        "/",
        json={
            "message": {
                "data": base64.b64encode(message.data).decode(),
                "messageId": message.message_id,
                "attributes": dict(message.attributes),
            },
            "subscription": f"projects/{PROJECT}/subscriptions/audit",
        },
        headers={
            "ce-id": message.message_id,
            "ce-specversion": "1.0",
            "ce-source": f"//pubsub.googleapis.com/{topic_path}",
            "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        },
    )
    return resp.status_code


def audit_clients() -> Any:
    """A function returning this thread's test client of the audit function (as served by
    the Functions Framework: one per delivering thread)."""
    import functions_framework

    app = functions_framework.create_app("audit", str(REPO / "functions" / "audit" / "main.py"))
    local = threading.local()

    def client() -> Any:
        if not hasattr(local, "client"):
            local.client = app.test_client()
        return local.client

    return client


def audit_instance(
    subscription: str, topic_path: str, env: dict[str, str], stored: Any, ready: Any,
    leases: int, limit_s: float,
) -> None:  # fmt: skip
    """One audit function instance in a process of its own (as deployed: the reaper and
    each audit instance have their own interpreter, no GIL shared): pulls what is
    published, delivers it to the audit function, acknowledges what it stored, adds the
    events to ``stored`` and stops once every lease has its row."""
    os.environ.update(env)
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    client = audit_clients()
    ready.set()
    deadline = time.monotonic() + limit_s
    while stored.value < leases and time.monotonic() < deadline:
        resp = subscriber.pull(
            request={"subscription": subscription, "max_messages": 2,
                     "return_immediately": True},
            timeout=30,
        )  # fmt: skip
        if not resp.received_messages:
            time.sleep(0.05)
            continue
        acks, events = [], 0
        for received in resp.received_messages:
            if deliver(client(), received.message, topic_path) == 200:
                acks.append(received.ack_id)
                events += int(received.message.attributes.get("events", "0"))
        if acks:
            subscriber.acknowledge(subscription=subscription, ack_ids=acks)
        with stored.get_lock():
            stored.value += events


def end_to_end(
    reaper: Reaper, subscription: str, topic_path: str, leases: int, instances: int,
    limit_s: float = 600,
) -> tuple[float, int, int]:  # fmt: skip
    """The crash wave as the deployment runs it: the reaper (``Reaper.run()``, again only
    if its budget ran out) reclaims and publishes while ``instances`` audit instances
    (processes) store what is published, all at once. Returns (seconds from the first
    reaper run to the last row stored, events stored, reaper runs)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    stored = context.Value("q", 0)
    env = {k: os.environ[k] for k in ("PUBSUB_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT",
                                      "DATABASE_URL", "LOG_LEVEL")}  # fmt: skip
    readies = [context.Event() for _ in range(instances)]
    processes = [
        context.Process(
            target=audit_instance,
            args=(subscription, topic_path, env, stored, ready, leases, limit_s),
        )
        for ready in readies
    ]
    for process in processes:
        process.start()
    for ready in readies:  # imports done: the instances are warm, as a scaled-out function
        ready.wait(120)
    t0 = time.perf_counter()
    runs = 0
    while time.perf_counter() - t0 < limit_s:
        report = reaper.run()
        runs += 1
        if report.publish_errors:
            raise RuntimeError(f"publish failed: {report.publish_errors[:3]}")
        if not (report.reclaimed or report.published or report.outbox_backlog):
            break
    while stored.value < leases and time.perf_counter() - t0 < limit_s:
        time.sleep(0.01)
    seconds = time.perf_counter() - t0
    for process in processes:
        process.join(60)
    return seconds, stored.value, runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leases", type=int, default=100_000)
    parser.add_argument("--per-license", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--audit-workers",
        type=int,
        default=2,
        help="audit deliveries in flight at once (function instances)",
    )
    parser.add_argument(
        "--end-to-end",
        action="store_true",
        help="run reclaim, publish and audit at once (as deployed) and time the wave from "
        "the first reaper run to the last row, instead of one stage after the other",
    )
    args = parser.parse_args()
    os.environ["LOG_LEVEL"] = "WARNING"  # the audit function logs one line per message

    redis_proc = start_redis()
    emulator = start_pubsub_emulator(PROJECT)
    database_url, drop_database = private_database()
    try:
        os.environ.update(
            PUBSUB_EMULATOR_HOST=emulator.url,
            GOOGLE_CLOUD_PROJECT=PROJECT,
            PUBSUB_TOPIC="seat-events",
            DATABASE_URL=database_url,
        )
        from google.cloud import pubsub_v1

        publisher_client = pubsub_v1.PublisherClient()
        subscriber = pubsub_v1.SubscriberClient()
        topic_path = publisher_client.topic_path(PROJECT, "seat-events")
        subscription = subscriber.subscription_path(PROJECT, "bench-audit")
        publisher_client.create_topic(name=topic_path)
        subscriber.create_subscription(
            name=subscription, topic=topic_path, ack_deadline_seconds=600
        )

        client = connect(redis_proc.url, socket_timeout=120)
        print(
            f"redis-server {client.info('server')['redis_version']}, Pub/Sub emulator, "
            f"PostgreSQL at {database_url.split('@')[-1].rsplit('/', 1)[0]}; "
            f"Python {platform.python_version()}"
        )
        started = time.monotonic()
        licenses = args.leases // args.per_license
        expired_at = server_time_ms(client) - 1000
        loaded = load_leases(
            client,
            licenses=licenses,
            per_license=args.per_license,
            deadline_ms=expired_at,
            lease_seconds=60,
        )
        print(f"loaded {loaded:,} expired leases on {licenses:,} licenses in "
              f"{time.monotonic() - started:.1f} s")  # fmt: skip

        reaper = Reaper(client, Publisher(), concurrency=args.concurrency, budget_seconds=300)
        if args.end_to_end:
            seconds, _stored, runs = end_to_end(
                reaper, subscription, topic_path, loaded, args.audit_workers
            )
            with db.get_engine().connect() as conn:
                rows = conn.execute(text("SELECT count(*) FROM lease_events")).scalar_one()
                distinct = conn.execute(
                    text("SELECT count(DISTINCT event_id) FROM lease_events")
                ).scalar_one()
            ok = rows == distinct == loaded
            print(
                f"end to end: {rows:,} leases reclaimed, published and stored in "
                f"{seconds:.1f} s = {rows / seconds:,.0f} leases/s ({runs} reaper runs, "
                f"{args.audit_workers} audit instances (processes), all stages at once)"
            )
            print(("OK" if ok else "FAILED") + ": one audit row per expired lease")
            return 0 if ok else 1

        # 1. reclaim in Redis
        client.config_resetstat()
        t0 = time.perf_counter()
        reclaimed = reclaim_all(reaper, args.concurrency)
        reclaim_s = time.perf_counter() - t0
        stats = client.info("commandstats")
        evalsha = stats.get("cmdstat_evalsha", {})
        backlog = sum(client.xlen(keys.outbox_key(s)) for s in range(keys.SHARDS))
        ok = reclaimed == loaded == backlog
        print(f"reclaim:  {reclaimed:,} leases in {reclaim_s:.2f} s = "
              f"{reclaimed / reclaim_s:,.0f} leases/s ({evalsha.get('calls', 0):,} reclaim.lua "
              f"calls, {evalsha.get('usec_per_call', 0) / 1000:.1f} ms each server-side, "
              f"{evalsha.get('usec_per_call', 0) * evalsha.get('calls', 0) / reclaimed:.1f} "
              f"usec per lease); outbox {backlog:,}")  # fmt: skip

        # 2. publish to the emulator
        t0 = time.perf_counter()
        published, runs = 0, 0
        while True:
            report = reaper.run()
            published, runs = published + report.published, runs + 1
            if report.publish_errors:
                raise RuntimeError(f"publish failed: {report.publish_errors[:3]}")
            if report.outbox_backlog == 0 or runs > 20:
                break
        publish_s = time.perf_counter() - t0
        ok = ok and published == reclaimed
        print(f"publish:  {published:,} events in {publish_s:.2f} s = "
              f"{published / publish_s:,.0f} events/s ({runs} reaper run(s), up to "
              f"{EVENTS_PER_MESSAGE} events per message, every publish confirmed before "
              f"XDEL)")  # fmt: skip

        # 3. audit function -> PostgreSQL
        messages = pull_all(subscriber, subscription, published)
        audit_client = audit_clients()

        per_message: list[float] = []

        def timed(message: Any) -> int:
            m0 = time.perf_counter()
            status = deliver(audit_client(), message, topic_path)
            per_message.append((time.perf_counter() - m0) * 1000)
            return status

        # Pub/Sub pushes a backlog to several function instances at once: --audit-workers
        # deliveries in flight (threads of this process: Python's share of the work is
        # serialised by the GIL, so this is a lower bound for as many instances).
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.audit_workers) as pool:
            statuses = list(pool.map(timed, messages))
        insert_s = time.perf_counter() - t0
        with db.get_engine().connect() as conn:
            rows = conn.execute(text("SELECT count(*) FROM lease_events")).scalar_one()
            distinct = conn.execute(
                text("SELECT count(DISTINCT event_id) FROM lease_events")
            ).scalar_one()
        ok = ok and rows == distinct == published and set(statuses) == {200}
        print(f"audit:    {rows:,} rows from {len(messages):,} messages in {insert_s:.2f} s = "
              f"{rows / insert_s:,.0f} rows/s (median {statistics.median(per_message):.1f} ms "
              f"per message of up to {EVENTS_PER_MESSAGE} events, one INSERT each, "
              f"{args.audit_workers} deliveries at a time)")  # fmt: skip
        t0 = time.perf_counter()
        again = [deliver(audit_client(), message, topic_path) for message in messages]
        dup_s = time.perf_counter() - t0
        with db.get_engine().connect() as conn:
            after = conn.execute(text("SELECT count(*) FROM lease_events")).scalar_one()
        ok = ok and after == rows and set(again) == {200}
        print(f"redelivery: {len(messages):,} messages again in {dup_s:.2f} s = "
              f"{published / dup_s:,.0f} duplicate events/s, "
              f"rows added: {after - rows}")  # fmt: skip
        print(("OK" if ok else "FAILED") + ": every lease reclaimed once, every event "
              "published once, one audit row per event")  # fmt: skip
        return 0 if ok else 1
    finally:
        drop_database()
        emulator.stop()
        redis_proc.stop()


if __name__ == "__main__":
    sys.exit(main())
