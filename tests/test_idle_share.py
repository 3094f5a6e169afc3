"""Idle seats and shared seats (docs/design.md, "Idle seats" and "Shared seats"): the seat
rules against a real redis-server AND a real three-node Redis Cluster, the reaper's end of
an idle lease, and the share groups' counts under every way a lease ends."""

from __future__ import annotations

import time

import pytest

from seatlease.errors import NoSeatsAvailable, SessionExpired
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import SeatEngine, SeatRequest


def events(eng: SeatEngine, license_id: str = "lic") -> list[dict]:
    return pubsub.outbox_events(eng.redis, keys.outbox_key(keys.shard_of("t", license_id)))


def types(eng: SeatEngine, license_id: str = "lic") -> list[str]:
    return [e["type"] for e in events(eng, license_id)]


def reap(eng: SeatEngine, license_id: str = "lic") -> int:
    reaper = Reaper(eng.redis, publisher=None)  # type: ignore[arg-type]
    shard = keys.shard_of("t", license_id)
    candidates, _, _ = reaper.survey()
    return reaper.reclaim(shard, candidates[shard])


def expire_now(eng: SeatEngine, session_id: str, license_id: str = "lic") -> None:
    k = keys.LicenseKeys.of("t", license_id)
    past = eng.server_time_ms() - 1
    eng.redis.zadd(k.leases, {session_id: past}, xx=True)
    eng.redis.zadd(k.deadlines, {f"t/{license_id}|{session_id}": past}, xx=True)


def ask(eng: SeatEngine, client: str, user: str | None = None, host: str | None = None, **kw):
    return eng.acquire(SeatRequest("t", "lic", client, user=user, host=host, **kw))


def warn_passed(eng: SeatEngine, session_id: str, license_id: str = "lic") -> None:
    """The warned lease's reclaim time has come (what waiting one interval would do)."""
    k = keys.LicenseKeys.of("t", license_id)
    past = eng.server_time_ms() - 1
    eng.redis.zadd(k.idlers, {session_id: past}, xx=True)
    raw = eng.redis.hget(k.sessions, session_id)
    import json

    rec = json.loads(raw)
    rec["iw"] = past
    eng.redis.hset(k.sessions, session_id, json.dumps(rec))


# -- idle --------------------------------------------------------------------------------


def test_an_idle_lease_is_warned_one_interval_ahead_and_activity_cancels(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    lease = ask(seat_engine, "a")
    quiet = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=59)
    assert quiet.idle_reclaim_at_ms is None
    warned = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=60)
    assert warned.idle_reclaim_at_ms is not None
    # no earlier than one heartbeat interval (a third of the lease) after the warning
    assert warned.idle_reclaim_at_ms - warned.now_ms == 10_000
    again = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=75)
    assert again.idle_reclaim_at_ms == warned.idle_reclaim_at_ms  # the first warning holds
    row = seat_engine.live_leases("t", "lic")[0]
    assert row["idle_reclaim_at_ms"] == warned.idle_reclaim_at_ms
    back = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=0)
    assert back.idle_reclaim_at_ms is None
    busy = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=500, busy=True)
    assert busy.idle_reclaim_at_ms is None
    silent = seat_engine.heartbeat("t", "lic", lease.session_id)  # says nothing: active
    assert silent.idle_reclaim_at_ms is None
    assert types(seat_engine) == ["lease.acquired", "lease.idle", "lease.active"]
    idle = events(seat_engine)[1]
    assert idle["metadata"]["idle_seconds"] == 60
    assert idle["metadata"]["idle_reclaim_at"].endswith("Z")


def test_when_needed_keeps_the_idle_seat_until_someone_is_refused(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    idle = ask(seat_engine, "idle")
    seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=120)
    with pytest.raises(NoSeatsAvailable) as refused:  # warned, its time not come
        ask(seat_engine, "other")
    assert refused.value.retry_after_seconds <= 10
    warn_passed(seat_engine, idle.session_id)
    # nobody waits: the idle lease heartbeats on, keeping its seat
    kept = seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=200)
    assert kept.idle_reclaim_at_ms is not None
    assert reap(seat_engine) == 0
    taken = ask(seat_engine, "other")  # someone needs it: the idle lease goes, to this call
    assert taken.created and taken.seats_used == 1
    with pytest.raises(SessionExpired) as gone:
        seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=300)
    assert gone.value.reason == "idle"
    ended = [e for e in events(seat_engine) if e["type"] == "lease.reclaimed"]
    assert [(e["session_id"], e["metadata"]["reason"]) for e in ended] == [
        (idle.session_id, "idle")
    ]


def test_always_reclaims_at_the_warned_time_whoever_calls(seat_engine, configs):
    configs.add(
        "t", "lic", seats=1, lease_seconds=3, idle_timeout_seconds=60, idle_reclaim="always"
    )
    idle = ask(seat_engine, "idle")
    warned = seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=61)
    assert warned.expires_at_ms == warned.idle_reclaim_at_ms  # its deadline is cut to it
    time.sleep((warned.idle_reclaim_at_ms - seat_engine.server_time_ms()) / 1000 + 0.05)
    assert reap(seat_engine) == 1
    reclaimed = [e for e in events(seat_engine) if e["type"] == "lease.reclaimed"]
    assert reclaimed[0]["metadata"]["reason"] == "idle"
    with pytest.raises(SessionExpired) as gone:
        seat_engine.heartbeat("t", "lic", idle.session_id)
    assert gone.value.reason == "idle"


def test_a_busy_lease_and_a_borrowed_lease_are_never_reclaimed(seat_engine, configs):
    configs.add(
        "t", "lic", seats=2, lease_seconds=30, idle_timeout_seconds=60, max_borrow_seconds=3600
    )
    busy = ask(seat_engine, "busy")
    borrowed = ask(seat_engine, "laptop", borrow_seconds=600)
    for _ in range(3):
        r = seat_engine.heartbeat("t", "lic", busy.session_id, idle_seconds=10_000, busy=True)
        assert r.idle_reclaim_at_ms is None
        b = seat_engine.heartbeat("t", "lic", borrowed.session_id, idle_seconds=10_000)
        assert b.idle_reclaim_at_ms is None
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "third")
    assert {r["session_id"] for r in seat_engine.live_leases("t", "lic")} == {
        busy.session_id,
        borrowed.session_id,
    }


def test_a_token_never_brings_back_an_idle_reclaimed_lease(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    idle = ask(seat_engine, "idle")
    seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=120)
    warn_passed(seat_engine, idle.session_id)
    ask(seat_engine, "other")
    k = keys.LicenseKeys.of("t", "lic")
    assert seat_engine.redis.zscore(k.ended, idle.session_id) % 1 == 0.25


# -- sharing ---------------------------------------------------------------------------


def test_one_user_on_two_machines_counts_once_and_a_release_keeps_the_seat(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, share="user")
    a1 = ask(seat_engine, "ann-1", user="ann", host="h1")
    a2 = ask(seat_engine, "ann-2", user="ann", host="h2")
    assert (a1.created, a2.created) == (True, True)
    assert (a1.seats_used, a2.seats_used) == (1, 1)
    assert (a1.shared_sessions, a2.shared_sessions) == (1, 2)
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "bob-1", user="bob")
    seat_engine.release("t", "lic", a1.session_id)
    with pytest.raises(NoSeatsAvailable):  # ann's other session keeps the seat
        ask(seat_engine, "bob-1", user="bob")
    rows = seat_engine.live_leases("t", "lic")
    assert [(r["shared"], r["shared_sessions"]) for r in rows] == [("ann", 1)]
    expire_now(seat_engine, a2.session_id)
    assert reap(seat_engine) == 1
    assert ask(seat_engine, "bob-1", user="bob").created
    acquired = [e for e in events(seat_engine) if e["type"] == "lease.acquired"]
    assert acquired[1]["metadata"]["shared_by"] == "user"
    assert acquired[1]["metadata"]["shared_sessions"] == 2


def test_share_limit_and_host_and_user_host_groups(seat_engine, configs):
    configs.add("t", "lic", seats=2, lease_seconds=30, share="user_host", share_limit=2)
    same = [ask(seat_engine, f"c{i}", user="ann", host="h1") for i in range(4)]
    assert [s.seats_used for s in same] == [1, 1, 2, 2]  # two a seat
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "c5", user="ann", host="h1")
    with pytest.raises(NoSeatsAvailable):  # ann on another host is another group
        ask(seat_engine, "c6", user="ann", host="h2")
    rows = seat_engine.live_leases("t", "lic")
    assert {r["shared"] for r in rows} == {"ann@h1"}


def test_weighted_leases_borrows_and_callers_without_a_user_never_share(seat_engine, configs):
    configs.add("t", "lic", seats=3, lease_seconds=30, share="user", max_borrow_seconds=3600)
    ask(seat_engine, "a", user="ann")
    heavy = ask(seat_engine, "b", user="ann", seats=2)
    assert heavy.shared_sessions is None and heavy.seats_used == 3
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "c", user="ann", borrow_seconds=600)
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "d")
    assert ask(seat_engine, "e", user="ann").seats_used == 3  # joins ann's seat


def test_turning_sharing_off_keeps_groups_counted_once_until_they_end(seat_engine, configs):
    configs.add("t", "lic", seats=2, lease_seconds=30, share="user")
    first = ask(seat_engine, "a", user="ann")
    ask(seat_engine, "b", user="ann")
    configs.add("t", "lic", seats=2, lease_seconds=30)
    seat_engine.cache_config("t", "lic", configs("t", "lic"))
    third = ask(seat_engine, "c", user="ann")  # no longer joins: a seat of its own
    assert third.shared_sessions is None and third.seats_used == 2
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "d", user="carol")
    seat_engine.release("t", "lic", first.session_id)
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "d", user="carol")
