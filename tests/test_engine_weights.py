"""Weighted seats in the seat scripts (docs/design.md, "Weighted seats"): a lease that
counts as N seats against the cap, overage, per-user limits, reservations and the wait
queue, on a private redis-server and on the Redis Cluster. Nothing is mocked: leases
expire by waiting or by the reaper's own script."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from seatlease.errors import (
    InvalidRequest,
    NoSeatsAvailable,
    SeatsMismatch,
    SessionExpired,
    UserLimitReached,
)
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

T = "t"


def events(eng: SeatEngine, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of(T, license_id))
    return [e for e in pubsub.outbox_events(eng.redis, stream) if e["license_id"] == license_id]


def acquire(eng: SeatEngine, license_id: str, client: str, seats: int | None = None, **kw):
    return eng.acquire(SeatRequest(T, license_id, client, seats=seats, **kw))


def extra(eng: SeatEngine, license_id: str) -> int:
    """How the license counts its weighted leases (lua/_lib.lua, add_weight): their seats
    past the first (``wsum``)."""
    return int(eng.redis.get(LicenseKeys.of(T, license_id).wsum) or 0)


# The seats in use, counted from the ground truth (every live lease's record and its
# weight), read atomically: the probe the engine's own bookkeeping is held against.
TRUE_SEATS_IN_USE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now),
    '+inf')) do
  local raw = redis.call('HGET', KEYS[2], sid)
  n = n + ((raw and cjson.decode(raw).w) or 1)
end
return n
"""


def add_policy(configs, license_id: str, seats: int, **policy) -> None:
    configs.add(
        T, license_id, seats=seats, lease_seconds=60, policy=LicensePolicy(**policy).redis_form()
    )


def test_a_weighted_lease_counts_its_seats_against_the_cap(seat_engine, configs):
    configs.add(T, "render", seats=10, lease_seconds=60)
    a = acquire(seat_engine, "render", "node-a", 4)
    assert (a.seats, a.seats_used) == (4, 4)
    b = acquire(seat_engine, "render", "node-b", 4)
    assert b.seats_used == 8
    c = acquire(seat_engine, "render", "desk-c")  # a plain lease is one seat
    assert (c.seats, c.seats_used) == (1, 9)
    with pytest.raises(NoSeatsAvailable) as full:
        acquire(seat_engine, "render", "node-d", 2)  # one seat free, two asked
    assert (full.value.seats_used, full.value.seats_requested) == (9, 2)
    assert acquire(seat_engine, "render", "desk-e").seats_used == 10  # the last one fits
    # the read side agrees, lease by lease
    rows = {r["client_id"]: r["seats"] for r in seat_engine.live_leases(T, "render")}
    assert rows == {"node-a": 4, "node-b": 4, "desk-c": 1, "desk-e": 1}
    # a release frees all of a lease's seats
    released = seat_engine.release(T, "render", a.session_id)
    assert released.seats_used == 6
    assert acquire(seat_engine, "render", "node-d", 4).seats_used == 10
    assert extra(seat_engine, "render") == 3 + 3  # node-b's and node-d's other seats


def test_overage_counts_weights_too(seat_engine, configs):
    configs.add(T, "over", seats=4, lease_seconds=60, overage_percent=50)  # limit 6
    assert acquire(seat_engine, "over", "a", 4).seats_used == 4
    lease = acquire(seat_engine, "over", "b", 2)
    assert lease.seats_used == 6 and lease.overage
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "over", "c")


def test_seats_over_the_license_is_a_400_naming_the_field_and_stores_nothing(seat_engine, configs):
    configs.add(T, "small", seats=3, lease_seconds=60)
    with pytest.raises(InvalidRequest) as bad:
        acquire(seat_engine, "small", "c1", 4)
    assert bad.value.fields["details"] == [
        {"field": "seats", "problem": "may be at most 3 (the license's seats)"}
    ]
    assert seat_engine.live_leases(T, "small") == [] and events(seat_engine, "small") == []
    assert acquire(seat_engine, "small", "c1", 3).seats_used == 3  # all of them is fine


def test_a_renewal_keeps_the_weight_and_another_weight_is_refused(seat_engine, configs):
    configs.add(T, "lic", seats=8, lease_seconds=60)
    first = acquire(seat_engine, "lic", "node", 4)
    again = acquire(seat_engine, "lic", "node")  # seats not said: the lease's own
    assert (again.created, again.session_id, again.seats, again.seats_used) == (
        False,
        first.session_id,
        4,
        4,
    )
    same = acquire(seat_engine, "lic", "node", 4)
    assert not same.created and same.seats == 4
    with pytest.raises(SeatsMismatch) as other:
        acquire(seat_engine, "lic", "node", 2)
    assert (other.value.held_seats, other.value.seats) == (4, 2)
    with pytest.raises(SeatsMismatch):  # a plain lease keeps its weight of one too
        acquire(seat_engine, "lic", "desk")
        acquire(seat_engine, "lic", "desk", 2)
    # the refusal changed nothing
    rows = {r["client_id"]: r["seats"] for r in seat_engine.live_leases(T, "lic")}
    assert rows == {"node": 4, "desk": 1}
    renewal = seat_engine.heartbeat(T, "lic", first.session_id)
    assert renewal.seats == 4


def test_a_weighted_lease_expires_whole_by_acquire_and_by_the_reaper(seat_engine, configs):
    configs.add(T, "exp", seats=6, lease_seconds=1)
    a = acquire(seat_engine, "exp", "a", 5)
    time.sleep(1.1)
    # acquire's own prune reclaims it: all five seats come back at once
    b = acquire(seat_engine, "exp", "b", 6)
    assert b.seats_used == 6 and extra(seat_engine, "exp") == 5
    with pytest.raises(SessionExpired):
        seat_engine.heartbeat(T, "exp", a.session_id)
    time.sleep(1.1)
    # the reaper's script (its reclaim step, without draining the outbox to Pub/Sub)
    shard = keys.shard_of(T, "exp")
    members = seat_engine.redis.zrange(keys.deadlines_key(shard), 0, -1)
    assert Reaper(seat_engine.redis, publisher=None).reclaim(shard, members) == 1
    assert extra(seat_engine, "exp") == 0 and seat_engine.live_leases(T, "exp") == []
    ended = [e for e in events(seat_engine, "exp") if e["type"] == "lease.reclaimed"]
    assert [(e["seats"], e["seats_used"]) for e in ended] == [(5, 0), (6, 0)]


def test_every_lease_event_carries_its_weight_and_a_weighted_seats_used(seat_engine, configs):
    configs.add(T, "ev", seats=5, lease_seconds=60, linger_seconds=30, max_borrow_seconds=600)
    a = acquire(seat_engine, "ev", "a", 3)
    acquire(seat_engine, "ev", "b", 2, borrow_seconds=60)
    seat_engine.release(T, "ev", a.session_id)  # lingers: its three seats stay held
    acquire(seat_engine, "ev", "a")  # taken back, still three seats
    seat_engine.release(T, "ev", a.session_id, revoke=True)
    got = [(e["type"], e["seats"], e["seats_used"]) for e in events(seat_engine, "ev")]
    assert got == [
        ("lease.acquired", 3, 3),
        ("lease.borrowed", 2, 5),
        ("lease.lingering", 3, 5),
        ("lease.renewed", 3, 5),
        ("lease.revoked", 3, 2),
    ]


def test_a_weighted_lease_with_terms_and_its_repeat(seat_engine, configs):
    from datetime import UTC, datetime, timedelta

    end = datetime.fromtimestamp(seat_engine.server_time_ms() / 1000, UTC) + timedelta(days=30)
    configs.add(T, "pro", seats=8, lease_seconds=60, expires_at=end, entitlements=("pro",))
    first = acquire(seat_engine, "pro", "n1", 4, entitlements=("pro",), request_id="r-1")
    assert first.seats == 4 and first.terms.entitlements == ("pro",)
    # a repeat of the request is answered from the stored (packed) reply, weight included
    assert acquire(seat_engine, "pro", "n1", 4, entitlements=("pro",), request_id="r-1") == first
    renewal = seat_engine.heartbeat(T, "pro", first.session_id, request_id="h-1")
    assert renewal.seats == 4 and renewal.terms.entitlements == ("pro",)
    assert seat_engine.heartbeat(T, "pro", first.session_id, request_id="h-1") == renewal


def test_the_per_user_limit_counts_seats(seat_engine, configs):
    add_policy(configs, "pu", seats=10, max_per_user=4)
    acquire(seat_engine, "pu", "a1", 3, user="ann")
    with pytest.raises(UserLimitReached) as over:
        acquire(seat_engine, "pu", "a2", 2, user="ann")
    assert (over.value.max_per_user, over.value.sessions, over.value.seats_requested) == (4, 3, 2)
    assert acquire(seat_engine, "pu", "a2", 1, user="ann").seats_used == 4
    with pytest.raises(UserLimitReached):
        acquire(seat_engine, "pu", "a3", user="ann")
    assert acquire(seat_engine, "pu", "b1", 4, user="bob").seats_used == 8


def test_a_member_takes_its_reservation_then_unreserved_seats(seat_engine, configs):
    # 6 seats, 2 reserved for eng; ann is in eng
    add_policy(configs, "rs", seats=6, groups={"eng": ["ann"]}, reserve={"eng": 2})
    with pytest.raises(NoSeatsAvailable) as reserved:
        acquire(seat_engine, "rs", "o1", 5, user="olga")  # 4 unreserved: not 5
    assert reserved.value.seats_reserved == 2
    assert acquire(seat_engine, "rs", "o1", 3, user="olga").seats_used == 3
    # ann's 3: both reserved seats and the last unreserved one
    assert acquire(seat_engine, "rs", "e1", 3, user="ann").seats_used == 6
    users = seat_engine.redis.hgetall(LicenseKeys.of(T, "rs").users)
    assert users == {"#g:eng": "2"}
    rec = json.loads(
        seat_engine.redis.hget(
            LicenseKeys.of(T, "rs").sessions, seat_engine.live_leases(T, "rs")[1]["session_id"]
        )
    )
    assert rec.get("cg") in (None, 2)
    # her release gives the group its two seats back
    [mine] = [r for r in seat_engine.live_leases(T, "rs") if r["client_id"] == "e1"]
    seat_engine.release(T, "rs", mine["session_id"])
    assert seat_engine.redis.hgetall(LicenseKeys.of(T, "rs").users) == {}
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "rs", "o2", 2, user="olga")  # 1 unreserved + 2 reserved free


def test_more_seats_than_a_user_can_ever_take_get_no_place_in_line(seat_engine, configs):
    add_policy(configs, "far", seats=4, groups={"eng": ["ann"]}, reserve={"eng": 2}, queue=True)
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "far", "o1", 3, user="olga", queue=True)  # 2 unreserved, ever
    assert seat_engine.waiting(T, "far") == []


def test_a_head_needing_n_gathers_seats_and_nobody_behind_takes_them(seat_engine, configs):
    add_policy(configs, "q", seats=4, queue=True, queue_ticket_seconds=60, queue_hold_seconds=30)
    held = [acquire(seat_engine, "q", f"h{i}") for i in range(4)]
    head = acquire(seat_engine, "q", "render", 3, queue=True)
    behind = acquire(seat_engine, "q", "desk", 1, queue=True)
    assert isinstance(head, QueuePlace) and head.seats == 3 and head.position == 1
    assert isinstance(behind, QueuePlace) and behind.position == 2
    assert [w["seats"] for w in seat_engine.waiting(T, "q")] == [3, 1]
    # two seats free: fewer than the head needs; they are held for it, not given behind
    seat_engine.release(T, "q", held[0].session_id)
    seat_engine.release(T, "q", held[1].session_id)
    again = acquire(seat_engine, "q", "desk", 1, queue=True, ticket=behind.ticket)
    assert isinstance(again, QueuePlace) and again.position == 2
    with pytest.raises(NoSeatsAvailable) as stranger:
        acquire(seat_engine, "q", "walk-in")
    assert stranger.value.seats_held == 2
    # the third seat frees: the head is served with its three
    seat_engine.release(T, "q", held[2].session_id)
    assert [w["held_since_ms"] is not None for w in seat_engine.waiting(T, "q")] == [True, False]
    lease = acquire(seat_engine, "q", "render", 3, queue=True, ticket=head.ticket)
    assert isinstance(lease, Lease) and lease.created and (lease.seats, lease.seats_used) == (3, 4)
    granted = [e for e in events(seat_engine, "q") if e["type"] == "queue.granted"]
    assert [(e["client_id"], e["seats"]) for e in granted] == [("render", 3)]
    joined = [e.get("seats") for e in events(seat_engine, "q") if e["type"] == "queue.joined"]
    assert joined == [3, None]  # one seat: no field, as in the answers


def test_a_gathering_head_that_lapses_frees_its_seats_for_those_behind(seat_engine, configs):
    add_policy(configs, "lapse", seats=2, queue=True, queue_ticket_seconds=1)
    a = acquire(seat_engine, "lapse", "a")
    acquire(seat_engine, "lapse", "b")
    head = acquire(seat_engine, "lapse", "render", 2, queue=True)
    assert isinstance(head, QueuePlace)
    seat_engine.release(T, "lapse", a.session_id)
    time.sleep(1.1)  # the head stops renewing: its ticket ends, and with it the gathering
    lease = acquire(seat_engine, "lapse", "walk-in")
    assert isinstance(lease, Lease) and lease.seats_used == 2
    left = [e for e in events(seat_engine, "lapse") if e["type"] == "queue.left"]
    assert [(e["client_id"], e["seats"]) for e in left] == [("render", 2)]


def test_the_api_maximum_weight_on_a_license_that_large(seat_engine, configs):
    """100,000 seats in one lease: acquire, heartbeat and release count its 99,999 other
    seats in one sum (O(1), whatever the weight)."""
    configs.add(T, "huge", seats=100_000, lease_seconds=60)
    lease = acquire(seat_engine, "huge", "farm", 100_000)
    assert lease.seats_used == 100_000 and extra(seat_engine, "huge") == 99_999
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "huge", "desk")
    assert seat_engine.heartbeat(T, "huge", lease.session_id).seats == 100_000
    assert extra(seat_engine, "huge") == 99_999  # a heartbeat moves no seat of it
    assert seat_engine.release(T, "huge", lease.session_id).seats_used == 0
    assert extra(seat_engine, "huge") == 0


@pytest.mark.parametrize("policy", [False, True])
def test_fifty_threads_with_mixed_weights_never_exceed_the_cap(seat_engine, configs, policy):
    """50 threads acquire leases of 1 to 4 seats, heartbeat and release them, while some
    expire: the weighted seats in use, read atomically after every step, never pass the
    limit, and at the end every count agrees with the live leases."""
    if policy:
        add_policy(configs, "mix", seats=12, max_per_user=6, groups={"g": ["u0"]}, reserve={"g": 3})
    else:
        configs.add(T, "mix", seats=12, lease_seconds=2, overage_percent=25)  # limit 15
    limit = 12 if policy else 15
    lk = LicenseKeys.of(T, "mix")
    probe = seat_engine.redis.register_script(TRUE_SEATS_IN_USE)
    seen, errors = [], []
    barrier = threading.Barrier(50)

    def worker(i: int) -> None:
        rng = random.Random(i)
        mine: list[str] = []
        barrier.wait()
        try:
            for step in range(30):
                roll = rng.random()
                if roll < 0.55 or not mine:
                    try:
                        lease = acquire(
                            seat_engine,
                            "mix",
                            f"c{i}-{step}",
                            rng.choice([None, 1, 2, 3, 4]),
                            user=f"u{i % 5}" if policy else None,
                            lease_seconds=rng.choice([1, 2]) if not policy else None,
                        )
                        mine.append(lease.session_id)
                        seen.append(lease.seats_used)
                    except (NoSeatsAvailable, UserLimitReached):
                        pass
                elif roll < 0.8:
                    try:
                        seat_engine.heartbeat(T, "mix", rng.choice(mine))
                    except SessionExpired:
                        pass
                else:
                    seat_engine.release(T, "mix", mine.pop(rng.randrange(len(mine))))
                seen.append(int(probe(keys=[lk.leases, lk.sessions])))
        except Exception as exc:  # reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert max(seen) <= limit and max(seen) >= limit - 4  # it did get full
    rows = seat_engine.live_leases(T, "mix")
    assert sum(r["seats"] for r in rows) == int(probe(keys=[lk.leases, lk.sessions])) <= limit
    if policy:  # the policy's counts agree with the leases
        counts = seat_engine.redis.hgetall(lk.users)
        per_user: dict[str, int] = {}
        for r in rows:
            user = r["metadata"]["user"]
            per_user[user] = per_user.get(user, 0) + r["seats"]
        assert {k[3:]: int(v) for k, v in counts.items() if k.startswith("#u:")} == per_user
        assert all(n <= 6 for n in per_user.values())
