"""seatlease_client over real HTTP: the acquire/heartbeat/release functions served by
``seatlease_cli.devserver.create_app`` on a werkzeug server in a background thread, on real
Redis and the real PostgreSQL store. Servers are stopped and restarted, Redis is killed,
processes get SIGTERM: nothing is mocked. Leases are 2-3 s so the whole file stays fast.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from client_bad_server import KEY_X
from werkzeug.serving import make_server

from seatlease.api import runtime, tokens
from seatlease.records import store
from seatlease.seats import redisconn
from seatlease_cli import devserver
from seatlease_cli.procs import free_port, start_redis
from seatlease_client import (
    AsyncSeatClient,
    BackendUnavailable,
    InvalidRequest,
    LicenseNotFound,
    LicenseSuspended,
    NoSeatsAvailable,
    QueueFull,
    SeatClient,
    SeatError,
    SeatWaitTimeout,
    ServiceError,
    SessionExpired,
    Unauthenticated,
)

REPO = Path(__file__).resolve().parent.parent
TENANT = "acme"


# -- a real HTTP server --------------------------------------------------------------


@pytest.fixture(scope="module")
def functions_app() -> Any:
    return devserver.create_app(["acquire", "heartbeat", "release", "keys"])


def pinned() -> list[str]:
    """The vendor's keys to pin: the x of each key the deployment signs with."""
    return [key["x"] for key in tokens.keyring().jwks()["keys"]]


class Gate:
    """WSGI wrapper around the real functions: counts requests per path and can hold
    the next heartbeat in the server (a heartbeat delayed past the lease's deadline)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.hold_next_heartbeat = 0.0
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        with self.lock:
            self.counts[path] += 1
            hold = 0.0
            if path == "/heartbeat" and self.hold_next_heartbeat:
                hold, self.hold_next_heartbeat = self.hold_next_heartbeat, 0.0
        if hold:
            time.sleep(hold)
        return self.app(environ, start_response)


class Served:
    """The functions on 127.0.0.1:<port>, in a thread; stop() and start() again keep the
    port (a restarted server)."""

    def __init__(self, app: Any) -> None:
        self.gate = Gate(app)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._server = make_server("127.0.0.1", self.port, self.gate, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def served(redis_url: str, database_url: str, functions_app: Any) -> Iterator[Served]:
    handle = Served(functions_app)
    handle.start()
    yield handle
    handle.stop()


@pytest.fixture
def make_license(api_key: str) -> Callable[..., str]:
    def create(license_id: str = "lic", seats: int = 2, lease_seconds: int = 3, **kw: Any) -> str:
        store.create_license(TENANT, license_id, seats=seats, lease_seconds=lease_seconds, **kw)
        runtime.refresh_license_cache(TENANT, license_id)
        return license_id

    return create


@pytest.fixture
def client(served: Served, api_key: str) -> SeatClient:
    return SeatClient(served.url, api_key, backoff=0.1, pinned_keys=pinned())


def live(license_id: str = "lic") -> list[dict[str, Any]]:
    return runtime.seat_engine().live_leases(TENANT, license_id)


def eventually(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Events:
    """on_lost / on_regained recorder."""

    def __init__(self) -> None:
        self.lost: list[str] = []
        self.regained = 0

    def on_lost(self, lease: Any, reason: str) -> None:
        assert lease.lost
        self.lost.append(reason)

    def on_regained(self, lease: Any) -> None:
        assert not lease.lost
        self.regained += 1


# -- happy path ----------------------------------------------------------------------


def test_lease_acquires_exposes_fields_and_releases_on_exit(client, make_license):
    make_license(seats=2, lease_seconds=3)
    before = signal.getsignal(signal.SIGTERM)
    with client.lease("lic", client_id="ws-1", metadata={"user": "ann"}) as lease:
        assert lease.license_id == "lic" and lease.client_id == "ws-1"
        assert lease.session_id and not lease.lost and not lease.overage
        assert (lease.lease_seconds, lease.heartbeat_interval_seconds) == (3, 1)
        assert (lease.seats_used, lease.seats_total) == (1, 2)
        assert isinstance(lease.expires_at, datetime) and lease.expires_at.tzinfo is not None
        assert 0 < (lease.expires_at - datetime.now(UTC)).total_seconds() <= 3.5
        [held] = live()
        assert (held["session_id"], held["client_id"]) == (lease.session_id, "ws-1")
        assert held["metadata"] == {"user": "ann"}
        assert client.held() == [lease]
        # the main thread holds a seat: SIGTERM releases it, chaining to the old handler
        assert signal.getsignal(signal.SIGTERM) == client._on_sigterm
    assert live() == [] and lease.released and client.held() == []
    assert signal.getsignal(signal.SIGTERM) == before
    # the seat really is free: another copy gets it as the only one
    assert client.acquire("lic", "ws-2")["seats_used"] == 1


def test_heartbeats_keep_the_lease_past_several_lease_lengths(client, make_license, served):
    make_license(lease_seconds=2)
    events = Events()
    with client.lease("lic", client_id="ws-1", on_lost=events.on_lost) as lease:
        first_expiry, session = lease.expires_at, lease.session_id
        time.sleep(5)  # 2.5 leases of 2 s
        assert [s["session_id"] for s in live()] == [session]
        assert lease.session_id == session and lease.expires_at > first_expiry
    # A third of the 2 s lease (the server's whole-second interval, 1 s, would leave no
    # room for one slow beat): 0.5-0.67 s with jitter, 7 to 10 beats in 5 s.
    assert 6 <= served.gate.counts["/heartbeat"] <= 11
    assert events.lost == [] and not lease.lost
    assert served.gate.counts["/acquire"] == 1 and served.gate.counts["/release"] == 1


# -- outages -------------------------------------------------------------------------


def test_server_restart_mid_lease_keeps_the_same_session(
    client, make_license, served, api_key, caplog
):
    caplog.set_level(logging.DEBUG, logger="seatlease.client")
    make_license(lease_seconds=4)
    events = Events()
    with client.lease("lic", client_id="ws-1", on_lost=events.on_lost) as lease:
        session, first_deadline = lease.session_id, lease.expires_at
        time.sleep(0.5)
        served.stop()  # heartbeats now fail with connection refused and are retried
        time.sleep(1.5)  # at least one heartbeat (every 1 s) failed meanwhile
        assert not lease.lost
        served.gate.counts.clear()
        served.start()  # same port, 2 s before the deadline
        eventually(lambda: served.gate.counts["/heartbeat"] >= 1, 3, "a heartbeat after restart")
        # past the original deadline: only the heartbeats after the restart kept it
        time.sleep(max(0.0, (first_deadline - datetime.now(UTC)).total_seconds()) + 0.5)
        assert lease.session_id == session and not lease.lost
        assert [s["session_id"] for s in live()] == [session]
    assert events.lost == [] and live() == []
    # the retries are logged, the API key never is
    assert "lic unreachable (network_error" in caplog.text and api_key not in caplog.text


def test_heartbeat_arriving_after_expiry_reacquires_and_reports(client, make_license, served):
    make_license(lease_seconds=2)
    events = Events()
    with client.lease(
        "lic", client_id="ws-1", on_lost=events.on_lost, on_regained=events.on_regained
    ) as lease:
        old = lease.session_id
        served.gate.hold_next_heartbeat = 3.0  # reaches the engine 1 s after the deadline
        eventually(lambda: events.regained == 1, 6, "the seat regained")
        # The client does not wait for it past the lease's deadline (issue 48): a renewal
        # not completed by then is abandoned and the seat lost as unreachable.
        assert events.lost == ["unreachable"]
        assert not lease.lost and lease.session_id != old and lease.client_id == "ws-1"
        [held] = live()
        assert (held["session_id"], held["client_id"]) == (lease.session_id, "ws-1")
    assert live() == []


def test_server_down_longer_than_the_lease_marks_it_lost_then_regains(client, make_license, served):
    make_license(lease_seconds=2)
    events = Events()
    with client.lease(
        "lic", client_id="ws-1", on_lost=events.on_lost, on_regained=events.on_regained
    ) as lease:
        old = lease.session_id
        served.stop()
        # (the callback runs just after `lost` is set: wait for both)
        eventually(lambda: lease.lost and events.lost, 4, "the lease marked lost")
        assert events.lost == ["unreachable"] and lease.lost_reason == "unreachable"
        served.start()
        # (the callback runs just after `lost` clears: wait for both)
        eventually(lambda: not lease.lost and events.regained, 4, "the seat regained")
        assert events.regained == 1 and lease.session_id != old
        assert [s["session_id"] for s in live()] == [lease.session_id]
    assert live() == []


def test_a_lease_redis_forgot_is_kept_by_its_token_without_on_lost(client, make_license, served):
    """Redis loses every seat (as a region's loss does, issue 40): the next heartbeat is
    410 ``unknown``, its one retry with the lease's last token (kept without ``verify``)
    re-admits the session: the same seat, no on_lost, nothing acquired again."""
    make_license(lease_seconds=2)
    events = Events()
    with client.lease(
        "lic", client_id="ws-1", on_lost=events.on_lost, on_regained=events.on_regained
    ) as lease:
        session = lease.session_id
        served.gate.counts.clear()
        redisconn.get_redis().flushall()
        time.sleep(2.5)  # past the 2 s lease: kept only by renewals after the flush
        assert events.lost == [] and events.regained == 0 and not lease.lost
        assert lease.session_id == session and [s["session_id"] for s in live()] == [session]
        assert served.gate.counts["/acquire"] == 0
    assert live() == []


def test_revoked_lease_stays_lost_while_denied_then_regains(client, make_license):
    make_license(seats=1, lease_seconds=2)
    events = Events()
    with client.lease(
        "lic", client_id="ws-1", on_lost=events.on_lost, on_regained=events.on_regained
    ) as lease:
        runtime.seat_engine().release(TENANT, "lic", lease.session_id, revoke=True)
        other = client.acquire("lic", "ws-2")  # takes the only seat before the next beat
        eventually(lambda: events.lost, 3, "the loss reported")
        # the server says an operator freed it (not "unknown": no retry with the token)
        assert events.lost == ["revoked"] and lease.lost_reason == "revoked"
        time.sleep(0.7)  # re-acquires are answered 409: still lost
        assert lease.lost and events.regained == 0
        client.release("lic", other["session_id"])
        eventually(lambda: events.regained == 1, 4, "the seat regained after the release")
        assert not lease.lost and [s["client_id"] for s in live()] == ["ws-1"]
    assert live() == []


def test_retries_on_503_while_redis_is_down(client, make_license, monkeypatch, served):
    own = start_redis()
    try:
        monkeypatch.setenv("REDIS_URL", own.url)
        redisconn.reset()
        make_license(lease_seconds=3)
        events = Events()
        with client.lease(
            "lic", client_id="ws-1", on_lost=events.on_lost, on_regained=events.on_regained
        ) as lease:
            own.stop()  # every call is now answered 503 with Retry-After
            with pytest.raises(BackendUnavailable) as raised:
                SeatClient(served.url, client._api_key, retries=0, pinned_keys=pinned()).acquire(
                    "lic", "ws-9"
                )
            assert raised.value.status == 503 and raised.value.code == "backend_unavailable"
            assert raised.value.retry_after_seconds == 2

            result: dict[str, Any] = {}
            served.gate.counts.clear()
            waiter = threading.Thread(
                target=lambda: result.update(client.acquire("lic", "ws-2")), daemon=True
            )
            waiter.start()
            time.sleep(1.5)
            assert not lease.lost and result == {}  # still retrying...
            # ...but not before Retry-After (2 s), although backoff alone would be 0.1 s
            assert served.gate.counts["/acquire"] == 1
            own = start_redis(port=int(own.url.rsplit(":", 1)[1].split("/")[0]))
            redisconn.reset()
            # The new Redis lost its data: the service finds it (the shard's mark gone) and
            # opens a recovery window of the license's leases (3 s / 3 + 5 s), in which a
            # new seat waits (503 recovering, Retry-After) and ws-1 comes back by its token
            waiter.join(timeout=20)
            assert result["client_id"] == "ws-2"  # the retried acquire got through
            # the new Redis lost the live leases (as the design says): the heartbeat's 410
            # "unknown" is retried with the lease's token, which re-admits it (no loss); had
            # the 503s outlasted the token (its exp: the last deadline), the seat is lost,
            # "unknown" (the token refused) or "unreachable" (the lease ran out first), and
            # re-acquired
            eventually(
                lambda: sorted(s["client_id"] for s in live()) == ["ws-1", "ws-2"], 5, "ws-1"
            )
            outcomes = (([], 0), (["unknown"], 1), (["unreachable"], 1))
            assert (events.lost, events.regained) in outcomes
            assert not lease.lost
    finally:
        own.stop()
        redisconn.reset()


# -- waiting -------------------------------------------------------------------------


def _hold_for(client: SeatClient, seconds: float, ready: threading.Event) -> threading.Thread:
    def hold() -> None:
        with client.lease("lic", client_id="holder"):
            ready.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert ready.wait(5)
    return thread


def test_wait_gets_a_seat_released_while_waiting(client, make_license):
    make_license(seats=1, lease_seconds=3)
    holder = _hold_for(client, 1.0, threading.Event())  # heartbeats keep it, then releases
    with pytest.raises(NoSeatsAvailable) as denied:
        client.acquire("lic", "waiter")
    assert (denied.value.seats_used, denied.value.seats_total) == (1, 1)
    assert 1 <= denied.value.retry_after_seconds <= 3
    start = time.monotonic()
    with client.lease("lic", client_id="waiter", wait=True, timeout=8) as lease:
        waited = time.monotonic() - start
        assert lease.session_id and [s["client_id"] for s in live()] == ["waiter"]
    holder.join(1)
    assert 0.8 < waited < 5  # the holder's release, noticed at the 409's Retry-After


def test_wait_timeout_raises_seat_wait_timeout(client, make_license):
    make_license(seats=1, lease_seconds=3)
    ready = threading.Event()
    holder = _hold_for(client, 2.5, ready)
    start = time.monotonic()
    with pytest.raises(SeatWaitTimeout) as timed_out:
        with client.lease("lic", client_id="waiter", wait=True, timeout=1.2):
            pytest.fail("no seat should be free")
    elapsed = time.monotonic() - start
    assert 1.1 < elapsed < 4
    assert isinstance(timed_out.value, NoSeatsAvailable) and timed_out.value.status == 409
    assert (timed_out.value.seats_used, timed_out.value.seats_total) == (1, 1)
    assert [s["client_id"] for s in live()] == ["holder"] and client.held() != []
    holder.join(4)
    assert client.held() == []


def test_a_full_queue_is_queue_full_a_kind_of_no_seats(client, make_license):
    make_license(seats=1, lease_seconds=30, policy={"queue": True, "queue_max": 1})
    client.acquire("lic", "holder")
    assert client.acquire("lic", "w1", queue=True)["queued"] is True
    with pytest.raises(QueueFull) as full:
        client.acquire("lic", "w2", queue=True)
    assert isinstance(full.value, NoSeatsAvailable) and full.value.status == 409
    assert (full.value.code, full.value.queue_max, full.value.seats_used) == ("queue_full", 1, 1)
    assert full.value.retry_after_seconds >= 1
    with pytest.raises(NoSeatsAvailable) as plain:  # not a QueueFull: a plain full license
        client.acquire("lic", "w3")
    assert not isinstance(plain.value, QueueFull) and plain.value.seats_held == 0


def test_wait_uses_the_license_queue_and_is_served_in_order(client, make_license):
    """On a license with a wait queue, wait=True takes a place in line (202 and a
    ticket), keeps it, and the clients that waited get the seat in the order they came;
    a plain acquire meanwhile gets a 409, and user and host reach the lease."""
    make_license(seats=1, lease_seconds=3, policy={"queue": True, "queue_hold_seconds": 5})
    holder = _hold_for(client, 1.5, threading.Event())
    got: list[str] = []
    lock = threading.Lock()

    def wait_for_seat(cid: str) -> None:
        with client.lease("lic", client_id=cid, wait=True, timeout=15, user=cid, host="pc"):
            with lock:
                got.append(cid)
            time.sleep(0.3)

    first = threading.Thread(target=wait_for_seat, args=("w1",))
    first.start()
    eventually(lambda: runtime.seat_engine().waiting(TENANT, "lic"), 5, "w1 in line")
    second = threading.Thread(target=wait_for_seat, args=("w2",))
    second.start()
    waiting = eventually(
        lambda: (
            [t for t in runtime.seat_engine().waiting(TENANT, "lic") if t["user"]]
            if len(runtime.seat_engine().waiting(TENANT, "lic")) == 2
            else None
        ),
        5,
        "both in line",
    )
    assert [(t["client_id"], t["user"]) for t in waiting] == [("w1", "w1"), ("w2", "w2")]
    place = client.acquire("lic", "intruder", queue=True)
    assert place["queued"] is True and place["position"] == 3
    for thread in (first, second):
        thread.join(20)
    holder.join(2)
    assert got == ["w1", "w2"]


# -- errors --------------------------------------------------------------------------


def test_typed_errors(client, make_license, served, api_key):
    make_license("lic", seats=1, lease_seconds=3, max_lease_seconds=60)
    make_license("frozen", seats=1)
    store.update_license(TENANT, "frozen", suspended=True)
    runtime.refresh_license_cache(TENANT, "frozen")

    def raised(kind: type[SeatError], call: Callable[[], Any]) -> SeatError:
        with pytest.raises(kind) as info:
            call()
        assert isinstance(info.value, SeatError) and info.value.message
        return info.value

    err = raised(LicenseNotFound, lambda: client.acquire("nope", "ws-1"))
    assert (err.status, err.code) == (404, "license_not_found")
    err = raised(LicenseSuspended, lambda: client.acquire("frozen", "ws-1"))
    assert (err.status, err.code) == (403, "license_suspended")
    bad_key = "sl_0123abcd_" + "x" * 32
    bad = SeatClient(served.url, bad_key, pinned_keys=pinned())
    err = raised(Unauthenticated, lambda: bad.acquire("lic", "ws-1"))
    assert (err.status, err.code) == (401, "unauthenticated")
    assert bad_key not in str(err) and bad_key not in repr(bad)
    err = raised(InvalidRequest, lambda: client.acquire("lic", "ws-1", lease_seconds=61))
    assert (err.status, err.code, err.body["max_lease_seconds"]) == (400, "invalid_request", 60)
    err = raised(InvalidRequest, lambda: client.acquire("lic", "bad id!"))
    assert err.body["details"][0]["field"] == "client_id"
    err = raised(SessionExpired, lambda: client.heartbeat("lic", "no-such-session"))
    assert (err.status, err.code, err.reason) == (410, "session_expired", "unknown")
    released = client.release("lic", "no-such-session")
    assert (released["released"], released["seats_used"]) == (False, 0)

    client.acquire("lic", "ws-1")
    err = raised(NoSeatsAvailable, lambda: client.acquire("lic", "ws-2"))
    assert (err.status, err.code) == (409, "no_seats_available")
    assert (err.seats_used, err.seats_total) == (1, 1)
    assert 1 <= err.retry_after_seconds <= 3
    # the context manager raises the same types and holds nothing afterwards
    raised(NoSeatsAvailable, lambda: client.lease("lic", client_id="ws-2").__enter__())
    raised(LicenseNotFound, lambda: client.lease("nope", client_id="ws-2").__enter__())
    assert client.held() == []

    unreachable = SeatClient(
        f"http://127.0.0.1:{free_port()}", api_key, retries=1, backoff=0.01, pinned_keys=pinned()
    )
    err = raised(BackendUnavailable, lambda: unreachable.acquire("lic", "ws-1"))
    assert (err.status, err.code) == (0, "network_error")


def test_api_key_never_in_repr_or_errors(client, make_license, api_key):
    make_license(seats=1)
    assert api_key not in repr(client) and "hidden" in repr(client)
    assert api_key not in repr(AsyncSeatClient(client.base_url, api_key, pinned_keys=pinned()))
    with client.lease("lic", client_id="ws-1") as lease:
        assert api_key not in repr(lease)
        with pytest.raises(NoSeatsAvailable) as denied:
            client.acquire("lic", "ws-2")
        assert api_key not in str(denied.value) and api_key not in repr(denied.value.body)
    with pytest.raises(ValueError):
        SeatClient("ftp://example.com", api_key, pinned_keys=pinned())


# -- threads, processes, asyncio -----------------------------------------------------


def test_threads_share_one_client_each_holding_a_lease(client, make_license):
    make_license(seats=4, lease_seconds=2)
    sessions: dict[int, str] = {}
    errors: list[BaseException] = []
    all_in = threading.Barrier(5)

    def work(i: int) -> None:
        try:
            with client.lease("lic", client_id=f"t{i}") as lease:
                sessions[i] = lease.session_id
                all_in.wait(5)
                time.sleep(2.5)  # longer than the lease: each thread's heartbeats count
                assert not lease.lost and lease.session_id == sessions[i]
                all_in.wait(5)
                all_in.wait(5)  # hold the seat until the main thread has looked at Redis
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    all_in.wait(5)
    assert len(client.held()) == 4
    all_in.wait(8)  # every thread has held its seat past two lease lengths
    assert sorted(s["client_id"] for s in live()) == ["t0", "t1", "t2", "t3"]
    all_in.wait(5)  # now the threads may leave their with blocks and release
    for t in threads:
        t.join(5)
    assert errors == [] and len(set(sessions.values())) == 4
    assert live() == [] and client.held() == []


CHILD = """
import signal, sys, time
from seatlease_client import SeatClient

url, key, mode, pinned = sys.argv[1:5]
if mode == "chained":
    def previous(signum, frame):
        print("previous handler ran", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, previous)
client = SeatClient(url, key, pinned_keys=pinned.split(","))
lease = client.lease("lic", client_id="child-" + mode).__enter__()
print(lease.session_id, flush=True)
if mode == "atexit":
    sys.exit(0)  # never leaves the with block: the atexit hook releases
time.sleep(30)
"""


@pytest.mark.parametrize(
    ("mode", "returncode"), [("default", -signal.SIGTERM), ("chained", 7), ("atexit", 0)]
)
def test_sigterm_and_exit_release_the_seat(served, api_key, make_license, mode, returncode):
    make_license(seats=1, lease_seconds=30)  # so only a release frees it quickly
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, served.url, api_key, mode, ",".join(pinned())],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        session = child.stdout.readline().strip()
        assert session, child.stderr.read()
        if mode != "atexit":
            assert [s["session_id"] for s in live()] == [session]
            child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=10)
    finally:
        child.kill()
    assert child.returncode == returncode, err
    assert ("previous handler ran" in out) == (mode == "chained")
    assert live() == []
    assert served.gate.counts["/release"] == 1


def test_lease_in_a_worker_thread_leaves_sigterm_alone(client, make_license):
    make_license(seats=1)
    before = signal.getsignal(signal.SIGTERM)
    seen: list[Any] = []

    def work() -> None:
        with client.lease("lic", client_id="ws-1"):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(5)
    assert seen == [before] and live() == []


def test_async_client_lease_heartbeats_and_releases(served, api_key, make_license):
    make_license(seats=1, lease_seconds=2)
    events = Events()

    async def main() -> None:
        client = AsyncSeatClient(served.url, api_key, backoff=0.1, pinned_keys=pinned())
        async with client.lease("lic", client_id="ws-1", on_lost=events.on_lost) as lease:
            session = lease.session_id
            await asyncio.sleep(3)  # a lease and a half: the asyncio task heartbeats
            assert [s["session_id"] for s in live()] == [session] and not lease.lost
            with pytest.raises(NoSeatsAvailable):
                await client.acquire("lic", "ws-2")
        assert live() == []
        got = await client.acquire("lic", "ws-2")
        beat = await client.heartbeat("lic", got["session_id"])
        assert beat["session_id"] == got["session_id"]
        assert (await client.release("lic", got["session_id"]))["released"] is True

    asyncio.run(main())
    assert events.lost == [] and served.gate.counts["/heartbeat"] >= 3


def test_overage_seat_is_flagged(client, make_license):
    make_license(seats=1, overage_percent=100)
    with (
        client.lease("lic", client_id="ws-1") as first,
        client.lease("lic", client_id="ws-2") as extra,
    ):
        assert not first.overage and extra.overage
        assert (extra.seats_used, extra.seats_total) == (2, 1)


def test_a_lease_context_is_entered_once(client, make_license):
    make_license(seats=1)
    context = client.lease("lic", client_id="ws-1")
    with context:
        pass
    with pytest.raises(RuntimeError):
        context.__enter__()
    assert live() == []


def test_client_package_imports_only_the_standard_library():
    """The vendor SDK has zero runtime dependencies: only the standard library and itself,
    token verification included (a pure-Python Ed25519, ``_ed25519``; issue 48)."""
    imported = set()
    for source in (REPO / "shared" / "client" / "seatlease_client").glob("*.py"):
        tree = ast.parse(source.read_text())
        imported |= {
            (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "level", 0) == 0
            for alias in node.names
        }
    allowed = set(sys.stdlib_module_names) | {"__future__", "seatlease_client"}
    assert "urllib" in imported and imported <= allowed, imported - allowed


def test_the_api_key_never_follows_a_redirect() -> None:
    """A 302 to another host (a misconfigured proxy, a hostile DNS answer), which urllib
    follows as a GET, is not followed at all (issue 48): the error names its Location and
    the other host receives nothing, let alone the key."""
    import http.server

    seen: list[str | None] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"code": "x", "message": "x"}}')

        do_GET = do_POST

        def log_message(self, *args):
            pass

    recorder = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    target = f"http://127.0.0.1:{recorder.server_address[1]}"

    class Redirector(Recorder):
        def do_POST(self):
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.end_headers()

    redirector = http.server.HTTPServer(("127.0.0.1", 0), Redirector)
    for srv in (recorder, redirector):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        client = SeatClient(f"http://127.0.0.1:{redirector.server_address[1]}",
                            "sl_00000000_" + "k" * 32, retries=0, pinned_keys=[KEY_X])  # fmt: skip
        with pytest.raises(ServiceError) as moved:
            client.acquire("lic", "pc-1")
        assert seen == []
        assert moved.value.code == "redirected" and moved.value.location == f"{target}/acquire"
        assert f"{target}/acquire" in str(moved.value)
    finally:
        recorder.shutdown()
        redirector.shutdown()


def test_waiting_rides_out_an_outage_within_its_timeout(
    redis_url, api_key, make_license, functions_app
):
    make_license("lic", seats=1)
    srv = Served(functions_app)
    client = SeatClient(
        srv.url, api_key, backoff=0.05, max_backoff=0.2, retries=2, pinned_keys=pinned()
    )
    threading.Timer(1.5, srv.start).start()  # the service comes up while we wait
    try:
        started = time.monotonic()
        with client.lease("lic", client_id="patient", wait=True, timeout=20) as lease:
            assert lease.session_id
        assert time.monotonic() - started < 15
        srv.stop()
        started = time.monotonic()
        with pytest.raises(SeatError):
            with client.lease("lic", client_id="patient", wait=True, timeout=1.0):
                pass
        assert time.monotonic() - started < 4  # the timeout bounds the wait
    finally:
        srv.stop()


def test_heartbeat_retries_speed_up_as_the_deadline_nears():
    """Pure logic: a failing heartbeat is retried at most a heartbeat interval apart, and
    at most a third of the time left before the deadline (so the last moments get several
    tries); once the seat is lost the ordinary backoff applies again."""
    from seatlease_client._lease import Lease, _Keeper

    client = SeatClient(
        "http://127.0.0.1:9", "sl_00000000_" + "k" * 32, backoff=10.0, pinned_keys=[KEY_X]
    )
    lease = Lease("lic", "ws-1")
    lease.lease_seconds, lease.heartbeat_interval_seconds = 30, 10
    keeper = _Keeper(client, lease, None, None, None)
    keeper.failures = 5
    keeper.valid_until = time.monotonic() + 60
    assert all(5 <= keeper._backoff(None) <= 10 for _ in range(20))  # the interval cap
    keeper.valid_until = time.monotonic() + 3
    assert all(0.45 <= keeper._backoff(None) <= 1.0 for _ in range(20))  # a third of 3 s
    keeper.valid_until = time.monotonic() + 0.01
    assert all(keeper._backoff(None) <= 0.05 for _ in range(20))
    assert keeper._backoff(2.0) >= 2.0  # Retry-After still wins
    lease.lost = True
    assert all(5 <= keeper._backoff(None) <= 10 for _ in range(20))
