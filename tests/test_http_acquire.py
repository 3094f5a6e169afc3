"""acquire over HTTP: every row of the contract table (docs/design.md), through
functions_framework.create_app(...).test_client(), on real Redis and PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta

from http_support import (
    Tenant,
    acquire,
    error_of,
    live_sessions,
    new_license,
    new_tenant,
    outbox_types,
    parse_time,
    redis_now,
    release,
)

from seatlease.api import runtime
from seatlease.events.pubsub import outbox_events
from seatlease.records import store
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis


def test_new_lease_is_201_with_the_full_body(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=5)
    before = redis_now()
    response = acquire(acme, lic, "ws-1@host")
    assert response.status_code == 201
    assert response.headers["Content-Type"] == "application/json"
    body = response.get_json()
    assert set(body) == {
        "session_id",
        "license_id",
        "client_id",
        "lease_expires_at",
        "lease_seconds",
        "heartbeat_interval_seconds",
        "seats_used",
        "seats_total",
        "overage",
        "borrowed",
        "lease_token",
    }
    assert body["license_id"] == "cad" and body["client_id"] == "ws-1@host"
    assert len(body["session_id"]) >= 16
    assert body["lease_seconds"] == 360  # the license's default
    assert body["heartbeat_interval_seconds"] == 120  # a third of the lease
    assert (body["seats_used"], body["seats_total"], body["overage"]) == (1, 5, False)
    assert body["borrowed"] is False
    expires = parse_time(body["lease_expires_at"])
    assert before + timedelta(seconds=359) < expires < before + timedelta(seconds=362)
    assert live_sessions(acme, lic) == [body["session_id"]]
    assert outbox_types(acme, lic) == ["lease.acquired"]


def test_requested_lease_length_and_license_default(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=5, lease_seconds=90)
    assert acquire(acme, lic, "a").get_json()["lease_seconds"] == 90
    body = acquire(acme, lic, "b", lease_seconds=300).get_json()
    assert (body["lease_seconds"], body["heartbeat_interval_seconds"]) == (300, 100)
    assert acquire(acme, lic, "c", lease_seconds=None).get_json()["lease_seconds"] == 90


def test_same_client_gets_200_same_session_extended(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    first = acquire(acme, lic, "ws-1", lease_seconds=100)
    assert first.status_code == 201
    time.sleep(0.02)
    again = acquire(acme, lic, "ws-1", lease_seconds=100)
    assert again.status_code == 200
    a, b = first.get_json(), again.get_json()
    assert b["session_id"] == a["session_id"]
    assert parse_time(b["lease_expires_at"]) > parse_time(a["lease_expires_at"])
    assert (b["seats_used"], b["seats_total"], b["overage"]) == (1, 1, False)
    # A longer lease on re-acquire moves the deadline further; still one seat.
    longer = acquire(acme, lic, "ws-1", lease_seconds=300).get_json()
    assert longer["session_id"] == a["session_id"] and longer["lease_seconds"] == 300
    assert parse_time(longer["lease_expires_at"]) - parse_time(b["lease_expires_at"]) > timedelta(
        seconds=199
    )
    assert live_sessions(acme, lic) == [a["session_id"]]
    assert outbox_types(acme, lic) == ["lease.acquired"]  # renewals are not events


def test_full_license_is_409_with_accurate_retry_after(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    assert acquire(acme, lic, "a", lease_seconds=100).status_code == 201
    assert acquire(acme, lic, "b", lease_seconds=50).status_code == 201
    denied = acquire(acme, lic, "c", lease_seconds=10)
    error = error_of(denied, 409, "no_seats_available")
    assert (error["seats_used"], error["seats_total"]) == (2, 2)
    # Time until the earliest lease (b, 50 s) expires, rounded up.
    assert error["retry_after_seconds"] in (49, 50)
    assert denied.headers["Retry-After"] == str(error["retry_after_seconds"])
    assert len(live_sessions(acme, lic)) == 2  # the denial took nothing
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.acquired"]


def test_retry_after_follows_the_earliest_deadline(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    assert acquire(acme, lic, "a", lease_seconds=2).status_code == 201
    time.sleep(0.6)
    error = error_of(acquire(acme, lic, "b"), 409, "no_seats_available")
    assert error["retry_after_seconds"] == 2  # 1.4 s left, rounded up
    time.sleep(1.5)
    # The earliest lease has expired: acquire prunes it itself (no reaper needed).
    taken = acquire(acme, lic, "b")
    assert taken.status_code == 201
    assert taken.get_json()["seats_used"] == 1
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.reclaimed", "lease.acquired"]


def test_overage_allows_a_third_seat_on_two_then_denies(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2, overage_percent=50)
    for client in ("a", "b"):
        body = acquire(acme, lic, client).get_json()
        assert body["overage"] is False
    third = acquire(acme, lic, "c")
    assert third.status_code == 201
    body = third.get_json()
    assert (body["seats_used"], body["seats_total"], body["overage"]) == (3, 2, True)
    error = error_of(acquire(acme, lic, "d"), 409, "no_seats_available")
    assert (error["seats_used"], error["seats_total"]) == (3, 2)
    # Back under the seat count, a new lease is no longer an overage.
    assert release(acme, lic, body["session_id"]).get_json()["released"] is True
    release(acme, lic, acquire(acme, lic, "a").get_json()["session_id"])
    assert acquire(acme, lic, "e").get_json()["overage"] is False


def test_unknown_license_is_404(acme: Tenant) -> None:
    error_of(acquire(acme, "nope", "a"), 404, "license_not_found")
    assert live_sessions(acme, "nope") == []


def test_another_tenants_license_is_404(acme: Tenant) -> None:
    globex = new_tenant("globex")
    new_license(globex, "cad", seats=5)
    new_license(acme, "other", seats=5)
    error = error_of(acquire(acme, "cad", "a"), 404, "license_not_found")
    assert "globex" not in error["message"]
    assert live_sessions(globex, "cad") == [] and live_sessions(acme, "cad") == []
    # The owner is unaffected, and the same license id in two tenants is two licenses.
    assert acquire(globex, "cad", "a").status_code == 201
    new_license(acme, "cad", seats=1)
    assert acquire(acme, "cad", "a").get_json()["seats_used"] == 1


def test_suspended_license_is_403_until_resumed(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=5)
    assert acquire(acme, lic, "a").status_code == 201
    store.update_license("acme", lic, suspended=True)
    runtime.refresh_license_cache("acme", lic)
    error_of(acquire(acme, lic, "b"), 403, "license_suspended")
    # Even the holder cannot extend by re-acquiring.
    error_of(acquire(acme, lic, "a"), 403, "license_suspended")
    assert len(live_sessions(acme, lic)) == 1
    store.update_license("acme", lic, suspended=False)
    runtime.refresh_license_cache("acme", lic)
    assert acquire(acme, lic, "b").status_code == 201


def test_lease_above_the_license_maximum_is_400_with_the_maximum(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=5, lease_seconds=60, max_lease_seconds=600)
    assert acquire(acme, lic, "a", lease_seconds=600).status_code == 201
    error = error_of(acquire(acme, lic, "b", lease_seconds=601), 400, "invalid_request")
    assert error["max_lease_seconds"] == 600
    assert len(live_sessions(acme, lic)) == 1


def test_metadata_travels_with_the_lease_event(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=5)
    meta = {"host": "ws-1", "pid": 42, "ratio": 0.5, "debug": False, "note": None, "é": "ü"}
    assert acquire(acme, lic, "a", metadata=meta).status_code == 201
    events = outbox_events(get_redis(), LicenseKeys.of("acme", lic).outbox)
    assert events[-1]["metadata"] == meta
