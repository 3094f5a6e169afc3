"""Issue 38 at the doors, through the functions as Cloud Functions loads them, on the real
PostgreSQL and redis-server: a term that cannot be kept is refused before anything is
stored, and a row stored before that rule never takes a view down (item 11); a borrowed
seat keeps its machine in every answer's token (item 12); invisible characters do not
walk past a deny list, and what people read can hold no line break or bidi control
(item 13)."""

from __future__ import annotations

from pathlib import Path

import functions_framework
import jwt
import pytest
from http_support import Tenant, acquire, call, error_of, heartbeat, new_license

import seatlease_cli as cli
from seatlease.fields import policy_name
from seatlease.records import store
from seatlease.seats.policy import LicensePolicy

REPO = Path(__file__).resolve().parent.parent
MACHINE_A = "a" * 64
MACHINE_B = "b" * 64


@pytest.fixture(scope="module")
def admin():
    return functions_framework.create_app(
        "admin", str(REPO / "functions" / "admin" / "main.py")
    ).test_client()


def post(admin, action: str, **fields):
    return admin.post("/", json={"action": action, **fields})


def claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


# -- item 11: what may be stored -----------------------------------------------------------

LAST = "9999-12-31T23:59:59Z"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expires_at": LAST, "grace_seconds": 7_776_000}, "grace_seconds"),
        ({"expires_at": LAST, "grace_seconds": 1}, "grace_seconds"),
        ({"starts_at": "1969-12-31T23:59:59Z"}, "starts_at"),
        ({"expires_at": "1960-01-01"}, "expires_at"),
    ],
)
def test_a_term_that_cannot_be_kept_is_a_400_and_nothing_is_stored(stack, admin, fields, field):
    """``license update --expires-at 9999-12-31T23:59:59Z --grace-seconds 7776000``
    answered 500 yet stored the term; ``license create`` did the same and created it."""
    post(admin, "tenant.create", tenant_id="acme")
    made = post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1, **fields)
    assert field in {d["field"] for d in error_of(made, 400, "invalid_request")["details"]}
    assert store.get_license("acme", "cad") is None
    post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1)
    changed = post(admin, "license.update", tenant_id="acme", license_id="cad", **fields)
    assert field in {d["field"] for d in error_of(changed, 400, "invalid_request")["details"]}
    row = store.get_license("acme", "cad")
    assert row["expires_at"] is None and row["starts_at"] is None and row["grace_seconds"] == 0


def test_the_latest_end_is_accepted_and_a_grace_or_renewal_past_it_is_not(stack, admin):
    post(admin, "tenant.create", tenant_id="acme")
    made = post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1,
                expires_at=LAST)  # fmt: skip
    assert made.status_code == 201, made.json
    # the stored end with a grace added later: checked against the stored row
    graced = post(admin, "license.update", tenant_id="acme", license_id="cad",
                  grace_seconds=3600)  # fmt: skip
    assert "grace_seconds" in error_of(graced, 400, "invalid_request")["message"]
    renewed = post(admin, "license.update", tenant_id="acme", license_id="cad",
                   renew_for_seconds=86400)  # fmt: skip
    assert "renew_for_seconds" in error_of(renewed, 400, "invalid_request")["message"]
    assert store.get_license("acme", "cad")["grace_seconds"] == 0


def test_a_bad_row_stored_before_the_rule_takes_no_view_down(acme: Tenant, admin, capsys):
    """Stored by the release before this rule: every view of the license (and of the
    others) answered 500 from then on."""
    new_license(acme, "good", seats=1)
    new_license(acme, "cad", seats=2)
    from datetime import UTC, datetime

    store.update_license(
        "acme", "cad", expires_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        grace_seconds=7_776_000,
    )  # fmt: skip
    from seatlease.api import runtime

    runtime.refresh_license_cache("acme", "cad")
    shown = post(admin, "license.show", tenant_id="acme", license_id="cad")
    assert shown.status_code == 200, shown.json
    assert shown.json["license"]["grace_ends_at"].startswith("9999-12-31")
    listed = post(admin, "license.list", tenant_id="acme")
    assert listed.status_code == 200
    assert {lic["license_id"] for lic in listed.json["licenses"]} == {"good", "cad"}
    assert post(admin, "status", tenant_id="acme").status_code == 200
    taken = acquire(acme, "cad", "ws-1")
    assert taken.status_code == 201, taken.get_json()
    assert taken.get_json()["license_grace_ends_at"].startswith("9999-12-31")
    portal_key = store.create_api_key("acme", label="it", scope="admin")
    portal = call(
        "portal", {"action": "status"}, tenant=Tenant("acme", portal_key.key, portal_key.prefix)
    )
    assert portal.status_code == 200, portal.get_json()
    assert cli.main(["status", "--tenant", "acme"]) == 0
    assert "ws-1" in capsys.readouterr().out


# -- item 12: a borrowed seat keeps its machine ------------------------------------------


def test_a_borrowed_seat_is_bound_to_its_machine_in_every_token(acme: Tenant) -> None:
    new_license(acme, "cad", seats=1, max_borrow_seconds=3600)
    borrowed = acquire(acme, "cad", "laptop", borrow_seconds=3600, fingerprint=MACHINE_A)
    assert borrowed.status_code == 201
    session = borrowed.get_json()["session_id"]
    assert claims(borrowed.get_json()["lease_token"])["cnf"] == {"machine": MACHINE_A}
    elsewhere = acquire(acme, "cad", "laptop", fingerprint=MACHINE_B)
    error = error_of(elsewhere, 409, "machine_mismatch")
    assert "another machine" in error["message"] and "Retry-After" not in elsewhere.headers
    again = acquire(acme, "cad", "laptop")  # no fingerprint: the first machine's token
    assert again.status_code == 200
    assert claims(again.get_json()["lease_token"])["cnf"] == {"machine": MACHINE_A}
    beat = heartbeat(acme, "cad", session)
    token = claims(beat.get_json()["lease_token"])
    assert token["cnf"] == {"machine": MACHINE_A} and token["borrowed"] is True
    assert token["sub"] == "laptop"  # heartbeat tokens carry sub, as the docs now say


# -- item 13: invisible characters and what people read ------------------------------------

INVISIBLE = ["\u200b", "\u200d", "\u00ad", "\ufeff", "\u2060", "\u034f", "\ufe0f"]


def test_invisible_characters_are_no_part_of_a_policy_name() -> None:
    for char in INVISIBLE:
        assert policy_name(f"mallory{char}") == "mallory"
        assert policy_name(f"mal{char}lory") == "mallory"
    assert policy_name("\u200b\u200d") == ""


def test_invisible_characters_do_not_walk_past_a_deny_list(acme: Tenant) -> None:
    policy = LicensePolicy(deny_users=["mallory"]).as_dict()
    new_license(acme, "cad", seats=5, policy=policy)
    for n, char in enumerate(INVISIBLE):
        refused = acquire(acme, "cad", f"ws-{n}", user=f"mallory{char}")
        error_of(refused, 403, "user_denied")
    assert acquire(acme, "cad", "ws-ok", user="mallorz").status_code == 201


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"user": "ann\u202egnp.exe"}, "user"),  # right-to-left override
        ({"user": "ann\u2066x\u2069"}, "user"),  # isolates
        ({"host": "pc-7\u2028fake-row"}, "host"),  # line separator
        ({"host": "pc\u200f7"}, "host"),  # right-to-left mark
        ({"metadata": {"host": "pc-7\nws-9   mallory"}}, "metadata"),
        ({"metadata": {"site": "lyon\r"}}, "metadata"),
        ({"metadata": {"note\u2029": "x"}}, "metadata"),
        ({"metadata": {"site": "\u202aparis"}}, "metadata"),
        ({"metadata": {"site": "tab\there"}}, "metadata"),
    ],
)
def test_line_breaks_and_bidi_controls_in_shown_fields_are_400(
    acme: Tenant, fields: dict, field: str
) -> None:
    """A newline in ``metadata.host`` drew a fake row in ``seatlease status``."""
    new_license(acme, "cad", seats=2)
    refused = acquire(acme, "cad", "ws-1", **fields)
    error = error_of(refused, 400, "invalid_request")
    assert field in error["message"], error
    assert acquire(acme, "cad", "ws-1").status_code == 201  # nothing was taken before
