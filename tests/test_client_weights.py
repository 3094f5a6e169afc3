"""seatlease_client (Python) and weighted seats: a lease that counts as N of the license's
seats (``seats=N``, ``lease.seats``), kept on renewal and on a re-acquire after a loss,
``SeatsMismatch`` (409 ``seats_mismatch``) for another weight, ``seats_requested`` on a
denial, and the token's ``seats`` claim.

Two kinds of test: the client's own behaviour against a small recording server here (what
it sends, what it makes of an answer, an older server's answer without ``seats``), and the
same story against the real functions on real Redis and PostgreSQL (``client_functions``).
The Node, Go, C and Java clients run the same story in their own suites."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jwt
import pytest
from client_bad_server import WEIGHTED_DENIAL
from http_support import post_json, serving
from werkzeug.wrappers import Request, Response

from seatlease.api import runtime
from seatlease.records import store
from seatlease_client import (
    Lease,
    NoSeatsAvailable,
    SeatClient,
    SeatError,
    SeatsMismatch,
    claimed_seats,
)

GRANT = {
    "session_id": "c2Vzc2lvbi0wMDAwMDAwMDAx",
    "license_id": "lic",
    "client_id": "pc-1",
    "lease_expires_at": "2100-01-01T00:00:00.000Z",
    "lease_seconds": 1,
    "heartbeat_interval_seconds": 1,
    "seats_used": 1,
    "seats_total": 8,
    "overage": False,
    "borrowed": False,
}

# A function's answer to one request body: (status, answer's JSON)
Answerer = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


class Recorder:
    """A stand-in server that records every body it is sent and answers as told."""

    def __init__(self, answer: Answerer) -> None:
        self.answer = answer
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        function = request.path.strip("/")
        body = json.loads(request.get_data() or b"{}")
        with self.lock:
            self.bodies.append((function, body))
        status, reply = self.answer(function, body)
        response = Response(json.dumps(reply), status=status, mimetype="application/json")
        return response(environ, start_response)

    def sent(self, function: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for name, body in self.bodies if name == function]


@contextmanager
def recording(answer: Answerer) -> Iterator[tuple[SeatClient, Recorder]]:
    recorder = Recorder(answer)
    with serving(recorder, quiet=True) as url:
        # a stand-in that signs nothing: what is sent is under test, not what is answered
        client = SeatClient(
            url, "sk_test", backoff=0.01, retries=1, handle_sigterm=False, insecure_skip_verify=True
        )
        yield client, recorder


def echo_weight(function: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A grant whose ``seats`` is the weight asked, and none when none was asked (an
    older server's answer); heartbeats renew, releases release."""
    if function == "release":
        return 200, {"released": True, "seats_used": 0}
    grant = dict(GRANT)
    if "seats" in body:
        grant["seats"] = body["seats"]
    return (201 if function == "acquire" else 200), grant


def test_seats_is_sent_only_when_given_and_the_answer_gives_the_weight():
    with recording(echo_weight) as (client, recorder):
        plain = client.acquire("lic", "pc-1")
        weighted = client.acquire("lic", "pc-2", seats=3)
        with client.lease("lic", client_id="pc-3") as old_server_lease:
            assert old_server_lease.seats == 1  # no seats in the answer: a plain lease
        with client.lease("lic", client_id="pc-4", seats=4) as lease:
            assert lease.seats == 4
            assert "weight=4" in repr(lease)
    first, second, third, fourth = recorder.sent("acquire")
    assert "seats" not in first and "seats" not in plain
    assert second["seats"] == 3 and weighted["seats"] == 3
    assert "seats" not in third
    assert fourth["seats"] == 4


def test_an_answer_without_seats_or_with_a_bad_one_is_a_weight_of_1():
    lease = Lease("lic", "pc-1")
    assert lease.seats == 1
    lease._apply({**GRANT, "seats": 5})
    assert lease.seats == 5
    for bad in (True, 0, -2, "4", 2.5, None):
        fresh = Lease("lic", "pc-1")
        fresh._apply({**GRANT, "seats": bad})
        assert fresh.seats == 1, bad


def test_a_re_acquire_after_the_seat_is_lost_asks_for_the_same_weight():
    state = {"lost": False}

    def answer(function: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if function == "heartbeat" and not state["lost"]:
            state["lost"] = True  # the first heartbeat finds the seat gone
            return 410, {
                "error": {"code": "session_expired", "message": "gone", "reason": "expired"}
            }
        return echo_weight(function, body)

    regained = threading.Event()
    with recording(answer) as (client, recorder):
        with client.lease(
            "lic", client_id="pc-1", seats=3, on_regained=lambda _lease: regained.set()
        ) as lease:
            assert regained.wait(10), "the lost seat is taken again"
            assert lease.seats == 3 and not lease.lost
    acquires = recorder.sent("acquire")
    assert len(acquires) >= 2
    assert [body["seats"] for body in acquires] == [3] * len(acquires)
    assert all("seats" not in body for body in recorder.sent("heartbeat"))


MISMATCH = {
    "error": {
        "code": "seats_mismatch",
        "message": "client pc-1 holds a lease of 4 seats; release it to take 2",
        "held_seats": 4,
        "seats": 2,
    }
}


def test_seats_mismatch_is_typed_and_never_waited_for():
    with recording(lambda _function, _body: (409, MISMATCH)) as (client, recorder):
        with pytest.raises(SeatsMismatch) as refused:
            client.acquire("lic", "pc-1", seats=2)
        assert refused.value.held_seats == 4 and refused.value.seats == 2
        assert refused.value.status == 409 and refused.value.code == "seats_mismatch"
        assert isinstance(refused.value, SeatError)
        assert not isinstance(refused.value, NoSeatsAvailable)  # waiting does not cure it
        started = time.monotonic()
        with (
            pytest.raises(SeatsMismatch),
            client.lease("lic", client_id="pc-1", seats=2, wait=True),
        ):
            pass
        assert time.monotonic() - started < 5
        assert len(recorder.sent("acquire")) == 2  # once each: no retry, no wait


def test_a_denial_says_how_many_seats_were_asked():
    denial = {"error": WEIGHTED_DENIAL}  # the C and Java clients' bad server's too
    with recording(lambda _f, _b: (409, denial)) as (client, _recorder):
        with pytest.raises(NoSeatsAvailable) as refused:
            client.acquire("lic", "pc-1", seats=4)
    assert refused.value.seats_requested == 4
    assert NoSeatsAvailable(409, "no_seats_available", "full", {}).seats_requested == 1


def test_the_seats_claim_is_1_when_absent():
    assert claimed_seats({"sid": "s"}) == 1
    assert claimed_seats({"sid": "s", "seats": 4}) == 4
    assert claimed_seats({"sid": "s", "seats": True}) == 1


# -- against the real functions ------------------------------------------------------------


def make_license(license_id: str, **fields: Any) -> None:
    store.create_license("acme", license_id, **fields)
    runtime.refresh_license_cache("acme", license_id)


def live_weights(license_id: str) -> dict[str, int]:
    leases = runtime.seat_engine().live_leases("acme", license_id)
    return {lease["client_id"]: lease.get("seats", 1) for lease in leases}


def test_a_weighted_lease_against_the_functions(client_functions):
    make_license("py-weights", seats=4, lease_seconds=3)  # heartbeats every second
    client = SeatClient(
        client_functions.url, client_functions.api_key, tenant_id="acme",
        backoff=0.05, handle_sigterm=False, pinned_keys=client_functions.pinned_keys(),
    )  # fmt: skip
    regained = threading.Event()
    with client.lease(
        "py-weights", client_id="render-1", seats=3, on_regained=lambda _l: regained.set()
    ) as lease:
        assert lease.seats == 3 and lease.seats_used == 3 and lease.seats_total == 4
        assert claimed_seats(jwt.decode(lease.token, options={"verify_signature": False})) == 3
        renewed = client.acquire("py-weights", "render-1")  # no seats: keeps the weight
        assert renewed["seats"] == 3 and renewed["session_id"] == lease.session_id
        same = client.acquire("py-weights", "render-1", seats=3)
        assert same["seats"] == 3 and same["session_id"] == lease.session_id
        with pytest.raises(SeatsMismatch) as mismatch:
            client.acquire("py-weights", "render-1", seats=2)
        assert mismatch.value.held_seats == 3 and mismatch.value.seats == 2
        with pytest.raises(NoSeatsAvailable) as full:
            client.acquire("py-weights", "ws-2", seats=2)
        assert full.value.seats_requested == 2 and full.value.seats_used == 3
        plain = client.acquire("py-weights", "ws-3")  # one seat is still free
        assert "seats" not in plain and plain["seats_used"] == 4  # a plain lease: no seats
        client.release("py-weights", plain["session_id"])
        assert live_weights("py-weights") == {"render-1": 3}
        session = lease.session_id
        post_json(f"{client_functions.url}/_test/flush", {})  # Redis forgets the seat...
        time.sleep(2.5)  # ...and its token re-admits it, with its weight (issue 40)
        assert not regained.is_set() and not lease.lost and lease.session_id == session
        assert lease.seats == 3 and live_weights("py-weights") == {"render-1": 3}


def test_a_borrow_from_another_machine_is_machine_mismatch_never_waited_for(
    client_functions, tmp_path
):
    """Issue 38, item 12, through the Python client and the real functions: a seat
    borrowed on one machine is refused to another machine asking with the same client id
    (``MachineMismatch``, a 409 that no wait cures), and stays the first machine's."""
    from seatlease_client import MachineMismatch

    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": "bound-borrow", "max_borrow_seconds": 86400},
    )
    first = SeatClient(
        client_functions.url, client_functions.api_key, machine_id="laptop-a", tenant_id="acme",
        pinned_keys=client_functions.pinned_keys(),
    )  # fmt: skip
    other = SeatClient(
        client_functions.url, client_functions.api_key, machine_id="laptop-b", tenant_id="acme",
        pinned_keys=client_functions.pinned_keys(),
    )  # fmt: skip
    seat = first.borrow("bound-borrow", "laptop", 3600, path=tmp_path / "a.json")
    started = time.monotonic()
    with pytest.raises(MachineMismatch) as refused:
        other.borrow("bound-borrow", "laptop", 3600, path=tmp_path / "b.json")
    assert refused.value.status == 409 and refused.value.code == "machine_mismatch"
    assert not isinstance(refused.value, NoSeatsAvailable)
    assert time.monotonic() - started < 5 and not (tmp_path / "b.json").exists()
    again = first.borrow("bound-borrow", "laptop", 3600, path=tmp_path / "a2.json")
    assert again.session_id == seat.session_id
