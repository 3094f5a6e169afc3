"""release over HTTP: 200 released true then false (idempotent), seats_used right, the
seat is free at once; 404 for an unknown or another tenant's license."""

from __future__ import annotations

import time

from http_support import (
    Tenant,
    acquire,
    error_of,
    live_sessions,
    new_license,
    new_tenant,
    outbox_types,
    release,
)
from werkzeug.test import TestResponse


def _sid(tenant: Tenant, license_id: str, client_id: str, **fields: object) -> str:
    response = acquire(tenant, license_id, client_id, **fields)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["session_id"]


def _answer(response: TestResponse) -> dict:
    """The answer without its release token (tests/test_tokens.py verifies tokens)."""
    body = response.get_json()
    assert body.pop("release_token").count(".") == 2  # a JWS: header.payload.signature
    return body


def test_release_is_200_true_then_false(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=3)
    first, _second = _sid(acme, lic, "a"), _sid(acme, lic, "b")
    response = release(acme, lic, first)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert _answer(response) == {"released": True, "seats_used": 1}
    again = release(acme, lic, first)
    assert again.status_code == 200
    assert _answer(again) == {"released": False, "seats_used": 1}
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.acquired", "lease.released"]


def test_released_seat_is_free_at_once(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    sid = _sid(acme, lic, "a")
    error_of(acquire(acme, lic, "b"), 409, "no_seats_available")
    assert _answer(release(acme, lic, sid)) == {"released": True, "seats_used": 0}
    taken = acquire(acme, lic, "b")
    assert taken.status_code == 201
    assert live_sessions(acme, lic) == [taken.get_json()["session_id"]]


def test_releasing_an_unknown_session_is_200_false(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    _sid(acme, lic, "a")
    assert _answer(release(acme, lic, "never-issued")) == {"released": False, "seats_used": 1}


def test_releasing_an_expired_lease_is_false_and_reclaims_it(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    sid = _sid(acme, lic, "a", lease_seconds=1)
    time.sleep(1.1)
    assert _answer(release(acme, lic, sid)) == {"released": False, "seats_used": 0}
    assert live_sessions(acme, lic) == []
    assert outbox_types(acme, lic) == ["lease.acquired", "lease.reclaimed"]


def test_unknown_license_is_404(acme: Tenant) -> None:
    error_of(release(acme, "nope", "some-session"), 404, "license_not_found")


def test_another_tenants_license_is_404_and_its_lease_survives(acme: Tenant) -> None:
    globex = new_tenant("globex")
    new_license(globex, "cad", seats=1)
    sid = _sid(globex, "cad", "a")
    error_of(release(acme, "cad", sid), 404, "license_not_found")
    assert live_sessions(globex, "cad") == [sid]
    new_license(acme, "cad", seats=1)
    assert _answer(release(acme, "cad", sid)) == {"released": False, "seats_used": 0}
    assert live_sessions(globex, "cad") == [sid]
    assert _answer(release(globex, "cad", sid)) == {"released": True, "seats_used": 0}
