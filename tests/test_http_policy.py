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


def test_a_full_queue_is_409_queue_full_and_keeps_its_places(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1, policy={"queue": True, "queue_max": 2})
    acquire(acme, lic, "h", user="hal")
    first = acquire(acme, lic, "w1", queue=True, user="wendy").get_json()
    assert acquire(acme, lic, "w2", queue=True, user="walt").status_code == 202
    full = acquire(acme, lic, "w3", queue=True, user="will")
    error = error_of(full, 409, "queue_full")
    assert (error["queue_max"], error["seats_used"], error["seats_total"]) == (2, 1, 1)
    assert full.headers["Retry-After"] == str(error["retry_after_seconds"])
    assert "queue is full" in error["message"]
    # a client in line keeps its place: the bound is on new places
    again = acquire(acme, lic, "w1", queue=True, ticket=first["ticket"], user="wendy")
    assert again.status_code == 202 and again.get_json()["position"] == 1
    assert outbox_types(acme, lic).count("queue.joined") == 2


def test_the_default_queue_bound_is_ten_per_seat(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2, policy={"queue": True})
    acquire(acme, lic, "h1", user="hal")
    acquire(acme, lic, "h2", user="hal")
    for i in range(20):
        assert acquire(acme, lic, f"w{i}", queue=True, user=f"u{i}").status_code == 202
    error = error_of(acquire(acme, lic, "w20", queue=True, user="u20"), 409, "queue_full")
    assert error["queue_max"] == 20


def test_a_seat_held_for_the_next_in_line_says_so(acme: Tenant) -> None:
    """Issue 34: the 409 carries the held seats, its message says a seat is held for the
    next in line, and Retry-After is the hold's remaining time, not a lease's."""
    lic = new_license(acme, "cad", seats=3, policy={"queue": True, "queue_hold_seconds": 30})
    held = [acquire(acme, lic, f"h{i}", user=f"hal{i}").get_json() for i in range(3)]
    assert acquire(acme, lic, "w", queue=True, user="wendy").status_code == 202
    assert release(acme, lic, held[0]["session_id"]).status_code == 200
    refused = acquire(acme, lic, "x", user="xena")
    error = error_of(refused, 409, "no_seats_available")
    assert (error["seats_used"], error["seats_total"], error["seats_held"]) == (2, 3, 1)
    assert error["seats_reserved"] == 0
    assert "held for the next in line" in error["message"]
    assert "All 3 seats are in use" not in error["message"]
    assert 29 <= error["retry_after_seconds"] <= 30  # the hold, not the leases' 360 s
    assert refused.headers["Retry-After"] == str(error["retry_after_seconds"])


def test_status_shows_the_hold_from_the_moment_the_seat_frees(acme: Tenant) -> None:
    """Issue 34: no acquire comes between the release and the status: the hold is there."""
    lic = new_license(acme, "cad", seats=1, policy={"queue": True})
    held = acquire(acme, lic, "h", user="hal").get_json()
    acquire(acme, lic, "w1", queue=True, user="wendy")
    acquire(acme, lic, "w2", queue=True, user="walt")
    [view] = run("status", tenant_id=acme.tenant_id, license_id=lic)[1]["licenses"]
    assert [t["seat_held"] for t in view["queue"]] == [False, False]
    assert release(acme, lic, held["session_id"]).status_code == 200
    [view] = run("status", tenant_id=acme.tenant_id, license_id=lic)[1]["licenses"]
    assert [t["seat_held"] for t in view["queue"]] == [True, False]


def test_free_seats_reserved_for_others_are_said_so(acme: Tenant) -> None:
    policy = {"groups": {"eng": ["ann"]}, "reserve": {"eng": 1}}
    lic = new_license(acme, "cad", seats=2, policy=policy)
    assert acquire(acme, lic, "o1", user="olga").status_code == 201
    error = error_of(acquire(acme, lic, "d1", user="dave"), 409, "no_seats_available")
    assert (error["seats_used"], error["seats_reserved"], error["seats_held"]) == (1, 1, 0)
    assert "reserved for groups this user is not in" in error["message"]
    assert acquire(acme, lic, "a1", user="ann").status_code == 201
    full = error_of(acquire(acme, lic, "d1", user="dave"), 409, "no_seats_available")
    assert (full["seats_reserved"], full["seats_held"]) == (0, 0)
    assert full["message"].startswith("All 2 seats are in use")


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
        ({"queue_max": 0}, "queue_max"),
        ({"queue_max": 10_001}, "queue_max"),
        ({"queue_max": "many"}, "queue_max"),
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
