"""A license's idle and sharing settings (issue 50: ``idle_timeout_seconds``,
``idle_reclaim``, ``share``, ``share_limit``) where they are stored and managed: the CLI's
flags and what ``license show/list`` print, the admin function's answers and its 400s,
the store's refusals, the table's CHECK constraints, and migration 0017 up and down.
Real PostgreSQL (and the local stack's SQLite for the migration) and redis-server; a bad
value is refused naming the field and its bound, with nothing stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import functions_framework
import pytest
from http_support import Tenant, call, error_of, new_license
from sqlalchemy import inspect, text

import seatlease_cli as cli
from seatlease.admin.licenses import license_view
from seatlease.errors import StoreError
from seatlease.licenses import LicenseConfig
from seatlease.records import db, store

REPO = Path(__file__).resolve().parent.parent
OFF = {"idle_timeout_seconds": 0, "idle_reclaim": "when_needed", "share": "none", "share_limit": 0}
CHECKS = (
    "ck_licenses_idle_timeout",
    "ck_licenses_idle_reclaim",
    "ck_licenses_share",
    "ck_licenses_share_limit",
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def settings(row: dict) -> dict:
    return {field: row[field] for field in OFF}


def shown(out: str) -> dict[str, str]:
    """``license show``'s lines as key -> value."""
    pairs = (line.split(None, 1) for line in out.splitlines() if line.strip())
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}


# -- the CLI ----------------------------------------------------------------------------


def test_cli_sets_every_field_on_create_and_update_and_shows_them(stack, capsys):
    store.create_tenant("acme")
    code, out, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "2",
        "--idle-timeout", "900", "--idle-reclaim", "always", "--share", "user_host",
        "--share-limit", "4",
    )  # fmt: skip
    assert code == 0, err
    lines = shown(out)
    assert lines["idle"] == "after 900 s, reclaimed always"
    assert lines["sharing"] == "by user_host, 4 sessions a seat"
    assert settings(store.get_license("acme", "cad")) == {
        "idle_timeout_seconds": 900,
        "idle_reclaim": "always",
        "share": "user_host",
        "share_limit": 4,
    }

    # Each flag alone changes its field and nothing else.
    steps = (
        (("--idle-timeout", "60"), {"idle_timeout_seconds": 60}),
        (("--idle-reclaim", "when_needed"), {"idle_reclaim": "when_needed"}),
        (("--share", "host"), {"share": "host"}),
        (("--share-limit", "0"), {"share_limit": 0}),
        (("--idle-timeout", "604800"), {"idle_timeout_seconds": 604800}),
        (("--share-limit", "10000"), {"share_limit": 10000}),
    )
    expected = settings(store.get_license("acme", "cad"))
    for flags, change in steps:
        code, out, err = run(
            capsys, "license", "update", "--tenant", "acme", "--license", "cad", *flags, "--json"
        )
        assert code == 0, err
        expected.update(change)
        assert settings(json.loads(out)["license"]) == expected, flags
        assert settings(store.get_license("acme", "cad")) == expected, flags

    code, out, err = run(capsys, "license", "show", "--tenant", "acme", "--license", "cad")
    assert code == 0, err
    lines = shown(out)
    assert lines["idle"] == "after 604800 s, reclaimed when_needed"
    assert lines["sharing"] == "by host, 10000 sessions a seat"
    code, out, err = run(
        capsys, "license", "show", "--tenant", "acme", "--license", "cad", "--json"
    )
    assert code == 0, err
    assert settings(json.loads(out)["license"]) == expected

    # Turned off again: show says so.
    code, out, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad",
        "--idle-timeout", "0", "--share", "none", "--share-limit", "0",
    )  # fmt: skip
    assert code == 0, err
    assert (shown(out)["idle"], shown(out)["sharing"]) == ("off", "none")
    assert settings(store.get_license("acme", "cad")) == {**OFF, "idle_reclaim": "when_needed"}


def test_cli_list_shows_the_columns_once_a_license_uses_them(stack, capsys):
    store.create_tenant("acme")
    run(capsys, "license", "create", "--tenant", "acme", "--license", "plain", "--seats", "1")
    code, out, err = run(capsys, "license", "list", "--tenant", "acme")
    assert code == 0, err
    assert "IDLE" not in out.splitlines()[0] and "SHARING" not in out.splitlines()[0]
    code, out, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "shared", "--seats", "1",
        "--share", "user", "--idle-timeout", "3600",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(capsys, "license", "list", "--tenant", "acme")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[-2:] == ["IDLE", "SHARING"]
    cells = {row.split()[1]: re.split(r"\s{2,}", row.strip())[-2:] for row in rows}
    assert cells["plain"] == ["off", "none"]
    assert cells["shared"] == ["after 3600 s, reclaimed when_needed", "by user, no limit"]
    code, out, err = run(capsys, "license", "list", "--tenant", "acme", "--json")
    assert code == 0, err
    listed = {lic["license_id"]: settings(lic) for lic in json.loads(out)["licenses"]}
    assert listed == {
        "plain": OFF,
        "shared": {**OFF, "idle_timeout_seconds": 3600, "share": "user"},
    }


BAD_FLAGS = [
    (("--idle-timeout", "59"), "idle_timeout_seconds", "60 and 604800"),
    (("--idle-timeout", "1"), "idle_timeout_seconds", "60 and 604800"),
    (("--idle-timeout", "604801"), "idle_timeout_seconds", "60 and 604800"),
    (("--idle-timeout", "-60"), "idle_timeout_seconds", "60 and 604800"),
    (("--share-limit", "-1"), "share_limit", "0"),
    (("--share-limit", "10001"), "share_limit", "10000"),
]


@pytest.mark.parametrize(("flags", "field", "bound"), BAD_FLAGS)
def test_cli_refuses_an_out_of_range_value_naming_it_and_stores_nothing(
    stack, capsys, flags, field, bound
):
    store.create_tenant("acme")
    code, _, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "1",
        *flags,
    )  # fmt: skip
    assert code == cli.EXIT_USAGE, err
    assert field in err and bound in err, err
    assert store.get_license("acme", "cad") is None

    store.create_license("acme", "cad", seats=1, idle_timeout_seconds=120, share="user")
    code, _, err = run(capsys, "license", "update", "--tenant", "acme", "--license", "cad", *flags)
    assert code == cli.EXIT_USAGE, err
    assert field in err and bound in err, err
    stored = settings(store.get_license("acme", "cad"))
    assert stored == {**OFF, "idle_timeout_seconds": 120, "share": "user"}


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (("--idle-reclaim", "never"), "invalid choice: 'never'"),
        (("--share", "team"), "invalid choice: 'team'"),
        (("--share-limit", "lots"), "invalid int value: 'lots'"),
        (("--idle-timeout", "15m"), "invalid int value: '15m'"),
    ],
)
def test_cli_refuses_an_unknown_choice_before_calling_anything(stack, capsys, flags, problem):
    store.create_tenant("acme")
    for action, extra in (("create", ("--seats", "1")), ("update", ())):
        with pytest.raises(SystemExit) as bad:
            run(capsys, "license", action, "--tenant", "acme", "--license", "cad", *extra, *flags)
        err = capsys.readouterr().err
        assert bad.value.code == cli.EXIT_USAGE
        assert f"argument {flags[0]}: {problem}" in err, err
        assert store.get_license("acme", "cad") is None


# -- the admin function -----------------------------------------------------------------


@pytest.fixture(scope="module")
def admin():
    return functions_framework.create_app(
        "admin", str(REPO / "functions" / "admin" / "main.py")
    ).test_client()


def post(admin, action: str, **fields):
    return admin.post("/", json={"action": action, **fields})


def test_admin_answers_carry_the_settings(stack, admin):
    assert post(admin, "tenant.create", tenant_id="acme").status_code == 201
    made = post(admin, "license.create", tenant_id="acme", license_id="cad", seats=3)
    assert made.status_code == 201, made.json
    assert settings(made.json["license"]) == OFF
    changed = post(
        admin, "license.update", tenant_id="acme", license_id="cad",
        idle_timeout_seconds=1800, idle_reclaim="always", share="user", share_limit=2,
    )  # fmt: skip
    assert changed.status_code == 200, changed.json
    wanted = {"idle_timeout_seconds": 1800, "idle_reclaim": "always", "share": "user",
              "share_limit": 2}  # fmt: skip
    assert settings(changed.json["license"]) == wanted
    assert settings(post(admin, "license.show", tenant_id="acme", license_id="cad").json[
        "license"]) == wanted  # fmt: skip
    (listed,) = post(admin, "license.list", tenant_id="acme").json["licenses"]
    assert settings(listed) == wanted
    (status,) = post(admin, "status", tenant_id="acme", license_id="cad").json["licenses"]
    assert settings(status) == wanted
    # An update naming none of them leaves them as they are.
    post(admin, "license.update", tenant_id="acme", license_id="cad", seats=4)
    assert settings(store.get_license("acme", "cad")) == wanted


BAD_VALUES = [
    ("idle_timeout_seconds", 59, "between 60 and 604800"),
    ("idle_timeout_seconds", 1, "between 60 and 604800"),
    ("idle_timeout_seconds", 604801, "between 60 and 604800"),
    ("idle_timeout_seconds", -1, "between 60 and 604800"),
    ("idle_timeout_seconds", "900", "integer"),
    ("idle_timeout_seconds", 900.5, "integer"),
    ("idle_timeout_seconds", True, "integer"),
    ("idle_reclaim", "never", "'when_needed' or 'always'"),
    ("idle_reclaim", "", "'when_needed' or 'always'"),
    ("idle_reclaim", 1, "'when_needed' or 'always'"),
    ("share", "team", "'none', 'user', 'host' or 'user_host'"),
    ("share", "USER", "'none', 'user', 'host' or 'user_host'"),
    ("share", "", "'none', 'user', 'host' or 'user_host'"),
    ("share_limit", -1, "greater than or equal to 0"),
    ("share_limit", 10001, "less than or equal to 10000"),
    ("share_limit", "4", "integer"),
]


@pytest.mark.parametrize(("field", "value", "problem"), BAD_VALUES)
def test_admin_refuses_a_bad_value_with_a_400_naming_it_and_stores_nothing(
    stack, admin, field, value, problem
):
    post(admin, "tenant.create", tenant_id="acme")
    for action, extra in (("license.create", {"seats": 1}), ("license.update", {})):
        if action == "license.update":
            post(admin, "license.create", tenant_id="acme", license_id="cad", seats=1,
                 idle_timeout_seconds=300, share="host")  # fmt: skip
        response = post(
            admin, action, tenant_id="acme", license_id="cad", **extra, **{field: value}
        )
        error = error_of(response, 400, "invalid_request")
        (detail,) = error["details"]
        assert detail["field"] == field, error
        assert problem in detail["problem"] and field in error["message"], error
        row = store.get_license("acme", "cad")
        if action == "license.create":
            assert row is None
        else:
            assert settings(row) == {**OFF, "idle_timeout_seconds": 300, "share": "host"}


# -- the store and the table ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("idle_timeout_seconds", 59, "0 (off) or between 60 and 604800"),
        ("idle_timeout_seconds", 604801, "0 (off) or between 60 and 604800"),
        ("idle_timeout_seconds", "600", "0 (off) or between 60 and 604800"),
        ("idle_reclaim", "never", "one of when_needed, always"),
        ("idle_reclaim", "", "one of when_needed, always"),
        ("share", "team", "one of none, user, host, user_host"),
        ("share_limit", 10001, "between 0 (no limit) and 10000"),
        ("share_limit", True, "between 0 (no limit) and 10000"),
    ],
)
def test_the_store_refuses_a_bad_value_in_words(database_url, field, value, words):
    store.create_tenant("acme")
    with pytest.raises(StoreError, match=re.escape(f"{field} must be {words}")):
        store.create_license("acme", "cad", seats=1, **{field: value})
    assert store.get_license("acme", "cad") is None
    store.create_license("acme", "cad", seats=1)
    with pytest.raises(StoreError, match=field):
        store.update_license("acme", "cad", **{field: value})
    assert settings(store.get_license("acme", "cad")) == OFF


def test_the_database_refuses_what_the_store_would(database_url):
    store.create_tenant("acme")
    for column, value, check in (
        ("idle_timeout_seconds", "59", "ck_licenses_idle_timeout"),
        ("idle_timeout_seconds", "604801", "ck_licenses_idle_timeout"),
        ("idle_reclaim", "'never'", "ck_licenses_idle_reclaim"),
        ("share", "'team'", "ck_licenses_share"),
        ("share_limit", "-1", "ck_licenses_share_limit"),
        ("share_limit", "10001", "ck_licenses_share_limit"),
    ):
        with pytest.raises(Exception, match=check):
            with db.get_engine().begin() as conn:
                conn.execute(
                    text(
                        f"INSERT INTO licenses (tenant_id, license_id, seats, {column}) "
                        f"VALUES ('acme', 'x', 1, {value})"
                    )
                )
    with db.get_engine().begin() as conn:  # the bounds themselves are allowed
        conn.execute(
            text(
                "INSERT INTO licenses (tenant_id, license_id, seats, idle_timeout_seconds, "
                "idle_reclaim, share, share_limit) "
                "VALUES ('acme', 'edge', 1, 604800, 'always', 'user_host', 10000)"
            )
        )
    assert settings(store.get_license("acme", "edge")) == {
        "idle_timeout_seconds": 604800,
        "idle_reclaim": "always",
        "share": "user_host",
        "share_limit": 10000,
    }
    assert settings(store.create_license("acme", "cad", seats=1)) == OFF  # off by default


# -- migration 0017 ---------------------------------------------------------------------


def test_migration_0017_reads_an_existing_license_as_off_and_downgrades(migration_urls):
    """On a PostgreSQL database at 0016 with a license, and on SQLite: 0017 adds the four
    settings, off, with their CHECK constraints; downgrading removes them and keeps the
    license; upgrading again works."""
    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0016")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO tenants (tenant_id) VALUES ('acme')"))
            conn.execute(
                text(
                    "INSERT INTO licenses (tenant_id, license_id, seats, linger_seconds) "
                    "VALUES ('acme', 'cad', 3, 60)"
                )
            )
        store.upgrade(engine, "0017")
        row = store.get_license("acme", "cad", engine)
        assert (row["seats"], row["linger_seconds"]) == (3, 60)
        assert settings(row) == OFF, url
        config = LicenseConfig.from_row(row)
        assert (config.idle_timeout_seconds, config.share) == (0, "none")
        assert settings(license_view(row)) == OFF
        for assignment, check in (
            ("idle_timeout_seconds = 30", "ck_licenses_idle_timeout"),
            ("idle_reclaim = 'later'", "ck_licenses_idle_reclaim"),
            ("share = 'all'", "ck_licenses_share"),
            ("share_limit = 10001", "ck_licenses_share_limit"),
        ):
            with pytest.raises(Exception, match=check):
                with engine.begin() as conn:
                    conn.execute(text(f"UPDATE licenses SET {assignment}"))
        store.update_license("acme", "cad", engine, idle_timeout_seconds=600, share="user")

        store.downgrade(engine, "0016")
        columns = {c["name"] for c in inspect(engine).get_columns("licenses")}
        assert not columns & set(OFF), url
        checks = {c["name"] for c in inspect(engine).get_check_constraints("licenses")}
        assert not checks & set(CHECKS) and "ck_licenses_on_failover" in checks, url
        with engine.begin() as conn:
            seats = conn.execute(text("SELECT seats FROM licenses")).scalar_one()
        assert seats == 3
        with pytest.raises(Exception, match="ck_licenses_linger"):  # the older checks stay
            with engine.begin() as conn:
                conn.execute(text("UPDATE licenses SET linger_seconds = 86401"))

        store.upgrade(engine)  # and up again: off once more
        assert settings(store.get_license("acme", "cad", engine)) == OFF
        engine.dispose()


# -- the tenant's side ------------------------------------------------------------------


def test_a_tenant_admin_reads_the_settings_and_cannot_change_them(acme: Tenant):
    """The portal's status carries each license's settings (the operator's view of it);
    the portal has no action that changes a license."""
    new_license(acme, "cad", seats=2, idle_timeout_seconds=600, share="user", share_limit=3)
    new_license(acme, "plain", seats=1)
    made = store.create_api_key("acme", label="it", scope="admin")
    tenant_admin = Tenant("acme", made.key, made.prefix)
    answer = call("portal", {"action": "status"}, tenant=tenant_admin)
    assert answer.status_code == 200, answer.get_json()
    listed = {lic["license_id"]: settings(lic) for lic in answer.get_json()["licenses"]}
    assert listed == {
        "cad": {**OFF, "idle_timeout_seconds": 600, "share": "user", "share_limit": 3},
        "plain": OFF,
    }
    refused = call(
        "portal",
        {"action": "license.update", "tenant_id": "acme", "license_id": "cad", "share": "none"},
        tenant=tenant_admin,
    )
    assert error_of(refused, 400, "invalid_request")["details"][0]["field"] == "action"
    assert settings(store.get_license("acme", "cad"))["share"] == "user"
