"""The license policy under concurrency, on a real redis-server and a real Redis
Cluster: 50 threads acquire (some through the queue), hold and release seats of one
license with a per-user limit, two reserved groups and a queue, while an atomic probe
reads the live leases; and the queue serves its waiting clients strictly in order."""

from __future__ import annotations

import random
import threading
import time

import pytest

from seatlease.errors import NoSeatsAvailable, UserDenied, UserLimitReached
from seatlease.licenses import LicenseConfig
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

# Per user: live leases; and live leases of users in no group. Atomic (one script).
PROBE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local out = {#sids}
if #sids == 0 then return out end
local raws = redis.call('HMGET', KEYS[2], unpack(sids))
for _, raw in ipairs(raws) do
  if raw then out[#out + 1] = cjson.decode(raw).u or '' end
end
return out
"""

GROUPS = {"eng": ["u0", "u1", "u2"], "ops": ["u3", "u4"]}
POLICY = LicensePolicy(
    max_per_user=2,
    groups=GROUPS,
    reserve={"eng": 2, "ops": 1},
    deny_users=["u9"],
    queue=True,
    queue_hold_seconds=1,
    queue_ticket_seconds=2,
    queue_max=100,  # every worker's two clients may wait (the default: 10 x 6 seats)
)
CONFIG = LicenseConfig(seats=6, lease_seconds=2, policy=POLICY.redis_form())
MEMBERS = {user for users in GROUPS.values() for user in users}
USERS = [f"u{i}" for i in range(10)]


def url_of(request: pytest.FixtureRequest, kind: str) -> str:
    server = request.getfixturevalue("redis_server" if kind == "single" else "redis_cluster")
    return server.url


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_fifty_threads_never_exceed_the_cap_a_user_limit_or_a_reservation(
    request: pytest.FixtureRequest, kind: str
) -> None:
    client = redisconn.connect(url_of(request, kind))
    client.flushall()
    eng = SeatEngine(client, lambda _t, _l: CONFIG)
    keys = LicenseKeys.of("t", "hot")
    probe = client.register_script(PROBE)
    stats = {"acquired": 0, "queued": 0, "limited": 0, "denied": 0, "refused": 0, "errors": 0}
    worst = {"total": 0, "per_user": 0, "outsiders": 0, "denied_held": 0, "samples": 0}
    lock = threading.Lock()
    started, finished = time.monotonic(), threading.Event()

    def enough() -> bool:
        """Bounded by counts, not by the machine's speed: at least 6 s and until every
        outcome below was seen often enough and the cap was reached (a slow machine runs
        longer), at most 120 s."""
        with lock:
            seen = (stats["acquired"] > 50 and stats["queued"] > 50 and stats["limited"] > 0
                    and stats["refused"] > 0 and worst["samples"] > 100
                    and worst["total"] == 6)  # fmt: skip
        elapsed = time.monotonic() - started
        return (seen and elapsed >= 6) or elapsed >= 120

    def worker(n: int) -> None:
        rng = random.Random(n)
        user = USERS[n % len(USERS)]
        ticket = None
        while not finished.is_set():
            cid = f"c{n}-{rng.randrange(2)}"
            try:
                got = eng.acquire(SeatRequest("t", "hot", cid, user=user, queue=rng.random() < 0.5,
                                  ticket=ticket))  # fmt: skip
                if isinstance(got, QueuePlace):
                    ticket = got.ticket
                    with lock:
                        stats["queued"] += 1
                    time.sleep(rng.uniform(0.01, 0.05))
                    continue
                ticket = None
                with lock:
                    stats["acquired"] += 1
                time.sleep(rng.uniform(0, 0.03))
                if rng.random() < 0.8:  # the rest expire by themselves
                    eng.release("t", "hot", got.session_id)
            except UserLimitReached:
                with lock:
                    stats["limited"] += 1
            except UserDenied:
                with lock:
                    stats["refused"] += 1
                time.sleep(0.01)
            except NoSeatsAvailable:
                with lock:
                    stats["denied"] += 1
                time.sleep(0.01)
            except Exception:
                with lock:
                    stats["errors"] += 1
                raise

    def watch() -> None:
        try:
            while not finished.is_set():
                reply = probe(keys=[keys.leases, keys.sessions])
                users = reply[1:]
                counts = {u: users.count(u) for u in set(users)}
                outsiders = sum(1 for u in users if u not in MEMBERS)
                with lock:
                    worst["total"] = max(worst["total"], int(reply[0]))
                    worst["per_user"] = max(worst["per_user"], max(counts.values(), default=0))
                    worst["outsiders"] = max(worst["outsiders"], outsiders)
                    worst["denied_held"] = max(worst["denied_held"], users.count("u9"))
                    worst["samples"] += 1
                if enough():
                    finished.set()
                time.sleep(0.002)
        finally:  # the workers stop with the watcher, whatever ends it
            finished.set()

    def refresh() -> None:  # an admin change now and then: never a 404 for the callers
        while not finished.is_set():
            eng.cache_config("t", "hot", CONFIG)
            time.sleep(0.05)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(50)]
    threads.append(threading.Thread(target=watch))
    threads.append(threading.Thread(target=refresh))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The policy's counts are the live leases' (an acquire first reclaims the expired)
    time.sleep(2.1)
    eng.acquire(SeatRequest("t", "hot", "last", user="u5"))
    users = probe(keys=[keys.leases, keys.sessions])[1:]
    counts = client.hgetall(keys.users)
    counts.pop("qseq", None)
    assert {f: int(n) for f, n in counts.items() if f.startswith("#u:")} == {
        f"#u:{u}": users.count(u) for u in set(users)
    }
    client.close()
    assert stats["errors"] == 0
    assert stats["acquired"] > 50 and stats["queued"] > 50 and stats["limited"] > 0
    assert worst["samples"] > 100
    assert worst["total"] == 6  # reached, never passed
    assert worst["per_user"] == 2
    # users in no group only ever hold the unreserved seats: 6 - (2 + 1)
    assert worst["outsiders"] <= 3
    assert stats["refused"] > 0 and worst["denied_held"] == 0  # u9 is on the deny list


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_the_queue_serves_waiting_clients_in_the_order_they_joined(
    request: pytest.FixtureRequest, kind: str
) -> None:
    client = redisconn.connect(url_of(request, kind))
    client.flushall()
    config = LicenseConfig(
        seats=1, lease_seconds=30, policy=LicensePolicy(queue=True, queue_max=20).redis_form()
    )
    eng = SeatEngine(client, lambda _t, _l: config)
    holder = eng.acquire(SeatRequest("t", "fifo", "holder"))
    assert isinstance(holder, Lease)
    tickets = {}
    for i in range(20):  # they join in this order
        place = eng.acquire(SeatRequest("t", "fifo", f"w{i:02}", queue=True))
        assert isinstance(place, QueuePlace) and place.position == i + 1
        tickets[f"w{i:02}"] = place.ticket
    served: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 30

    def wait(cid: str) -> None:
        while time.monotonic() < deadline:
            got = eng.acquire(SeatRequest("t", "fifo", cid, queue=True, ticket=tickets[cid]))
            if isinstance(got, Lease):
                with lock:
                    served.append(cid)
                time.sleep(0.01)
                eng.release("t", "fifo", got.session_id)
                return
            time.sleep(0.005)

    threads = [threading.Thread(target=wait, args=(cid,)) for cid in tickets]
    for thread in threads:
        thread.start()
    # newcomers without a place keep trying too: they never jump the queue
    intruders = 0
    eng.release("t", "fifo", holder.session_id)
    while any(t.is_alive() for t in threads):
        try:
            got = eng.acquire(SeatRequest("t", "fifo", "intruder"))
        except NoSeatsAvailable:
            continue
        with lock:
            intruders += len(served) < len(tickets)  # a seat a waiting client was owed
        eng.release("t", "fifo", got.session_id)
    for thread in threads:
        thread.join()
    client.close()
    assert served == sorted(tickets)
    assert intruders == 0
