"""The Python client's idle reporting (issue 50; contract: "Clients"): ``lease.touch()``,
``with lease.busy():``, ``on_idle_warning`` and a seat reclaimed for idleness.

First against a scripted server in this process (it answers each heartbeat as the test
says, with tokens signed by the bad server's key, tests/client_bad_server.py, and records
every request's body): the wire format exactly as the contract says, the warning's
callback, the heartbeat a touch sends at once after a warning, and a ``410`` reason
``idle``. Then end to end against the real functions (tests/client_harness.py's stack on
the session's Redis and PostgreSQL), where the engine decides."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from client_bad_server import GRANT, KEY_X, jwks, signed
from http_support import serving
from werkzeug.wrappers import Request, Response

from seatlease_client import AsyncSeatClient, InvalidResponse, Lease, SeatClient, SessionExpired

KEY = "sl_00000000_" + "k" * 32
RECLAIM_AT = "2100-01-01T00:00:00.000Z"


def renewal(session_id: str, **fields: Any) -> dict[str, Any]:
    """A heartbeat's 200 answer: a 3 s lease beaten every second, unless ``fields`` say."""
    return {
        "session_id": session_id,
        "lease_expires_at": "2100-01-01T00:00:00.000Z",
        "lease_seconds": 3,
        "heartbeat_interval_seconds": 1,
        **fields,
    }


def gone(reason: str) -> tuple[int, dict[str, Any]]:
    error = {"code": "session_expired", "reason": reason, "message": f"The session is {reason}."}
    return 410, {"error": error}


class Scripted:
    """WSGI: acquire grants a new session (a 3 s lease), release releases, and each
    heartbeat is answered by ``on_heartbeat(body)`` (default: renewed); every request is
    recorded as (function, body, time.monotonic())."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[tuple[str, dict[str, Any], float]] = []
        self.sessions = 0
        self.url = ""
        self.on_heartbeat: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]] = lambda b: (
            200,
            renewal(b["session_id"]),
        )

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        function = request.path.rsplit("/", 1)[-1]
        if function == "keys":
            return self.json(200, jwks())(environ, start_response)
        raw = request.get_data()
        environ["wsgi.input"] = io.BytesIO(raw)
        body = json.loads(raw or b"{}")
        with self.lock:
            self.sent.append((function, body, time.monotonic()))
            if function == "acquire":
                self.sessions += 1
                session = f"c2Vzc2lvbi0{self.sessions:013d}"
        if function == "acquire":
            grant = {**GRANT, "session_id": session, "lease_seconds": 3}
            grant["heartbeat_interval_seconds"] = 1
            status, answer = 201, grant
        elif function == "release":
            status, answer = 200, {"released": True, "seats_used": 0}
        else:
            status, answer = self.on_heartbeat(body)
        if status < 300:
            answer = signed(function, body, answer)
        return self.json(status, answer)(environ, start_response)

    @staticmethod
    def json(status: int, body: Any) -> Response:
        return Response(json.dumps(body), status=status, mimetype="application/json")

    def bodies(self, function: str, since: float = 0.0) -> list[dict[str, Any]]:
        with self.lock:
            return [body for name, body, at in self.sent if name == function and at >= since]

    def wait_for(self, function: str, count: int, within: float, since: float = 0.0) -> list:
        """The first ``count`` bodies of ``function`` sent after ``since``, waited for."""
        deadline = time.monotonic() + within
        while len(bodies := self.bodies(function, since)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(bodies)} {function} of {count} within {within} s")
            time.sleep(0.02)
        return bodies[:count]


@contextmanager
def scripted() -> Iterator[tuple[Scripted, SeatClient]]:
    server = Scripted()
    with serving(server, quiet=True) as url:
        server.url = url
        client = SeatClient(url, KEY, pinned_keys=[KEY_X], backoff=0.1, handle_sigterm=False)
        yield server, client


ACTIVITY = ("idle_seconds", "busy")


# -- the wire format ------------------------------------------------------------------


def test_a_lease_never_touched_sends_neither_field():
    with scripted() as (server, client), client.lease("lic", client_id="pc-1"):
        beats = server.wait_for("heartbeat", 2, within=5)
    assert [sorted(set(ACTIVITY) & set(b)) for b in beats] == [[], []]


def test_after_the_first_touch_each_heartbeat_sends_the_whole_seconds_since_it():
    with scripted() as (server, client), client.lease("lic", client_id="pc-1") as lease:
        lease.touch(seconds_ago=75.6)
        touched = time.monotonic()
        first, second = server.wait_for("heartbeat", 2, within=5, since=touched)
        lease.touch()
        [fresh] = server.wait_for("heartbeat", 1, within=5, since=time.monotonic())
    # whole seconds (floored), growing with time, an int and never a float; no busy
    assert isinstance(first["idle_seconds"], int) and 75 <= first["idle_seconds"] <= 77
    assert first["idle_seconds"] <= second["idle_seconds"] <= 78
    assert fresh["idle_seconds"] in (0, 1)
    assert not any("busy" in body for body in (first, second, fresh))


def test_busy_scopes_nest_and_send_busy_true_only_while_one_is_open():
    with scripted() as (server, client), client.lease("lic", client_id="pc-1") as lease:
        with lease.busy():
            with lease.busy():
                [inner] = server.wait_for("heartbeat", 1, within=5, since=time.monotonic())
            [outer] = server.wait_for("heartbeat", 1, within=5, since=time.monotonic())
        [after] = server.wait_for("heartbeat", 1, within=5, since=time.monotonic())
    assert inner.get("busy") is True and outer.get("busy") is True
    assert "busy" not in after
    assert not any("idle_seconds" in b for b in (inner, outer, after))  # never touched


def test_a_busy_scope_is_entered_once_and_touch_takes_a_real_number():
    lease = Lease("lic", "pc-1")
    scope = lease.busy()
    with scope:
        pass
    with pytest.raises(RuntimeError), scope:
        pass
    for bad in (-1, float("nan"), float("inf"), "5"):
        with pytest.raises(ValueError):
            lease.touch(seconds_ago=bad)  # type: ignore[arg-type]


def test_the_plain_heartbeat_sends_idle_seconds_and_busy_when_given():
    with scripted() as (server, client):
        session = client.acquire("lic", "pc-1")["session_id"]
        client.heartbeat("lic", session)
        client.heartbeat("lic", session, idle_seconds=90, busy=False)
        client.heartbeat("lic", session, busy=True)
    plain, idle, busy = server.bodies("heartbeat")
    assert not set(ACTIVITY) & set(plain)
    assert (idle["idle_seconds"], idle["busy"]) == (90, False)
    assert busy["busy"] is True and "idle_seconds" not in busy


# -- the warning ----------------------------------------------------------------------


def warn_while(
    flag: threading.Event, always: bool = False, **fields: Any
) -> Callable[[dict], tuple[int, dict]]:
    """Heartbeats answered with an idle warning while ``flag`` is set, and ``fields``
    with it (``always``: with every answer)."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        extra = dict(fields) if always or flag.is_set() else {}
        if flag.is_set():
            extra["idle_reclaim_at"] = RECLAIM_AT
        return 200, renewal(body["session_id"], **extra)

    return answer


def test_the_warning_calls_on_idle_warning_once_per_warning():
    warned: list[tuple[Lease, datetime]] = []
    warning = threading.Event()
    with scripted() as (server, client):
        server.on_heartbeat = warn_while(warning)
        with client.lease(
            "lic", client_id="pc-1", on_idle_warning=lambda *a: warned.append(a)
        ) as lease:
            warning.set()
            server.wait_for("heartbeat", 3, within=6, since=time.monotonic())
            assert len(warned) == 1  # three warned answers, one call
            assert lease.idle_reclaim_at == datetime(2100, 1, 1, tzinfo=UTC)
            assert warned[0] == (lease, lease.idle_reclaim_at)
            warning.clear()
            server.wait_for("heartbeat", 2, within=5, since=time.monotonic())
            assert lease.idle_reclaim_at is None  # cleared by an answer without it
            warning.set()
            server.wait_for("heartbeat", 2, within=5, since=time.monotonic())
    assert len(warned) == 2  # warned again after it was cleared


def test_after_a_warning_a_touch_sends_a_heartbeat_at_once():
    """A renewal stretches the interval to 20 s: the heartbeat that cancels the warning
    must not wait for it, and the touch itself must not wait on the network."""
    warning = threading.Event()
    warned = threading.Event()
    with scripted() as (server, client):
        # renewed: a 60 s lease, beaten every 20 s
        server.on_heartbeat = warn_while(
            warning, always=True, lease_seconds=60, heartbeat_interval_seconds=20
        )
        with client.lease(
            "lic", client_id="pc-1", on_idle_warning=lambda *_: warned.set()
        ) as lease:
            lease.touch(seconds_ago=120)
            touched = time.monotonic()
            warning.set()
            assert warned.wait(5)
            time.sleep(0.3)  # the next heartbeat is now 15-20 s away
            before = len(server.bodies("heartbeat"))
            started = time.monotonic()
            # the same activity again, half a second newer (a poller of the system's idle
            # time): it cannot make the idle seconds any fewer, so no heartbeat
            lease.touch(seconds_ago=120 + (time.monotonic() - touched) - 0.5)
            time.sleep(0.5)
            assert len(server.bodies("heartbeat")) == before
            warning.clear()
            lease.touch()
            took = time.monotonic() - started
            [cancel] = server.wait_for("heartbeat", 1, within=2, since=started)
            for _ in range(20):  # key presses while it is on its way: no more heartbeats
                lease.touch()
            time.sleep(0.5)
            after = server.bodies("heartbeat", since=started)
    assert took < 0.6  # the touches returned at once (0.5 s of it the test's sleep)
    assert cancel["idle_seconds"] in (0, 1)
    assert len(after) == 1, after
    assert lease.idle_reclaim_at is None


def test_the_first_touch_ever_also_cancels_a_warning():
    """Warned before any touch (the server's own idea, or a product that touches late):
    the first touch is newer than anything reported."""
    warning = threading.Event()
    warned = threading.Event()
    with scripted() as (server, client):
        server.on_heartbeat = warn_while(warning, lease_seconds=60, heartbeat_interval_seconds=20)
        with client.lease(
            "lic", client_id="pc-1", on_idle_warning=lambda *_: warned.set()
        ) as lease:
            warning.set()
            assert warned.wait(5)
            started = time.monotonic()
            lease.touch()
            [cancel] = server.wait_for("heartbeat", 1, within=2, since=started)
    assert cancel["idle_seconds"] == 0


def test_after_a_warning_entering_a_busy_scope_sends_a_heartbeat_at_once():
    warning = threading.Event()
    warned = threading.Event()
    with scripted() as (server, client):
        server.on_heartbeat = warn_while(warning, lease_seconds=60, heartbeat_interval_seconds=20)
        with client.lease(
            "lic", client_id="pc-1", on_idle_warning=lambda *_: warned.set()
        ) as lease:
            lease.touch(seconds_ago=300)
            warning.set()
            assert warned.wait(5)
            started = time.monotonic()
            with lease.busy():
                [cancel] = server.wait_for("heartbeat", 1, within=2, since=started)
    assert cancel["busy"] is True and cancel["idle_seconds"] >= 300


def test_a_malformed_idle_reclaim_at_is_not_the_services_answer():
    with scripted() as (server, client):
        session = client.acquire("lic", "pc-1")["session_id"]
        server.on_heartbeat = lambda b: (200, renewal(b["session_id"], idle_reclaim_at=7))
        with pytest.raises(InvalidResponse):
            client.heartbeat("lic", session)


# -- reclaimed for idleness -----------------------------------------------------------


def test_a_410_idle_is_lost_as_idle_and_asked_for_again_only_on_activity():
    lost: list[str] = []
    regained = threading.Event()
    reclaimed = threading.Event()
    with scripted() as (server, client):

        def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            if reclaimed.is_set() and body["session_id"].endswith("1"):
                return gone("idle")
            return 200, renewal(body["session_id"])

        server.on_heartbeat = answer
        with client.lease(
            "lic", client_id="pc-1",
            on_lost=lambda _, reason: lost.append(reason),
            on_regained=lambda _: regained.set(),
        ) as lease:  # fmt: skip
            lease.touch(seconds_ago=600)
            reclaimed.set()
            deadline = time.monotonic() + 5
            while not lease.lost and time.monotonic() < deadline:
                time.sleep(0.02)
            assert (lease.lost, lease.lost_reason, lost) == (True, "idle", ["idle"])
            time.sleep(2.5)  # several heartbeat intervals: no re-acquire while idle
            assert len(server.bodies("acquire")) == 1
            lease.touch()
            assert regained.wait(2)
            assert (lease.lost, lease.lost_reason) == (False, None)
            assert lease.session_id.endswith("2")
            server.wait_for("heartbeat", 1, within=3, since=time.monotonic())
    assert lost == ["idle"] and len(server.bodies("acquire")) == 2


def test_a_busy_scope_also_asks_again_for_a_seat_reclaimed_for_idleness():
    regained = threading.Event()
    with scripted() as (server, client):
        server.on_heartbeat = lambda body: (
            gone("idle") if body["session_id"].endswith("1") else (200, renewal(body["session_id"]))
        )
        with client.lease("lic", client_id="pc-1", on_regained=lambda _: regained.set()) as lease:
            deadline = time.monotonic() + 5
            while not lease.lost and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lease.lost_reason == "idle"
            with lease.busy():
                assert regained.wait(2)


def test_the_plain_heartbeat_raises_session_expired_with_reason_idle():
    with scripted() as (server, client):
        session = client.acquire("lic", "pc-1")["session_id"]
        server.on_heartbeat = lambda _: gone("idle")
        with pytest.raises(SessionExpired) as raised:
            client.heartbeat("lic", session, idle_seconds=3600)
    assert raised.value.reason == "idle"


# -- the asyncio client ---------------------------------------------------------------


def test_the_async_client_reports_activity_and_wakes_on_a_touch_after_a_warning():
    warning = threading.Event()

    async def run(url: str, server: Scripted) -> tuple[list[dict], dict, float]:
        client = AsyncSeatClient(url, KEY, pinned_keys=[KEY_X], handle_sigterm=False)
        warned = asyncio.Event()
        loop = asyncio.get_running_loop()
        async with client.lease(
            "lic", client_id="pc-1",
            on_idle_warning=lambda *_: loop.call_soon_threadsafe(warned.set),
        ) as lease:  # fmt: skip
            lease.touch(seconds_ago=100)
            with lease.busy():
                await asyncio.sleep(1.2)
            warning.set()
            await asyncio.wait_for(warned.wait(), 5)
            started = time.monotonic()
            lease.touch()  # from the event loop itself: it must not block it
            while not server.bodies("heartbeat", since=started):
                await asyncio.sleep(0.02)
            took = time.monotonic() - started
            return server.bodies("heartbeat"), server.bodies("heartbeat", started)[0], took

    with scripted() as (server, _):
        server.on_heartbeat = warn_while(warning, lease_seconds=60, heartbeat_interval_seconds=20)
        beats, cancel, took = asyncio.run(run(server.url, server))
    assert any(b.get("busy") is True and b["idle_seconds"] >= 100 for b in beats)
    assert cancel["idle_seconds"] == 0 and "busy" not in cancel
    assert took < 2


# -- end to end: the real functions and engine ------------------------------------------


def eventually(check: Callable[[], Any], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.05)
    return value


def create_license(stack: Any, license_id: str, **fields: Any) -> None:
    import urllib.request

    request = urllib.request.Request(
        f"{stack.url}/_test/license",
        data=json.dumps({"license_id": license_id, **fields}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def live_clients(stack: Any, license_id: str) -> list[str]:
    import urllib.request

    with urllib.request.urlopen(f"{stack.url}/_test/live?license_id={license_id}") as answer:
        return [lease["client_id"] for lease in json.load(answer)]


def stack_client(stack: Any) -> SeatClient:
    return SeatClient(
        stack.url, stack.api_key, pinned_keys=stack.pinned_keys(), backoff=0.1,
        handle_sigterm=False, max_wait_poll=1.0,
    )  # fmt: skip


def test_end_to_end_an_idle_lease_is_warned_and_a_touch_cancels_it(client_functions):
    create_license(client_functions, "idle1", seats=1, lease_seconds=3, idle_timeout_seconds=60)
    client = stack_client(client_functions)
    warned: list[datetime] = []
    with client.lease(
        "idle1", client_id="pc-1", on_idle_warning=lambda _, at: warned.append(at)
    ) as lease:
        lease.touch(seconds_ago=61)
        eventually(lambda: lease.idle_reclaim_at, 5, "the idle warning")
        assert len(warned) == 1
        # no earlier than one heartbeat interval (a third of the 3 s lease) after now
        assert warned[0] > datetime.now(UTC) - timedelta(seconds=1)
        lease.touch()
        eventually(lambda: lease.idle_reclaim_at is None, 3, "the warning cancelled")
        assert not lease.lost


def test_end_to_end_always_reclaims_an_idle_lease_as_idle_and_a_touch_regains_it(client_functions):
    create_license(
        client_functions,
        "idle2",
        seats=1,
        lease_seconds=3,
        idle_timeout_seconds=60,
        idle_reclaim="always",
    )
    client = stack_client(client_functions)
    lost: list[str] = []
    with client.lease("idle2", client_id="pc-1", on_lost=lambda _, r: lost.append(r)) as lease:
        lease.touch(seconds_ago=3600)
        eventually(lambda: lease.lost, 8, "the idle lease reclaimed")
        assert (lease.lost_reason, lost) == ("idle", ["idle"])
        time.sleep(2)
        assert lease.lost  # not taken straight back
        assert live_clients(client_functions, "idle2") == []
        lease.touch()
        eventually(lambda: not lease.lost, 5, "the seat asked for again on activity")
        assert live_clients(client_functions, "idle2") == ["pc-1"]


def test_end_to_end_a_busy_lease_is_never_warned(client_functions):
    create_license(
        client_functions,
        "idle3",
        seats=1,
        lease_seconds=3,
        idle_timeout_seconds=60,
        idle_reclaim="always",
    )
    client = stack_client(client_functions)
    with client.lease("idle3", client_id="pc-1") as lease, lease.busy():
        lease.touch(seconds_ago=3600)
        time.sleep(4)
        assert lease.idle_reclaim_at is None and not lease.lost


def test_end_to_end_when_needed_hands_the_idle_seat_to_a_refused_client(client_functions):
    create_license(client_functions, "idle4", seats=1, lease_seconds=3, idle_timeout_seconds=60)
    client = stack_client(client_functions)
    lost: list[str] = []
    with client.lease("idle4", client_id="idle-pc", on_lost=lambda _, r: lost.append(r)) as idle:
        idle.touch(seconds_ago=3600)
        eventually(lambda: idle.idle_reclaim_at, 5, "the idle warning")
        time.sleep(2)  # nobody waits: the warned lease keeps its seat
        assert not idle.lost and live_clients(client_functions, "idle4") == ["idle-pc"]
        with client.lease("idle4", client_id="busy-pc", wait=True, timeout=10) as other:
            assert other.session_id
            eventually(lambda: idle.lost, 5, "the idle lease told")
            assert live_clients(client_functions, "idle4") == ["busy-pc"]
    assert lost == ["idle"]
