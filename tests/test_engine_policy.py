"""License policy in the seat engine (acquire.lua with _policy.lua), against a real
redis-server and a real Redis Cluster: per-user limits, reserved seats, deny lists, the
fair wait queue and its events."""

from __future__ import annotations

import time

import pytest

from seatlease.errors import InvalidRequest, NoSeatsAvailable, UserDenied, UserLimitReached
from seatlease.events import pubsub
from seatlease.seats import keys
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.policy import LicensePolicy


def events(eng: SeatEngine, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of("t", license_id))
    return [e for e in pubsub.outbox_events(eng.redis, stream) if e["license_id"] == license_id]


def add(configs, license_id: str, seats: int, **policy) -> None:
    configs.add(
        "t", license_id, seats=seats, lease_seconds=60, policy=LicensePolicy(**policy).redis_form()
    )


def acquire(eng: SeatEngine, license_id: str, client: str, user: str | None = None, **kw):
    return eng.acquire(SeatRequest("t", license_id, client, user=user, **kw))


def test_per_user_limit_names_the_limit_and_the_count(seat_engine, configs):
    add(configs, "lic", seats=5, max_per_user=2)
    acquire(seat_engine, "lic", "a1", "ann")
    acquire(seat_engine, "lic", "a2", "ann")
    with pytest.raises(UserLimitReached) as over:
        acquire(seat_engine, "lic", "a3", "ann")
    assert (over.value.max_per_user, over.value.sessions) == (2, 2)
    assert acquire(seat_engine, "lic", "b1", "bob").created  # another user is not limited
    # the same client again is its lease, not a new seat
    again = acquire(seat_engine, "lic", "a1", "ann")
    assert isinstance(again, Lease) and not again.created
    # a released lease no longer counts
    first = acquire(seat_engine, "lic", "a2", "ann")
    seat_engine.release("t", "lic", first.session_id)
    assert acquire(seat_engine, "lic", "a3", "ann").created


def test_user_and_host_reach_the_lease_metadata_and_events(seat_engine, configs):
    add(configs, "lic", seats=2, max_per_user=1)
    lease = seat_engine.acquire(
        SeatRequest("t", "lic", "c1", metadata={"user": "spoof", "x": 1}, user="ann", host="pc-7")
    )
    [live] = seat_engine.live_leases("t", "lic")
    assert live["session_id"] == lease.session_id
    assert live["metadata"] == {"user": "ann", "x": 1, "host": "pc-7"}
    [event] = events(seat_engine, "lic")
    assert event["metadata"]["user"] == "ann" and event["metadata"]["host"] == "pc-7"


def test_policy_needs_a_user_and_denies_listed_users(seat_engine, configs):
    add(configs, "lic", seats=2, deny_users=["mallory"])
    with pytest.raises(InvalidRequest) as missing:
        acquire(seat_engine, "lic", "c1")
    assert missing.value.fields["details"][0]["field"] == "user"
    with pytest.raises(UserDenied):
        acquire(seat_engine, "lic", "c1", "mallory")
    assert acquire(seat_engine, "lic", "c1", "ann").created
    assert events(seat_engine, "lic")[-1]["type"] == "lease.acquired"


def test_reserved_seats_go_to_members_only_with_a_true_retry_after(seat_engine, configs):
    add(configs, "lic", seats=3, groups={"eng": ["ann", "bob"]}, reserve={"eng": 2})
    outsider = acquire(seat_engine, "lic", "o1", "olga", lease_seconds=30)
    assert outsider.created
    # two seats free, both reserved for eng: olga's colleague is refused
    with pytest.raises(NoSeatsAvailable) as denied:
        acquire(seat_engine, "lic", "o2", "oscar")
    assert denied.value.seats_used == 1
    # true for oscar: only olga's seat (30 s) can become his, not a member's (60 s)
    assert 29 <= denied.value.retry_after_seconds <= 30
    assert acquire(seat_engine, "lic", "e1", "ann").created
    assert acquire(seat_engine, "lic", "e2", "bob").created
    # the license is full now; a member leaving frees a reserved seat, still not oscar's
    with pytest.raises(NoSeatsAvailable) as full:
        acquire(seat_engine, "lic", "o2", "oscar")
    assert 29 <= full.value.retry_after_seconds <= 30


def test_a_member_takes_unreserved_seats_once_its_reservation_is_used(seat_engine, configs):
    add(configs, "lic", seats=3, groups={"eng": ["ann"]}, reserve={"eng": 1})
    assert acquire(seat_engine, "lic", "e1", "ann").created  # the reserved seat
    assert acquire(seat_engine, "lic", "e2", "ann").created  # an unreserved one
    assert acquire(seat_engine, "lic", "o1", "olga").created  # the last unreserved one
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "lic", "e3", "ann")


def test_queue_answers_a_place_renews_it_and_grants_in_order(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True)
    holder = acquire(seat_engine, "lic", "h")
    first = acquire(seat_engine, "lic", "q1", queue=True)
    second = acquire(seat_engine, "lic", "q2", queue=True)
    assert isinstance(first, QueuePlace) and isinstance(second, QueuePlace)
    assert (first.position, second.position) == (1, 2)
    assert first.ticket != second.ticket
    assert 1 <= first.retry_after_seconds <= 10  # a third of the 30 s hold
    again = acquire(seat_engine, "lic", "q1", queue=True, ticket=first.ticket)
    assert isinstance(again, QueuePlace) and again.ticket == first.ticket
    assert again.position == 1
    # without queue: a plain 409, as today
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "lic", "x")
    seat_engine.release("t", "lic", holder.session_id)
    # the freed seat is held for the head: a newcomer and the second in line are refused
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "lic", "x")
    behind = acquire(seat_engine, "lic", "q2", queue=True, ticket=second.ticket)
    assert isinstance(behind, QueuePlace) and behind.position == 2
    granted = acquire(seat_engine, "lic", "q1", queue=True, ticket=first.ticket)
    assert isinstance(granted, Lease) and granted.created
    types = [e["type"] for e in events(seat_engine, "lic")]
    assert types == [
        "lease.acquired",
        "queue.joined",
        "queue.joined",
        "lease.released",
        "queue.granted",
        "lease.acquired",
    ]
    grant = events(seat_engine, "lic")[4]
    assert grant["client_id"] == "q1" and grant["session_id"] == granted.session_id
    assert grant["metadata"]["queued_ms"] >= 0
    place = acquire(seat_engine, "lic", "q2", queue=True, ticket=second.ticket)
    assert isinstance(place, QueuePlace) and place.position == 1


def test_queue_is_off_unless_the_license_has_it(seat_engine, configs):
    add(configs, "lic", seats=1, max_per_user=5)
    acquire(seat_engine, "lic", "h", "ann")
    with pytest.raises(NoSeatsAvailable):
        acquire(seat_engine, "lic", "q1", "bob", queue=True)


def test_a_head_that_may_not_take_the_seat_does_not_block_one_that_may(seat_engine, configs):
    add(configs, "lic", seats=2, groups={"eng": ["ann", "bob"]}, reserve={"eng": 1}, queue=True)
    acquire(seat_engine, "lic", "o1", "olga")  # the unreserved seat
    ann = acquire(seat_engine, "lic", "e1", "ann")  # the reserved one
    oscar = acquire(seat_engine, "lic", "o2", "oscar", queue=True)
    bob = acquire(seat_engine, "lic", "e2", "bob", queue=True)
    assert (oscar.position, bob.position) == (1, 2)
    seat_engine.release("t", "lic", ann.session_id)  # frees a seat reserved for eng
    still = acquire(seat_engine, "lic", "o2", "oscar", queue=True, ticket=oscar.ticket)
    assert isinstance(still, QueuePlace) and still.position == 1
    served = acquire(seat_engine, "lic", "e2", "bob", queue=True, ticket=bob.ticket)
    assert isinstance(served, Lease) and served.created


def test_a_user_at_the_limit_is_refused_not_queued(seat_engine, configs):
    add(configs, "lic", seats=1, max_per_user=1, queue=True)
    acquire(seat_engine, "lic", "a1", "ann")
    with pytest.raises(UserLimitReached):
        acquire(seat_engine, "lic", "a2", "ann", queue=True)


def test_an_abandoned_ticket_holds_a_freed_seat_no_longer_than_the_hold(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, queue_hold_seconds=1, queue_ticket_seconds=60)
    holder = acquire(seat_engine, "lic", "h")
    abandoned = acquire(seat_engine, "lic", "gone", queue=True)
    assert isinstance(abandoned, QueuePlace)
    seat_engine.release("t", "lic", holder.session_id)
    freed = time.monotonic()
    while True:
        try:
            lease = acquire(seat_engine, "lic", "other")
            break
        except NoSeatsAvailable:
            time.sleep(0.05)
    waited = time.monotonic() - freed
    # held for the 1 s hold (from this client's first try), then free: the slack above
    # it is this loop's polling on a busy machine
    assert lease.created and 0.9 <= waited <= 2.0
    left = [e for e in events(seat_engine, "lic") if e["type"] == "queue.left"]
    assert left[0]["client_id"] == "gone" and left[0]["metadata"]["reason"] == "hold_expired"


def test_a_ticket_not_renewed_drops_out(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, queue_ticket_seconds=2)
    acquire(seat_engine, "lic", "h")
    acquire(seat_engine, "lic", "q1", queue=True)
    second = acquire(seat_engine, "lic", "q2", queue=True)
    assert isinstance(second, QueuePlace) and second.position == 2
    time.sleep(1.0)
    acquire(seat_engine, "lic", "q2", queue=True, ticket=second.ticket)  # q2: 2 s more
    time.sleep(1.3)  # q1's 2 s are over
    renewed = acquire(seat_engine, "lic", "q2", queue=True, ticket=second.ticket)
    assert isinstance(renewed, QueuePlace) and renewed.position == 1
    left = [e for e in events(seat_engine, "lic") if e["type"] == "queue.left"]
    assert [e["client_id"] for e in left] == ["q1"]
    assert left[0]["metadata"]["reason"] == "ticket_expired"


def test_a_license_without_policy_caches_no_policy_field(seat_engine, configs):
    configs.add("t", "plain", seats=1)
    seat_engine.acquire(SeatRequest("t", "plain", "c1", user="ann"))
    cfg = keys.LicenseKeys.of("t", "plain")
    assert seat_engine.redis.hget(cfg.cfg, "policy") is None
    assert not seat_engine.redis.exists(cfg.users)


def test_turning_the_queue_off_drops_its_tickets(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True)
    acquire(seat_engine, "lic", "h")
    assert isinstance(acquire(seat_engine, "lic", "q1", queue=True), QueuePlace)
    assert [t["client_id"] for t in seat_engine.waiting("t", "lic")] == ["q1"]
    config = configs.add("t", "lic", seats=1, lease_seconds=60)  # policy cleared
    seat_engine.cache_config("t", "lic", config)
    assert seat_engine.waiting("t", "lic") == []
    with pytest.raises(NoSeatsAvailable):  # "queue": true on a license without a queue
        acquire(seat_engine, "lic", "q1", queue=True)
