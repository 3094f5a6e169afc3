"""Issue 31, item 9: answers that carry a secret (a new API key) or a lease token say
``Cache-Control: no-store``, so no cache between the caller and the function keeps one.
Through the functions as Cloud Functions loads them, on real Redis and PostgreSQL."""

from __future__ import annotations

from http_support import Tenant, acquire, call, heartbeat, new_license, release

from seatlease.records import store


def _no_store(response) -> None:
    assert response.headers.get("Cache-Control") == "no-store", dict(response.headers)


def test_seat_answers_with_tokens_are_no_store(acme: Tenant) -> None:
    new_license(acme, "cad", seats=1)
    taken = acquire(acme, "cad", "ws-1")
    assert taken.status_code == 201 and "lease_token" in taken.get_json()
    _no_store(taken)
    again = acquire(acme, "cad", "ws-1")
    assert again.status_code == 200
    _no_store(again)
    sid = taken.get_json()["session_id"]
    beat = heartbeat(acme, "cad", sid)
    assert beat.status_code == 200 and "lease_token" in beat.get_json()
    _no_store(beat)
    gone = release(acme, "cad", sid)
    assert gone.status_code == 200 and "release_token" in gone.get_json()
    _no_store(gone)
    _no_store(acquire(acme, "nope", "ws-1"))  # errors too: every answer is the caller's


def test_a_new_api_key_is_no_store_from_the_admin_and_the_portal(acme: Tenant) -> None:
    made = call("admin", {"action": "apikey.create", "tenant_id": "acme", "label": "ci"})
    assert made.status_code == 201 and "key" in made.get_json()
    _no_store(made)
    admin_key = store.create_api_key("acme", label="it", scope="admin")
    portal = call(
        "portal",
        {"action": "keys.create", "label": "farm"},
        tenant=Tenant("acme", admin_key.key, admin_key.prefix),
    )
    assert portal.status_code == 201 and "key" in portal.get_json()
    _no_store(portal)


def test_every_answer_of_every_function_is_no_store(acme: Tenant) -> None:
    """Issue 38: the portal's page said ``no-cache`` and the refusals of ``keys`` and the
    portal said nothing; every answer is no-store (the JWKS itself excepted: public keys,
    cached by design for ``max-age``)."""
    page = call("portal", method="GET", content_type=None)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    _no_store(page)
    for name, method in (("keys", "POST"), ("portal", "PUT"), ("acquire", "GET")):
        refused = call(name, method=method, content_type=None)
        assert refused.status_code == 405, (name, refused.status_code)
        _no_store(refused)
    jwks = call("keys", method="GET", content_type=None)
    assert jwks.status_code == 200
    assert jwks.headers["Cache-Control"] == "public, max-age=300"
