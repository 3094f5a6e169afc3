"""The Python client as issue 48 asks: verified by default (a pinned key or a loud opt-out,
a refused grant never a seat and released at once), every exchange bounded in time (a
dripped answer, a dripped release, a dripped heartbeat), answers read by their code (a
404 that is not ``license_not_found``, a grant with a null session, a renewal without
counts), no redirect followed, and the parity options (borrow's identity, acquire's
``request_id`` and ``fingerprint``, a cancellable wait). Against the fake bad server
(tests/client_bad_server.py, in this process) and the real functions (``client_functions``).
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import client_bad_server
import pytest
from client_bad_server import GRANT, KEY_X, bad_server
from http_support import serving
from werkzeug.wrappers import Response

from seatlease_client import (
    BackendUnavailable,
    Cancelled,
    InvalidRequest,
    InvalidResponse,
    LicenseNotFound,
    SeatClient,
    SeatError,
    ServiceError,
    TokenMissing,
    UntrustedKey,
)
from seatlease_client._machine import fingerprint as machine_fingerprint

KEY = "sl_00000000_" + "k" * 32


@pytest.fixture(scope="module")
def bad() -> Iterator[str]:
    with bad_server() as url:
        yield url


def calls(url: str, scenario: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/{scenario}/_calls", timeout=10) as answer:
        return json.load(answer)


def reset(url: str) -> None:
    urllib.request.urlopen(f"{url}/signed/_reset", timeout=10).close()  # every scenario's


def client_for(url: str, scenario: str, **options: Any) -> SeatClient:
    options.setdefault("pinned_keys", [KEY_X])
    options.setdefault("retries", 0)
    return SeatClient(f"{url}/{scenario}", KEY, handle_sigterm=False, **options)


def timed(call: Any) -> tuple[Any, BaseException | None, float]:
    started = time.monotonic()
    try:
        return call(), None, time.monotonic() - started
    except BaseException as exc:
        return None, exc, time.monotonic() - started


def claims_of(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


# -- 1. verified by default ---------------------------------------------------------------


def test_a_client_without_a_pinned_key_or_the_opt_out_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="pinned_keys") as unpinned:
        SeatClient("http://127.0.0.1:9", KEY)
    assert "insecure_skip_verify" in str(unpinned.value)
    with pytest.raises(ValueError, match="insecure_skip_verify"):
        SeatClient("http://127.0.0.1:9", KEY, verify=False)
    with pytest.raises(ValueError, match="insecure_skip_verify"):
        SeatClient("http://127.0.0.1:9", KEY, verify=False, pinned_keys=[KEY_X])
    with pytest.raises(ValueError, match="contradict"):
        SeatClient("http://127.0.0.1:9", KEY, pinned_keys=[KEY_X], insecure_skip_verify=True)
    with pytest.raises(ValueError, match="Ed25519"):
        SeatClient("http://127.0.0.1:9", KEY, pinned_keys=["not-a-key"])
    assert SeatClient("http://127.0.0.1:9", KEY, pinned_keys=[KEY_X]).verify is True
    insecure = SeatClient("http://127.0.0.1:9", KEY, insecure_skip_verify=True, verify=False)
    assert insecure.verify is False and insecure.insecure_skip_verify is True


@pytest.mark.parametrize(
    ("scenario", "refusal"), [("no_token", TokenMissing), ("foreign_key", UntrustedKey)]
)
def test_a_grant_without_a_pinned_signature_is_no_seat_and_is_released_at_once(
    bad: str, scenario: str, refusal: type
) -> None:
    reset(bad)
    client = client_for(bad, scenario, release_timeout=2)
    _, error, took = timed(lambda: client.acquire("lic", "pc-1"))
    assert isinstance(error, refusal), error
    assert calls(bad, scenario) == {"acquire": 1, "release": 1}  # given back at once
    assert took < 3
    reset(bad)
    with pytest.raises(refusal):
        with client.lease("lic", client_id="pc-1"):
            pytest.fail("a refused grant is no seat")
    assert client.held() == []
    assert calls(bad, scenario) == {"acquire": 1, "release": 1}


def test_the_opt_out_takes_an_unsigned_grant_as_before(bad: str) -> None:
    client = client_for(bad, "no_token", pinned_keys=None, insecure_skip_verify=True)
    assert client.acquire("lic", "pc-1")["session_id"] == GRANT["session_id"]


def test_a_pinned_signed_grant_is_a_seat(bad: str) -> None:
    reset(bad)
    client = client_for(bad, "signed")
    with client.lease("lic", client_id="pc-1") as lease:
        assert lease.session_id == GRANT["session_id"] and lease.token
        assert claims_of(lease.token)["sub"] == "pc-1"
    assert lease.released and calls(bad, "signed") == {"acquire": 1, "release": 1}


# -- 2. every exchange bounded ------------------------------------------------------------


def test_a_dripped_answer_ends_the_acquire_within_its_timeout(bad: str) -> None:
    client = client_for(bad, "drip", timeout=2)
    _, error, took = timed(lambda: client.acquire("lic", "pc-1"))
    assert isinstance(error, BackendUnavailable) and error.code == "network_error", error
    assert "within 2 s" in str(error)
    assert 1.9 < took < 3.0, took  # the old client read one byte a second for minutes


def test_a_dripped_release_ends_leaving_the_with_block_within_release_timeout(bad: str) -> None:
    client = client_for(bad, "drip_release", timeout=10, release_timeout=1.5)
    with client.lease("lic", client_id="pc-1") as lease:
        started = time.monotonic()
    took = time.monotonic() - started
    assert lease.released and took < 2.5, took
    # and close() (release_all: atexit, SIGTERM) within the same budget for every seat held
    first = client.lease("lic", client_id="pc-1").__enter__()
    second = client.lease("lic", client_id="pc-2").__enter__()
    _, error, took = timed(client.close)
    assert error is None and took < 2.5, took
    assert first.released and second.released and client.held() == []


DRIPPED_EXIT = """
import signal, sys, time
from seatlease_client import SeatClient

url, key, pinned, mode = sys.argv[1:5]
client = SeatClient(url, key, pinned_keys=[pinned], release_timeout=1.5, timeout=30)
lease = client.lease("lic", client_id="pc-" + mode).__enter__()
print(lease.session_id, flush=True)
if mode == "atexit":
    sys.exit(0)  # the atexit hook releases: into a dripping server
time.sleep(60)
"""


@pytest.mark.parametrize(("mode", "returncode"), [("sigterm", -signal.SIGTERM), ("atexit", 0)])
def test_release_timeout_bounds_the_release_at_exit_and_on_sigterm(
    bad: str, mode: str, returncode: int
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", DRIPPED_EXIT, f"{bad}/drip_release", KEY, KEY_X, mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == GRANT["session_id"]
        started = time.monotonic()
        if mode == "sigterm":
            child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == returncode, child.stderr.read() if child.stderr else ""
        # 1.5 s of release_timeout (the old client dripped the release for minutes)
        assert time.monotonic() - started < 4.0
    finally:
        child.kill()
        child.wait()


def test_a_dripped_heartbeat_loses_the_seat_by_the_leases_deadline(bad: str) -> None:
    lost: list[str] = []
    client = client_for(bad, "drip_heartbeat", timeout=30)
    with client.lease("lic", client_id="pc-1", on_lost=lambda _l, r: lost.append(r)) as lease:
        [keeper] = client._keepers.values()
        # The grant says 60 s leases; the deadline is brought to 2 s from now to keep the
        # test short. The heartbeat is dripped: it must be given up at the deadline.
        keeper.valid_until = time.monotonic() + 2
        _, error, took = timed(keeper.step)
        assert error is None
        assert lost == ["unreachable"] and lease.lost and lease.lost_reason == "unreachable"
        assert 1.9 < took < 3.0, took


# -- 3. answers read by their code ----------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "code"), [("not_found", "not_found"), ("empty_404", "http_404")]
)
def test_a_404_that_is_not_license_not_found_is_a_service_error_naming_the_url(
    bad: str, scenario: str, code: str
) -> None:
    client = client_for(bad, scenario)
    with pytest.raises(ServiceError) as refused:
        client.acquire("lic", "pc-1")
    assert not isinstance(refused.value, LicenseNotFound)
    assert refused.value.status == 404 and refused.value.code == code
    assert f"{bad}/{scenario}/acquire" in str(refused.value)
    with pytest.raises(LicenseNotFound):
        client_for(bad, "license_not_found").acquire("lic", "pc-1")


def test_a_grant_with_a_null_session_is_an_invalid_response_and_no_seat(bad: str) -> None:
    reset(bad)
    client = client_for(bad, "session_null")
    with pytest.raises(InvalidResponse) as refused:
        client.acquire("lic", "pc-1")
    assert refused.value.code == "invalid_response" and "session_id" in str(refused.value)
    with pytest.raises(InvalidResponse):
        with client.lease("lic", client_id="pc-1"):
            pytest.fail("no seat")
    assert client.held() == []
    assert calls(bad, "session_null") == {"acquire": 2}  # no release of "None"


def test_wrong_types_and_non_json_are_invalid_responses(bad: str) -> None:
    for scenario in ("wrong_types", "not_an_object", "html", "truncated", "deep_nesting", "huge"):
        with pytest.raises(InvalidResponse):
            client_for(bad, scenario, pinned_keys=None, insecure_skip_verify=True).acquire(
                "lic", "pc-1"
            )


def test_seat_counts_keep_their_last_values_when_a_renewal_omits_them(bad: str) -> None:
    client = client_for(bad, "heartbeat_no_counts")
    with client.lease("lic", client_id="pc-1") as lease:
        assert (lease.seats_used, lease.seats_total) == (1, 2)
        [keeper] = client._keepers.values()
        keeper.step()
        keeper.step()
        assert not lease.lost and (lease.seats_used, lease.seats_total) == (1, 2)


def test_a_redirect_is_not_followed_and_names_its_location(bad: str) -> None:
    reset(bad)
    with pytest.raises(ServiceError) as moved:
        client_for(bad, "redirect").acquire("lic", "pc-1")
    assert moved.value.status == 307 and moved.value.code == "redirected"
    assert moved.value.location == f"{bad}/signed/acquire"
    assert f"{bad}/signed/acquire" in str(moved.value)
    assert calls(bad, "signed") == {}  # never asked


# -- 4. parity ------------------------------------------------------------------------------


def test_a_wait_for_a_seat_can_be_cancelled_from_another_thread(bad: str) -> None:
    client = client_for(bad, "weighted_denial")  # 409, retry in 5 s
    context = client.lease("lic", client_id="pc-1", wait=True, timeout=60)
    threading.Timer(0.5, context.cancel).start()
    _, error, took = timed(context.__enter__)
    assert isinstance(error, Cancelled) and error.code == "cancelled", error
    assert took < 2, took
    assert client.held() == []


def stack_client(stack: Any, **options: Any) -> SeatClient:
    return SeatClient(
        stack.url, stack.api_key, pinned_keys=stack.pinned_keys(), retries=0,
        handle_sigterm=False, tenant_id="acme", **options,
    )  # fmt: skip


def test_borrow_takes_the_identity_acquire_takes(client_functions, tmp_path) -> None:
    """A per-user license (its policy requires ``user``): the borrow names the user, the
    host, the entitlements, the version and the weight as an acquire does."""
    from seatlease.api import runtime
    from seatlease.records import store

    store.create_license(
        "acme", "per-user", seats=4, max_borrow_seconds=3600, policy={"max_per_user": 2},
        entitlements=["cad"], max_version="3.0",
    )  # fmt: skip
    runtime.refresh_license_cache("acme", "per-user")
    client = stack_client(client_functions, machine_id="the-laptop")
    with pytest.raises(InvalidRequest) as refused:  # what a borrow without a user got
        client.borrow("per-user", "laptop-0", 600, path=tmp_path / "none.json")
    assert "user" in str(refused.value)
    seat = client.borrow(
        "per-user", "laptop-1", 600, path=tmp_path / "seat.json", user="ann", host="pc-1",
        entitlements=["cad"], version="2.1", seats=2, request_id="borrow-1",
    )  # fmt: skip
    assert seat.seats == 2 and seat.claims["borrowed"] is True
    [held] = runtime.seat_engine().live_leases("acme", "per-user")
    assert held["client_id"] == "laptop-1"
    logged = [e["request_id"] for e in client_functions.gate.log if e["path"] == "/acquire"]
    assert logged[-1] == "borrow-1"
    seat.return_early()
    assert runtime.seat_engine().live_leases("acme", "per-user") == []


def test_acquire_takes_a_request_id_and_a_fingerprint(client_functions) -> None:
    from seatlease.api import runtime
    from seatlease.records import store

    store.create_license("acme", "fp", seats=2, lease_seconds=30)
    runtime.refresh_license_cache("acme", "fp")
    client = stack_client(client_functions, machine_id="machine-a")
    first = client.acquire("fp", "ws-1", request_id="my-call-1", fingerprint=True)
    assert claims_of(first["lease_token"])["cnf"] == {"machine": machine_fingerprint("machine-a")}
    # A retry of the caller's own with the same request_id: answered as the first call.
    again = client.acquire("fp", "ws-1", request_id="my-call-1", fingerprint=True)
    assert again["session_id"] == first["session_id"]
    other = client.acquire("fp", "ws-2", fingerprint="ab" * 32)
    assert claims_of(other["lease_token"])["cnf"] == {"machine": "ab" * 32}
    logged = [e["request_id"] for e in client_functions.gate.log if e["path"] == "/acquire"]
    assert logged[:2] == ["my-call-1", "my-call-1"]
    for answer in (first, other):
        client.release("fp", answer["session_id"])


def test_errors_are_seat_errors(bad: str) -> None:
    """The new types are SeatErrors: code written for SeatError catches them."""
    assert issubclass(ServiceError, SeatError) and issubclass(InvalidResponse, SeatError)
    assert issubclass(Cancelled, SeatError)


# -- 5. the review of issue 48's clients: the shared rules -----------------------------------


def test_a_failed_jwks_fetch_is_retried_and_the_good_grant_never_released(bad: str) -> None:
    """Rule 1: the first /keys is a 503. The grant is good: the check is retried (the
    acquire, same request_id) and the seat held; no release before the client's own (the
    old client released it, then a real server answered the retry from its store with
    the released session)."""
    reset(bad)
    client = client_for(bad, "keys503once", retries=3, backoff=0.05)
    with client.lease("lic", client_id="pc-1") as lease:
        assert lease.session_id == GRANT["session_id"] and not lease.lost
        assert "release" not in calls(bad, "keys503once")
    assert lease.released
    assert calls(bad, "keys503once") == {"keys": 2, "acquire": 2, "release": 1}
    reset(bad)
    client = client_for(bad, "keys503once", retries=3, backoff=0.05)  # no JWKS cached
    answer = client.acquire("lic", "pc-1")  # the plain call alike
    assert answer["session_id"] == GRANT["session_id"]
    assert calls(bad, "keys503once") == {"keys": 2, "acquire": 2}


@pytest.mark.parametrize(
    ("scenario", "released", "field"),
    [("no_expiry", 1, "lease_expires_at"), ("float_lease", 1, "lease_seconds"),
     ("empty_session", 0, "session_id")],
)  # fmt: skip
def test_a_grant_of_the_wrong_shape_is_an_invalid_response_released_when_it_names_a_session(
    bad: str, scenario: str, released: int, field: str
) -> None:
    """Rule 2: no ``lease_expires_at``, a ``lease_seconds`` of 60.5, an empty
    ``session_id``: ``invalid_response``, no seat; the first two released at once."""
    reset(bad)
    client = client_for(bad, scenario, release_timeout=2)
    with pytest.raises(InvalidResponse) as refused:
        client.acquire("lic", "pc-1")
    assert refused.value.code == "invalid_response" and field in str(refused.value)
    expected = {"acquire": 1, "release": 1} if released else {"acquire": 1}
    assert calls(bad, scenario) == expected
    reset(bad)
    with pytest.raises(InvalidResponse):
        with client.lease("lic", client_id="pc-1"):
            pytest.fail("no seat")
    assert client.held() == [] and calls(bad, scenario) == expected


def test_null_counts_are_absent_counts_and_the_grant_a_seat(bad: str) -> None:
    reset(bad)
    client = client_for(bad, "null_counts")
    with client.lease("lic", client_id="pc-1") as lease:
        assert lease.session_id == GRANT["session_id"] and not lease.lost
        assert (lease.seats_used, lease.seats_total) == (0, 0)  # none known yet
    assert calls(bad, "null_counts") == {"acquire": 1, "release": 1}


def _without_heartbeat_interval(environ: dict[str, Any], start_response: Any) -> Any:
    """The bad server's ``signed`` scenario, its answers without
    ``heartbeat_interval_seconds`` (an optional field: the token does not sign it)."""
    answer = Response.from_app(client_bad_server.app, environ)
    body = json.loads(answer.get_data() or b"null")
    if isinstance(body, dict) and "heartbeat_interval_seconds" in body:
        del body["heartbeat_interval_seconds"]
        answer.set_data(json.dumps(body).encode())
    return answer(environ, start_response)


def test_a_grant_without_heartbeat_interval_seconds_is_a_seat() -> None:
    """Rule 2: ``heartbeat_interval_seconds`` is optional (the old client required it):
    absent, the client beats every third of the lease."""
    with serving(_without_heartbeat_interval, quiet=True) as url:
        client = client_for(url, "signed")
        answer = client.acquire("lic", "pc-1")
        assert "heartbeat_interval_seconds" not in answer
        with client.lease("lic", client_id="pc-1") as lease:
            assert lease.heartbeat_interval_seconds == 0 and lease.lease_seconds == 3
            [keeper] = client._keepers.values()
            assert 0.75 <= keeper.beat_delay() <= 1.0  # 3 s leases: every second
            keeper.step()  # a renewal without it is fine too
            assert not lease.lost
        assert lease.released


def test_a_releases_jwks_refetch_ends_within_release_timeout(bad: str) -> None:
    """Rule 3: the release is signed under a kid the cached JWKS lacks, and the JWKS
    fetched again is dripped: the release still ends by ``release_timeout``."""
    reset(bad)  # the first /keys answers at once, the later ones drip
    client = client_for(bad, "rotated_release", timeout=30, release_timeout=1.5)
    with client.lease("lic", client_id="pc-1") as lease:
        assert client._verifier is not None
        client._verifier.min_refetch = 0  # look at once (no rate limit on refetches)
        started = time.monotonic()
    took = time.monotonic() - started
    assert lease.released and took < 2.5, took


def test_close_waits_release_timeout_not_another_threads_slow_jwks_fetch(bad: str) -> None:
    """Another thread (a heartbeat's) fetches the dripped JWKS under the client's 5 s
    ``timeout``: ``close()`` must end by its own ``release_timeout`` (the old verifier
    held its lock across the fetch, so the release's check waited for it)."""
    reset(bad)  # the first /keys answers at once, the later ones drip
    client = client_for(bad, "rotated_release", timeout=5, release_timeout=1.5)
    lease = client.lease("lic", client_id="pc-1").__enter__()
    assert client._verifier is not None
    client._verifier.min_refetch = 0
    slow = threading.Thread(
        target=lambda: timed(lambda: client.release("lic", "another")), daemon=True
    )
    slow.start()
    time.sleep(0.5)  # now inside the dripped /keys
    _, error, took = timed(client.close)
    assert error is None and lease.released and took < 2.5, took
    slow.join(timeout=10)


SIGTERM_IN_A_FETCH = """
import sys, threading
from seatlease_client import SeatClient

url, key, pinned = sys.argv[1:4]
client = SeatClient(url, key, pinned_keys=[pinned], release_timeout=1.5, timeout=60)
lease = client.lease("lic", client_id="pc-1").__enter__()
client._verifier.min_refetch = 0
print(lease.session_id, flush=True)
# Signed under a kid the cached JWKS lacks: the JWKS is fetched again, dripped for a
# minute, in the main thread, where SIGTERM's handler (release_all) then runs.
client.release("lic", "another-session")
"""


def test_sigterm_inside_a_dripped_jwks_fetch_exits_within_release_timeout(bad: str) -> None:
    """The old verifier held a plain lock across the JWKS fetch: SIGTERM's release, in
    the same thread, waited for that lock forever."""
    reset(bad)  # the first /keys answers at once, the later ones drip
    child = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_IN_A_FETCH, f"{bad}/rotated_release", KEY, KEY_X],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == GRANT["session_id"]
        time.sleep(1.0)  # the release's answer came; its JWKS now drips
        started = time.monotonic()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=15) == -signal.SIGTERM
        assert time.monotonic() - started < 1.5 + 2.0
    finally:
        child.kill()
        child.wait()


def test_the_exchange_timeout_covers_name_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """``getaddrinfo`` cannot be interrupted: a resolver that takes 6 s (the operating
    system's, patched here, not the client's code) must not hold a 1 s acquire."""
    real = socket.getaddrinfo

    def slow(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "seatlease.slow-dns.test":
            time.sleep(6)
            raise socket.gaierror(socket.EAI_NONAME, "no such host")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    client = SeatClient(
        "http://seatlease.slow-dns.test:9", KEY, pinned_keys=[KEY_X], timeout=1, retries=0,
        handle_sigterm=False,
    )  # fmt: skip
    _, error, took = timed(lambda: client.acquire("lic", "pc-1"))
    assert isinstance(error, BackendUnavailable) and error.code == "network_error", error
    assert took < 2.0, took


@pytest.mark.parametrize(
    "key",
    [
        "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  # the identity
        base64.urlsafe_b64encode(bytes(32)).rstrip(b"=").decode(),
        base64.urlsafe_b64encode(bytes.fromhex("ec" + "ff" * 30 + "7f")).rstrip(b"=").decode(),
        base64.urlsafe_b64encode(bytes.fromhex("01" + "00" * 30 + "80")).rstrip(b"=").decode(),
        {"kty": "OKP", "crv": "Ed25519", "x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
    ],
)
def test_a_pinned_key_of_small_order_is_refused_at_construction(key: Any) -> None:
    """Rule 4: a key of small order verifies signatures anyone can make."""
    with pytest.raises(ValueError, match="small order"):
        SeatClient("http://127.0.0.1:9", KEY, pinned_keys=[key])
    assert SeatClient("http://127.0.0.1:9", KEY, pinned_keys=[KEY_X]).verify is True
