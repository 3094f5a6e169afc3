"""heartbeat over HTTP: 200 extends; 410 session_expired with reason expired|unknown;
404 for an unknown or another tenant's license (on real Redis and PostgreSQL)."""

from __future__ import annotations

import time
from datetime import timedelta

from http_support import (
    Tenant,
    acquire,
    error_of,
    heartbeat,
    live_sessions,
    new_license,
    new_tenant,
    outbox_types,
    parse_time,
    redis_now,
    release,
)

from seatlease.api import runtime


def _session(tenant: Tenant, license_id: str, client_id: str = "ws-1", **fields: object) -> dict:
    response = acquire(tenant, license_id, client_id, **fields)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()


def test_heartbeat_is_200_and_extends_the_lease(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    lease = _session(acme, lic, lease_seconds=60)
    time.sleep(0.05)
    response = heartbeat(acme, lic, lease["session_id"])
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    body = response.get_json()
    assert set(body) == {
        "session_id",
        "lease_expires_at",
        "lease_seconds",
        "heartbeat_interval_seconds",
        "borrowed",
        "lease_token",
    }
    assert body["session_id"] == lease["session_id"] and body["borrowed"] is False
    assert (body["lease_seconds"], body["heartbeat_interval_seconds"]) == (60, 20)
    expires = parse_time(body["lease_expires_at"])
    assert expires > parse_time(lease["lease_expires_at"])
    now = redis_now()
    assert now + timedelta(seconds=59) < expires <= now + timedelta(seconds=60)
    assert outbox_types(acme, lic) == ["lease.acquired"]  # heartbeats are not events


def test_heartbeats_keep_a_short_lease_alive_past_its_first_deadline(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    lease = _session(acme, lic, lease_seconds=1)
    for _ in range(3):
        time.sleep(0.5)
        assert heartbeat(acme, lic, lease["session_id"]).status_code == 200
    # 1.5 s after acquiring a 1 s lease, the seat is still held.
    error_of(acquire(acme, lic, "other"), 409, "no_seats_available")


def test_expired_lease_is_410_expired_then_unknown(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    lease = _session(acme, lic, lease_seconds=1)
    time.sleep(1.1)
    error = error_of(heartbeat(acme, lic, lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "expired"
    assert live_sessions(acme, lic) == []  # reclaimed by that call
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.reclaimed"]
    error = error_of(heartbeat(acme, lic, lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "unknown"
    # The seat is free again.
    assert acquire(acme, lic, "other").status_code == 201


def test_unknown_session_is_410_unknown(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    error = error_of(heartbeat(acme, lic, "never-issued"), 410, "session_expired")
    assert error["reason"] == "unknown"


def test_released_session_is_410_unknown(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    lease = _session(acme, lic)
    assert release(acme, lic, lease["session_id"]).get_json()["released"] is True
    error = error_of(heartbeat(acme, lic, lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "unknown"


def test_revoked_session_is_410_revoked(acme: Tenant) -> None:
    """An operator's revoke: its client learns it (reason ``revoked``, not ``unknown``)
    while a token of the lease could still be valid; a released one is ``unknown``."""
    lic = new_license(acme, "cad", seats=2)
    lease, released = _session(acme, lic), _session(acme, lic, client_id="c2")
    assert runtime.seat_engine().release("acme", lic, lease["session_id"], revoke=True).released
    assert runtime.seat_engine().release("acme", lic, released["session_id"]).released
    error = error_of(heartbeat(acme, lic, lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "revoked"
    error = error_of(heartbeat(acme, lic, released["session_id"]), 410, "session_expired")
    assert error["reason"] == "unknown"
    assert outbox_types(acme, lic) == [
        "lease.acquired", "lease.acquired", "lease.revoked", "lease.released"
    ]  # fmt: skip


def test_unknown_license_is_404(acme: Tenant) -> None:
    error_of(heartbeat(acme, "nope", "some-session"), 404, "license_not_found")


def test_another_tenants_license_and_session_are_404(acme: Tenant) -> None:
    globex = new_tenant("globex")
    new_license(globex, "cad", seats=1)
    lease = _session(globex, "cad")
    error_of(heartbeat(acme, "cad", lease["session_id"]), 404, "license_not_found")
    # A license of the same name in acme does not see globex's session either.
    new_license(acme, "cad", seats=1)
    error = error_of(heartbeat(acme, "cad", lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "unknown"
    assert heartbeat(globex, "cad", lease["session_id"]).status_code == 200


def test_session_of_another_license_is_410(acme: Tenant) -> None:
    new_license(acme, "cad", seats=1)
    new_license(acme, "cam", seats=1)
    lease = _session(acme, "cad")
    error = error_of(heartbeat(acme, "cam", lease["session_id"]), 410, "session_expired")
    assert error["reason"] == "unknown"
