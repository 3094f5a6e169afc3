"""A caller's numbers never set a seat call's Redis time (docs/design.md, "Seat engine
rules"): each script call is measured by the server itself (SLOWLOG, every command
logged with its own duration in microseconds) at every size a caller controls at the
API's maximum, against the same call at a small size, on a real redis-server:

- a weight of 100,000 seats (the API's maximum) against a weight of 1: acquire,
  heartbeat, renewal, linger, take-back and release, and the reaper's reclaim of it;
- 10,000 clients in a license's wait queue (its bound) against 100: a place kept, a
  newcomer refused (queue_full), a release serving the head, the head's grant, the reaper
  holding a freed seat, and 10,000 tickets lapsing at once (the bounded walk);
- 10,000 live sessions of one user against 1: that user's next acquire (its per-user
  count) refused and granted, a heartbeat and a release;
- 10,000 sessions sharing a seat (a license sharing by user, one user on 10,000 clients)
  against 10: a session joining it, a heartbeat and a release; the same with share_limit 1
  (one group of 10,000 seats);
- a full license of 10,000 leases warned for being idle (reclaimed when needed) against
  100: a refusal while their time has not come walks none of them; once it has, a call
  reclaims at most IDLE_WALK of them (lua/_acquire.lua's make_room), whatever their number.

Each figure is the least of several samples (other processes only ever add time). A
call must stay within BOUND times its small-size figure plus SLACK_US (the machine's
noise on a call of tens of microseconds); before weights cost O(1), a heartbeat of
100,000 seats took about 150 times a one-seat heartbeat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from seatlease.errors import NoSeatsAvailable, QueueFull, UserLimitReached
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.protocol.calls import acquire_call, heartbeat_call
from seatlease.seats.protocol.replies import decode

T = "t"
BOUND = 3.0
SLACK_US = 150
SAMPLES = 5
MAX_WEIGHT = 100_000
MAX_QUEUE = 10_000
MAX_SESSIONS = 10_000
IDLE_WALK = 20  # the warned idle leases an acquire reclaims at most (_acquire.lua)
# Redis's own slowlog threshold (slowlog-log-slower-than's default): no seat call of a
# caller's making may come near it
SLOWLOG_US = 10_000


# The commands that run a script: EVALSHA (and EVAL), and FCALL of the seat library (the
# client's calls: seats/scripts.py)
SCRIPTS = (b"eval", b"fcall")


def script_us(client: Any, call: Callable[[], Any]) -> int:
    """The Redis time (µs) of the scripts ``call`` ran: their SLOWLOG entries' durations."""
    client.slowlog_reset()
    call()
    entries = client.slowlog_get(1000)  # (the commands a script calls are logged too)
    return sum(e["duration"] for e in entries if bytes(e["command"]).lower().startswith(SCRIPTS))


def least(client: Any, call: Callable[[], Any], samples: int = SAMPLES) -> int:
    return min(script_us(client, call) for _ in range(samples))


@pytest.fixture
def slow(redis_client):
    """Every command logged with its duration (the server's own measure)."""
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.config_set("slowlog-max-len", 4096)
    yield redis_client
    redis_client.config_set("slowlog-log-slower-than", 10000)
    redis_client.slowlog_reset()


def within(name: str, large: int, small: int) -> None:
    print(f"  {name}: {large} us at the maximum, {small} us small")  # (shown with -s)
    assert large <= BOUND * small + SLACK_US, (
        f"{name}: {large} us at the caller's maximum against {small} us at a small size"
    )


def fill(eng: SeatEngine, license_id: str, clients: list[str], **fields: Any) -> list[Any]:
    """One acquire per client, pipelined (what many clients calling at once do)."""
    eng.cache_config(T, license_id, eng.config_loader(T, license_id))
    eng.scripts.library.load()  # (the calls are queued in a pipeline: the library first)
    replies = []
    for start in range(0, len(clients), 500):
        pipe = eng.redis.pipeline(transaction=False)
        for client_id in clients[start : start + 500]:
            ks, av = acquire_call(T, license_id, client_id, request_id="r-" + client_id, **fields)
            eng.scripts.acquire(keys=ks, args=av, client=pipe)
        replies += pipe.execute()
    return replies


def test_a_weight_of_100000_costs_what_one_seat_costs(engine, configs, slow) -> None:
    figures: dict[int, dict[str, int]] = {}
    for weight in (1, MAX_WEIGHT):
        lic = f"w{weight}"
        configs.add(T, lic, seats=MAX_WEIGHT * 2, lease_seconds=60, linger_seconds=60)
        fill(engine, lic, [f"other-{i}" for i in range(100)])  # a license in use
        f: dict[str, int] = {}

        def new_and_release(w: int = weight, lic: str = lic) -> None:
            lease = engine.acquire(SeatRequest(T, lic, "node", seats=w))
            engine.release(T, lic, lease.session_id, revoke=True)

        f["acquire + revoke"] = least(slow, new_and_release)
        lease = engine.acquire(SeatRequest(T, lic, "node", seats=weight))
        f["heartbeat"] = least(
            slow, lambda s=lease.session_id, lic=lic: engine.heartbeat(T, lic, s)
        )
        f["renewal"] = least(
            slow, lambda w=weight, lic=lic: engine.acquire(SeatRequest(T, lic, "node", seats=w))
        )

        def linger_and_back(w: int = weight, lic: str = lic, s: str = lease.session_id) -> None:
            engine.release(T, lic, s)
            engine.acquire(SeatRequest(T, lic, "node", seats=w))

        f["linger + take back"] = least(slow, linger_and_back)
        figures[weight] = f
    for name, light in figures[1].items():
        within(name, figures[MAX_WEIGHT][name], light)


def test_the_reapers_reclaim_of_the_heaviest_lease(timeline, configs) -> None:
    """(On the shifted clock: the lease runs out.)"""
    slow = timeline.redis
    slow.config_set("slowlog-log-slower-than", 0)
    slow.config_set("slowlog-max-len", 4096)
    costs = {}
    for weight in (1, MAX_WEIGHT):
        lic = f"r{weight}"
        configs.add(T, lic, seats=MAX_WEIGHT, lease_seconds=10)
        timeline.engine.acquire(SeatRequest(T, lic, "node", seats=weight))
    timeline.advance(11)
    reaper = Reaper(slow, publisher=None)
    for weight in (1, MAX_WEIGHT):
        lic = f"r{weight}"
        shard = keys.shard_of(T, lic)
        member = [m for m in slow.zrange(keys.deadlines_key(shard), 0, -1) if f"/{lic}|" in m]
        costs[weight] = script_us(slow, lambda s=shard, m=member: reaper.reclaim(s, m))
    slow.config_set("slowlog-log-slower-than", 10000)
    within("the reaper's reclaim", costs[MAX_WEIGHT], costs[1])


def queued(eng: SeatEngine, configs, lic: str, waiting: int) -> list[str]:
    policy = LicensePolicy(
        queue=True, queue_ticket_seconds=600, queue_hold_seconds=300, queue_max=MAX_QUEUE
    )
    configs.add(T, lic, seats=10, lease_seconds=600, policy=policy.redis_form())
    fill(eng, lic, [f"holder-{i}" for i in range(10)])
    clients = [f"waiter-{i:05d}" for i in range(waiting)]
    assert all(r[0] == "queued" for r in fill(eng, lic, clients, queue=True))
    return clients


def test_10000_in_line_cost_what_100_cost(engine, configs, slow) -> None:
    """(100: the walk's own bound, QUEUE_SCAN in _policy.lua, which a release reads in
    full whatever the line's length beyond it.)"""
    figures: dict[int, dict[str, int]] = {}
    for waiting in (100, MAX_QUEUE):
        lic = f"q{waiting}"
        clients = queued(engine, configs, lic, waiting)
        f: dict[str, int] = {}
        last = SeatRequest(T, lic, clients[-1], queue=True)
        f["the last keeps its place"] = least(slow, lambda r=last: engine.acquire(r))
        if waiting == MAX_QUEUE:

            def full(lic: str = lic) -> None:
                with pytest.raises(QueueFull):
                    engine.acquire(SeatRequest(T, lic, "newcomer", queue=True))

            f["a newcomer"] = least(slow, full)
        else:  # the same call, with room: a place at the back, kept
            newcomer = SeatRequest(T, lic, "newcomer", queue=True)
            f["a newcomer"] = least(slow, lambda r=newcomer: engine.acquire(r))
        holders = {r["client_id"]: r["session_id"] for r in engine.live_leases(T, lic)}
        releases, grants = [], []
        for n in range(SAMPLES):  # each release serves the next head, who comes for it
            sid = holders[f"holder-{n}"]
            releases.append(script_us(slow, lambda s=sid, lic=lic: engine.release(T, lic, s)))
            got: list[Any] = []
            head = SeatRequest(T, lic, clients[n], queue=True)
            grants.append(script_us(slow, lambda r=head, g=got: g.append(engine.acquire(r))))
            assert not isinstance(got[0], QueuePlace)
        f["a release serves the head"], f["the head's grant"] = min(releases), min(grants)
        figures[waiting] = f
    for name, small in figures[100].items():
        within(name, figures[MAX_QUEUE][name], small)


def test_10000_lapsed_tickets_are_a_bounded_walk(timeline, configs) -> None:
    """Every ticket of a full queue lapses at once (the shifted clock): each later call
    drops at most the prune step and the walk's bound (100 and 100; the seats still free
    wait for the line it has not walked yet), so its time does not grow with the crowd:
    the calls behind 10,000 lapsed tickets cost what those behind 1,000 cost. (Before,
    each dropped up to 1,100 at 13 us a ticket.) Then the line is walked, and a newcomer
    gets its seat."""
    slow = timeline.redis
    slow.config_set("slowlog-log-slower-than", 0)
    slow.config_set("slowlog-max-len", 4096)
    costs: dict[int, list[int]] = {}
    for waiting in (1000, MAX_QUEUE):
        queued(timeline.engine, configs, f"lapsed{waiting}", waiting)
    timeline.advance(601)  # the tickets lapse; the holders' leases (600 s) end too

    def newcomer(lic: str, n: int) -> Any:
        try:
            return timeline.engine.acquire(SeatRequest(T, lic, f"n{n}"))
        except NoSeatsAvailable as held:  # the free seats wait for the unwalked line
            assert held.retry_after_seconds == 1
            return held

    for waiting in (1000, MAX_QUEUE):
        lic = f"lapsed{waiting}"
        costs[waiting] = [script_us(slow, lambda lic=lic, n=n: newcomer(lic, n)) for n in range(4)]
    slow.config_set("slowlog-log-slower-than", 10000)
    for small, large in zip(costs[1000], costs[MAX_QUEUE], strict=True):
        within("an acquire behind lapsed tickets", large, small)
    # 1,000 lapsed: 200 dropped a call, so the fifth call walks the line's end
    answers = [newcomer("lapsed1000", n) for n in range(4, 7)]
    assert isinstance(answers[-1], Lease) and timeline.engine.waiting(T, "lapsed1000") == []


def test_10000_sessions_of_one_user_cost_what_one_costs(engine, configs, slow) -> None:
    figures: dict[int, dict[str, int]] = {}
    for held in (1, MAX_SESSIONS):
        lic = f"u{held}"
        policy = LicensePolicy(max_per_user=MAX_SESSIONS)
        configs.add(T, lic, seats=MAX_SESSIONS + 10, lease_seconds=600, policy=policy.redis_form())
        replies = fill(engine, lic, [f"s-{i:05d}" for i in range(held)], user="ann")
        assert all(r[0] == "acquired" for r in replies)
        f: dict[str, int] = {}
        if held == MAX_SESSIONS:

            def refused(lic: str = lic) -> None:
                with pytest.raises(UserLimitReached):
                    engine.acquire(SeatRequest(T, lic, "one-more", user="ann"))

            f["her next acquire"] = least(slow, refused)
        else:

            def granted(lic: str = lic) -> None:
                lease = engine.acquire(SeatRequest(T, lic, "one-more", user="ann"))
                engine.release(T, lic, lease.session_id, revoke=True)

            f["her next acquire"] = least(slow, granted) // 2  # (a grant and a revoke)
        sid = decode(replies[-1]).session_id
        f["a heartbeat"] = least(slow, lambda s=sid, lic=lic: engine.heartbeat(T, lic, s))
        f["a release"] = script_us(slow, lambda s=sid, lic=lic: engine.release(T, lic, s))
        figures[held] = f
    for name, small in figures[1].items():
        within(name, figures[MAX_SESSIONS][name], small)


def test_the_slowlog_measures_a_script(engine, configs, slow) -> None:
    """The measure itself: a script's own time, not zero, not another command's, for the
    calls of each kind: acquire and heartbeat by FCALL, the configuration's cache by
    EVALSHA."""
    configs.add(T, "m", seats=3, lease_seconds=60)
    engine.acquire(SeatRequest(T, "m", "first"))  # (the configuration is cached now)
    cost = script_us(slow, lambda: engine.acquire(SeatRequest(T, "m", "c")))
    assert 0 < cost < 1_000_000
    # (the slowlog's own commands are the measuring tool: a loaded machine can make one
    # of them the longest, which says nothing of the seat call)
    entries = [
        e for e in slow.slowlog_get(1000) if not bytes(e["command"]).lower().startswith(b"slowlog")
    ]
    assert [bytes(e["command"])[:5].lower() for e in entries if e["duration"] == max(
        x["duration"] for x in entries
    )] == [b"fcall"]  # fmt: skip
    lease = engine.acquire(SeatRequest(T, "m", "d"))
    assert 0 < script_us(slow, lambda: engine.heartbeat(T, "m", lease.session_id))
    assert 0 < script_us(slow, lambda: engine.cache_config(T, "m", engine.config_loader(T, "m")))
    assert script_us(slow, lambda: slow.ping()) == 0
    assert LicenseKeys.of(T, "m").leases  # (the license's keys exist)


def test_10000_sessions_sharing_a_seat_cost_what_10_cost(engine, configs, slow) -> None:
    """A share group's counts are one field of the license's users hash (lua/_lib.lua's
    shared seats): its size never costs a call. share_limit 0 puts every session of ann on
    one seat; share_limit 1 gives each its own, in one group of as many seats."""
    for limit in (0, 1):
        figures: dict[int, dict[str, int]] = {}
        for held in (10, MAX_SESSIONS):
            lic = f"share{limit}-{held}"
            configs.add(T, lic, seats=MAX_SESSIONS + 10, lease_seconds=600, share="user",
                        share_limit=limit)  # fmt: skip
            clients = [f"s-{i:05d}" for i in range(held)]
            replies = fill(engine, lic, clients, user="ann", share_user="ann")
            assert all(r[0] == "acquired" for r in replies)
            f: dict[str, int] = {}
            joins: list[Any] = []

            def join_and_revoke(lic: str = lic, joins: list[Any] = joins) -> None:
                lease = engine.acquire(SeatRequest(T, lic, "one-more", user="ann"))
                joins.append(lease)
                engine.release(T, lic, lease.session_id, revoke=True)

            f["a session joining"] = least(slow, join_and_revoke)
            # the group is one seat (limit 0), or a seat a session (limit 1)
            assert {(j.shared_sessions, j.seats_used) for j in joins} == {
                (held + 1, 1 if limit == 0 else held + 1)
            }
            sid = decode(replies[-1]).session_id
            f["a heartbeat"] = least(slow, lambda s=sid, lic=lic: engine.heartbeat(T, lic, s))
            f["a release"] = script_us(slow, lambda s=sid, lic=lic: engine.release(T, lic, s))
            figures[held] = f
        for name, small in figures[10].items():
            within(f"{name} (share_limit {limit})", figures[MAX_SESSIONS][name], small)


def warned_full(eng: SeatEngine, configs, lic: str, leases: int) -> None:
    """A full license of ``leases`` seats, every lease warned for being idle (a heartbeat
    saying 120 s of no activity against a timeout of 60; reclaimed when needed): each
    warning's time comes one heartbeat interval later (600 s / 3)."""
    configs.add(T, lic, seats=leases, lease_seconds=600, idle_timeout_seconds=60)
    replies = fill(eng, lic, [f"idle-{i:05d}" for i in range(leases)])
    sids = [decode(r).session_id for r in replies]
    for start in range(0, len(sids), 500):
        pipe = eng.redis.pipeline(transaction=False)
        for sid in sids[start : start + 500]:
            ks, av = heartbeat_call(T, lic, sid, request_id="w-" + sid, idle_seconds=120)
            eng.scripts.heartbeat(keys=ks, args=av, client=pipe)
        assert all(r[0] == "ok" for r in pipe.execute())
    assert eng.redis.zcard(LicenseKeys.of(T, lic).idlers) == leases


def idle_reclaims(client: Any, lic: str, call: Callable[[], Any]) -> tuple[int, int, int]:
    """``call``'s scripts' Redis time (µs), its longest script, and the leases it reclaimed
    for being idle (lease.reclaimed, reason idle, in the license's outbox)."""
    outbox = keys.outbox_key(keys.shard_of(T, lic))
    client.xtrim(outbox, maxlen=0)
    client.slowlog_reset()
    call()
    entries = [e for e in client.slowlog_get(4096)
               if bytes(e["command"]).lower().startswith(SCRIPTS)]  # fmt: skip
    reclaimed = [
        e
        for e in pubsub.outbox_events(client, outbox)
        if e["type"] == "lease.reclaimed" and e["metadata"].get("reason") == "idle"
    ]
    durations = [e["duration"] for e in entries]
    return sum(durations), max(durations), len(reclaimed)


def test_a_refusal_behind_10000_warned_idle_leases_is_a_bounded_walk(timeline, configs) -> None:
    """(On the shifted clock: the warnings' time comes.) Before it, a refused call finds
    none due (one ZRANGEBYSCORE of none) and reclaims nothing. After it, a call reclaims
    what it needs and no more than IDLE_WALK: a lease of one seat one, a lease of 50 seats
    20, then 20, then the last 10 it needs (granted then), behind 100 warned leases as
    behind 10,000, at the same cost, and never near the slowlog's threshold."""
    slow = timeline.redis
    slow.config_set("slowlog-log-slower-than", 0)
    slow.config_set("slowlog-max-len", 4096)
    eng = timeline.engine
    sizes = (100, MAX_SESSIONS)
    for leases in sizes:
        warned_full(eng, configs, f"idle{leases}", leases)

    def refused(lic: str, client: str, seats: int = 1) -> Callable[[], None]:
        def call() -> None:
            with pytest.raises(NoSeatsAvailable):
                eng.acquire(SeatRequest(T, lic, client, seats=seats))

        return call

    def granted(lic: str, client: str, seats: int = 1) -> Callable[[], None]:
        return lambda: eng.acquire(SeatRequest(T, lic, client, seats=seats))

    early: dict[int, list[tuple[int, int, int]]] = {}
    for leases in sizes:
        lic = f"idle{leases}"
        early[leases] = [idle_reclaims(slow, lic, refused(lic, f"early-{n}")) for n in range(4)]
    timeline.advance(201)  # every warning's time has come; the leases live on (600 s)
    for leases in sizes:
        # The jump also ends the fill's reply generations: Redis deletes an expired hash
        # when it is first touched, 12 ms for the 20,000 replies of the larger fill, in
        # whichever call touches it first. That is the reply store's cost (lua/_replies.lua),
        # not the walk's: paid here, outside the measured calls.
        slow.exists(*LicenseKeys.of(T, f"idle{leases}").replies)
    due: dict[int, list[tuple[int, int, int]]] = {}
    for leases in sizes:
        lic = f"idle{leases}"
        due[leases] = [
            idle_reclaims(slow, lic, granted(lic, "one-seat")),
            idle_reclaims(slow, lic, refused(lic, "fifty", seats=50)),
            idle_reclaims(slow, lic, refused(lic, "fifty", seats=50)),
            idle_reclaims(slow, lic, granted(lic, "fifty", seats=50)),
        ]
    slow.config_set("slowlog-log-slower-than", 10000)
    for leases in sizes:
        assert [n for _us, _longest, n in early[leases]] == [0, 0, 0, 0]
        assert [n for _us, _longest, n in due[leases]] == [1, IDLE_WALK, IDLE_WALK, 10]
        longest = max(longest for _us, longest, _n in early[leases] + due[leases])
        assert longest < SLOWLOG_US, f"{leases} warned: a call took {longest} us"
    within(
        "a refusal before the warnings' time",
        min(us for us, _l, _n in early[MAX_SESSIONS]),
        min(us for us, _l, _n in early[100]),
    )
    for step, (large, small) in enumerate(zip(due[MAX_SESSIONS], due[100], strict=True)):
        within(f"a call after it (step {step}: {small[2]} reclaimed)", large[0], small[0])
    assert eng.redis.zcard(LicenseKeys.of(T, f"idle{MAX_SESSIONS}").idlers) == (
        MAX_SESSIONS - 1 - 2 * IDLE_WALK - 10
    )
