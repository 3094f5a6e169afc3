"""The seat rules' promises at their edges (issue 38), on a real redis-server whose clock
the tests move (tests/procs.py, ``start_shifted_redis``): a term is kept by the deadlines
themselves, whether or not a client calls again; a queue poll never ends in a script
error; a lingering lease is its client's to take back with another weight; a borrowed
seat stays on its machine. Each test failed on the scripts before these rules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from seatlease.errors import (
    LicenseExpired,
    LicenseNotStarted,
    MachineMismatch,
    NoSeatsAvailable,
)
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import Lease, QueuePlace, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

T = "t"
MACHINE_A = "a" * 64
MACHINE_B = "b" * 64


def moment(timeline, seconds: float = 0) -> datetime:
    """The Redis clock's now, plus ``seconds``."""
    return datetime.fromtimestamp(timeline.now_ms() / 1000, UTC) + timedelta(seconds=seconds)


def events(timeline, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of(T, license_id))
    found = pubsub.outbox_events(timeline.redis, stream)
    return [e for e in found if e.get("license_id") == license_id]


def reap(timeline, license_id: str) -> int:
    """The reaper's reclaim step for the license's shard, as a run does it."""
    shard = keys.shard_of(T, license_id)
    members = timeline.redis.zrangebyscore(keys.deadlines_key(shard), "-inf", timeline.now_ms())
    return Reaper(timeline.redis, publisher=None).reclaim(shard, members)


def deadline(timeline, license_id: str, session_id: str) -> int:
    return int(timeline.redis.zscore(LicenseKeys.of(T, license_id).leases, session_id))


def set_config(timeline, configs, license_id: str, **changes):
    """An operator's change: stored (the config table) and written to the cache at once."""
    config = replace(configs(T, license_id), **changes)
    configs.configs[(T, license_id)] = config
    timeline.engine.cache_config(T, license_id, config)
    return config


def acquire(timeline, license_id: str, client: str, **kw):
    return timeline.engine.acquire(SeatRequest(T, license_id, client, **kw))


# -- nothing outlives a license's end ---------------------------------------------------


def test_a_linger_is_cut_at_the_licenses_end(timeline, configs) -> None:
    """Item 1: released 4 s before the end, with an hour of linger, the seat lingered (and
    counted) for the hour."""
    end = moment(timeline, 10)
    configs.add(T, "lic", seats=2, lease_seconds=60, linger_seconds=3600, expires_at=end)
    lease = acquire(timeline, "lic", "ws-1")
    timeline.advance(6)
    released = timeline.engine.release(T, "lic", lease.session_id)
    assert released.lingering
    fin = configs(T, "lic").ends_at_ms
    assert deadline(timeline, "lic", lease.session_id) == fin
    timeline.advance(5)  # past the end
    assert timeline.engine.live_leases(T, "lic") == []
    assert reap(timeline, "lic") == 1
    ended = [e for e in events(timeline, "lic") if e["session_id"] == lease.session_id]
    assert [e["type"] for e in ended] == ["lease.acquired", "lease.lingering", "lease.released"]


def test_a_borrow_taken_before_a_term_ends_at_the_term_set_later(timeline, configs) -> None:
    """Item 2: a 1-hour borrow, then an end 3 s away: it was still live after the end and
    after the reaper ran; its re-acquire answered an exp past the license's end."""
    configs.add(T, "lic", seats=2, lease_seconds=60, max_borrow_seconds=3600)
    borrow = acquire(timeline, "lic", "laptop", borrow_seconds=3600, fingerprint=MACHINE_A)
    config = set_config(timeline, configs, "lic", expires_at=moment(timeline, 3))
    assert deadline(timeline, "lic", borrow.session_id) == config.ends_at_ms  # cut at once
    again = acquire(timeline, "lic", "laptop")
    assert again.session_id == borrow.session_id and again.borrowed
    assert again.expires_at_ms <= again.terms.ends_at_ms and again.terms.cut
    renewal = timeline.engine.heartbeat(T, "lic", borrow.session_id)
    assert renewal.expires_at_ms <= renewal.terms.ends_at_ms
    timeline.advance(4)
    assert timeline.engine.live_leases(T, "lic") == []
    assert reap(timeline, "lic") == 1
    [ended] = [e for e in events(timeline, "lic") if e["type"] == "lease.reclaimed"]
    assert ended["metadata"]["reason"] == "license_expired"


def test_a_shortened_term_cuts_a_borrow_and_a_lease(timeline, configs) -> None:
    """Item 2 (shortened) and 3: the deadlines follow the shorter term in the same step."""
    configs.add(
        T, "lic", seats=3, lease_seconds=600, max_borrow_seconds=7200,
        expires_at=moment(timeline, 3600),
    )  # fmt: skip
    borrow = acquire(timeline, "lic", "laptop", borrow_seconds=7200)
    lease = acquire(timeline, "lic", "desk")
    assert deadline(timeline, "lic", borrow.session_id) == configs(T, "lic").ends_at_ms
    config = set_config(timeline, configs, "lic", expires_at=moment(timeline, 30))
    for sid in (borrow.session_id, lease.session_id):
        assert deadline(timeline, "lic", sid) == config.ends_at_ms
    timeline.advance(31)
    assert timeline.engine.live_leases(T, "lic") == []


def test_a_lease_held_when_a_term_is_set_ends_at_the_end_without_a_heartbeat(
    timeline, configs
) -> None:
    """Item 3: it lived until its next heartbeat, a lease length past the end."""
    configs.add(T, "lic", seats=1, lease_seconds=300)
    lease = acquire(timeline, "lic", "ws-1")
    set_config(timeline, configs, "lic", expires_at=moment(timeline, 3))
    timeline.advance(4)
    assert timeline.engine.live_leases(T, "lic") == []
    with pytest.raises(LicenseExpired):  # nothing new is granted either
        acquire(timeline, "lic", "ws-2")
    assert reap(timeline, "lic") == 1
    [ended] = [e for e in events(timeline, "lic") if e["type"] == "lease.reclaimed"]
    assert ended["session_id"] == lease.session_id
    assert ended["metadata"]["reason"] == "license_expired"


def test_a_cold_config_cache_is_refilled_before_a_heartbeat_decides(timeline, configs) -> None:
    """Item 4: a lease taken before a term, heartbeating less often than the cache lives,
    got 200 with a deadline past the end, for ever (the term was stored while the cache
    could not be written: it reached Redis only by a refill)."""
    configs.add(T, "lic", seats=1, lease_seconds=1800, max_lease_seconds=3600)
    lease = acquire(timeline, "lic", "ws-1")
    # the database's term changes without a cache write, then the cache's TTL passes
    configs.configs[(T, "lic")] = replace(configs(T, "lic"), expires_at=moment(timeline, 60))
    timeline.advance(700)
    with pytest.raises(LicenseExpired):
        timeline.engine.heartbeat(T, "lic", lease.session_id)
    assert timeline.engine.live_leases(T, "lic") == []


def test_a_start_moved_later_ends_the_held_leases(timeline, configs) -> None:
    """Item 5: held leases kept heartbeating while their own re-acquire was refused."""
    configs.add(T, "lic", seats=2, lease_seconds=300, max_borrow_seconds=3600)
    lease = acquire(timeline, "lic", "ws-1")
    borrow = acquire(timeline, "lic", "laptop", borrow_seconds=3600)
    set_config(timeline, configs, "lic", starts_at=moment(timeline, 3600))
    assert timeline.engine.live_leases(T, "lic") == []  # a license not started holds nothing
    with pytest.raises(LicenseNotStarted):
        timeline.engine.heartbeat(T, "lic", lease.session_id)
    with pytest.raises(LicenseNotStarted):
        acquire(timeline, "lic", "laptop")
    reap(timeline, "lic")
    ended = {e["session_id"]: e for e in events(timeline, "lic") if e["type"] == "lease.reclaimed"}
    assert set(ended) == {lease.session_id, borrow.session_id}
    assert {e["metadata"]["reason"] for e in ended.values()} == {"license_not_started"}


def test_in_grace_ends_with_the_grace_under_keep_leases(timeline, configs) -> None:
    """Item 6: ``in_grace`` stayed true after the grace."""
    configs.add(
        T, "lic", seats=1, lease_seconds=60, expires_at=moment(timeline, 2), grace_seconds=2,
        on_expiry="keep_leases",
    )  # fmt: skip
    lease = acquire(timeline, "lic", "ws-1")
    assert not lease.terms.in_grace
    timeline.advance(3)
    assert timeline.engine.heartbeat(T, "lic", lease.session_id).terms.in_grace
    timeline.advance(2)
    after = timeline.engine.heartbeat(T, "lic", lease.session_id)  # kept, past the grace
    assert not after.terms.in_grace


# -- the queue never breaks ---------------------------------------------------------------


def queued_license(configs, seats: int = 1) -> None:
    policy = LicensePolicy(
        queue=True, queue_ticket_seconds=60, queue_hold_seconds=30, queue_max=10_000
    )
    configs.add(T, "q", seats=seats, lease_seconds=300, policy=policy.redis_form())


@pytest.mark.parametrize("weight", [1, 2])
def test_a_lapsed_caller_behind_more_lapsed_tickets_than_the_prune_rejoins(
    timeline, configs, weight
) -> None:
    """Item 7: more than the prune step (100) of lapsed tickets stood ahead of a caller
    whose own ticket lapsed; a seat freed (by a lease running out, so no release served
    the queue). The caller's ticket survived the prune and the queue's walk dropped it:
    asking two seats of the one free, every poll was a script error (500), the ticket
    left in the ticket sets and not the queue; asking one, the call said queue.left and
    then queue.granted for that one ticket."""
    queued_license(configs, seats=2)
    acquire(timeline, "q", "holder-1", lease_seconds=70)
    acquire(timeline, "q", "holder-2")
    for i in range(101):
        assert isinstance(acquire(timeline, "q", f"w{i:03}", queue=True), QueuePlace)
    first = acquire(timeline, "q", "late", queue=True, seats=weight)
    assert isinstance(first, QueuePlace) and first.position == 102
    timeline.advance(71)  # every ticket lapses, and holder-1's lease runs out
    for _ in range(3):
        polled = acquire(timeline, "q", "late", queue=True, ticket=first.ticket, seats=weight)
        if weight == 1:
            assert isinstance(polled, Lease) and polled.created
            break
        assert isinstance(polled, QueuePlace) and polled.position == 1
    mine = [e["type"] for e in events(timeline, "q") if e.get("client_id") == "late"]
    if weight == 1:
        assert mine == ["queue.joined", "queue.left", "lease.acquired"]
        assert timeline.engine.waiting(T, "q") == []
    else:
        assert mine == ["queue.joined", "queue.left", "queue.joined"]
        [waiting] = timeline.engine.waiting(T, "q")  # in the queue and the ticket sets
        assert (waiting["client_id"], waiting["seats"]) == ("late", 2)
    lk = LicenseKeys.of(T, "q")
    assert set(timeline.redis.zrange(lk.queue, 0, -1)) == set(timeline.redis.hkeys(lk.tickets))


def test_the_reaper_starts_the_hold_for_the_head_when_it_frees_a_seat(timeline, configs) -> None:
    """Item 8: after the reaper reclaimed a seat, nothing held it for the head."""
    queued_license(configs)
    acquire(timeline, "q", "holder", lease_seconds=10)
    assert isinstance(acquire(timeline, "q", "head", queue=True), QueuePlace)
    timeline.advance(11)
    assert reap(timeline, "q") == 1
    [head] = timeline.engine.waiting(T, "q")
    assert head["client_id"] == "head" and head["held_since_ms"] is not None
    with pytest.raises(NoSeatsAvailable) as walk_in:  # the seat is the head's for the hold
        acquire(timeline, "q", "walk-in")
    assert walk_in.value.seats_held == 1


# -- a lingering lease changes weight; a borrowed seat stays on its machine ---------------


def test_a_lingering_lease_is_taken_back_with_another_weight(timeline, configs) -> None:
    """Item 10: acquire 4, release (it lingers), acquire 1 was a 409 seats_mismatch whose
    remedy ("release it first") did nothing."""
    configs.add(T, "lic", seats=4, lease_seconds=60, linger_seconds=300)
    first = acquire(timeline, "lic", "node", seats=4)
    assert timeline.engine.release(T, "lic", first.session_id).lingering
    back = acquire(timeline, "lic", "node", seats=1)
    assert not back.created and back.session_id == first.session_id
    assert (back.seats, back.seats_used) == (1, 1)
    other = acquire(timeline, "lic", "desk", seats=3)  # the three seats are free again
    assert other.seats_used == 4
    # grow while lingering: decided as a new lease would be; refused, it lingers on
    assert timeline.engine.release(T, "lic", back.session_id).lingering
    with pytest.raises(NoSeatsAvailable):
        acquire(timeline, "lic", "node", seats=2)
    [row] = [r for r in timeline.engine.live_leases(T, "lic") if r["client_id"] == "node"]
    assert row["lingering"] and row["seats"] == 1
    timeline.engine.release(T, "lic", other.session_id, revoke=True)  # (no linger)
    grown = acquire(timeline, "lic", "node", seats=4)
    assert grown.session_id == first.session_id and grown.seats_used == 4
    renewed = [e for e in events(timeline, "lic") if e["type"] == "lease.renewed"]
    assert [(e["session_id"], e.get("seats", 1)) for e in renewed] == [
        (first.session_id, 1),
        (first.session_id, 4),
    ]


def test_a_borrowed_seat_keeps_its_machine(timeline, configs) -> None:
    """Item 12: re-acquiring with another fingerprint (or none) answered 200 with a token
    for the new machine: two machines held one borrowed seat offline."""
    configs.add(T, "lic", seats=1, lease_seconds=60, max_borrow_seconds=3600)
    borrow = acquire(timeline, "lic", "laptop", borrow_seconds=3600, fingerprint=MACHINE_A)
    assert borrow.machine == MACHINE_A
    with pytest.raises(MachineMismatch):
        acquire(timeline, "lic", "laptop", fingerprint=MACHINE_B)
    with pytest.raises(MachineMismatch):
        acquire(timeline, "lic", "laptop", borrow_seconds=3600, fingerprint=MACHINE_B)
    kept = acquire(timeline, "lic", "laptop")  # none: the first machine's
    assert kept.session_id == borrow.session_id and kept.machine == MACHINE_A
    assert acquire(timeline, "lic", "laptop", fingerprint=MACHINE_A).machine == MACHINE_A
    assert timeline.engine.heartbeat(T, "lic", borrow.session_id).machine == MACHINE_A


def test_a_renewal_after_the_seats_were_lowered_is_one_answer(timeline, configs) -> None:
    """After the license's seats went below a held weight, a renewal without ``seats`` got
    200 but the same renewal with ``seats`` got 400."""
    configs.add(T, "lic", seats=4, lease_seconds=60)
    lease = acquire(timeline, "lic", "node", seats=4)
    set_config(timeline, configs, "lic", seats=2)
    without = acquire(timeline, "lic", "node")
    with_seats = acquire(timeline, "lic", "node", seats=4)
    assert without.session_id == with_seats.session_id == lease.session_id
    assert (without.seats, with_seats.seats) == (4, 4)


def test_a_lingering_lease_taken_back_as_a_borrow_of_another_weight(timeline, configs) -> None:
    """The same session, borrowed now, with its new weight: lease.converted, as a lingering
    lease borrowed with its own weight is."""
    configs.add(T, "lic", seats=4, lease_seconds=60, linger_seconds=300, max_borrow_seconds=600)
    first = acquire(timeline, "lic", "node", seats=2)
    timeline.engine.release(T, "lic", first.session_id)
    back = acquire(timeline, "lic", "node", seats=3, borrow_seconds=600, fingerprint=MACHINE_A)
    assert (back.session_id, back.borrowed, back.seats, back.machine) == (
        first.session_id,
        True,
        3,
        MACHINE_A,
    )
    kinds = [e["type"] for e in events(timeline, "lic")]
    assert kinds == ["lease.acquired", "lease.lingering", "lease.converted"]
    assert int(timeline.redis.get(LicenseKeys.of(T, "lic").wsum)) == 2
