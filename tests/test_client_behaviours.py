"""The Python client against the fake bad server's behaviours (tests/client_bad_server.py,
in this process): a ``Retry-After`` of an hour never outlasts the maximum back-off, a
session the server lost is kept by its last lease token, a seat an operator freed is lost
as ``revoked`` without its token being sent, an ended term is said once and
asked again only every few minutes, and a suspended license keeps its held seats while it
refuses new ones. The Node and Go clients run the same stories in their own suites
(tests/test_client_node.py, tests/test_client_go.py)."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import client_bad_server
import pytest
from client_bad_server import KEY_X, REGRANTED, bad_server
from http_support import serving
from werkzeug.wrappers import Request, Response

from seatlease_client import (
    BackendUnavailable,
    LicenseExpired,
    LicenseSuspended,
    SeatClient,
)
from seatlease_client._lease import FINAL_REFUSAL_PAUSE, Lease, _Keeper

KEY = "sl_00000000_" + "k" * 32


def calls(url: str, scenario: str) -> dict[str, int]:
    """The bad server's count of calls per function for ``scenario`` since its reset."""
    with urllib.request.urlopen(f"{url}/{scenario}/_calls", timeout=10) as answer:
        return json.load(answer)


def reset(url: str, scenario: str) -> None:
    urllib.request.urlopen(f"{url}/{scenario}/_reset", timeout=10).close()


class Recorder:
    """The bad server, recording each request's function and JSON body on the way."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        # A heartbeat carrying this lease_token is answered 410 unknown (a token the
        # server refuses; the recover scenario itself takes any token).
        self.refused_token: str | None = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        raw = Request(environ).get_data()
        environ["wsgi.input"] = io.BytesIO(raw)  # the bad server reads it again
        function = environ.get("PATH_INFO", "").rsplit("/", 1)[-1]
        body = json.loads(raw) if raw else {}
        self.sent.append((function, body))
        if function == "heartbeat" and body.get("lease_token") == self.refused_token:
            gone = {"error": client_bad_server.SESSION_UNKNOWN}
            return Response(json.dumps(gone), status=410, mimetype="application/json")(
                environ, start_response
            )
        return client_bad_server.app(environ, start_response)

    def bodies(self, function: str) -> list[dict[str, Any]]:
        return [body for name, body in self.sent if name == function]


@contextmanager
def recorded_bad_server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    with serving(recorder, quiet=True) as url:
        yield url, recorder


def in_thread(call: Any, within: float) -> tuple[Any, BaseException | None, float]:
    """``call()`` in a daemon thread, waited for at most ``within`` s: (result, error,
    seconds taken); the error is a TimeoutError when it was still running (a client
    asleep for an hour must fail the test, not hang it)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    if thread.is_alive():
        return None, TimeoutError(f"still running after {within} s"), within
    return outcome.get("result"), outcome.get("error"), time.monotonic() - started


# -- issue 39 item 9: Retry-After is capped at the maximum back-off ---------------------


def test_a_retry_after_of_an_hour_never_outlasts_the_maximum_backoff():
    with bad_server() as url:
        client = SeatClient(
            f"{url}/retry_after_long", KEY, backoff=0.1, max_backoff=1.0, retries=2,
            handle_sigterm=False, pinned_keys=[KEY_X],
        )  # fmt: skip
        _, error, took = in_thread(lambda: client.acquire("lic", "pc-1"), within=10)
    assert isinstance(error, BackendUnavailable), error
    assert error.status == 503 and error.retry_after_seconds == 3600
    assert took < 4, took  # two pauses of at most 1 s each, not of an hour


def test_a_held_lease_retries_a_503_at_most_max_backoff_apart():
    client = SeatClient(
        "http://127.0.0.1:9", KEY, backoff=0.1, max_backoff=1.0, pinned_keys=[KEY_X]
    )
    keeper = _Keeper(client, Lease("lic", "pc-1"), None, None, None)
    keeper.failures = 3
    assert all(keeper._backoff(3600.0) <= 1.0 for _ in range(20))
    lost = Lease("lic", "pc-1")
    lost.lost = True
    keeper = _Keeper(client, lost, None, None, None)
    keeper.failures = 1
    assert all(0.9 <= keeper._backoff(3600.0) <= 1.0 for _ in range(20))


# -- issue 40: a session the server lost, kept by its last lease token -------------------


def test_a_lease_the_server_forgot_is_kept_by_its_token_without_on_lost():
    """``recover``: a heartbeat without the token is 410 ``unknown``; the client sends it
    once more with the session's last lease_token (kept although it does not verify) and a
    fresh request_id, and the 200 keeps the seat: no on_lost, not lost."""
    lost: list[str] = []
    with recorded_bad_server() as (url, recorder):
        client = SeatClient(f"{url}/recover", KEY, handle_sigterm=False, pinned_keys=[KEY_X])
        with client.lease("lic", client_id="pc-1", on_lost=lambda _l, r: lost.append(r)) as lease:
            granted = lease.token  # the grant's (verified) token
            assert granted
            [keeper] = client._keepers.values()  # its next beat is 15-20 s away: beat now
            delay = keeper.step()
            assert not lease.lost and lost == [] and delay > 1
            keeper.step()  # the next heartbeat is a normal one again
            assert not lease.lost and lost == []
    first, retry, second, *_ = recorder.bodies("heartbeat")
    assert "lease_token" not in first and "lease_token" not in second
    assert retry["lease_token"] == granted and retry["session_id"] == first["session_id"]
    assert retry["request_id"] and retry["request_id"] != first.get("request_id")
    assert len(recorder.bodies("acquire")) == 1  # never lost, never acquired again


def test_a_token_the_server_refuses_loses_the_seat_as_before():
    """The retry with the token answered 410 again: lost (``unknown``), and acquired again."""
    events: list[str] = []
    with recorded_bad_server() as (url, recorder):
        client = SeatClient(f"{url}/recover", KEY, handle_sigterm=False, pinned_keys=[KEY_X])
        keeper = _Keeper(
            client, Lease("lic", "pc-1"), None,
            lambda _l, reason: events.append(reason), lambda _l: events.append("regained"),
        )  # fmt: skip
        keeper.acquire_first(False, None)
        keeper.lease.token = recorder.refused_token = "not-the-token"
        assert keeper.step() == 0.0  # lost: acquire again at once
        assert keeper.lease.lost and events == ["unknown"]
        keeper.step()
        assert not keeper.lease.lost and events == ["unknown", "regained"]
    heartbeats = recorder.bodies("heartbeat")
    assert [body.get("lease_token") for body in heartbeats] == [None, "not-the-token"]


def test_a_seat_an_operator_freed_is_lost_as_revoked_without_sending_its_token():
    """``revoked``: a heartbeat is 410 ``revoked`` (an operator freed the seat). The lease
    is lost with that reason (the product can tell its user an administrator freed the
    seat), the token is never sent (the server refuses a revoked session's token: only
    ``unknown`` is answered with it), and the seat is acquired again at once."""
    events: list[tuple[str, str | None, bool]] = []
    with bad_server() as url:
        reset(url, "revoked")
        client = SeatClient(
            f"{url}/revoked", KEY, backoff=0.05, handle_sigterm=False, pinned_keys=[KEY_X]
        )
        held = client.lease(
            "lic", client_id="pc-1",
            on_lost=lambda lost, reason: events.append((reason, lost.lost_reason, lost.lost)),
            on_regained=lambda _l: events.append(("regained", None, False)),
        )  # fmt: skip
        with held as lease:
            assert lease.token and lease.session_id != REGRANTED
            deadline = time.monotonic() + 5  # heartbeats every second
            while len(events) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert events == [("revoked", "revoked", True), ("regained", None, False)], events
            assert not lease.lost and lease.lost_reason is None
            assert lease.session_id == REGRANTED
            counted = calls(url, "revoked")
        assert lease.released
    assert counted["acquire"] == 2 and "token" not in counted, counted


# -- issue 42 items 2 and 9: an ended term, said once; a suspension keeps held seats -----


def warnings(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.name == "seatlease.client" and r.levelno >= 30]


def test_an_ended_term_loses_the_seat_once_and_asks_again_only_minutes_later(caplog):
    caplog.set_level(logging.INFO, logger="seatlease.client")
    lost: list[str] = []
    with bad_server() as url:
        reset(url, "term_ended")
        client = SeatClient(
            f"{url}/term_ended", KEY, backoff=0.05, handle_sigterm=False, pinned_keys=[KEY_X]
        )
        with client.lease("lic", client_id="pc-1", on_lost=lambda _l, r: lost.append(r)) as lease:
            deadline = time.monotonic() + 5
            while not lease.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lease.lost and lease.lost_reason == "license_expired"
            time.sleep(8)  # the old client asked again (and logged) every few seconds
            assert lost == ["license_expired"] and lease.lost
            counted = calls(url, "term_ended")
            # the first grant, then at most one re-acquire after the loss
            assert counted["heartbeat"] == 1 and counted["acquire"] <= 2, counted
            said = warnings(caplog.records)
            assert len(said) == 1 and "license_expired" in said[0], said
            # a program waiting for its first seat is told at once, never made to wait
            started = time.monotonic()
            with pytest.raises(LicenseExpired) as ended:
                with client.lease("lic", client_id="pc-2", wait=True, timeout=60):
                    pytest.fail("no seat on an ended term")
            assert time.monotonic() - started < 2 and ended.value.expired_at
        assert lease.released


def test_a_refused_re_acquire_waits_minutes_and_is_said_once(caplog):
    """The keeper's own pace: a 403 on a re-acquire (here ``license_suspended``) is asked
    again only after FINAL_REFUSAL_PAUSE (5 minutes, up to 20 % later), with one WARNING
    for the first refusal and none for the next."""
    caplog.set_level(logging.INFO, logger="seatlease.client")
    with bad_server() as url:
        reset(url, "suspended")
        client = SeatClient(
            f"{url}/suspended", KEY, backoff=0.05, handle_sigterm=False, pinned_keys=[KEY_X]
        )
        keeper = _Keeper(client, Lease("lic", "pc-1"), None, None, None)
        keeper.acquire_first(False, None)
        keeper._lose("unknown")  # as a 410 would
        pauses = [keeper.step(), keeper.step()]
    assert FINAL_REFUSAL_PAUSE == 300.0
    assert all(300.0 <= pause <= 360.0 for pause in pauses), pauses
    assert keeper.lease.lost and keeper.lease.lost_reason == "unknown"
    said = [m for m in warnings(caplog.records) if "refused" in m]
    assert len(said) == 1 and "license_suspended" in said[0], said


def test_a_suspended_license_keeps_its_held_seat_and_refuses_a_new_one():
    lost: list[str] = []
    with bad_server() as url:
        reset(url, "suspended")
        client = SeatClient(
            f"{url}/suspended", KEY, backoff=0.05, handle_sigterm=False, pinned_keys=[KEY_X]
        )
        with client.lease("lic", client_id="pc-1", on_lost=lambda _l, r: lost.append(r)) as lease:
            started = time.monotonic()
            with pytest.raises(LicenseSuspended) as refused:
                with client.lease("lic", client_id="pc-2", wait=True, timeout=60):
                    pytest.fail("a suspended license grants no new seat")
            assert time.monotonic() - started < 2 and refused.value.code == "license_suspended"
            time.sleep(4)  # past its 3 s lease: kept by heartbeats (every second)
            assert not lease.lost and lost == []
            counted = calls(url, "suspended")
            assert counted["heartbeat"] >= 3 and counted["acquire"] == 2, counted
