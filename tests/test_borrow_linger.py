"""Borrowing and linger (docs/design.md, "Borrowing and linger"): the seat rules against a
real redis-server AND a real three-node Redis Cluster, the reaper's reclaim of lingering
leases, and the config cache written before the two settings existed."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_support import (
    acquire,
    call,
    error_of,
    heartbeat,
    live_sessions,
    new_license,
    outbox_types,
    parse_time,
    release,
    serving,
)
from sqlalchemy import inspect, text

import seatlease_cli as cli
from seatlease import admin
from seatlease.api import auth, runtime, tokens
from seatlease.api.runtime import seat_engine as runtime_engine
from seatlease.errors import InvalidRequest, NoSeatsAvailable, SessionExpired, StoreError
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.records import db, store
from seatlease.seats import keys
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease_cli import devserver
from seatlease_client import (
    BadSignature,
    MalformedToken,
    SeatClient,
    TokenExpired,
    TokenMismatch,
    UntrustedKey,
)
from seatlease_client import InvalidRequest as InvalidRequestError
from seatlease_client import NoSeatsAvailable as NoSeatsAvailableError

DAY = 86_400


def events(eng: SeatEngine, license_id: str = "lic") -> list[dict]:
    return pubsub.outbox_events(eng.redis, keys.outbox_key(keys.shard_of("t", license_id)))


def types(eng: SeatEngine, license_id: str = "lic") -> list[str]:
    return [e["type"] for e in events(eng, license_id)]


def status(eng: SeatEngine, license_id: str = "lic") -> dict[str, dict]:
    return {row["session_id"]: row for row in eng.live_leases("t", license_id)}


def expire_now(eng: SeatEngine, session_id: str, license_id: str = "lic") -> None:
    """Move a lease's deadline into the past (what waiting would do), in both places."""
    k = keys.LicenseKeys.of("t", license_id)
    past = eng.server_time_ms() - 1
    eng.redis.zadd(k.leases, {session_id: past}, xx=True)
    eng.redis.zadd(k.deadlines, {f"t/{license_id}|{session_id}": past}, xx=True)


def reap(eng: SeatEngine, license_id: str = "lic") -> int:
    """The reaper's reclaim of this license's shard (no Pub/Sub involved)."""
    reaper = Reaper(eng.redis, publisher=None)  # type: ignore[arg-type]
    shard = keys.shard_of("t", license_id)
    candidates, _, _ = reaper.survey()
    return reaper.reclaim(shard, candidates[shard])


# -- borrowing -------------------------------------------------------------------------


def test_a_borrow_counts_against_the_cap_needs_no_heartbeats_returns_early(seat_engine, configs):
    configs.add("t", "lic", seats=2, lease_seconds=30, max_borrow_seconds=7 * DAY)
    borrowed = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=3 * DAY))
    assert borrowed.created and borrowed.borrowed and borrowed.seats_used == 1
    assert borrowed.lease_seconds == 3 * DAY
    now = seat_engine.server_time_ms()
    assert abs(borrowed.expires_at_ms - (now + 3 * DAY * 1000)) < 2000
    assert borrowed.heartbeat_interval_seconds == 3 * DAY  # none needed before it ends
    seat_engine.acquire(SeatRequest("t", "lic", "desk"))
    with pytest.raises(NoSeatsAvailable) as denied:  # the borrow holds one of the two
        seat_engine.acquire(SeatRequest("t", "lic", "third"))
    assert denied.value.seats_used == 2

    renewal = seat_engine.heartbeat("t", "lic", borrowed.session_id)
    assert renewal.borrowed and renewal.expires_at_ms == borrowed.expires_at_ms
    rows = status(seat_engine)
    assert rows[borrowed.session_id]["borrowed"] is True
    assert rows[borrowed.session_id]["lingering"] is False
    assert [r["borrowed"] for s, r in rows.items() if s != borrowed.session_id] == [False]

    back = seat_engine.release("t", "lic", borrowed.session_id)
    assert (back.released, back.lingering, back.seats_used) == (True, False, 1)
    assert seat_engine.acquire(SeatRequest("t", "lic", "third")).created
    assert types(seat_engine) == [
        "lease.borrowed",
        "lease.acquired",
        "lease.released",
        "lease.acquired",
    ]
    first = events(seat_engine)[0]
    assert (first["seats_used"], first["client_id"]) == (1, "laptop")


def test_borrow_beyond_the_license_maximum_is_refused_naming_it(seat_engine, configs):
    configs.add("t", "lic", seats=2, max_borrow_seconds=DAY)
    with pytest.raises(InvalidRequest) as too_long:
        seat_engine.acquire(SeatRequest("t", "lic", "c1", borrow_seconds=DAY + 1))
    assert too_long.value.fields["max_borrow_seconds"] == DAY
    assert too_long.value.fields["details"][0]["field"] == "borrow_seconds"
    assert str(DAY) in too_long.value.message
    assert seat_engine.acquire(SeatRequest("t", "lic", "c1", borrow_seconds=DAY)).borrowed

    configs.add("t", "off", seats=2)  # max_borrow_seconds 0: no borrowing
    with pytest.raises(InvalidRequest) as off:
        seat_engine.acquire(SeatRequest("t", "off", "c1", borrow_seconds=1))
    assert off.value.fields["max_borrow_seconds"] == 0
    assert "borrowing is off" in off.value.message
    with pytest.raises(InvalidRequest):
        seat_engine.acquire(SeatRequest("t", "off", "c1", borrow_seconds=10, lease_seconds=10))
    assert seat_engine.live_leases("t", "off") == []
    assert types(seat_engine, "off") == []


def test_reacquire_of_a_borrowed_lease_returns_it_unchanged(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, max_borrow_seconds=DAY)
    borrowed = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=600))
    time.sleep(0.01)
    plain = seat_engine.acquire(SeatRequest("t", "lic", "laptop"))  # the product restarted
    again = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=DAY))
    for lease in (plain, again):
        assert not lease.created and lease.borrowed
        assert lease.session_id == borrowed.session_id
        assert lease.expires_at_ms == borrowed.expires_at_ms and lease.lease_seconds == 600
    assert types(seat_engine) == ["lease.borrowed"]


def test_a_borrow_by_a_client_holding_a_lease_converts_it(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, max_borrow_seconds=DAY)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "laptop"))
    converted = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=DAY))
    assert not converted.created and converted.borrowed
    assert converted.session_id == lease.session_id and converted.seats_used == 1
    assert converted.expires_at_ms > lease.expires_at_ms + (DAY - 60) * 1000
    assert status(seat_engine)[lease.session_id]["borrowed"] is True
    assert seat_engine.heartbeat("t", "lic", lease.session_id).expires_at_ms == (
        converted.expires_at_ms
    )
    assert types(seat_engine) == ["lease.acquired", "lease.converted"]
    assert events(seat_engine)[1]["seats_used"] == 1


def test_an_expired_borrow_is_reclaimed_like_any_lease(seat_engine, configs):
    configs.add("t", "lic", seats=1, max_borrow_seconds=DAY)
    borrowed = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=1))
    time.sleep(1.05)
    with pytest.raises(SessionExpired) as gone:
        seat_engine.heartbeat("t", "lic", borrowed.session_id)
    assert gone.value.reason == "expired"
    assert seat_engine.acquire(SeatRequest("t", "lic", "desk")).created
    assert types(seat_engine) == ["lease.borrowed", "lease.reclaimed", "lease.acquired"]


def test_borrowed_lease_is_not_lingering_after_its_return(seat_engine, configs):
    configs.add("t", "lic", seats=1, max_borrow_seconds=DAY, linger_seconds=600)
    borrowed = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=600))
    back = seat_engine.release("t", "lic", borrowed.session_id)
    assert back.released and not back.lingering and back.seats_used == 0
    assert seat_engine.acquire(SeatRequest("t", "lic", "desk")).created  # the seat is free at once


# -- linger ----------------------------------------------------------------------------


def test_a_released_seat_lingers_for_its_client_only(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, linger_seconds=300)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "cad-1", metadata={"user": "ann"}))
    released = seat_engine.release("t", "lic", lease.session_id)
    assert (released.released, released.lingering, released.seats_used) == (True, True, 1)
    row = status(seat_engine)[lease.session_id]
    assert row["lingering"] is True and row["borrowed"] is False
    assert abs(row["expires_at_ms"] - (seat_engine.server_time_ms() + 300_000)) < 2000

    with pytest.raises(SessionExpired) as hb:  # the client released it
        seat_engine.heartbeat("t", "lic", lease.session_id)
    assert hb.value.reason == "unknown"
    again = seat_engine.release("t", "lic", lease.session_id)
    assert (again.released, again.lingering, again.seats_used) == (False, False, 1)
    with pytest.raises(NoSeatsAvailable) as denied:  # the lingering seat still counts
        seat_engine.acquire(SeatRequest("t", "lic", "someone-else"))
    assert denied.value.seats_used == 1 and 299 <= denied.value.retry_after_seconds <= 300

    back = seat_engine.acquire(SeatRequest("t", "lic", "cad-1"))  # the product restarted
    assert not back.created and back.session_id == lease.session_id
    assert abs(back.expires_at_ms - (seat_engine.server_time_ms() + 30_000)) < 2000
    assert status(seat_engine)[lease.session_id]["lingering"] is False
    assert seat_engine.heartbeat("t", "lic", lease.session_id).expires_at_ms >= back.expires_at_ms
    assert types(seat_engine) == ["lease.acquired", "lease.lingering", "lease.renewed"]
    lingering = events(seat_engine)[1]
    assert (lingering["seats_used"], lingering["metadata"]) == (1, {"user": "ann"})


def test_a_lingering_seat_is_freed_by_the_prune_at_acquire_as_released(seat_engine, configs):
    configs.add("t", "lic", seats=1, linger_seconds=1)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "cad-1"))
    seat_engine.release("t", "lic", lease.session_id)
    time.sleep(1.05)  # the linger really runs out
    other = seat_engine.acquire(SeatRequest("t", "lic", "someone-else"))
    assert other.created and other.seats_used == 1
    assert types(seat_engine) == [
        "lease.acquired",
        "lease.lingering",
        "lease.released",  # not reclaimed: the client did release it
        "lease.acquired",
    ]
    ended = events(seat_engine)[2]
    assert (ended["session_id"], ended["seats_used"]) == (lease.session_id, 0)
    # The same client's acquire after its linger is a new lease.
    seat_engine.release("t", "lic", other.session_id)
    expire_now(seat_engine, other.session_id)
    fresh = seat_engine.acquire(SeatRequest("t", "lic", "someone-else"))
    assert fresh.created and fresh.session_id != other.session_id


def test_the_reaper_ends_a_lingering_lease_as_released(seat_engine, configs):
    configs.add("t", "lic", seats=2, lease_seconds=30, linger_seconds=600)
    lingering = seat_engine.acquire(SeatRequest("t", "lic", "cad-1"))
    crashed = seat_engine.acquire(SeatRequest("t", "lic", "cad-2"))
    seat_engine.release("t", "lic", lingering.session_id)
    expire_now(seat_engine, lingering.session_id)
    expire_now(seat_engine, crashed.session_id)
    assert reap(seat_engine) == 2
    assert seat_engine.live_leases("t", "lic") == []
    ended = {e["session_id"]: e["type"] for e in events(seat_engine)[3:]}
    assert ended == {
        lingering.session_id: "lease.released",
        crashed.session_id: "lease.reclaimed",
    }
    client_map = seat_engine.redis.hgetall(keys.LicenseKeys.of("t", "lic").clients)
    assert client_map == {}
    # Its client's next acquire is a new lease.
    assert seat_engine.acquire(SeatRequest("t", "lic", "cad-1")).created


def test_a_heartbeat_after_the_linger_ran_out_ends_it_as_released(seat_engine, configs):
    configs.add("t", "lic", seats=1, linger_seconds=600)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "cad-1"))
    seat_engine.release("t", "lic", lease.session_id)
    expire_now(seat_engine, lease.session_id)
    with pytest.raises(SessionExpired) as gone:
        seat_engine.heartbeat("t", "lic", lease.session_id)
    assert gone.value.reason == "unknown"
    assert types(seat_engine) == ["lease.acquired", "lease.lingering", "lease.released"]


def test_revoke_ends_a_lingering_lease_at_once(seat_engine, configs):
    configs.add("t", "lic", seats=1, linger_seconds=600)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "cad-1"))
    seat_engine.release("t", "lic", lease.session_id)
    revoked = seat_engine.release("t", "lic", lease.session_id, revoke=True)
    assert (revoked.released, revoked.lingering, revoked.seats_used) == (True, False, 0)
    assert seat_engine.acquire(SeatRequest("t", "lic", "someone-else")).created
    assert types(seat_engine) == [
        "lease.acquired",
        "lease.lingering",
        "lease.revoked",
        "lease.acquired",
    ]


def test_a_borrow_in_linger_takes_the_seat_back_as_borrowed(seat_engine, configs):
    configs.add("t", "lic", seats=1, linger_seconds=600, max_borrow_seconds=DAY)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "laptop"))
    seat_engine.release("t", "lic", lease.session_id)
    borrowed = seat_engine.acquire(SeatRequest("t", "lic", "laptop", borrow_seconds=DAY))
    assert borrowed.session_id == lease.session_id and borrowed.borrowed
    row = status(seat_engine)[lease.session_id]
    assert (row["borrowed"], row["lingering"]) == (True, False)
    assert types(seat_engine) == ["lease.acquired", "lease.lingering", "lease.converted"]


# -- idempotency, and a config cache from before -----------------------------------------


def test_repeats_of_borrow_and_linger_calls_answer_the_first_run(seat_engine, configs):
    configs.add("t", "lic", seats=1, linger_seconds=600, max_borrow_seconds=DAY)
    first = seat_engine.acquire(
        SeatRequest("t", "lic", "laptop", borrow_seconds=60, request_id="r-1")
    )
    repeat = seat_engine.acquire(
        SeatRequest("t", "lic", "laptop", borrow_seconds=60, request_id="r-1")
    )
    assert repeat == first and repeat.created and repeat.borrowed
    seat_engine.release("t", "lic", first.session_id)
    lease = seat_engine.acquire(SeatRequest("t", "lic", "desk"))
    gone = seat_engine.release("t", "lic", lease.session_id, request_id="r-2")
    assert seat_engine.release("t", "lic", lease.session_id, request_id="r-2") == gone
    assert gone.lingering and gone.released
    assert types(seat_engine) == [
        "lease.borrowed",
        "lease.released",
        "lease.acquired",
        "lease.lingering",
    ]


def test_a_config_cached_before_borrowing_existed_means_off(seat_engine, configs):
    """A cache entry written by the previous version (no max_borrow_seconds or
    linger_seconds fields) during a deploy: both off, nothing breaks."""
    configs.add("t", "lic", seats=1, max_borrow_seconds=DAY, linger_seconds=600)
    cfg = keys.LicenseKeys.of("t", "lic").cfg
    seat_engine.redis.hset(
        cfg,
        mapping={
            "exists": 1,
            "seats": 1,
            "lease_seconds": 360,
            "max_lease_seconds": 3600,
            "overage_percent": 0,
            "suspended": 0,
        },
    )
    seat_engine.redis.expire(cfg, 600)
    with pytest.raises(InvalidRequest):
        seat_engine.acquire(SeatRequest("t", "lic", "c1", borrow_seconds=60))
    lease = seat_engine.acquire(SeatRequest("t", "lic", "c1"))
    assert not seat_engine.release("t", "lic", lease.session_id).lingering
    seat_engine.cache_config("t", "lic", configs("t", "lic"))  # what an admin change does
    assert seat_engine.acquire(SeatRequest("t", "lic", "c1", borrow_seconds=60)).borrowed


# -- over HTTP: the real functions on real Redis and PostgreSQL --------------------------


def lease_claims(token: str) -> dict:
    """The lease token's claims, its signature verified with the deployment's key."""
    kid = jwt.get_unverified_header(token)["kid"]
    (jwk,) = [k for k in tokens.keyring().jwks()["keys"] if k["kid"] == kid]
    return jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["EdDSA"], audience="acme/cad")


def test_http_borrow_is_201_borrowed_and_its_token_carries_the_end(acme) -> None:
    lic = new_license(acme, "cad", seats=1, lease_seconds=60, max_borrow_seconds=7 * DAY)
    response = acquire(acme, lic, "laptop-17", borrow_seconds=3 * DAY)
    assert response.status_code == 201, response.get_data(as_text=True)
    body = response.get_json()
    assert body["borrowed"] is True and body["lease_seconds"] == 3 * DAY
    assert body["heartbeat_interval_seconds"] == 3 * DAY
    expires = parse_time(body["lease_expires_at"])
    claims = lease_claims(body["lease_token"])
    assert claims["borrowed"] is True and claims["sub"] == "laptop-17"
    assert claims["exp"] == int(expires.timestamp())  # the borrow's end, whole seconds
    assert claims["exp"] - claims["iat"] == 3 * DAY

    assert acquire(acme, lic, "desk").status_code == 409  # it holds the only seat
    beat = heartbeat(acme, lic, body["session_id"]).get_json()
    assert beat["lease_expires_at"] == body["lease_expires_at"]  # no heartbeat needed
    assert beat["borrowed"] is True and lease_claims(beat["lease_token"])["borrowed"] is True
    again = acquire(acme, lic, "laptop-17")
    assert again.status_code == 200 and again.get_json()["borrowed"] is True
    assert again.get_json()["lease_expires_at"] == body["lease_expires_at"]

    back = release(acme, lic, body["session_id"]).get_json()
    assert (back["released"], back["seats_used"]) == (True, 0)
    desk = acquire(acme, lic, "desk")
    assert desk.status_code == 201 and desk.get_json()["borrowed"] is False
    assert "borrowed" not in lease_claims(desk.get_json()["lease_token"])
    desk_beat = heartbeat(acme, lic, desk.get_json()["session_id"]).get_json()
    assert desk_beat["borrowed"] is False
    assert "borrowed" not in lease_claims(desk_beat["lease_token"])
    assert outbox_types(acme, lic) == [
        "lease.borrowed",
        "lease.released",
        "lease.acquired",
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (2_592_001, "less than or equal to 2592000"),
        (-1, "greater than or equal to 1"),
        (0, "greater than or equal to 1"),
        (1.5, "valid integer"),
        (60.0, "valid integer"),
        ("60", "valid integer"),
        (True, "valid integer"),
        ([60], "valid integer"),
    ],
)
def test_http_bad_borrow_seconds_is_400_naming_the_field(acme, value, problem) -> None:
    lic = new_license(acme, "cad", seats=1, max_borrow_seconds=30 * DAY)
    error = error_of(acquire(acme, lic, "laptop", borrow_seconds=value), 400, "invalid_request")
    assert [d["field"] for d in error["details"]] == ["borrow_seconds"]
    assert problem in error["details"][0]["problem"]
    assert "borrow_seconds" in error["message"]
    assert live_sessions(acme, lic) == [] and outbox_types(acme, lic) == []


def test_http_borrow_beyond_the_license_maximum_is_400_naming_it(acme) -> None:
    lic = new_license(acme, "cad", seats=1, max_borrow_seconds=DAY)
    error = error_of(acquire(acme, lic, "laptop", borrow_seconds=DAY + 1), 400, "invalid_request")
    assert error["max_borrow_seconds"] == DAY and str(DAY) in error["message"]
    assert error["details"][0]["field"] == "borrow_seconds"
    both = error_of(
        acquire(acme, lic, "laptop", borrow_seconds=60, lease_seconds=60), 400, "invalid_request"
    )
    assert both["details"][0]["field"] == "borrow_seconds"
    assert "lease_seconds" in both["details"][0]["problem"]
    off = new_license(acme, "plain", seats=1)
    error = error_of(acquire(acme, off, "laptop", borrow_seconds=60), 400, "invalid_request")
    assert error["max_borrow_seconds"] == 0 and "borrowing is off" in error["message"]
    assert live_sessions(acme, lic) == live_sessions(acme, off) == []


def test_http_linger_keeps_the_seat_for_the_same_client(acme) -> None:
    lic = new_license(acme, "cad", seats=1, linger_seconds=600)
    first = acquire(acme, lic, "cad-ws-1").get_json()
    gone = release(acme, lic, first["session_id"]).get_json()
    assert (gone["released"], gone["seats_used"]) == (True, 1)  # still held, for it
    assert (
        error_of(heartbeat(acme, lic, first["session_id"]), 410, "session_expired")["reason"]
        == "unknown"
    )
    assert release(acme, lic, first["session_id"]).get_json()["released"] is False
    assert error_of(acquire(acme, lic, "cad-ws-2"), 409, "no_seats_available")
    back = acquire(acme, lic, "cad-ws-1")  # the product restarted
    assert back.status_code == 200 and back.get_json()["session_id"] == first["session_id"]
    assert heartbeat(acme, lic, first["session_id"]).status_code == 200
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.lingering", "lease.renewed"]


# -- the operator's side: admin actions, the CLI, the migration ------------------------------


def admin_call(action: str, **fields):
    return admin.execute(admin.parse({"action": action, **fields}))


def test_admin_license_settings_and_status(redis_url, database_url) -> None:
    store.create_tenant("acme")
    status, body = admin_call(
        "license.create",
        tenant_id="acme",
        license_id="cad",
        seats=2,
        max_borrow_seconds=7 * DAY,
        linger_seconds=300,
    )
    assert status == 201 and body["cache_refreshed"]
    lic = body["license"]
    assert (lic["max_borrow_seconds"], lic["linger_seconds"]) == (7 * DAY, 300)
    _, body = admin_call("license.update", tenant_id="acme", license_id="cad", linger_seconds=0)
    assert (body["license"]["max_borrow_seconds"], body["license"]["linger_seconds"]) == (
        7 * DAY,
        0,
    )
    _, shown = admin_call("license.show", tenant_id="acme", license_id="cad")
    assert shown["license"]["linger_seconds"] == 0
    admin_call("license.update", tenant_id="acme", license_id="cad", linger_seconds=300)

    engine = runtime_engine()  # the cache the admin actions refreshed
    borrowed = engine.acquire(SeatRequest("acme", "cad", "laptop", borrow_seconds=DAY))
    lingering = engine.acquire(SeatRequest("acme", "cad", "desk"))
    assert engine.release("acme", "cad", lingering.session_id).lingering
    _, body = admin_call("status", tenant_id="acme", license_id="cad")
    (lic,) = body["licenses"]
    assert lic["seats_used"] == 2
    leases = {row["session_id"]: row for row in lic["leases"]}
    assert (leases[borrowed.session_id]["borrowed"], leases[borrowed.session_id]["lingering"]) == (
        True,
        False,
    )
    assert leases[borrowed.session_id]["expires_in_seconds"] > DAY - 60
    assert (
        leases[lingering.session_id]["borrowed"],
        leases[lingering.session_id]["lingering"],
    ) == (
        False,
        True,
    )
    # An operator's revoke ends the lingering seat at once.
    _, revoked = admin_call(
        "revoke", tenant_id="acme", license_id="cad", session_id=lingering.session_id
    )
    assert revoked["revoked"] and revoked["seats_used"] == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_borrow_seconds", -1),
        ("max_borrow_seconds", 2_592_001),
        ("max_borrow_seconds", "3600"),
        ("linger_seconds", -1),
        ("linger_seconds", 86_401),
        ("linger_seconds", 1.5),
    ],
)
def test_admin_refuses_bad_settings_naming_the_field(database_url, field, value) -> None:
    for action, extra in (("license.create", {"seats": 1}), ("license.update", {})):
        with pytest.raises(InvalidRequest) as bad:
            admin.parse(
                {"action": action, "tenant_id": "a", "license_id": "l", field: value, **extra}
            )
        assert [d["field"] for d in bad.value.fields["details"]] == [field]
    # The store (and the table's CHECK constraint behind it) refuse them too.
    store.create_tenant("acme")
    if isinstance(value, int):
        with pytest.raises(StoreError, match=field):
            store.create_license("acme", "cad", seats=1, **{field: value})
    assert store.get_license("acme", "cad") is None


def test_the_database_refuses_out_of_range_settings(database_url) -> None:
    store.create_tenant("acme")
    for column, value, check in (
        ("max_borrow_seconds", 2_592_001, "ck_licenses_max_borrow"),
        ("linger_seconds", -1, "ck_licenses_linger"),
    ):
        with pytest.raises(Exception, match=check):
            with db.get_engine().begin() as conn:
                conn.execute(
                    text(
                        f"INSERT INTO licenses (tenant_id, license_id, seats, {column}) "
                        f"VALUES ('acme', 'x', 1, {value})"
                    )
                )
    made = store.create_license("acme", "cad", seats=1)
    assert (made["max_borrow_seconds"], made["linger_seconds"]) == (0, 0)  # off by default


def test_cli_flags_and_status_columns(redis_url, database_url, capsys, monkeypatch) -> None:
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    auth.forget_all()

    def run(*argv: str) -> str:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        assert code == 0, err
        return out

    run("tenant", "create", "acme")
    out = run(
        "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "2",
        "--max-borrow-seconds", "86400", "--linger-seconds", "120",
    )  # fmt: skip
    assert "max_borrow_seconds  86400" in out and "linger_seconds      120" in out
    out = run("license", "update", "--tenant", "acme", "--license", "cad", "--linger-seconds", "60")
    assert "linger_seconds      60" in out
    listing = run("license", "list", "--tenant", "acme").splitlines()
    assert listing[0].split()[-3:] == ["MAX_BORROW_SECONDS", "LINGER_SECONDS", "SUSPENDED"]
    assert listing[1].split()[-3:] == ["86400", "60", "no"]

    engine = runtime_engine()
    borrowed = engine.acquire(SeatRequest("acme", "cad", "laptop", borrow_seconds=DAY))
    lingering = engine.acquire(SeatRequest("acme", "cad", "desk"))
    engine.release("acme", "cad", lingering.session_id)
    lines = run("status", "--tenant", "acme").splitlines()
    rows = {line.split()[0]: line.split()[-2:] for line in lines if line.strip()}
    assert rows[borrowed.session_id] in (["23h59m", "borrowed"], ["1d00h", "borrowed"])
    assert rows[lingering.session_id] in (["59s", "lingering"], ["1m00s", "lingering"])

    code = cli.main(["license", "update", "--tenant", "acme", "--license", "cad",
                     "--linger-seconds", "86401"])  # fmt: skip
    assert code != 0 and "linger_seconds" in capsys.readouterr().err


def test_migration_0004_adds_the_settings_off_and_downgrades(migration_urls) -> None:
    """On a PostgreSQL database at 0003 with a license, and on SQLite: 0004 adds both
    settings as 0 with their CHECK constraints; downgrading removes them again."""
    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0003")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO tenants (tenant_id) VALUES ('acme')"))
            conn.execute(
                text(
                    "INSERT INTO licenses (tenant_id, license_id, seats) VALUES ('acme', 'cad', 3)"
                )
            )
        store.upgrade(engine)
        row = store.get_license("acme", "cad", engine)
        assert (row["seats"], row["max_borrow_seconds"], row["linger_seconds"]) == (3, 0, 0)
        with pytest.raises(Exception, match="ck_licenses_linger"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE licenses SET linger_seconds = 86401"))
        store.downgrade(engine, "0003")
        columns = {c["name"] for c in inspect(engine).get_columns("licenses")}
        assert "linger_seconds" not in columns and "max_borrow_seconds" not in columns
        with pytest.raises(Exception, match="ck_licenses_seats"):  # the older checks stay
            with engine.begin() as conn:
                conn.execute(text("UPDATE licenses SET seats = -1"))
        engine.dispose()


# -- the Python client: borrow, verify offline, return early -----------------------------


class Counting:
    """WSGI wrapper around the real functions that counts the requests it serves."""

    def __init__(self, app) -> None:
        self.app, self.requests = app, 0

    def __call__(self, environ, start_response):
        self.requests += 1
        return self.app(environ, start_response)


@pytest.fixture
def served(redis_url: str, database_url: str):
    """The real functions over HTTP on a free port; tenant acme with an API key and a
    one-seat license lending seats for up to a day."""
    app = Counting(devserver.create_app(["acquire", "heartbeat", "release", "keys"]))
    store.create_tenant("acme")
    key = store.create_api_key("acme").key
    store.create_license("acme", "cad", seats=1, max_borrow_seconds=DAY)
    runtime.refresh_license_cache("acme", "cad")
    with serving(app) as url:
        yield url, key, app


def seat_client(url: str, key: str, **options) -> SeatClient:
    options.setdefault("pinned_keys", tokens.keyring().jwks()["keys"])  # the vendor's keys
    return SeatClient(url, key, retries=0, handle_sigterm=False, tenant_id="acme", **options)


def test_client_borrows_saves_verifies_offline_and_returns_early(served, tmp_path) -> None:
    url, key, app = served
    path = tmp_path / "seat.json"
    seat = seat_client(url, key).borrow("cad", "laptop-17", 3600, path=path)
    assert (seat.license_id, seat.client_id, seat.borrow_seconds) == ("cad", "laptop-17", 3600)
    assert 3590 < seat.seconds_left <= 3600 and not seat.expired
    assert seat.claims["borrowed"] is True and seat.claims["exp"] == int(
        seat.expires_at.timestamp()
    )
    assert path.stat().st_mode & 0o777 == 0o600
    (row,) = runtime.seat_engine().live_leases("acme", "cad")
    assert (row["session_id"], row["borrowed"]) == (seat.session_id, True)

    # Later, offline: a new process loads and verifies it without a single request.
    before = app.requests
    again = seat_client(url, key).load_borrowed(str(path))
    assert app.requests == before
    assert (again.session_id, again.expires_at) == (seat.session_id, seat.expires_at)

    with pytest.raises(NoSeatsAvailableError):  # the borrow holds the only seat
        seat_client(url, key).acquire("cad", "desk")
    answer = again.return_early()
    assert answer["released"] is True and not path.exists()
    assert seat_client(url, key).acquire("cad", "desk")["borrowed"] is False


def test_an_altered_or_foreign_saved_seat_does_not_verify(served, tmp_path) -> None:
    url, key, _ = served
    path = tmp_path / "seat.json"
    seat_client(url, key).borrow("cad", "laptop-17", 600, path=path)
    saved = json.loads(path.read_text())

    def write(document: dict) -> str:
        altered = tmp_path / "altered.json"
        altered.write_text(json.dumps(document))
        return str(altered)

    # A later end written into the token: the signature no longer holds.
    header, payload, signature = saved["answer"]["lease_token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["exp"] += 30 * DAY
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    token = ".".join([header, forged, signature])
    with pytest.raises(BadSignature):
        seat_client(url, key).load_borrowed(
            write({**saved, "answer": {**saved["answer"], "lease_token": token}})
        )
    # A later end in the answer only: it disagrees with the token.
    later = {**saved["answer"], "lease_expires_at": "2099-01-01T00:00:00.000Z"}
    with pytest.raises(TokenMismatch):
        seat_client(url, key).load_borrowed(write({**saved, "answer": later}))
    # A token of one's own, with one's own key in the saved JWKS: not a pinned key.
    own = Ed25519PrivateKey.generate()
    mine = jwt.encode(
        {**claims, "exp": claims["exp"]}, own, algorithm="EdDSA",
        headers={"kid": "mine", "typ": "seatlease-lease+jwt"},
    )  # fmt: skip
    raw = own.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    jwk = {"kty": "OKP", "crv": "Ed25519", "kid": "mine", "alg": "EdDSA", "use": "sig",
           "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode()}  # fmt: skip
    foreign = {**saved, "answer": {**saved["answer"], "lease_token": mine}, "jwks": {"keys": [jwk]}}
    with pytest.raises(UntrustedKey):
        seat_client(url, key).load_borrowed(write(foreign))
    with pytest.raises(MalformedToken):
        seat_client(url, key).load_borrowed(write({"something": "else"}))


def test_a_saved_seat_past_its_end_is_expired(served, tmp_path) -> None:
    url, key, _ = served
    path = tmp_path / "seat.json"
    seat = seat_client(url, key, token_leeway=0).borrow("cad", "laptop-17", 1, path=path)
    time.sleep(max(0.0, seat.expires_at.timestamp() - time.time()) + 1.1)
    with pytest.raises(TokenExpired):
        seat_client(url, key, token_leeway=0).load_borrowed(path)
    assert seat.expired


def test_client_borrow_beyond_the_maximum_saves_nothing(served, tmp_path) -> None:
    url, key, _ = served
    path = tmp_path / "seat.json"
    with pytest.raises(InvalidRequestError) as refused:
        seat_client(url, key).borrow("cad", "laptop-17", DAY + 1, path=path)
    assert refused.value.body["max_borrow_seconds"] == DAY
    assert not path.exists() and runtime.seat_engine().live_leases("acme", "cad") == []


def test_async_client_borrows_loads_and_returns_early(served, tmp_path) -> None:
    """The asyncio client: the same borrow, offline load and early return, each awaited
    (the HTTP calls run in worker threads)."""
    import asyncio

    from seatlease_client import AsyncSeatClient

    url, key, app = served
    path = tmp_path / "seat.json"
    client = AsyncSeatClient(url, key, retries=0, handle_sigterm=False, tenant_id="acme",
                             pinned_keys=tokens.keyring().jwks()["keys"])  # fmt: skip

    async def story() -> tuple:
        seat = await client.borrow("cad", "laptop-9", 600, path=path)
        before = app.requests
        again = await client.load_borrowed(path)
        offline = app.requests == before
        answer = await client.return_early(again)
        return seat, again, offline, answer

    seat, again, offline, answer = asyncio.run(story())
    assert seat.claims["borrowed"] is True and 590 < seat.seconds_left <= 600
    assert offline and again.session_id == seat.session_id
    assert answer["released"] is True and not path.exists()
    assert runtime.seat_engine().live_leases("acme", "cad") == []


# -- a borrowed seat stays on its machine (issue 31, item 11) ----------------------------


def test_a_borrowed_seat_verifies_only_on_the_machine_that_borrowed_it(served, tmp_path) -> None:
    """borrow -> copy the file -> return early -> borrow again: the copy is worth nothing
    on another machine, whose fingerprint the token does not name."""
    from seatlease_client import TokenWrongMachine
    from seatlease_client._machine import fingerprint

    url, key, _ = served
    path, copy = tmp_path / "seat.json", tmp_path / "copied.json"
    laptop = seat_client(url, key, machine_id="laptop-machine-id")
    seat = laptop.borrow("cad", "laptop-17", 3600, path=path)
    assert seat.claims["cnf"] == {"machine": fingerprint("laptop-machine-id")}
    assert json.loads(path.read_text())["request"]["fingerprint"] == fingerprint(
        "laptop-machine-id"
    )
    copy.write_text(path.read_text())
    desktop = seat_client(url, key, machine_id="desktop-machine-id")
    with pytest.raises(TokenWrongMachine) as refused:
        desktop.load_borrowed(copy)
    assert refused.value.code == "token_wrong_machine"
    # The same machine still loads it (docs/client.md says what that allows).
    assert seat_client(url, key, machine_id="LAPTOP-machine-id ").load_borrowed(copy).session_id
    # With no machine_id the client reads the system's own (/etc/machine-id here): not
    # the laptop's.
    with pytest.raises(TokenWrongMachine):
        seat_client(url, key).load_borrowed(copy)


def test_a_saved_seat_without_its_machine_does_not_load(served, tmp_path) -> None:
    """A heartbeat's token of a borrowed lease carries no machine: written into a file
    with a request of its own, it still does not pass as a borrowed seat."""
    from seatlease_client import TokenWrongMachine

    url, key, _ = served
    path = tmp_path / "seat.json"
    laptop = seat_client(url, key, machine_id="laptop-machine-id")
    laptop.borrow("cad", "laptop-17", 3600, path=path)
    saved = json.loads(path.read_text())
    nonce = "my-own-nonce-0001"
    beat = call(
        "heartbeat",
        {"license_id": "cad", "session_id": saved["answer"]["session_id"], "nonce": nonce},
        headers={"Authorization": f"Bearer {key}"},
    ).get_json()
    request = {k: v for k, v in saved["request"].items() if k != "fingerprint"}
    forged = {
        **saved,
        "request": {**request, "nonce": nonce},
        "answer": {**saved["answer"], "lease_token": beat["lease_token"]},
    }
    path.write_text(json.dumps(forged))
    with pytest.raises(TokenWrongMachine):
        seat_client(url, key, machine_id="desktop-machine-id").load_borrowed(path)


def test_acquire_refuses_a_malformed_fingerprint(acme) -> None:
    new_license(acme, "cad", seats=1, max_borrow_seconds=DAY)
    for bad in ("ABC", "g" * 64, "A" * 64, "a" * 63, 7):
        answer = acquire(acme, "cad", "ws-1", borrow_seconds=60, fingerprint=bad)
        assert error_of(answer, 400, "invalid_request")["details"][0]["field"] == "fingerprint"
    good = acquire(acme, "cad", "ws-1", borrow_seconds=60, fingerprint="a" * 64)
    assert good.status_code == 201
    claims = json.loads(
        base64.urlsafe_b64decode(good.get_json()["lease_token"].split(".")[1] + "==")
    )
    assert claims["cnf"] == {"machine": "a" * 64} and claims["borrowed"] is True
