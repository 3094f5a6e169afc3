"""Many processes and threads hammer one small license with acquire/heartbeat/release
while leases also expire, some seats are borrowed and released seats linger for their
clients: the number of live leases (borrowed and lingering ones included) never exceeds
seats + overage."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time

import pytest

from seatlease.errors import NoSeatsAvailable, SessionExpired
from seatlease.licenses import LicenseConfig
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys

# Counts live leases with the server's clock, atomically (a read-only probe).
LIVE_PROBE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
"""

# limit 4; borrows of up to 2 s, and a released seat lingers 1 s for its client
CONFIG = LicenseConfig(
    seats=3, lease_seconds=1, overage_percent=34, max_borrow_seconds=2, linger_seconds=1
)


def _worker(url: str, worker: int, seconds: float, out: multiprocessing.Queue) -> None:
    eng = SeatEngine(redisconn.connect(url), lambda _t, _l: CONFIG)
    rng = random.Random(worker)
    stats = {
        "acquired": 0,
        "borrowed": 0,
        "lingering": 0,
        "taken_back": 0,
        "denied": 0,
        "max_used": 0,
        "errors": 0,
    }
    held: list[tuple[str, str]] = []  # (session, client)
    lingering: dict[str, str] = {}  # client -> its session released into linger

    def loop(thread: int) -> None:
        while time.monotonic() < deadline:
            roll = rng.random()
            try:
                if roll < 0.5 or not held:
                    client = f"w{worker}-t{thread}-{rng.randrange(3)}"
                    borrow = 2 if rng.random() < 0.2 else None
                    lease = eng.acquire(SeatRequest("t", "hot", client, borrow_seconds=borrow))
                    stats["acquired"] += 1
                    stats["borrowed"] += lease.borrowed and lease.created
                    # Its lingering seat back (or its lease still live, or a new one).
                    was = lingering.pop(client, None)
                    stats["taken_back"] += was == lease.session_id and not lease.created
                    stats["max_used"] = max(stats["max_used"], lease.seats_used)
                    held.append((lease.session_id, client))
                elif roll < 0.8:
                    eng.heartbeat("t", "hot", rng.choice(held)[0])
                else:
                    session, client = held.pop(rng.randrange(len(held)))
                    if eng.release("t", "hot", session).lingering:
                        stats["lingering"] += 1
                        lingering[client] = session
            except NoSeatsAvailable:
                stats["denied"] += 1
            except (SessionExpired, IndexError, ValueError):
                pass
            except Exception:
                stats["errors"] += 1
                raise

    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(stats)


def test_live_leases_never_exceed_the_limit(redis_url, redis_client):
    probe = redis_client.register_script(LIVE_PROBE)
    keys = LicenseKeys.of("t", "hot")
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(redis_url, w, 6.0, out)) for w in range(4)]
    for p in procs:
        p.start()
    observed_max = 0
    samples = 0
    while any(p.is_alive() for p in procs):
        live = probe(keys=[keys.leases])
        observed_max = max(observed_max, live)
        samples += 1
        assert live <= CONFIG.seat_limit, f"{live} live leases on a {CONFIG.seat_limit}-seat limit"
        time.sleep(0.002)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    stats = [out.get(timeout=10) for _ in procs]
    assert sum(s["errors"] for s in stats) == 0
    assert max(s["max_used"] for s in stats) <= CONFIG.seat_limit
    # The test exercised contention: the limit was reached and acquires were denied.
    assert observed_max == CONFIG.seat_limit or max(s["max_used"] for s in stats) == 4
    assert sum(s["denied"] for s in stats) > 0 and sum(s["acquired"] for s in stats) > 50
    # ... and the new kinds of seat: borrows, lingering seats, and clients taking theirs back.
    for kind in ("borrowed", "lingering", "taken_back"):
        assert sum(s[kind] for s in stats) > 0, kind
    assert samples > 100
    # The structures agree with each other after the storm.
    sessions = redis_client.hkeys(keys.sessions)
    assert sorted(redis_client.zrange(keys.leases, 0, -1)) == sorted(sessions)
    indexed = {m.split("|", 1)[1] for m in redis_client.zrange(keys.deadlines, 0, -1)}
    assert indexed == set(sessions)
    assert set(redis_client.hvals(keys.clients)) <= set(sessions)


@pytest.mark.parametrize("clients", [50])
def test_same_client_racing_gets_one_seat(engine, configs, clients):
    """Re-acquire by the same client_id from many threads at once: one lease, never two."""
    configs.add("t", "race", seats=10)
    results: list[str] = []
    barrier = threading.Barrier(clients)

    def go() -> None:
        barrier.wait()
        results.append(engine.acquire(SeatRequest("t", "race", "same-client")).session_id)

    threads = [threading.Thread(target=go) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert len(engine.live_leases("t", "race")) == 1


def test_a_lingering_seat_goes_to_its_client_not_to_a_racing_crowd(engine, configs):
    """One seat, released into linger; its client and 30 others acquire at once: the
    others are denied (the lingering seat counts), its client takes it back."""
    configs.add("t", "linger", seats=1, linger_seconds=60)
    first = engine.acquire(SeatRequest("t", "linger", "owner"))
    assert engine.release("t", "linger", first.session_id).lingering
    barrier = threading.Barrier(31)
    outcomes: dict[str, str] = {}

    def go(client: str) -> None:
        barrier.wait()
        try:
            lease = engine.acquire(SeatRequest("t", "linger", client))
            outcomes[client] = lease.session_id
        except NoSeatsAvailable:
            outcomes[client] = "denied"

    clients = ["owner", *(f"other-{i}" for i in range(30))]
    threads = [threading.Thread(target=go, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.pop("owner") == first.session_id
    assert set(outcomes.values()) == {"denied"}
    (row,) = engine.live_leases("t", "linger")
    assert (row["session_id"], row["lingering"]) == (first.session_id, False)


def test_borrowers_racing_for_the_last_seats_never_exceed_the_limit(engine, configs):
    """Borrowers and ordinary acquirers race for 3 seats + 1 overage: exactly 4 win."""
    configs.add("t", "borrow", seats=3, overage_percent=34, max_borrow_seconds=600)
    barrier = threading.Barrier(40)
    won: list[bool] = []

    def go(i: int) -> None:
        barrier.wait()
        try:
            lease = engine.acquire(
                SeatRequest("t", "borrow", f"c{i}", borrow_seconds=600 if i % 2 else None)
            )
            won.append(lease.borrowed)
        except NoSeatsAvailable:
            pass

    threads = [threading.Thread(target=go, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 4
    rows = engine.live_leases("t", "borrow")
    assert len(rows) == 4 and sum(r["borrowed"] for r in rows) == sum(won)
