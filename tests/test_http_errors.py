"""The error side of the HTTP contract, for acquire, heartbeat and release alike: every
class of bad input is a 400 ``invalid_request`` that changes nothing; 401 for a missing,
malformed, unknown or revoked key; 405; 415; 413; 503 ``backend_unavailable`` with
``Retry-After`` when Redis or PostgreSQL is down (and nothing half done); an unexpected
failure is a JSON 500 without a stack trace. Plus the per-request JSON log line and the
cold import of the client-facing functions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from http_support import (
    FUNCTIONS,
    REPO,
    Tenant,
    acquire,
    call,
    error_of,
    heartbeat,
    live_sessions,
    log_lines,
    new_license,
    outbox_types,
    release,
)

from seatlease.api import auth
from seatlease.records import db, store
from seatlease.seats import redisconn
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis
from seatlease_cli.procs import free_port

LICENSE = "cad"


@pytest.fixture
def acme_five_seats(acme: Tenant) -> Tenant:
    """conftest's ``acme`` with LICENSE: 5 seats, leases of 60 s, up to an hour."""
    new_license(acme, LICENSE, seats=5, lease_seconds=60, max_lease_seconds=3600)
    return acme


def _valid(name: str, session_id: str = "some-session") -> dict:
    if name == "acquire":
        return {"license_id": LICENSE, "client_id": "ws-1"}
    return {"license_id": LICENSE, "session_id": session_id}


def _nothing_changed(tenant: Tenant) -> None:
    assert live_sessions(tenant, LICENSE) == []
    assert outbox_types(tenant, LICENSE) == []


# -- 400 invalid_request ---------------------------------------------------------------

NOT_JSON = [
    pytest.param(b'{"license_id": "cad",', id="truncated-json"),
    pytest.param(b'{"license_id": "cad", "client_id": "a"} trailing', id="trailing-garbage"),
    pytest.param(b"{'license_id': 'cad'}", id="single-quotes"),
    pytest.param(b"\xff\xfe\x00{", id="not-utf8"),
    pytest.param(b"", id="empty-body"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'"cad"', id="string"),
    pytest.param(b"5", id="number"),
    pytest.param(b"null", id="null"),
    pytest.param(b"1" * 5000, id="integer-too-long-for-python"),
    pytest.param(b"[" * 5000, id="nested-too-deep"),
    pytest.param(b'{"a":' * 3000, id="nested-objects-too-deep"),
]


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("data", NOT_JSON)
def test_body_that_is_not_a_json_object_is_400(
    acme_five_seats: Tenant, name: str, data: bytes
) -> None:
    error = error_of(call(name, data=data, tenant=acme_five_seats), 400, "invalid_request")
    assert "JSON" in error["message"]
    _nothing_changed(acme_five_seats)


def _big(n: int) -> dict:
    return {"k": "x" * n}  # {"k":"xx..."} is n + 8 bytes of compact JSON


BAD_ACQUIRE = [
    # (changes to a valid body, the field reported in details)
    ({"license_id": None}, "license_id"),
    ({"client_id": None}, "client_id"),
    ({"license_id": 5}, "license_id"),
    ({"client_id": ["a"]}, "client_id"),
    ({"lease_seconds": "5"}, "lease_seconds"),
    ({"lease_seconds": True}, "lease_seconds"),
    ({"lease_seconds": False}, "lease_seconds"),
    ({"lease_seconds": 5.0}, "lease_seconds"),
    ({"lease_seconds": 2.5}, "lease_seconds"),
    ({"lease_seconds": 0}, "lease_seconds"),
    ({"lease_seconds": -1}, "lease_seconds"),
    ({"lease_seconds": 604801}, "lease_seconds"),
    ({"lease_seconds": 10**30}, "lease_seconds"),
    ({"lease_seconds": {"s": 5}}, "lease_seconds"),
    ({"metadata": [1, 2]}, "metadata"),
    ({"metadata": "host=a"}, "metadata"),
    ({"metadata": 5}, "metadata"),
    ({"metadata": {"a": {"b": 1}}}, "metadata"),
    ({"metadata": {"a": [1]}}, "metadata"),
    ({"metadata": _big(4089)}, "metadata"),
    ({"metadata": {f"k{i}": "v" * 40 for i in range(120)}}, "metadata"),
    ({"extra": 1}, "extra"),
    ({"session_id": "s"}, "session_id"),
    ({"License_id": "cad"}, "License_id"),
    ({"license_id": "cad/other"}, "license_id"),
    ({"license_id": "cad other"}, "license_id"),
    ({"license_id": "{cad}"}, "license_id"),
    ({"license_id": "cad|x"}, "license_id"),
    ({"license_id": "cad\n"}, "license_id"),
    ({"license_id": "c\u00e9d"}, "license_id"),
    ({"license_id": ""}, "license_id"),
    ({"license_id": "a" * 129}, "license_id"),
    ({"client_id": "ws 1"}, "client_id"),
    ({"client_id": "ws/1"}, "client_id"),
    ({"client_id": "x" * 129}, "client_id"),
    ({"client_id": "a\x00b"}, "client_id"),
    # PostgreSQL's jsonb (the audit trail) refuses NUL and unpaired surrogates
    ({"metadata": {"user": "a\x00b"}}, "metadata"),
    ({"metadata": {"a\x00": "b"}}, "metadata"),
    ({"metadata": {"host\ud800": "pc"}}, "metadata"),
    ({"metadata": {"user": "\udc00"}}, "metadata"),
]


@pytest.mark.parametrize(
    ("changes", "field"),
    [pytest.param(c, f, id=f"{f}={json.dumps(c)[:40]}") for c, f in BAD_ACQUIRE],
)
def test_bad_acquire_field_is_400_with_details(
    acme_five_seats: Tenant, changes: dict, field: str
) -> None:
    body = {**_valid("acquire"), **changes}
    error = error_of(call("acquire", body, tenant=acme_five_seats), 400, "invalid_request")
    assert field in [d["field"] for d in error["details"]], error
    assert all(set(d) == {"field", "problem"} for d in error["details"])
    _nothing_changed(acme_five_seats)


@pytest.mark.parametrize("missing", ["license_id", "client_id"])
def test_acquire_missing_field_is_400(acme_five_seats: Tenant, missing: str) -> None:
    body = {k: v for k, v in _valid("acquire").items() if k != missing}
    error = error_of(call("acquire", body, tenant=acme_five_seats), 400, "invalid_request")
    assert error["details"] == [{"field": missing, "problem": "Field required"}]
    _nothing_changed(acme_five_seats)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param('{"metadata": {"x": NaN}}', id="NaN"),
        pytest.param('{"metadata": {"x": Infinity}}', id="Infinity"),
        pytest.param('{"metadata": {"x": -Infinity}}', id="-Infinity"),
        pytest.param('{"metadata": {"x": 1e400}}', id="overflowing-float"),
        pytest.param('{"lease_seconds": NaN}', id="lease-NaN"),
    ],
)
def test_non_finite_numbers_are_not_json(acme_five_seats: Tenant, raw: str) -> None:
    """NaN and Infinity are not JSON: accepting them would put text into the event stream
    that PostgreSQL's jsonb (the audit log) refuses."""
    body = '{"license_id": "cad", "client_id": "ws-1", ' + raw[1:]
    error_of(call("acquire", data=body, tenant=acme_five_seats), 400, "invalid_request")
    _nothing_changed(acme_five_seats)


def test_metadata_of_exactly_4096_bytes_is_accepted(acme_five_seats: Tenant) -> None:
    response = call(
        "acquire", {**_valid("acquire"), "metadata": _big(4088)}, tenant=acme_five_seats
    )
    assert response.status_code == 201, response.get_data(as_text=True)


def test_explicit_nulls_for_optional_fields_are_accepted(acme_five_seats: Tenant) -> None:
    body = {**_valid("acquire"), "lease_seconds": None, "metadata": None}
    response = call("acquire", body, tenant=acme_five_seats)
    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.get_json()["lease_seconds"] == 60


BAD_SESSION_BODIES = [
    ({"license_id": LICENSE}, "session_id"),
    ({"session_id": "s-1"}, "license_id"),
    ({"license_id": LICENSE, "session_id": "s-1", "client_id": "a"}, "client_id"),
    ({"license_id": LICENSE, "session_id": 17}, "session_id"),
    ({"license_id": LICENSE, "session_id": None}, "session_id"),
    ({"license_id": LICENSE, "session_id": "s 1"}, "session_id"),
    ({"license_id": LICENSE, "session_id": "s/1"}, "session_id"),
    ({"license_id": LICENSE, "session_id": ""}, "session_id"),
    ({"license_id": LICENSE, "session_id": "s" * 129}, "session_id"),
    ({"license_id": "cad|x", "session_id": "s-1"}, "license_id"),
    ({"license_id": True, "session_id": "s-1"}, "license_id"),
]


@pytest.mark.parametrize("name", ["heartbeat", "release"])
@pytest.mark.parametrize(
    ("body", "field"),
    [pytest.param(b, f, id=f"{f}={json.dumps(b)[:50]}") for b, f in BAD_SESSION_BODIES],
)
def test_bad_session_body_is_400(
    acme_five_seats: Tenant, name: str, body: dict, field: str
) -> None:
    sid = acquire(acme_five_seats, LICENSE, "holder").get_json()["session_id"]
    before = outbox_types(acme_five_seats, LICENSE)
    error = error_of(call(name, body, tenant=acme_five_seats), 400, "invalid_request")
    assert field in [d["field"] for d in error["details"]], error
    assert live_sessions(acme_five_seats, LICENSE) == [sid]
    assert outbox_types(acme_five_seats, LICENSE) == before


# -- 401 unauthenticated ---------------------------------------------------------------

BAD_AUTH = [
    pytest.param({}, id="missing"),
    pytest.param({"Authorization": ""}, id="empty"),
    pytest.param({"Authorization": "Bearer"}, id="no-key"),
    pytest.param({"Authorization": "Bearer    "}, id="blank-key"),
    pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="basic-scheme"),
    pytest.param({"Authorization": "Token sl_0123abcd_aaaaaaaaaaaaaaaaaaaaaaaa"}, id="scheme"),
    pytest.param({"Authorization": "Bearer not-a-key"}, id="malformed-key"),
    pytest.param({"Authorization": "Bearer sl_0123abcd_short"}, id="short-key"),
    pytest.param({"Authorization": "Bearer sl_0123abcd_" + "a" * 65}, id="long-key"),
    pytest.param({"Authorization": "Bearer sl_0123abcd_aaaaaaaaaaaaaaaaaaaaaaaa"}, id="unknown"),
]


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("headers", BAD_AUTH)
def test_bad_credentials_are_401(acme_five_seats: Tenant, name: str, headers: dict) -> None:
    response = call(name, _valid(name), headers=headers)
    error_of(response, 401, "unauthenticated")
    assert response.headers["WWW-Authenticate"] == "Bearer"
    if "Authorization" in headers:
        secret = headers["Authorization"].partition(" ")[2].strip()
        assert not secret or secret not in response.get_data(as_text=True)
    _nothing_changed(acme_five_seats)


def test_bad_input_without_a_key_is_401_not_400(acme_five_seats: Tenant) -> None:
    """Anonymous callers learn nothing about validation."""
    error_of(call("acquire", data=b"{not json"), 401, "unauthenticated")
    error_of(call("acquire", {"license_id": "a b"}), 401, "unauthenticated")


def test_lowercase_bearer_scheme_is_accepted(acme_five_seats: Tenant) -> None:
    response = call(
        "acquire", _valid("acquire"), headers={"Authorization": f"bearer {acme_five_seats.key}"}
    )
    assert response.status_code == 201


def test_revoked_key_is_401_everywhere(acme_five_seats: Tenant) -> None:
    sid = acquire(acme_five_seats, LICENSE, "ws-1").get_json()["session_id"]
    other = store.create_api_key("acme")
    key_hash = store.revoke_api_key(acme_five_seats.prefix)
    auth.forget(key_hash)
    for name in FUNCTIONS:
        response = call(name, _valid(name, sid), tenant=acme_five_seats)
        error_of(response, 401, "unauthenticated")
        assert acme_five_seats.key not in response.get_data(as_text=True)
    assert live_sessions(acme_five_seats, LICENSE) == [sid]  # the lease itself is untouched
    # The tenant's other key still works.
    assert heartbeat(Tenant("acme", other.key, other.prefix), LICENSE, sid).status_code == 200


# -- 405, 415, 413 -----------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_other_methods_are_405(acme_five_seats: Tenant, name: str, method: str) -> None:
    response = call(name, _valid(name), tenant=acme_five_seats, method=method)
    error_of(response, 405, "method_not_allowed")
    assert response.headers["Allow"] == "POST"
    _nothing_changed(acme_five_seats)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_head_is_405_without_a_body(acme_five_seats: Tenant, name: str) -> None:
    response = call(name, tenant=acme_five_seats, method="HEAD")
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.get_data() == b""


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_non_json_media_type_is_415(
    acme_five_seats: Tenant, name: str, content_type: str | None
) -> None:
    data = json.dumps(_valid(name))
    response = call(name, data=data, tenant=acme_five_seats, content_type=content_type)
    error_of(response, 415, "unsupported_media_type")
    # 415 comes before authentication (documented order).
    error_of(call(name, data=data, content_type=content_type), 415, "unsupported_media_type")
    _nothing_changed(acme_five_seats)


def test_json_with_charset_parameter_is_accepted(acme_five_seats: Tenant) -> None:
    response = call(
        "acquire",
        _valid("acquire"),
        tenant=acme_five_seats,
        content_type="application/json; charset=utf-8",
    )
    assert response.status_code == 201


@pytest.mark.parametrize("name", FUNCTIONS)
def test_body_over_16_kib_is_413(acme_five_seats: Tenant, name: str) -> None:
    text = json.dumps(_valid(name))
    padded = text[:-1] + " " * (16 * 1024 + 1 - len(text)) + "}"
    assert len(padded) == 16 * 1024 + 1
    error_of(call(name, data=padded, tenant=acme_five_seats), 413, "payload_too_large")
    _nothing_changed(acme_five_seats)


def test_body_of_exactly_16_kib_is_accepted(acme_five_seats: Tenant) -> None:
    text = json.dumps(_valid("acquire"))
    padded = text[:-1] + " " * (16 * 1024 - len(text)) + "}"
    assert call("acquire", data=padded, tenant=acme_five_seats).status_code == 201


# -- 503 backend_unavailable -------------------------------------------------------------


def _assert_503(response, backend: str) -> None:
    error = error_of(response, 503, "backend_unavailable")
    assert response.headers["Retry-After"] == str(error["retry_after_seconds"])
    assert error["retry_after_seconds"] >= 1
    assert backend in error["message"]


def test_redis_down_is_503_and_nothing_half_done(
    acme_five_seats: Tenant, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # caches the key locally
    sid = acquire(acme_five_seats, LICENSE, "ws-1").get_json()["session_id"]
    fresh = store.create_api_key("acme")  # never used: its lookup needs Redis
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    redisconn.reset()
    _assert_503(acquire(acme_five_seats, LICENSE, "ws-2"), "redis")
    _assert_503(heartbeat(acme_five_seats, LICENSE, sid), "redis")
    _assert_503(release(acme_five_seats, LICENSE, sid), "redis")
    _assert_503(call("acquire", _valid("acquire"), headers=_bearer(fresh.key)), "redis")
    monkeypatch.setenv("REDIS_URL", redis_url)
    redisconn.reset()
    assert live_sessions(acme_five_seats, LICENSE) == [sid]  # no lease for ws-2, sid not released
    assert outbox_types(acme_five_seats, LICENSE) == ["lease.acquired"]
    assert call("acquire", _valid("acquire"), headers=_bearer(fresh.key)).status_code == 200


def test_redis_full_is_503_and_nothing_half_done(acme_five_seats: Tenant, redis_client) -> None:
    """Memorystore runs with noeviction: at maxmemory, writes fail. A seat is not
    granted or extended then (503, retry later), and releasing still works: it frees."""
    sid = acquire(acme_five_seats, LICENSE, "ws-1").get_json()["session_id"]
    other = acquire(acme_five_seats, LICENSE, "ws-3").get_json()["session_id"]
    redis_client.config_set("maxmemory", 1)  # far below what is used: every write is OOM
    try:
        _assert_503(acquire(acme_five_seats, LICENSE, "ws-2"), "redis")
        _assert_503(heartbeat(acme_five_seats, LICENSE, sid), "redis")
        assert sorted(live_sessions(acme_five_seats, LICENSE)) == sorted([sid, other])
        assert outbox_types(acme_five_seats, LICENSE) == ["lease.acquired"] * 2
        released = release(acme_five_seats, LICENSE, other)
    finally:
        redis_client.config_set("maxmemory", 0)
    assert released.status_code == 200
    assert live_sessions(acme_five_seats, LICENSE) == [sid]
    assert outbox_types(acme_five_seats, LICENSE) == ["lease.acquired"] * 2 + ["lease.released"]
    assert heartbeat(acme_five_seats, LICENSE, sid).status_code == 200


def test_a_read_only_replica_is_503(acme_five_seats: Tenant, redis_client) -> None:
    """During a failover the client may still talk to the old primary, now a replica:
    READONLY errors are 503 with Retry-After, not 500."""
    sid = acquire(acme_five_seats, LICENSE, "ws-1").get_json()["session_id"]
    redis_client.config_set("replica-read-only", "yes")
    redis_client.replicaof("127.0.0.1", str(free_port()))  # a primary that is not there
    try:
        _assert_503(acquire(acme_five_seats, LICENSE, "ws-2"), "redis")
        _assert_503(heartbeat(acme_five_seats, LICENSE, sid), "redis")
    finally:
        redis_client.replicaof("NO", "ONE")
    assert live_sessions(acme_five_seats, LICENSE) == [sid]
    assert heartbeat(acme_five_seats, LICENSE, sid).status_code == 200


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_postgres_down_on_a_cache_miss_is_503_and_nothing_half_done(
    acme_five_seats: Tenant, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_license("acme", "cam", seats=5)  # in the database, not cached in Redis
    fresh = store.create_api_key("acme")  # never used: not cached either
    sid = acquire(acme_five_seats, LICENSE, "ws-1").get_json()["session_id"]
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    _assert_503(acquire(acme_five_seats, "cam", "ws-1"), "database")
    _assert_503(heartbeat(acme_five_seats, "cam", "s-1"), "database")
    _assert_503(release(acme_five_seats, "cam", "s-1"), "database")
    _assert_503(call("acquire", _valid("acquire"), headers=_bearer(fresh.key)), "database")
    # Cached license and key: the hot path does not need the database.
    assert heartbeat(acme_five_seats, LICENSE, sid).status_code == 200
    assert acquire(acme_five_seats, LICENSE, "ws-2").status_code == 201
    assert (
        live_sessions(acme_five_seats, "cam") == [] and outbox_types(acme_five_seats, "cam") == []
    )
    assert not get_redis().exists(LicenseKeys.of("acme", "cam").cfg)  # no negative entry
    monkeypatch.setenv("DATABASE_URL", database_url)
    db.reset()
    taken = acquire(acme_five_seats, "cam", "ws-1")
    assert taken.status_code == 201 and taken.get_json()["seats_used"] == 1
    assert call("acquire", _valid("acquire"), headers=_bearer(fresh.key)).status_code == 200


# -- 500 internal_error ------------------------------------------------------------------


def test_unexpected_failure_is_json_500_without_stack_trace(
    acme_five_seats: Tenant, capsys: pytest.CaptureFixture[str]
) -> None:
    # A key of the wrong type makes the script fail with WRONGTYPE: a bug, not bad input.
    get_redis().set(LicenseKeys.of("acme", LICENSE).leases, "not a zset")
    capsys.readouterr()
    response = acquire(acme_five_seats, LICENSE, "ws-1")
    error = error_of(response, 500, "internal_error")
    assert "WRONGTYPE" not in error["message"]
    lines = log_lines(capsys.readouterr().out)
    (trace,) = [line for line in lines if "stack_trace" in line]
    assert trace["severity"] == "ERROR" and "WRONGTYPE" in trace["stack_trace"]
    assert _request_line_of(lines, "acquire")["status"] == 500


# -- the per-request log line ------------------------------------------------------------

LOG_FIELDS = {"severity", "message", "function", "status", "license_id", "outcome", "latency_ms"}


def _request_line(out: str, name: str) -> dict:
    return _request_line_of(log_lines(out), name)


def _request_line_of(all_lines: list[dict], name: str) -> dict:
    lines = [line for line in all_lines if line.get("function") == name and "status" in line]
    assert len(lines) == 1, lines
    line = lines[0]
    assert LOG_FIELDS <= set(line), line
    assert isinstance(line["latency_ms"], int | float) and line["latency_ms"] >= 0
    return line


def test_one_log_line_per_request_with_the_fields_and_never_the_key(
    acme_five_seats: Tenant, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    lease = acquire(acme_five_seats, LICENSE, "ws-1").get_json()
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["severity"], line["status"], line["outcome"]) == ("INFO", 201, "acquired")
    assert (line["license_id"], line["tenant_id"]) == (LICENSE, "acme")

    acquire(acme_five_seats, LICENSE, "ws-1")
    assert _request_line(capsys.readouterr().out, "acquire")["outcome"] == "renewed"

    heartbeat(acme_five_seats, LICENSE, lease["session_id"])
    line = _request_line(capsys.readouterr().out, "heartbeat")
    assert (line["status"], line["outcome"], line["license_id"]) == (200, "renewed", LICENSE)

    heartbeat(acme_five_seats, LICENSE, "gone")
    line = _request_line(capsys.readouterr().out, "heartbeat")
    assert (line["status"], line["outcome"]) == (410, "session_expired")

    release(acme_five_seats, LICENSE, lease["session_id"])
    line = _request_line(capsys.readouterr().out, "release")
    assert (line["status"], line["outcome"]) == (200, "released")
    release(acme_five_seats, LICENSE, lease["session_id"])
    assert _request_line(capsys.readouterr().out, "release")["outcome"] == "already_gone"

    call("acquire", {"license_id": LICENSE, "client_id": "a b"}, tenant=acme_five_seats)
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["status"], line["outcome"]) == (400, "invalid_request")

    call("acquire", _valid("acquire"), headers=_bearer("sl_0123abcd_" + "z" * 32))
    out = capsys.readouterr().out
    line = _request_line(out, "acquire")
    assert (line["severity"], line["status"], line["outcome"]) == (
        "WARNING",
        401,
        "unauthenticated",
    )
    assert line["license_id"] is None and line["tenant_id"] is None
    assert "z" * 32 not in out

    call("acquire", _valid("acquire"), tenant=acme_five_seats, method="GET")
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["status"], line["outcome"]) == (405, "method_not_allowed")


def test_log_lines_never_contain_a_key(
    acme_five_seats: Tenant, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    for name in FUNCTIONS:
        call(name, _valid(name), tenant=acme_five_seats)
        call(name, {"bad": 1}, tenant=acme_five_seats)
        call(name, _valid(name), headers={"Authorization": f"Bearer {acme_five_seats.key}x"})
    out = capsys.readouterr().out
    assert acme_five_seats.key not in out
    assert acme_five_seats.key.split("_", 2)[2] not in out
    assert len(log_lines(out)) == 9


def test_denial_log_line(acme_five_seats: Tenant, capsys: pytest.CaptureFixture[str]) -> None:
    new_license(acme_five_seats, "one", seats=1)
    acquire(acme_five_seats, "one", "a")
    capsys.readouterr()
    acquire(acme_five_seats, "one", "b")
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["status"], line["outcome"], line["license_id"]) == (
        409,
        "no_seats_available",
        "one",
    )


# -- cold import ------------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCTIONS)
def test_cold_import_loads_neither_sqlalchemy_nor_pubsub(name: str) -> None:
    """The database client loads only on a config-cache miss, and Pub/Sub never: a cold
    start of a client-facing function stays small. Nor PyJWT: tokens are encoded with
    cryptography alone (seatlease.api.tokens), without every algorithm PyJWT loads."""
    code = (
        f"import sys; sys.path.insert(0, 'functions/{name}'); import main; "
        "print(any(m == 'sqlalchemy' or m.startswith('sqlalchemy.') for m in sys.modules), "
        "any(m.startswith('google.cloud.pubsub') for m in sys.modules), "
        "'jwt' in sys.modules, "
        f"'seatlease.records.store' in sys.modules, callable(getattr(main, {name!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.split()[-5:] == ["False", "False", "False", "False", "True"], (
        result.stdout + result.stderr
    )


def test_a_licenses_own_refusal_is_info_a_refused_key_a_warning(
    acme_five_seats: Tenant, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make run`'s terminal filled with WARNING lines for every ordinary 403 (issue 42): a
    suspended license, an ended term, a missing entitlement are the client's answer, not
    an operator's to act on; a refused key still is a WARNING."""
    from datetime import UTC, datetime, timedelta

    from seatlease.api import runtime

    capsys.readouterr()
    store.update_license("acme", LICENSE, suspended=True)
    runtime.refresh_license_cache("acme", LICENSE)
    error_of(acquire(acme_five_seats, LICENSE, "ws-1"), 403, "license_suspended")
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["severity"], line["outcome"]) == ("INFO", "license_suspended")
    ended = datetime.now(UTC) - timedelta(days=1)
    store.update_license("acme", LICENSE, suspended=False, expires_at=ended)
    runtime.refresh_license_cache("acme", LICENSE)
    error_of(acquire(acme_five_seats, LICENSE, "ws-1"), 403, "license_expired")
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["severity"], line["outcome"]) == ("INFO", "license_expired")
    call("acquire", _valid("acquire"), headers={"Authorization": "Bearer sl_0123abcd_" + "z" * 32})
    line = _request_line(capsys.readouterr().out, "acquire")
    assert (line["severity"], line["status"]) == ("WARNING", 401)


@pytest.mark.parametrize("name", ["reason", "recovering", "recovered"])
def test_metadata_keys_the_service_writes_are_refused(acme_five_seats: Tenant, name: str) -> None:
    """A client's `metadata.reason` would pass for the service's own (a crashed lease
    counted as ended by the license's term in the reports): the keys the service writes
    in a lease's events are refused at the door, naming the field; nothing is taken."""
    body = {"license_id": LICENSE, "client_id": "ws-1", "metadata": {name: "license_expired"}}
    error = error_of(call("acquire", body, tenant=acme_five_seats), 400, "invalid_request")
    assert error["details"][0]["field"] == f"metadata.{name}", error
    _nothing_changed(acme_five_seats)
