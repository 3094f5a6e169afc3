"""License policy over HTTP (acquire and the admin actions), on real Redis and
PostgreSQL: the statuses and error bodies of docs/design.md's "License policy and the
wait queue", and bad input refused with a 400 naming the field and nothing stored."""

from __future__ import annotations

import pytest
from http_support import Tenant, acquire, call, error_of, new_license, outbox_types, release

from seatlease import admin
from seatlease.errors import InvalidRequest, StoreError
from seatlease.records import store

POLICY = {
    "max_per_user": 1,
    "groups": {"eng": ["ann", "bob"], "ops": ["olga"]},
    "reserve": {"eng": 1, "ops": 1},
    "deny_users": ["mallory"],
}


def run(action: str, **fields):
    return admin.execute(admin.parse({"action": action, **fields}))


def test_policy_statuses_over_http(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=3, policy=POLICY)
    first = acquire(acme, lic, "ann-1", user="ann", host="pc-1")
    assert first.status_code == 201
    over = error_of(acquire(acme, lic, "ann-2", user="ann"), 409, "user_limit_reached")
    assert (over["max_per_user"], over["sessions"]) == (1, 1)
    assert 359 <= over["retry_after_seconds"] <= 360  # until ann's lease ends
    error_of(acquire(acme, lic, "m-1", user="mallory"), 403, "user_denied")
    missing = error_of(acquire(acme, lic, "x-1"), 400, "invalid_request")
    assert missing["details"][0]["field"] == "user"
    # one unreserved seat: carol takes it; then only the ops reservation is free
    assert acquire(acme, lic, "c-1", user="carol").status_code == 201
    denied = acquire(acme, lic, "d-1", user="dave")
    error_of(denied, 409, "no_seats_available")
    assert int(denied.headers["Retry-After"]) >= 1
    assert acquire(acme, lic, "o-1", user="olga").status_code == 201
    assert outbox_types(acme, lic).count("lease.acquired") == 3


def test_queue_over_http_is_202_with_a_ticket(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1, policy={"queue": True})
    held = acquire(acme, lic, "h").get_json()
    queued = acquire(acme, lic, "w", queue=True, user="wendy")
    assert queued.status_code == 202
    body = queued.get_json()
    assert body["queued"] is True and body["position"] == 1
    assert body["retry_after_seconds"] >= 1 and body["ticket"]
    # the header says the same as the body, as on a 409 or a 429
    assert queued.headers["Retry-After"] == str(body["retry_after_seconds"])
    assert set(body) >= {"queued", "position", "ticket", "retry_after_seconds"}
    assert release(acme, lic, held["session_id"]).status_code == 200
    granted = acquire(acme, lic, "w", queue=True, ticket=body["ticket"], user="wendy")
    assert granted.status_code == 201
    status = run("status", tenant_id=acme.tenant_id, license_id=lic)[1]
    assert status["licenses"][0]["queue"] == []
    assert status["licenses"][0]["leases"][0]["user"] == "wendy"


def test_status_shows_the_queue(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1, policy={"queue": True})
    acquire(acme, lic, "h", user="hal")
    acquire(acme, lic, "w1", queue=True, user="wendy", host="pc-9")
    acquire(acme, lic, "w2", queue=True)
    [view] = run("status", tenant_id=acme.tenant_id, license_id=lic)[1]["licenses"]
    assert [(t["position"], t["client_id"], t["user"]) for t in view["queue"]] == [
        (1, "w1", "wendy"),
        (2, "w2", None),
    ]
    assert view["queue"][0]["host"] == "pc-9" and view["queue"][0]["seat_held"] is False


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("user", "u" * 129, "at most 128"),
        ("user", "", "at least 1"),
        ("user", 7, "string"),
        ("user", "a\u0000b", "NUL"),
        ("host", "h" * 129, "at most 128"),
        ("host", ["pc"], "string"),
        ("host", "pc\u0000", "NUL"),
        ("queue", "yes", "boolean"),
        ("ticket", "not a ticket!", "pattern"),
    ],
)
def test_bad_user_host_queue_and_ticket_are_400_naming_the_field(
    acme: Tenant, field: str, value: object, problem: str
) -> None:
    lic = new_license(acme, "cad", seats=1)
    error = error_of(acquire(acme, lic, "c", **{field: value}), 400, "invalid_request")
    assert error["details"][0]["field"] == field
    assert problem.lower() in error["details"][0]["problem"].lower()
    assert outbox_types(acme, lic) == []


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"reserve": {"eng": 1}}, "reserve"),  # unknown group
        ({"groups": {"eng": ["a"]}, "reserve": {"eng": 5}}, "reserve"),  # over the seats
        ({"max_per_user": -1}, "max_per_user"),
        ({"groups": {"eng": ["a"]}, "reserve": {"eng": -2}}, "reserve"),
        ({"queue_hold_seconds": 0}, "queue_hold_seconds"),
        ({"deny_users": ["x\u0000"]}, "deny_users"),
        ({"groups": {"bad name!": ["a"]}}, "groups"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_policies_are_400_naming_the_field_and_nothing_is_stored(
    acme: Tenant, policy: dict, field: str
) -> None:
    with pytest.raises((InvalidRequest, StoreError)) as bad:
        run("license.create", tenant_id="acme", license_id="cad", seats=2, policy=policy)
    assert field in str(bad.value)
    assert store.get_license("acme", "cad") is None
    new_license(acme, "ok", seats=2)
    with pytest.raises((InvalidRequest, StoreError)) as bad_update:
        run("license.update", tenant_id="acme", license_id="ok", policy=policy)
    assert field in str(bad_update.value)
    assert store.get_license("acme", "ok")["policy"] is None
    # over the admin function: the same 400
    response = call(
        "admin",
        {"action": "license.update", "tenant_id": "acme", "license_id": "ok", "policy": policy},
    )
    error = error_of(response, 400, "invalid_request")
    assert field in error["message"]


def test_lowering_seats_below_the_reservations_is_refused(acme: Tenant) -> None:
    new_license(acme, "cad", seats=3, policy={"groups": {"eng": ["a"]}, "reserve": {"eng": 3}})
    with pytest.raises(StoreError, match="reserve"):
        run("license.update", tenant_id="acme", license_id="cad", seats=2)
    assert store.get_license("acme", "cad")["seats"] == 3


def test_policy_changes_take_effect_at_once_and_clear(acme: Tenant) -> None:
    new_license(acme, "cad", seats=3)
    assert acquire(acme, "cad", "a1", user="ann").status_code == 201
    status, body = run(
        "license.update", tenant_id="acme", license_id="cad", policy={"deny_users": ["ann"]}
    )
    assert status == 200 and body["license"]["policy"]["deny_users"] == ["ann"]
    error_of(acquire(acme, "cad", "a2", user="ann"), 403, "user_denied")
    run("license.update", tenant_id="acme", license_id="cad", clear_policy=True)
    assert store.get_license("acme", "cad")["policy"] is None
    assert acquire(acme, "cad", "a2", user="ann").status_code == 201
    assert run("license.show", tenant_id="acme", license_id="cad")[1]["license"]["policy"] is None
