"""A Redis stall during a seat call (SIGSTOP/SIGCONT of a private redis-server).

redis-py sends the EVALSHA, times out after ``REDIS_SOCKET_TIMEOUT`` (2 s) and sends it
again on a new connection; when Redis resumes it runs both. Every seat call carries a
request id, and the scripts answer a repeat from the first run's stored reply, so the
caller is told what its call did, exactly once. Nothing here is mocked: the functions
run as Cloud Functions runs them, on real Redis and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from http_support import Tenant, acquire, error_of, new_license, new_tenant, release

from seatlease.api import auth
from seatlease.events.pubsub import outbox_events
from seatlease.seats import redisconn
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis
from seatlease_cli.procs import Proc, start_redis


@pytest.fixture
def private_redis(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Proc]:
    handle = start_redis()
    monkeypatch.setenv("REDIS_URL", handle.url)
    redisconn.reset()
    auth.forget_all()
    yield handle
    os.kill(handle.procs[0].pid, signal.SIGCONT)  # never leave it frozen
    redisconn.reset()
    auth.forget_all()
    handle.stop()


@pytest.fixture
def warm_acme(private_redis: Proc) -> Tenant:
    """Tenant ``acme`` with license ``cad`` (2 seats) on the redis-server this test stalls,
    every cache the seat call reads already filled."""
    tenant = new_tenant("acme")
    new_license(tenant, "cad", seats=2)
    # Warm every cache the call would otherwise fill (API key, license config, scripts),
    # so the stall hits the seat script itself.
    warm = acquire(tenant, "cad", "warm-up").get_json()
    release(tenant, "cad", warm["session_id"])
    return tenant


def freeze(proc: Proc, seconds: float) -> threading.Timer:
    """Stop the redis-server now; it resumes after ``seconds``."""
    pid = proc.procs[0].pid
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
    timer.start()
    return timer


def acquired_events(tenant: Tenant) -> list[dict]:
    events = outbox_events(get_redis(), LicenseKeys.of(tenant.tenant_id, "cad").outbox)
    return [e for e in events if e["type"] == "lease.acquired" and e["client_id"] != "warm-up"]


def test_a_new_lease_taken_during_a_stall_is_reported_new(private_redis, warm_acme) -> None:
    freeze(private_redis, 3.0)  # longer than one socket timeout: the script is sent twice
    started = time.monotonic()
    answer = acquire(warm_acme, "cad", "ws-1")
    assert time.monotonic() - started > 2.5
    assert answer.status_code == 201, answer.get_json()  # not 200 "already held"
    body = answer.get_json()
    assert body["seats_used"] == 1
    assert [e["session_id"] for e in acquired_events(warm_acme)] == [body["session_id"]]


def test_a_release_during_a_stall_says_it_released(private_redis, warm_acme) -> None:
    lease = acquire(warm_acme, "cad", "ws-1").get_json()
    freeze(private_redis, 3.0)
    answer = release(warm_acme, "cad", lease["session_id"])
    assert answer.status_code == 200
    assert (answer.get_json()["released"], answer.get_json()["seats_used"]) == (True, 0)


def test_a_denial_during_a_stall_is_counted_once(private_redis, warm_acme) -> None:
    for client in ("ws-1", "ws-2"):
        assert acquire(warm_acme, "cad", client).status_code == 201
    freeze(private_redis, 3.0)
    error_of(acquire(warm_acme, "cad", "ws-3"), 409, "no_seats_available")
    shard_denials = LicenseKeys.of("acme", "cad").denials
    assert get_redis().hget(shard_denials, "acme/cad") == "1"


def test_a_stall_longer_than_the_retries_is_a_503_that_names_its_request(
    private_redis, warm_acme
) -> None:
    timer = freeze(private_redis, 12.0)
    answer = acquire(warm_acme, "cad", "ws-1", request_id="req-0001")
    error = error_of(answer, 503, "backend_unavailable")
    assert answer.headers["Retry-After"]
    assert error["request_id"] == "req-0001"
    assert "request_id" in error["message"]
    timer.join()
    # Redis resumed and ran the queued script: the lease exists. Repeating the call with
    # the same request_id tells the client what happened, as the first run answered.
    again = acquire(warm_acme, "cad", "ws-1", request_id="req-0001")
    assert again.status_code == 201, again.get_json()
    (event,) = acquired_events(warm_acme)
    assert again.get_json()["session_id"] == event["session_id"]
    # Another call (a new request_id) is a new question: the client holds that lease.
    assert acquire(warm_acme, "cad", "ws-1", request_id="req-0002").status_code == 200


def test_a_repeated_request_id_is_answered_from_the_first_run(private_redis, warm_acme) -> None:
    first = acquire(warm_acme, "cad", "ws-1", request_id="lost-reply-1")
    again = acquire(warm_acme, "cad", "ws-1", request_id="lost-reply-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.get_json() == again.get_json()
    sid = first.get_json()["session_id"]
    r1 = release(warm_acme, "cad", sid, request_id="lost-reply-2")
    r2 = release(warm_acme, "cad", sid, request_id="lost-reply-2")
    assert r1.get_json()["released"] is r2.get_json()["released"] is True
    assert release(warm_acme, "cad", sid).get_json()["released"] is False  # a new call


def test_a_stall_on_a_server_that_lost_the_library_makes_one_lease(
    private_redis, warm_acme
) -> None:
    """The seat library gone (a restart without persistence) and Redis frozen when the
    call comes: the FCALLs redis-py sends and sends again all answer "function not found"
    once Redis resumes (none ran), the library is loaded, and the call is made once."""
    from seatlease.seats.scripts import library_code

    get_redis().function_flush()
    freeze(private_redis, 3.0)
    answer = acquire(warm_acme, "cad", "ws-1")
    assert answer.status_code == 201, answer.get_json()
    assert [e["session_id"] for e in acquired_events(warm_acme)] == [
        answer.get_json()["session_id"]
    ]
    assert get_redis().zcard(LicenseKeys.of("acme", "cad").leases) == 1
    names = [dict(zip(lib[::2], lib[1::2], strict=True))["library_name"]
             for lib in get_redis().function_list()]  # fmt: skip
    assert names == [library_code()[0]]
