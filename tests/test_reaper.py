"""The reaper against a real redis-server (and the local Redis Cluster) and the real
Pub/Sub emulator: exact reclaim, no double reclaim, nothing lost when Pub/Sub is down."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import functions_framework
import pytest

import seatlease.events.reaper
from seatlease.events.pubsub import Publisher, outbox_events
from seatlease.events.reaper import Reaper
from seatlease.seats import keys, redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease_cli.procs import start_pubsub_emulator


def events_in(messages) -> list[dict]:
    return [event for m in messages for event in json.loads(m.data)]


def outbox_types(redis, tenant: str, license_id: str) -> list[str]:
    stream = keys.outbox_key(keys.shard_of(tenant, license_id))
    return [event["type"] for event in outbox_events(redis, stream)]


@pytest.fixture
def reaper(redis_client, pubsub) -> Reaper:
    return Reaper(redis_client, Publisher(), concurrency=8, budget_seconds=20)


def test_one_run_reclaims_exactly_the_expired_leases(engine, configs, reaper, pubsub):
    configs.add("t", "short", seats=10, lease_seconds=1)
    configs.add("t", "long", seats=10, lease_seconds=300)
    crashed = [engine.acquire(SeatRequest("t", "short", f"crash-{i}")) for i in range(4)]
    released = engine.acquire(SeatRequest("t", "short", "polite"))
    engine.release("t", "short", released.session_id)
    alive = [engine.acquire(SeatRequest("t", "long", f"alive-{i}")) for i in range(3)]
    time.sleep(1.1)

    report = reaper.run()

    assert report.reclaimed == 4 and report.outbox_backlog == 0
    assert report.published == 4 + 1 + 1 + 3 + 4  # acquired, released, reclaimed
    assert report.shards_swept == keys.SHARDS
    assert engine.live_leases("t", "short") == []
    assert {row["client_id"] for row in engine.live_leases("t", "long")} == {
        lease.client_id for lease in alive
    }
    events = events_in(pubsub.pull())
    reclaimed = [e for e in events if e["type"] == "lease.reclaimed"]
    assert sorted(e["session_id"] for e in reclaimed) == sorted(c.session_id for c in crashed)
    assert all(e["seats_total"] == 10 and e["occurred_at"].endswith("Z") for e in reclaimed)
    assert len({e["event_id"] for e in events}) == len(events) == report.published
    # A second run finds nothing to do.
    again = reaper.run()
    assert (again.reclaimed, again.published) == (0, 0)


def test_a_lease_heartbeated_at_the_last_moment_is_not_reclaimed(engine, configs, reaper):
    configs.add("t", "lic", seats=2, lease_seconds=1)
    lease = engine.acquire(SeatRequest("t", "lic", "c1"))
    time.sleep(1.05)
    shard = keys.shard_of("t", "lic")
    candidates = engine.redis.zrangebyscore(keys.deadlines_key(shard), "-inf", "+inf")
    assert candidates == [f"t/lic|{lease.session_id}"]
    # The heartbeat lands between the reaper's read and its reclaim. (The lease is
    # already past its deadline here, so this heartbeat reclaims it itself; re-acquire
    # to model "heartbeated just before expiry" with a fresh, live deadline.)
    configs.add("t", "lic2", seats=2, lease_seconds=2)
    live = engine.acquire(SeatRequest("t", "lic2", "c2"))
    shard2 = keys.shard_of("t", "lic2")
    member = f"t/lic2|{live.session_id}"
    engine.redis.zadd(keys.deadlines_key(shard2), {member: 1})  # stale read: "expired"
    stale = [member]
    engine.heartbeat("t", "lic2", live.session_id)  # moves the deadline forward
    assert reaper.reclaim(shard2, stale) == 0
    assert [r["session_id"] for r in engine.live_leases("t", "lic2")] == [live.session_id]
    assert reaper.reclaim(shard, candidates) == 1


def test_two_reapers_at_once_reclaim_each_lease_once(engine, configs, redis_client, pubsub):
    configs.add("t", "herd", seats=500, lease_seconds=1)
    sessions = [engine.acquire(SeatRequest("t", "herd", f"c{i}")).session_id for i in range(300)]
    time.sleep(1.1)
    reapers = [Reaper(redis_client, Publisher(), concurrency=4) for _ in range(2)]
    reports = []
    barrier = threading.Barrier(2)

    def run(r: Reaper) -> None:
        barrier.wait()
        reports.append(r.run())

    threads = [threading.Thread(target=run, args=(r,)) for r in reapers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.reclaimed for r in reports) == 300
    events = events_in(pubsub.pull())
    per_session = Counter(e["session_id"] for e in events if e["type"] == "lease.reclaimed")
    assert set(per_session) == set(sessions) and set(per_session.values()) == {1}
    assert Counter(e["event_id"] for e in events).most_common(1)[0][1] == 1
    # One run drained the shard; the other found it locked and left it to the holder.
    assert sum(r.published for r in reports) == 600
    assert redis_client.xlen(keys.outbox_key(keys.shard_of("t", "herd"))) == 0


def test_denials_are_counted_and_flushed_as_one_event_per_license(engine, configs, reaper, pubsub):
    configs.add("t", "full", seats=1)
    engine.acquire(SeatRequest("t", "full", "holder"))
    for i in range(250):  # a retry storm: memory stays one counter
        with pytest.raises(Exception, match="seats"):
            engine.acquire(SeatRequest("t", "full", f"storm-{i % 7}"))
    shard = keys.shard_of("t", "full")
    assert engine.redis.hgetall(keys.denials_key(shard)) == {"t/full": "250"}
    report = reaper.run()
    assert report.denials == 250
    denied = [e for e in events_in(pubsub.pull()) if e["type"] == "lease.denied"]
    assert len(denied) == 1 and denied[0]["count"] == 250 and denied[0]["license_id"] == "full"
    assert engine.redis.exists(keys.denials_key(shard)) == 0


def test_pubsub_down_keeps_the_outbox_and_the_next_run_delivers(
    engine, configs, redis_client, monkeypatch
):
    emulator = start_pubsub_emulator("seatlease-outage")
    port = int(emulator.url.rsplit(":", 1)[1])
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", emulator.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "seatlease-outage")
    configs.add("t", "lic", seats=5, lease_seconds=1)
    for i in range(3):
        engine.acquire(SeatRequest("t", "lic", f"c{i}"))
    emulator.stop()
    try:
        time.sleep(1.1)
        publisher = Publisher(topic="seat-events", timeout=2.0)
        report = Reaper(redis_client, publisher, budget_seconds=20).run()
        assert report.reclaimed == 3 and report.published == 0 and report.publish_errors
        assert (
            outbox_types(redis_client, "t", "lic")
            == ["lease.acquired"] * 3 + ["lease.reclaimed"] * 3
        )
        assert report.outbox_backlog == 6
        emulator = start_pubsub_emulator("seatlease-outage", port=port)  # back, empty
        from conftest import PubSubWiring

        wiring = PubSubWiring(emulator.url, "seatlease-outage", "seat-events")
        report = Reaper(redis_client, Publisher(topic="seat-events")).run()
        assert report.published == 6 and report.outbox_backlog == 0
        assert [e["type"] for e in events_in(wiring.pull())].count("lease.reclaimed") == 3
    finally:
        emulator.stop()


def test_reaper_function_contract(redis_url, pubsub, configs, monkeypatch):
    client = functions_framework.create_app("reaper", "functions/reaper/main.py").test_client()
    got = client.get("/")
    assert got.status_code == 405 and got.json["error"]["code"] == "method_not_allowed"
    ok = client.post("/")
    assert ok.status_code == 200
    assert {"reclaimed", "published", "shards_swept", "duration_ms"} <= set(ok.json)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    redisconn.reset()
    down = client.post("/", json={})
    assert down.status_code == 503 and down.headers["Retry-After"]
    assert down.json["error"]["code"] == "backend_unavailable"


def test_reaper_function_answers_503_when_pubsub_is_down(engine, configs, redis_url, monkeypatch):
    from seatlease_cli.procs import free_port

    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "nowhere")
    import seatlease.events.reaper

    monkeypatch.setattr(seatlease.events.reaper, "_publisher", Publisher(timeout=1.0))
    configs.add("t", "lic", seats=1)
    engine.acquire(SeatRequest("t", "lic", "c1"))
    client = functions_framework.create_app("reaper", "functions/reaper/main.py").test_client()
    resp = client.post("/")
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "30"
    assert resp.json["error"]["code"] == "backend_unavailable"
    assert outbox_types(engine.redis, "t", "lic") == ["lease.acquired"]


def test_time_budget_leaves_work_for_the_next_run(engine, configs, redis_client, pubsub):
    configs.add("t", "lic", seats=100, lease_seconds=1)
    for i in range(50):
        engine.acquire(SeatRequest("t", "lic", f"c{i}"))
    time.sleep(1.1)
    tiny = Reaper(redis_client, Publisher(), budget_seconds=1e-6)
    first = tiny.run()
    assert first.budget_exhausted and first.reclaimed == 0
    second = Reaper(redis_client, Publisher()).run()
    assert second.reclaimed == 50 and second.outbox_backlog == 0


def test_reclaim_runs_on_a_redis_cluster(redis_cluster, configs):
    client = redisconn.connect(redis_cluster.url)
    client.flushall()
    engine = SeatEngine(client, configs)
    for n in range(20):
        configs.add("t", f"lic-{n}", seats=3, lease_seconds=1)
        engine.acquire(SeatRequest("t", f"lic-{n}", "c1"))
    time.sleep(1.1)

    class NoPublish(Publisher):
        def publish(self, events):  # the cluster test is about Redis; publishing is
            return len(events)  # covered against the emulator above

    report = Reaper(client, NoPublish()).run()
    assert report.reclaimed == 20 and report.published == 40 and report.outbox_backlog == 0
    client.close()


def test_reclaimed_events_keep_seats_total_when_the_config_cache_expired(
    engine, configs, reaper, redis_client, pubsub
):
    """Heartbeats do not refresh the license's cached config, so a lease held all day
    outlives it: the seat count recorded at acquire fills the event instead."""
    configs.add("t", "held", seats=7, lease_seconds=1)
    engine.acquire(SeatRequest("t", "held", "crashed"))
    expired_by_heartbeat = engine.acquire(SeatRequest("t", "held", "late"))
    redis_client.delete(keys.LicenseKeys.of("t", "held").cfg)  # the cache's TTL ran out
    time.sleep(1.1)
    with pytest.raises(Exception, match="expired"):
        engine.heartbeat("t", "held", expired_by_heartbeat.session_id)
    report = reaper.run()
    assert report.reclaimed == 1
    reclaimed = [e for e in events_in(pubsub.pull()) if e["type"] == "lease.reclaimed"]
    assert len(reclaimed) == 2 and all(e["seats_total"] == 7 for e in reclaimed)


def test_a_full_redis_is_still_reclaimed_and_drained(engine, configs, reaper, redis_client, pubsub):
    """At maxmemory (noeviction) writes fail, but the reaper only deletes: it reclaims
    the expired leases and drains the outbox, which is how a full Redis gets room back."""
    configs.add("t", "lic", seats=5, lease_seconds=1)
    for i in range(3):
        engine.acquire(SeatRequest("t", "lic", f"c{i}"))
    time.sleep(1.1)
    redis_client.config_set("maxmemory", 1)
    try:
        report = reaper.run()
    finally:
        redis_client.config_set("maxmemory", 0)
    assert report.reclaimed == 3 and report.published == 6 and not report.publish_errors
    assert outbox_types(redis_client, "t", "lic") == []
    assert Counter(e["type"] for e in events_in(pubsub.pull())) == {
        "lease.acquired": 3,
        "lease.reclaimed": 3,
    }


def test_a_crash_wave_is_published_while_it_is_still_being_reclaimed(
    engine, configs, redis_client, pubsub, monkeypatch
):
    """4,000 leases expire at once: the run publishes reclaimed events while expired
    leases are still waiting to be reclaimed (the audit trail fills during the wave, not
    after it), and every event is still published exactly once."""
    seen: list[tuple[int, int]] = []  # (reclaimed events in the call, leases still expired)

    class Watching(Publisher):
        def publish(self, events):
            waiting = sum(redis_client.zcard(keys.deadlines_key(s)) for s in range(keys.SHARDS))
            reclaimed = sum('"lease.reclaimed"' in e for e in events)
            seen.append((reclaimed, waiting))
            return super().publish(events)

    for n in range(40):
        configs.add("t", f"lic{n}", seats=100, lease_seconds=1)
        for i in range(100):
            engine.acquire(SeatRequest("t", f"lic{n}", f"c{i}"))
    time.sleep(1.1)
    # Small reclaim batches on one thread: the wave takes long enough to watch (a wave of
    # 4,000 is otherwise reclaimed before the first message is gathered).
    monkeypatch.setattr(seatlease.events.reaper, "RECLAIM_BATCH", 5)
    report = Reaper(redis_client, Watching(), concurrency=1, budget_seconds=60).run()

    assert report.reclaimed == 4000 and report.outbox_backlog == 0
    assert report.published == 8000 and not report.publish_errors
    assert any(reclaimed and waiting for reclaimed, waiting in seen), seen
    events = events_in(pubsub.pull(wait=30))
    while len(events) < 8000:  # the emulator hands out at most 1,000 messages a pull
        more = events_in(pubsub.pull(wait=5))
        if not more:
            break
        events += more
    assert len(events) == len({e["event_id"] for e in events}) == 8000
    assert Counter(e["type"] for e in events) == {"lease.acquired": 4000, "lease.reclaimed": 4000}


def test_a_redis_failure_under_the_waves_drain_fails_the_run(engine, configs, redis_client, pubsub):
    """The drain that runs beside a wave's reclaims meets a Redis error: the run raises
    it (the reaper function then answers 503), as the drain after the reclaims would;
    the unpublished events stay in the outboxes for the next run."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    class Broken(Reaper):
        def drain(self, shards, deadline):
            if threading.current_thread() is not threading.main_thread():
                raise RedisConnectionError("connection reset (staged)")
            return super().drain(shards, deadline)

    for n in range(10):  # over several shards: a sweep reads at most 1,000 per shard
        configs.add("t", f"lic{n}", seats=300, lease_seconds=1)
        for i in range(250):
            engine.acquire(SeatRequest("t", f"lic{n}", f"c{i}"))
    time.sleep(1.1)
    with pytest.raises(RedisConnectionError, match="staged"):
        Broken(redis_client, Publisher(), concurrency=1, budget_seconds=60).run()
    report = Reaper(redis_client, Publisher(), budget_seconds=60).run()
    assert report.outbox_backlog == 0 and report.published == 5000
