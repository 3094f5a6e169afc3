"""The license policy and the wait queue at their edges (issue 29), against a real
redis-server and a real Redis Cluster: a user with 10,000 sessions and a group
reservation of 10,000 (nothing is unpacked per lease), lapsed tickets ahead of live
ones, the queue switched off with clients waiting, many distinct users, and license
refreshes racing seat calls."""

from __future__ import annotations

import json
import threading
import time

import pytest

from seatlease.errors import (
    LicenseNotFound,
    NoSeatsAvailable,
    QueueFull,
    SessionExpired,
    UserLimitReached,
)
from seatlease.events import pubsub
from seatlease.events.pubsub import Publisher
from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats import keys
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.policy import LicensePolicy


def events(eng: SeatEngine, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of("t", license_id))
    return [e for e in pubsub.outbox_events(eng.redis, stream) if e["license_id"] == license_id]


def add(configs, license_id: str, seats: int, lease_seconds: int = 60, **policy) -> LicenseConfig:
    return configs.add(
        "t",
        license_id,
        seats=seats,
        lease_seconds=lease_seconds,
        max_lease_seconds=max(lease_seconds, 3600),
        policy=LicensePolicy(**policy).redis_form(),
    )


def acquire(eng: SeatEngine, license_id: str, client: str, user: str | None = None, **kw):
    return eng.acquire(SeatRequest("t", license_id, client, user=user, **kw))


def take_many(eng: SeatEngine, license_id: str, user: str, n: int) -> list[str]:
    """``n`` leases of one user, from 8 threads (each acquire is one FCALL)."""
    sids: list[str] = []
    lock = threading.Lock()

    def run(part: int) -> None:
        mine = [acquire(eng, license_id, f"{user}-{i}", user).session_id
                for i in range(part, n, 8)]  # fmt: skip
        with lock:
            sids.extend(mine)

    threads = [threading.Thread(target=run, args=(p,)) for p in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sids) == n
    return sids


def release_all(eng: SeatEngine, license_id: str, sids: list[str]) -> None:
    def run(part: int) -> None:
        for sid in sids[part::8]:
            assert eng.release("t", license_id, sid).released

    threads = [threading.Thread(target=run, args=(p,)) for p in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def policy_fields(eng: SeatEngine, license_id: str) -> dict[str, str]:
    return eng.redis.hgetall(keys.LicenseKeys.of("t", license_id).users)


# -- 1. large per-user and group lists ------------------------------------------------


def test_a_user_with_ten_thousand_sessions_is_never_locked_out(seat_engine, configs):
    # both allowed: seats up to 1,000,000, max_per_user up to 1,000,000
    add(configs, "big", seats=20_000, lease_seconds=3600, max_per_user=100_000)
    sids = take_many(seat_engine, "big", "svc", 10_000)
    extra = acquire(seat_engine, "big", "svc-extra", "svc")  # the 10,001st
    assert isinstance(extra, Lease) and extra.created and extra.seats_used == 10_001
    assert policy_fields(seat_engine, "big") == {"#u:svc": "10001"}
    release_all(seat_engine, "big", [*sids, extra.session_id])
    assert policy_fields(seat_engine, "big") == {}
    again = acquire(seat_engine, "big", "svc-again", "svc")
    assert isinstance(again, Lease) and again.created and again.seats_used == 1


def test_a_group_reservation_of_ten_thousand_breaks_no_acquire(seat_engine, configs):
    add(configs, "grp", seats=20_000, lease_seconds=3600, groups={"eng": ["svc"]},
        reserve={"eng": 10_000})  # fmt: skip
    sids = take_many(seat_engine, "grp", "svc", 10_000)  # all charged to eng
    assert policy_fields(seat_engine, "grp") == {"#g:eng": "10000"}
    outsider = acquire(seat_engine, "grp", "olga-1", "olga")  # an unreserved seat
    assert isinstance(outsider, Lease) and outsider.created
    release_all(seat_engine, "grp", [*sids, outsider.session_id])
    assert policy_fields(seat_engine, "grp") == {}
    assert acquire(seat_engine, "grp", "olga-2", "olga").created
    assert acquire(seat_engine, "grp", "svc-again", "svc").created
    assert policy_fields(seat_engine, "grp") == {"#g:eng": "1"}


def test_a_list_written_before_counts_becomes_a_count(seat_engine, configs):
    """A deploy's first acquire meets the old lists ("u:<user>": session ids): their live
    leases are counted (and uncounted when they end), the list goes."""
    add(configs, "old", seats=5, max_per_user=2, groups={"eng": ["ann"]}, reserve={"eng": 1})
    first = acquire(seat_engine, "old", "a1", "ann")
    lk = keys.LicenseKeys.of("t", "old")
    r = seat_engine.redis
    # the state as the code before counts left it: a list with a live and a gone lease
    r.delete(lk.users)
    r.hset(lk.users, mapping={"u:ann": f"{first.session_id} gone0", "g:eng": first.session_id})
    record = json.loads(r.hget(lk.sessions, first.session_id))
    assert record.pop("cu") == 1 and record.pop("cg") == 1 and record["g"] == "eng"
    r.hset(lk.sessions, first.session_id, json.dumps(record))
    second = acquire(seat_engine, "old", "a2", "ann")
    assert second.created
    with pytest.raises(UserLimitReached) as over:  # the converted list counted a1
        acquire(seat_engine, "old", "a3", "ann")
    assert over.value.sessions == 2
    assert policy_fields(seat_engine, "old") == {"#u:ann": "2", "#g:eng": "1"}
    seat_engine.release("t", "old", first.session_id)
    seat_engine.release("t", "old", second.session_id)
    assert policy_fields(seat_engine, "old") == {}


# -- 2. lapsed tickets ahead of live ones -----------------------------------------------


def lapse(eng: SeatEngine, license_id: str, clients: list[str]) -> None:
    """Time travel: these tickets were not renewed in time (both indexes say so)."""
    lk = keys.LicenseKeys.of("t", license_id)
    eng.redis.zadd(lk.ticket_deadlines, dict.fromkeys(clients, 1))
    eng.redis.zadd(lk.ticket_index, {f"t/{license_id}|{c}": 1 for c in clients})


def test_a_free_seat_is_never_held_for_a_lapsed_ticket(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, queue_max=1000)
    holder = acquire(seat_engine, "lic", "h")
    gone = [f"w{i:03}" for i in range(150)]
    for client in gone:
        assert isinstance(acquire(seat_engine, "lic", client, queue=True), QueuePlace)
    lapse(seat_engine, "lic", gone)
    seat_engine.release("t", "lic", holder.session_id)
    newcomer = acquire(seat_engine, "lic", "newcomer")  # 0 of 1 in use, nobody waiting
    assert isinstance(newcomer, Lease) and newcomer.created
    left = [e for e in events(seat_engine, "lic") if e["type"] == "queue.left"]
    assert sorted(e["client_id"] for e in left) == gone
    assert {e["metadata"]["reason"] for e in left} == {"ticket_expired"}


def test_lapsed_tickets_ahead_do_not_keep_a_live_one_waiting(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, queue_max=1000)
    holder = acquire(seat_engine, "lic", "h")
    gone = [f"w{i:03}" for i in range(150)]
    for client in gone:
        acquire(seat_engine, "lic", client, queue=True)
    live = acquire(seat_engine, "lic", "live", queue=True)
    assert isinstance(live, QueuePlace) and live.position == 151
    lapse(seat_engine, "lic", gone)
    seat_engine.release("t", "lic", holder.session_id)
    with pytest.raises(NoSeatsAvailable) as refused:  # the seat is held for "live"
        acquire(seat_engine, "lic", "newcomer")
    assert refused.value.seats_held == 1
    granted = acquire(seat_engine, "lic", "live", queue=True, ticket=live.ticket)
    assert isinstance(granted, Lease) and granted.created


# -- 3. the queue switched off with clients waiting -------------------------------------


def test_turning_the_queue_off_ends_every_wait_with_an_event(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True)
    acquire(seat_engine, "lic", "h", "hal")
    for i in range(3):
        place = seat_engine.acquire(
            SeatRequest(
                "t",
                "lic",
                f"q{i}",
                user=f"u{i}",
                host=f"pc-{i}",
                queue=True,
                metadata={"bulk": "x" * 1000},
            )
        )
        assert isinstance(place, QueuePlace)
    config = configs.add("t", "lic", seats=1, lease_seconds=60)  # policy cleared
    seat_engine.cache_config("t", "lic", config)
    assert seat_engine.waiting("t", "lic") == []
    left = [e for e in events(seat_engine, "lic") if e["type"] == "queue.left"]
    assert [e["client_id"] for e in left] == ["q0", "q1", "q2"]
    for i, event in enumerate(left):
        assert event["metadata"]["reason"] == "queue_off"
        assert event["metadata"]["user"] == f"u{i}" and event["metadata"]["host"] == f"pc-{i}"
        assert "bulk" not in event["metadata"]
    lk = keys.LicenseKeys.of("t", "lic")
    assert not seat_engine.redis.exists(lk.queue, lk.tickets, lk.ticket_deadlines)
    assert seat_engine.redis.zcard(lk.ticket_index) == 0


# -- 4. many distinct users -----------------------------------------------------------


def test_the_users_hash_holds_only_users_with_live_sessions(seat_engine, configs):
    add(configs, "lic", seats=4, max_per_user=1, groups={"eng": ["u1", "u2"]}, reserve={"eng": 1})
    for i in range(300):  # throwaway user names, each released
        lease = acquire(seat_engine, "lic", f"c{i}", f"u{i}")
        assert seat_engine.release("t", "lic", lease.session_id).released
    assert policy_fields(seat_engine, "lic") == {}
    # leases that end by expiring: the reaper, a heartbeat and an acquire reclaim them
    lk = keys.LicenseKeys.of("t", "lic")
    a = acquire(seat_engine, "lic", "a", "u1")  # charged to eng
    b = acquire(seat_engine, "lic", "b", "bob")
    c = acquire(seat_engine, "lic", "c", "carol")
    assert policy_fields(seat_engine, "lic") == {
        "#u:u1": "1", "#g:eng": "1", "#u:bob": "1", "#u:carol": "1"
    }  # fmt: skip
    shard = keys.deadlines_key(lk.shard)
    for lease in (a, b, c):
        seat_engine.redis.zadd(lk.leases, {lease.session_id: 1})
        seat_engine.redis.zadd(shard, {f"t/lic|{lease.session_id}": 1})
    Reaper(seat_engine.redis, Publisher(), budget_seconds=20).reclaim(
        lk.shard, [f"t/lic|{a.session_id}"]
    )
    with pytest.raises(SessionExpired):
        seat_engine.heartbeat("t", "lic", b.session_id)
    assert acquire(seat_engine, "lic", "d", "dave").created  # prunes carol's
    assert policy_fields(seat_engine, "lic") == {"#u:dave": "1"}


# -- 5. refreshes racing calls ---------------------------------------------------------


def test_a_license_refresh_racing_calls_never_answers_not_found(seat_engine, configs):
    # a policy naming 20,000 users (20 groups of the most a list may name): its cached
    # form is a large write, which Redis reads in several pieces
    groups = {f"g{g:02}": [f"m{g}-{i}" for i in range(1000)] for g in range(20)}
    config = add(configs, "lic", seats=40, max_per_user=5, queue=True, groups=groups,
                 reserve=dict.fromkeys(groups, 1))  # fmt: skip
    seat_engine.cache_config("t", "lic", config)
    stop = time.monotonic() + 4
    counts = {"calls": 0, "refreshes": 0, "not_found": 0}
    lock = threading.Lock()

    def refresh() -> None:
        while time.monotonic() < stop:
            seat_engine.cache_config("t", "lic", config)
            with lock:
                counts["refreshes"] += 1

    def call(n: int) -> None:
        while time.monotonic() < stop:
            try:
                lease = acquire(seat_engine, "lic", f"c{n}", f"u{n}")
                seat_engine.heartbeat("t", "lic", lease.session_id)
                seat_engine.release("t", "lic", lease.session_id)
            except LicenseNotFound:
                with lock:
                    counts["not_found"] += 1
            with lock:
                counts["calls"] += 3

    threads = [threading.Thread(target=refresh) for _ in range(3)]
    threads += [threading.Thread(target=call, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts["not_found"] == 0, counts
    assert counts["calls"] > 100 and counts["refreshes"] > 10


# -- issue 31: a bounded queue of small tickets, swept without traffic ------------------


def test_a_ticket_and_its_events_keep_no_request_metadata(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True)
    acquire(seat_engine, "lic", "h")
    bulk = {f"k{i}": "v" * 100 for i in range(35)}  # about 4 KB, as the flood's
    place = seat_engine.acquire(
        SeatRequest("t", "lic", "w1", user="wendy", host="pc-9", queue=True, metadata=bulk)
    )
    assert isinstance(place, QueuePlace)
    lk = keys.LicenseKeys.of("t", "lic")
    record = seat_engine.redis.hget(lk.tickets, "w1")
    assert len(record) < 200 and "k0" not in record
    assert json.loads(record)["h"] == "pc-9"
    [joined] = [e for e in events(seat_engine, "lic") if e["type"] == "queue.joined"]
    assert joined["metadata"] == {"user": "wendy", "host": "pc-9", "queued_ms": 0}
    [view] = seat_engine.waiting("t", "lic")
    assert (view["user"], view["host"]) == ("wendy", "pc-9")
    # user and host may be any text (no NUL): JSON-escaped, never spliced raw
    odd = seat_engine.acquire(
        SeatRequest("t", "lic", "w2", user='a"b\\c', host="é/\u2028", queue=True)
    )
    assert isinstance(odd, QueuePlace)
    last = events(seat_engine, "lic")[-1]
    assert last["metadata"]["user"] == 'a"b\\c' and last["metadata"]["host"] == "é/\u2028"


def test_the_queue_holds_at_most_its_maximum_of_ten_thousand(seat_engine, configs):
    """At the API's maximum (queue_max 10,000): the 10,001st client is refused."""
    add(configs, "lic", seats=1, queue=True, queue_max=10_000)
    acquire(seat_engine, "lic", "h")

    def join(part: int) -> None:
        for i in range(part, 10_000, 8):
            assert isinstance(acquire(seat_engine, "lic", f"w{i:05}", queue=True), QueuePlace)

    threads = [threading.Thread(target=join, args=(p,)) for p in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lk = keys.LicenseKeys.of("t", "lic")
    assert seat_engine.redis.zcard(lk.queue) == 10_000
    with pytest.raises(QueueFull) as full:
        acquire(seat_engine, "lic", "w10000", queue=True)
    assert full.value.queue_max == 10_000
    assert seat_engine.redis.zcard(lk.queue) == 10_000
    # a place already held is renewed, never refused
    again = acquire(seat_engine, "lic", "w00000", queue=True)
    assert isinstance(again, QueuePlace)
    assert again.position == seat_engine.redis.zrank(lk.queue, "w00000") + 1


def test_the_default_bound_is_ten_per_seat_at_most_ten_thousand():
    assert LicensePolicy(queue=True).queue_bound(3) == 30
    assert LicensePolicy(queue=True).queue_bound(5_000) == 10_000
    assert LicensePolicy(queue=True, queue_max=7).queue_bound(5_000) == 7


def test_the_reaper_sweeps_lapsed_tickets_without_any_traffic(seat_engine, configs, pubsub):
    add(configs, "a", seats=1, queue=True, queue_max=1000)
    add(configs, "b", seats=1, queue=True)
    acquire(seat_engine, "a", "h")
    acquire(seat_engine, "b", "h")
    gone = [f"w{i:03}" for i in range(300)]
    for client in gone:
        acquire(seat_engine, "a", client, user="u", queue=True)
    live = acquire(seat_engine, "a", "live", queue=True)
    other = acquire(seat_engine, "b", "other", queue=True)
    lapse(seat_engine, "a", gone)
    reaper = Reaper(seat_engine.redis, Publisher(), budget_seconds=20)
    report = reaper.run()
    assert report.tickets_dropped == 300
    la, lb = keys.LicenseKeys.of("t", "a"), keys.LicenseKeys.of("t", "b")
    assert seat_engine.redis.zrange(la.queue, 0, -1) == ["live"]
    assert seat_engine.redis.hkeys(la.tickets) == ["live"]
    assert seat_engine.redis.zrange(lb.queue, 0, -1) == ["other"]
    assert isinstance(live, QueuePlace) and isinstance(other, QueuePlace)
    assert report.published >= 300  # a queue.left each, published by the same run
    # nothing left for a second run; the live tickets stay in the shard's index
    assert reaper.run().tickets_dropped == 0
    members = seat_engine.redis.zrange(la.ticket_index, 0, -1)
    assert "t/a|live" in members and not any(m.startswith("t/a|w") for m in members)


def test_a_swept_ticket_leaves_with_an_event_saying_why(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, queue_hold_seconds=1)
    holder = acquire(seat_engine, "lic", "h")
    acquire(seat_engine, "lic", "w1", user="wendy", host="pc-1", queue=True)
    acquire(seat_engine, "lic", "w2", user="walt", queue=True)
    seat_engine.release("t", "lic", holder.session_id)  # held for w1 for 1 s
    lapse(seat_engine, "lic", ["w2"])
    time.sleep(1.1)  # w1's hold is over
    reaper = Reaper(seat_engine.redis, Publisher(), budget_seconds=20)
    shard = keys.shard_of("t", "lic")
    assert reaper.sweep_tickets(shard, reaper.ticket_survey()[shard]) == 2
    left = {e["client_id"]: e for e in events(seat_engine, "lic") if e["type"] == "queue.left"}
    assert left["w1"]["metadata"]["reason"] == "hold_expired"
    assert left["w1"]["metadata"]["user"] == "wendy" and left["w1"]["metadata"]["host"] == "pc-1"
    assert left["w2"]["metadata"]["reason"] == "ticket_expired"
    assert seat_engine.waiting("t", "lic") == []


def test_a_ticket_shows_its_user_as_sent_and_judges_it_in_one_form(seat_engine, configs):
    add(configs, "lic", seats=1, queue=True, deny_users=["mallory"])
    acquire(seat_engine, "lic", "h", "hal")
    place = seat_engine.acquire(
        SeatRequest("t", "lic", "w1", user="Wendy", host="pc-1", queue=True)
    )
    assert isinstance(place, QueuePlace)
    record = json.loads(seat_engine.redis.hget(keys.LicenseKeys.of("t", "lic").tickets, "w1"))
    assert (record["u"], record["s"], record["h"]) == ("wendy", "Wendy", "pc-1")
    [view] = seat_engine.waiting("t", "lic")
    assert (view["user"], view["host"]) == ("Wendy", "pc-1")
    [joined] = [e for e in events(seat_engine, "lic") if e["type"] == "queue.joined"]
    assert joined["metadata"]["user"] == "Wendy"
