"""Weighted seats over HTTP (acquire and heartbeat through functions-framework's test
client, real redis-server and PostgreSQL): the answer, the token, the refusals and every
class of bad ``seats``: a 400 naming the field, nothing stored."""

from __future__ import annotations

import jwt
import pytest
from http_support import Tenant, acquire, error_of, heartbeat, new_license, outbox_types

from seatlease.api import runtime


def claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def test_a_weighted_lease_is_answered_and_signed_with_its_seats(acme: Tenant):
    lic = new_license(acme, "render", seats=8)
    made = acquire(acme, lic, "node-1", seats=4)
    assert made.status_code == 201, made.get_json()
    body = made.get_json()
    assert (body["seats"], body["seats_used"], body["seats_total"]) == (4, 4, 8)
    assert claims(body["lease_token"])["seats"] == 4
    beat = heartbeat(acme, lic, body["session_id"])
    assert beat.status_code == 200 and beat.get_json()["seats"] == 4
    assert claims(beat.get_json()["lease_token"])["seats"] == 4
    # a renewal without seats keeps them; with the same, too
    for fields in ({}, {"seats": 4}):
        again = acquire(acme, lic, "node-1", **fields)
        assert again.status_code == 200 and again.get_json()["seats"] == 4
    # a plain lease's answer and token are as they always were: no seats field
    plain = acquire(acme, lic, "desk-1").get_json()
    assert "seats" not in plain and "seats" not in claims(plain["lease_token"])
    assert plain["seats_used"] == 5


def test_another_weight_for_a_held_lease_is_a_409_naming_the_held_weight(acme: Tenant):
    lic = new_license(acme, "render", seats=8)
    acquire(acme, lic, "node-1", seats=4)
    error = error_of(acquire(acme, lic, "node-1", seats=2), 409, "seats_mismatch")
    assert (error["held_seats"], error["seats"]) == (4, 2)
    assert "4 seats" in error["message"] and "release" in error["message"]
    [live] = runtime.seat_engine().live_leases("acme", "render")
    assert live["seats"] == 4


def test_not_enough_free_seats_for_the_weight_is_a_409_saying_so(acme: Tenant):
    lic = new_license(acme, "render", seats=4)
    acquire(acme, lic, "node-1", seats=3)
    response = acquire(acme, lic, "node-2", seats=2)
    error = error_of(response, 409, "no_seats_available")
    assert (error["seats_used"], error["seats_total"], error["seats_requested"]) == (3, 4, 2)
    assert "3 of 4 seats are in use" in error["message"]
    assert "would count as 2 seats" in error["message"]
    assert int(response.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    "seats",
    [0, -1, 5, 100_001, True, 1.5, "2", None],
    ids=["zero", "negative", "over-the-license", "over-the-api-max", "bool", "float", "text",
         "null-is-default"],
)  # fmt: skip
def test_bad_seats_are_400_naming_the_field_and_nothing_is_stored(acme: Tenant, seats):
    lic = new_license(acme, "render", seats=4)
    response = acquire(acme, lic, "node-1", seats=seats)
    if seats is None:  # an explicit null is the default, like every optional field
        assert response.status_code == 201 and "seats" not in response.get_json()
        return
    error = error_of(response, 400, "invalid_request")
    assert "seats" in {d["field"] for d in error["details"]}, error
    assert runtime.seat_engine().live_leases("acme", "render") == []
    assert outbox_types(acme, lic) == []
