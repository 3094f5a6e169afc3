"""Seat engine rules against a real redis-server AND a real three-node Redis Cluster
(every script is proven free of CROSSSLOT errors)."""

from __future__ import annotations

import time

import pytest

from seatlease.errors import (
    LeaseTooLong,
    LicenseNotFound,
    LicenseSuspended,
    NoSeatsAvailable,
    SessionExpired,
)
from seatlease.events import pubsub
from seatlease.seats import keys, redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest


def outbox_events(eng: SeatEngine, tenant: str, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of(tenant, license_id))
    return pubsub.outbox_events(eng.redis, stream)


def test_cluster_client_is_used_for_cluster_urls(redis_cluster):
    from redis.cluster import RedisCluster

    assert isinstance(redisconn.connect(redis_cluster.url), RedisCluster)


def test_keys_of_one_license_share_one_slot():
    from redis.crc import key_slot

    for i in range(200):
        k = keys.LicenseKeys.of("tenant", f"lic-{i}")
        every = [k.cfg, k.leases, k.sessions, k.clients, k.deadlines, k.outbox, k.denials]
        assert len({key_slot(x.encode()) for x in every}) == 1


def test_acquire_until_full_then_denied_with_retry_after(seat_engine, configs):
    configs.add("t", "lic", seats=2, lease_seconds=30)
    a = seat_engine.acquire(SeatRequest("t", "lic", "c1", metadata={"user": "ann", "host": "pc1"}))
    b = seat_engine.acquire(SeatRequest("t", "lic", "c2"))
    assert a.created and b.created and a.session_id != b.session_id
    assert (a.seats_used, b.seats_used, b.seats_total) == (1, 2, 2)
    assert a.lease_seconds == 30 and a.heartbeat_interval_seconds == 10
    with pytest.raises(NoSeatsAvailable) as denied:
        seat_engine.acquire(SeatRequest("t", "lic", "c3"))
    assert denied.value.seats_used == 2 and denied.value.seats_total == 2
    assert 29 <= denied.value.retry_after_seconds <= 30
    types = [e["type"] for e in outbox_events(seat_engine, "t", "lic")]
    assert types == ["lease.acquired", "lease.acquired"]  # denials are counters, not events
    denials = seat_engine.redis.hget(keys.denials_key(keys.shard_of("t", "lic")), "t/lic")
    assert denials == "1"


def test_reacquire_by_same_client_returns_same_lease_extended(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30)
    first = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    time.sleep(0.01)
    again = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    assert not again.created and again.session_id == first.session_id
    assert again.expires_at_ms > first.expires_at_ms
    assert again.seats_used == 1
    assert len(outbox_events(seat_engine, "t", "lic")) == 1


def test_each_lease_has_its_own_deadline(seat_engine, configs):
    """One live client must not keep a crashed client's seat (one EXPIRE on the whole set
    would: docs/design.md, "Every lease has its own deadline")."""
    configs.add("t", "lic", seats=2, lease_seconds=1)
    crashed = seat_engine.acquire(SeatRequest("t", "lic", "crashed"))
    alive = seat_engine.acquire(SeatRequest("t", "lic", "alive"))
    for _ in range(3):
        time.sleep(0.45)
        seat_engine.heartbeat("t", "lic", alive.session_id)
    newcomer = seat_engine.acquire(SeatRequest("t", "lic", "newcomer"))  # prunes the crashed lease
    assert newcomer.created and newcomer.seats_used == 2
    with pytest.raises(SessionExpired) as gone:
        seat_engine.heartbeat("t", "lic", crashed.session_id)
    assert gone.value.reason == "unknown"
    events = outbox_events(seat_engine, "t", "lic")
    reclaimed = [e for e in events if e["type"] == "lease.reclaimed"]
    assert [e["session_id"] for e in reclaimed] == [crashed.session_id]
    deadlines = seat_engine.redis.zrange(keys.deadlines_key(keys.shard_of("t", "lic")), 0, -1)
    assert f"t/lic|{crashed.session_id}" not in deadlines


def test_heartbeat_extends_and_reports_expired_then_unknown(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=1)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    renewal = seat_engine.heartbeat("t", "lic", lease.session_id)
    assert renewal.expires_at_ms >= lease.expires_at_ms and renewal.lease_seconds == 1
    time.sleep(1.1)
    with pytest.raises(SessionExpired) as expired:
        seat_engine.heartbeat("t", "lic", lease.session_id)
    assert expired.value.reason == "expired"
    with pytest.raises(SessionExpired) as unknown:
        seat_engine.heartbeat("t", "lic", lease.session_id)
    assert unknown.value.reason == "unknown"
    assert [e["type"] for e in outbox_events(seat_engine, "t", "lic")] == [
        "lease.acquired",
        "lease.reclaimed",
    ]


def test_release_is_idempotent_and_frees_the_seat(seat_engine, configs):
    configs.add("t", "lic", seats=1)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "c1", metadata={"user": "ann"}))
    first = seat_engine.release("t", "lic", lease.session_id)
    second = seat_engine.release("t", "lic", lease.session_id)
    assert (first.released, first.seats_used, first.seats_total) == (True, 0, 1)
    assert (second.released, second.seats_used) == (False, 0)
    assert seat_engine.acquire(SeatRequest("t", "lic", "c2")).created
    released = outbox_events(seat_engine, "t", "lic")[1]
    assert released["type"] == "lease.released" and released["metadata"] == {"user": "ann"}


def test_revoke_records_revoked_and_next_heartbeat_is_unknown(seat_engine, configs):
    configs.add("t", "lic", seats=1)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    assert seat_engine.release("t", "lic", lease.session_id, revoke=True).released
    with pytest.raises(SessionExpired):
        seat_engine.heartbeat("t", "lic", lease.session_id)
    assert outbox_events(seat_engine, "t", "lic")[-1]["type"] == "lease.revoked"


def test_overage_allows_a_percentage_over_the_seats(seat_engine, configs):
    configs.add("t", "lic", seats=4, overage_percent=50)
    leases = [seat_engine.acquire(SeatRequest("t", "lic", f"c{i}")) for i in range(6)]
    assert [lease.overage for lease in leases] == [False] * 4 + [True] * 2
    with pytest.raises(NoSeatsAvailable) as denied:
        seat_engine.acquire(SeatRequest("t", "lic", "c7"))
    assert denied.value.seats_total == 4 and denied.value.seats_used == 6


def test_unknown_license_suspended_and_lease_too_long(seat_engine, configs):
    with pytest.raises(LicenseNotFound):
        seat_engine.acquire(SeatRequest("t", "missing", "c1"))
    with pytest.raises(LicenseNotFound):
        seat_engine.heartbeat("t", "missing", "s1")
    with pytest.raises(LicenseNotFound):
        seat_engine.release("t", "missing", "s1")
    configs.add("t", "frozen", seats=3, suspended=True)
    with pytest.raises(LicenseSuspended):
        seat_engine.acquire(SeatRequest("t", "frozen", "c1"))
    configs.add("t", "short", seats=3, lease_seconds=60, max_lease_seconds=120)
    with pytest.raises(LeaseTooLong) as too_long:
        seat_engine.acquire(SeatRequest("t", "short", "c1", lease_seconds=121))
    assert too_long.value.max_lease_seconds == 120
    assert (
        seat_engine.acquire(SeatRequest("t", "short", "c1", lease_seconds=120)).lease_seconds == 120
    )


def test_license_not_found_is_cached_briefly_and_config_refreshes(seat_engine, configs):
    with pytest.raises(LicenseNotFound):
        seat_engine.acquire(SeatRequest("t", "later", "c1"))
    configs.add("t", "later", seats=1)
    with pytest.raises(LicenseNotFound):  # negative cache still holds
        seat_engine.acquire(SeatRequest("t", "later", "c1"))
    seat_engine.cache_config("t", "later", configs("t", "later"))  # what an admin change does
    assert seat_engine.acquire(SeatRequest("t", "later", "c1")).created
    configs.add("t", "later", seats=2)
    seat_engine.cache_config("t", "later", configs("t", "later"))
    assert seat_engine.acquire(SeatRequest("t", "later", "c2")).seats_total == 2


def test_tenants_are_isolated(seat_engine, configs):
    configs.add("a", "lic", seats=1)
    seat_engine.acquire(SeatRequest("a", "lic", "c1"))
    with pytest.raises(LicenseNotFound):
        seat_engine.acquire(SeatRequest("b", "lic", "c1"))


def test_time_comes_from_the_redis_server(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=100)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    node_time = seat_engine.redis.time()
    if isinstance(node_time, dict):  # cluster client: one answer per node
        node_time = next(iter(node_time.values()))
    server_ms = node_time[0] * 1000 + node_time[1] // 1000
    assert abs(lease.expires_at_ms - (server_ms + 100_000)) < 2000


def test_live_leases_lists_what_status_shows(seat_engine, configs):
    configs.add("t", "lic", seats=3)
    seat_engine.acquire(SeatRequest("t", "lic", "c1", metadata={"user": "ann", "host": "pc1"}))
    seat_engine.acquire(SeatRequest("t", "lic", "c2"))
    rows = sorted(seat_engine.live_leases("t", "lic"), key=lambda r: r["client_id"])
    assert [r["client_id"] for r in rows] == ["c1", "c2"]  # same-ms deadlines: any order
    assert rows[0]["metadata"] == {"user": "ann", "host": "pc1"}


def test_scripts_survive_script_flush(seat_engine, configs):
    """redis-py Script reloads on NOSCRIPT (a failover or restart empties the cache)."""
    configs.add("t", "lic", seats=2)
    seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    seat_engine.redis.script_flush()
    assert seat_engine.acquire(SeatRequest("t", "lic", "c2")).created


def test_server_made_ids_never_start_with_a_dash():
    """Session and request ids are typed after CLI options (``seatlease revoke --session
    ID``), where a leading "-" reads as an option: the old ids did so one time in 64."""
    from seatlease.seats.ids import new_request_id, new_session_id

    sessions = [new_session_id() for _ in range(5000)]
    requests = [new_request_id() for _ in range(5000)]
    assert not [i for i in sessions + requests if i.startswith("-")]
    assert {len(s) for s in sessions} == {24} and {len(r) for r in requests} == {16}
    assert len(set(sessions)) == 5000
    assert set("".join(sessions)) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    )
