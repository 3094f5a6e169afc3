"""Terms, grace, entitlements and versions at the doors: the admin function's license
actions, the CLI's flags, and acquire/heartbeat over HTTP with their answers, errors and
lease tokens. Real PostgreSQL and redis-server (the fixtures); bad input is a 400 naming
the field with nothing stored."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import functions_framework
import jwt
import pytest
from http_support import Tenant, acquire, error_of, heartbeat, new_license, parse_time

import seatlease_cli as cli
from seatlease.api import runtime
from seatlease.records import store
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def admin():
    return functions_framework.create_app(
        "admin", str(REPO / "functions" / "admin" / "main.py")
    ).test_client()


def post(admin, action: str, **fields):
    return admin.post("/", json={"action": action, **fields})


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


# -- the admin actions ------------------------------------------------------------------


def test_create_show_update_renew_and_clear(stack, admin):
    assert post(admin, "tenant.create", tenant_id="acme").status_code == 201
    ends = datetime(2027, 11, 25, tzinfo=UTC)
    made = post(
        admin, "license.create", tenant_id="acme", license_id="cad", seats=3,
        starts_at="2026-01-01", expires_at=iso(ends), grace_seconds=7 * 86400,
        on_expiry="keep_leases", entitlements=["render.gpu", "pro", "pro"],
        max_version="2026.4",
    )  # fmt: skip
    assert made.status_code == 201, made.json
    lic = made.json["license"]
    assert lic["starts_at"] == "2026-01-01T00:00:00Z"
    assert lic["expires_at"] == "2027-11-25T00:00:00Z"
    assert lic["grace_ends_at"] == "2027-12-02T00:00:00Z"
    assert (lic["grace_seconds"], lic["on_expiry"]) == (7 * 86400, "keep_leases")
    assert lic["entitlements"] == ["pro", "render.gpu"] and lic["max_version"] == "2026.4"
    assert lic["term_state"] == "active" and lic["expires_in_days"] > 300
    # the cache has them at once
    cfg = get_redis().hgetall(LicenseKeys.of("acme", "cad").cfg)
    assert cfg["entc"] == "pro,render.gpu" and cfg["keep"] == "1"
    # and all of them in one text the seat scripts read with the configuration
    # (T|starts|exp|fin|keep|ent|entc|maxv|maxk)
    text = cfg["terms"].split("|")
    assert text[0] == "T" and text[4:] == ["1", " pro render.gpu ", "pro,render.gpu", "2026.4",
                                           cfg["maxk"]]  # fmt: skip
    assert text[1:4] == [cfg["starts"], cfg["exp"], cfg["fin"]]
    # renew: a year from the later of now and the current end
    renewed = post(
        admin, "license.update", tenant_id="acme", license_id="cad",
        renew_for_seconds=365 * 86400,
    )  # fmt: skip
    assert renewed.status_code == 200, renewed.json
    assert renewed.json["license"]["expires_at"] == "2028-11-24T00:00:00Z"
    cleared = post(
        admin, "license.update", tenant_id="acme", license_id="cad", clear_term=True,
        clear_entitlements=True, clear_max_version=True,
    )  # fmt: skip
    assert cleared.status_code == 200, cleared.json
    lic = cleared.json["license"]
    assert (lic["expires_at"], lic["starts_at"], lic["entitlements"], lic["max_version"]) == (
        None, None, [], None,
    )  # fmt: skip
    assert lic["term_state"] == "perpetual"
    assert "terms" not in get_redis().hgetall(LicenseKeys.of("acme", "cad").cfg)


def test_list_expiring_within(stack, admin):
    post(admin, "tenant.create", tenant_id="acme")
    for name, days in (("soon", 10), ("later", 90), ("gone", -40)):
        post(admin, "license.create", tenant_id="acme", license_id=name, seats=1,
             expires_at=iso(soon(days * 86400)))  # fmt: skip
    post(admin, "license.create", tenant_id="acme", license_id="grace", seats=1,
         expires_at=iso(soon(-86400)), grace_seconds=7 * 86400)  # fmt: skip
    post(admin, "license.create", tenant_id="acme", license_id="forever", seats=1)
    listed = post(admin, "license.list", tenant_id="acme", expiring_within_seconds=30 * 86400)
    assert [lic["license_id"] for lic in listed.json["licenses"]] == ["grace", "soon"]
    assert listed.json["licenses"][0]["term_state"] == "in_grace"
    everything = post(admin, "license.list", tenant_id="acme").json["licenses"]
    assert len(everything) == 5


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expires_at": "next tuesday"}, "expires_at"),
        ({"starts_at": "2026-13-01"}, "starts_at"),
        ({"starts_at": "2027-01-01", "expires_at": "2026-12-31"}, "expires_at"),
        ({"starts_at": "2027-01-01", "expires_at": "2027-01-01"}, "expires_at"),
        ({"grace_seconds": 90 * 86400 + 1}, "grace_seconds"),
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"on_expiry": "explode"}, "on_expiry"),
        ({"entitlements": ["Pro"]}, "entitlements.0"),
        ({"entitlements": ["-pro"]}, "entitlements.0"),
        ({"entitlements": ["x" * 65]}, "entitlements.0"),
        ({"entitlements": [f"e{i}" for i in range(65)]}, "entitlements"),
        ({"entitlements": "pro"}, "entitlements"),
        ({"max_version": "2026.x"}, "max_version"),
        ({"max_version": "v2026"}, "max_version"),
        ({"max_version": "2026."}, "max_version"),
    ],
)
def test_bad_terms_are_400_naming_the_field_and_nothing_is_stored(stack, admin, fields, field):
    post(admin, "tenant.create", tenant_id="acme")
    for action, extra in (("license.create", {"seats": 1}), ("license.update", {})):
        if action == "license.update":
            post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1)
        response = post(admin, action, tenant_id="acme", license_id="cad", **extra, **fields)
        error = error_of(response, 400, "invalid_request")
        assert field in {d["field"] for d in error["details"]}, error
        if action == "license.create":
            assert store.get_license("acme", "cad") is None
        else:
            row = store.get_license("acme", "cad")
            assert row["expires_at"] is None and row["entitlements"] is None


def test_an_update_ending_before_the_stored_start_is_refused(stack, admin):
    post(admin, "tenant.create", tenant_id="acme")
    post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1,
         starts_at="2027-01-01")  # fmt: skip
    response = post(admin, "license.update", tenant_id="acme", license_id="cad",
                    expires_at="2026-06-01")  # fmt: skip
    assert "expires_at" in error_of(response, 400, "invalid_request")["message"]
    assert store.get_license("acme", "cad")["expires_at"] is None
    no_end = post(admin, "license.update", tenant_id="acme", license_id="cad",
                  renew_for_seconds=86400)  # fmt: skip
    assert "renew_for_seconds" in error_of(no_end, 400, "invalid_request")["message"]


# -- the CLI ----------------------------------------------------------------------------


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_flags_show_renew_and_list(stack, capsys):
    store.create_tenant("acme")
    ends = (datetime.now(UTC) + timedelta(days=364)).date().isoformat()
    code, out, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "2",
        "--expires-at", ends, "--grace-seconds", "604800", "--entitlement", "pro",
        "--entitlement", "render", "--max-version", "2026.4",
    )  # fmt: skip
    assert code == 0, err
    assert f"expires {ends} (in 364 days), grace 604800 s, end_leases" in out
    assert "pro, render" in out and "2026.4" in out
    code, out, err = run(capsys, "license", "update", "--tenant", "acme", "--license", "cad",
                         "--renew-for", "365d", "--json")  # fmt: skip
    assert code == 0, err
    renewed = json.loads(out)["license"]["expires_at"]
    assert renewed.startswith((datetime.fromisoformat(ends) + timedelta(days=365)).isoformat())
    code, out, err = run(capsys, "license", "list", "--tenant", "acme", "--expiring", "30d")
    assert code == 0 and "cad" not in out
    code, out, err = run(capsys, "license", "list", "--tenant", "acme", "--expiring", "800d")
    assert code == 0 and "cad" in out
    with pytest.raises(SystemExit) as bad:
        run(capsys, "license", "update", "--tenant", "acme", "--license", "cad",
            "--renew-for", "a year")  # fmt: skip
    assert bad.value.code == 2 and "365d" in capsys.readouterr().err


# -- acquire and heartbeat over HTTP ----------------------------------------------------


def test_cli_an_ended_term_reads_to_the_minute_and_clearing_it_clears_its_grace(stack, capsys):
    """Issue 42: `license update` said "expired 2026-11-28" (a date) beside "stops ...
    03:08 UTC", and after --clear-term still showed grace_seconds 600."""
    store.create_tenant("acme")
    ended = (datetime.now(UTC) - timedelta(minutes=5)).replace(second=0, microsecond=0)
    code, out, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "2",
        "--expires-at", iso(ended), "--grace-seconds", "600",
    )  # fmt: skip
    assert code == 0, err
    stops = ended + timedelta(seconds=600)
    minute = "%Y-%m-%d %H:%M UTC"
    said = f"in grace: expired {ended:{minute}}, stops {stops:{minute}}, grace 600 s"
    assert said in out, out
    assert not any(line.startswith(("grace_seconds", "on_expiry")) for line in out.splitlines())
    code, out, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--clear-term"
    )
    assert code == 0, err
    term = next(line for line in out.splitlines() if line.startswith("term"))
    assert term.split(None, 1)[1] == "perpetual" and "grace" not in out, out
    assert store.get_license("acme", "cad")["grace_seconds"] == 0


def test_http_grace_answer_token_and_the_end(acme: Tenant):
    lic = new_license(
        acme, "cad", seats=2, expires_at=soon(1.0), grace_seconds=2,
        entitlements=["pro", "render"], max_version="2026.4",
    )  # fmt: skip
    expires = store.get_license("acme", "cad")["expires_at"].astimezone(UTC)
    expires = expires.replace(microsecond=expires.microsecond // 1000 * 1000)  # ms
    before = acquire(acme, lic, "ws-1", entitlements=["pro"], version="2026.4")
    assert before.status_code == 201, before.get_json()
    body = before.get_json()
    assert body["in_grace"] is False and body["cut_to_license_end"] is True
    assert parse_time(body["license_expires_at"]) == expires
    assert parse_time(body["lease_expires_at"]) == parse_time(body["license_grace_ends_at"])
    assert body["entitlements"] == ["pro", "render"] and body["max_version"] == "2026.4"
    token = claims(body["lease_token"])
    assert token["ent"] == ["pro", "render"] and token["maxv"] == "2026.4"
    assert token["lexp"] == int(expires.timestamp()) + 2 and token["exp"] <= token["lexp"]
    time.sleep(max(0, expires.timestamp() - time.time()) + 0.1)
    grace = acquire(acme, lic, "ws-2")
    assert grace.status_code == 201 and grace.get_json()["in_grace"] is True
    beat = heartbeat(acme, lic, body["session_id"])
    assert beat.status_code == 200 and beat.get_json()["in_grace"] is True
    assert claims(beat.get_json()["lease_token"])["lexp"] == token["lexp"]
    time.sleep(max(0, expires.timestamp() + 2 - time.time()) + 0.1)
    error = error_of(acquire(acme, lic, "ws-3"), 403, "license_expired")
    assert parse_time(error["expired_at"]) == expires + timedelta(seconds=2)
    # the term's end and the grace's, each by its own name, in the body and the message
    assert parse_time(error["expires_at"]) == expires
    assert error["grace_ends_at"] == error["expired_at"]
    assert f"term ended at {error['expires_at']} (expires_at)" in error["message"]
    assert f"its grace at {error['grace_ends_at']} (grace_ends_at)" in error["message"]
    error_of(heartbeat(acme, lic, body["session_id"]), 403, "license_expired")
    error_of(heartbeat(acme, lic, body["session_id"]), 410, "session_expired")


def test_http_refusals(acme: Tenant):
    starts = soon(3600).replace(microsecond=0)
    lic = new_license(acme, "later", seats=1, starts_at=starts)
    error = error_of(acquire(acme, lic, "ws-1"), 403, "license_not_started")
    assert parse_time(error["starts_at"]) == starts
    lic = new_license(acme, "pro", seats=1, entitlements=["pro"], max_version="2026.4")
    error = error_of(acquire(acme, lic, "ws-1", entitlements=["pro", "gpu"]), 403, "not_entitled")
    assert error["missing_entitlements"] == ["gpu"]
    error = error_of(acquire(acme, lic, "ws-1", version="2026.10"), 403, "version_not_entitled")
    assert (error["version"], error["max_version"]) == ("2026.10", "2026.4")
    assert runtime.seat_engine().live_leases("acme", "pro") == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"entitlements": ["Pro"]}, "entitlements.0"),
        ({"entitlements": "pro"}, "entitlements"),
        ({"entitlements": [f"e{i}" for i in range(65)]}, "entitlements"),
        ({"version": "2026.x"}, "version"),
        ({"version": "1..2"}, "version"),
        ({"version": 2026}, "version"),
    ],
)
def test_http_bad_entitlements_and_versions_are_400(acme: Tenant, fields, field):
    lic = new_license(acme, "cad", seats=1, entitlements=["pro"])
    error = error_of(acquire(acme, lic, "ws-1", **fields), 400, "invalid_request")
    assert field in {d["field"] for d in error["details"]}
    assert runtime.seat_engine().live_leases("acme", "cad") == []


def test_http_a_license_without_terms_answers_as_before(acme: Tenant):
    lic = new_license(acme, "cad", seats=1)
    body = acquire(acme, lic, "ws-1").get_json()
    assert not {"license_expires_at", "in_grace", "entitlements"} & set(body)
    assert not {"ent", "lexp", "maxv"} & set(claims(body["lease_token"]))


def test_cli_status_shows_the_term(stack, capsys):
    store.create_tenant("acme")
    now = datetime.now(UTC)
    store.create_license(
        "acme", "grace", seats=1, expires_at=now - timedelta(days=1),
        grace_seconds=3 * 86400, entitlements=["pro"], max_version="7",
    )  # fmt: skip
    store.create_license("acme", "gone", seats=1, expires_at=now - timedelta(days=10))
    store.create_license("acme", "year", seats=1, expires_at=now + timedelta(days=364, hours=1))
    store.create_license("acme", "plain", seats=1)
    code, out, err = run(capsys, "status", "--tenant", "acme")
    assert code == 0, err
    sections = {part.split(":", 1)[0]: part for part in out.split("\n\n")}
    grace = sections["acme/grace"]
    assert "term: in grace: expired" in grace and "(IN GRACE: renew before it stops)" in grace
    assert "entitlements: pro" in grace and "versions up to 7" in grace
    assert "(EXPIRED: no new seats)" in sections["acme/gone"]
    ends = (now + timedelta(days=364, hours=1)).date().isoformat()
    assert f"term: expires {ends} (in 365 days)" in sections["acme/year"]
    assert "term" not in sections["acme/plain"]
