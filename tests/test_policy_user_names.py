# ruff: noqa: RUF001  (fullwidth letters on purpose: they are what the rule is about)
"""Issue 31, item 8: a license's policy compares user names in one form (NFKC,
case-folded, trimmed: seatlease.fields.policy_name), so case, surrounding spaces and
compatibility characters (fullwidth letters, ligatures) do not walk past a deny list, a
per-user limit or a reservation; the lease keeps the name as sent. Against a real
redis-server and the real Redis Cluster (seat_engine), and through the acquire function."""

from __future__ import annotations

import pytest
from http_support import Tenant, error_of, new_license
from http_support import acquire as http_acquire

from seatlease.errors import NoSeatsAvailable, UserDenied, UserLimitReached
from seatlease.fields import policy_name
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.policy import LicensePolicy

SPELLINGS = ["Mallory", "mallory ", " MALLORY", "ｍａｌｌｏｒｙ", "Ｍallory\u3000", "MALLORY\t"]


def add(configs, license_id: str, seats: int, **policy) -> None:
    configs.add(
        "t", license_id, seats=seats, lease_seconds=60, policy=LicensePolicy(**policy).redis_form()
    )


def take(eng: SeatEngine, license_id: str, client: str, user: str):
    return eng.acquire(SeatRequest("t", license_id, client, user=user))


def test_the_policy_form_of_a_name() -> None:
    assert {policy_name(s) for s in SPELLINGS} == {"mallory"}
    assert policy_name("ﬁona") == "fiona"  # a ligature is its letters
    assert policy_name("Straße") == policy_name("STRASSE")
    assert policy_name("   ") == ""


@pytest.mark.parametrize("listed", ["mallory", "MALLORY", "ｍａｌｌｏｒｙ "])
def test_every_spelling_of_a_denied_user_is_denied(seat_engine, configs, listed: str) -> None:
    add(configs, "lic", seats=10, deny_users=[listed])
    for n, spelling in enumerate(SPELLINGS):
        with pytest.raises(UserDenied):
            take(seat_engine, "lic", f"c{n}", spelling)
    assert take(seat_engine, "lic", "ok", "malloryx").created
    assert len(seat_engine.live_leases("t", "lic")) == 1


def test_a_per_user_limit_counts_every_spelling_as_one_user(seat_engine, configs) -> None:
    add(configs, "lic", seats=10, max_per_user=2)
    take(seat_engine, "lic", "c0", "Ann")
    take(seat_engine, "lic", "c1", "ann ")
    for n, spelling in enumerate(["ANN", "ａｎｎ", " Ann"]):
        with pytest.raises(UserLimitReached) as over:
            take(seat_engine, "lic", f"x{n}", spelling)
        assert over.value.sessions == 2
    # The leases keep the names as sent, for status, events and reports.
    users = sorted(lease["metadata"]["user"] for lease in seat_engine.live_leases("t", "lic"))
    assert users == ["Ann", "ann "]


def test_a_reservation_serves_its_members_however_they_spell_themselves(
    seat_engine, configs
) -> None:
    add(configs, "lic", seats=2, groups={"eng": ["Bob"]}, reserve={"eng": 1})
    take(seat_engine, "lic", "o1", "olga")
    with pytest.raises(NoSeatsAvailable):  # the last seat is eng's
        take(seat_engine, "lic", "o2", "oscar")
    assert take(seat_engine, "lic", "b1", "ＢＯＢ ").created


def test_through_the_function_a_fullwidth_name_is_denied(acme: Tenant) -> None:
    new_license(acme, "cad", seats=3, policy={"deny_users": ["mallory"]})
    error_of(http_acquire(acme, "cad", "ws-1", user="ｍａｌｌｏｒｙ"), 403, "user_denied")
    error_of(http_acquire(acme, "cad", "ws-2", user="Mallory "), 403, "user_denied")
    taken = http_acquire(acme, "cad", "ws-3", user="Zoë")
    assert taken.status_code == 201
