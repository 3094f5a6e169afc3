"""The ``seatlease`` CLI in direct mode (DATABASE_URL + REDIS_URL), run in-process through
``seatlease_cli.main`` against the real PostgreSQL and redis-server of the fixtures. Seats are
taken and checked through the real acquire/heartbeat functions (functions-framework test
clients), so what the CLI changes is what a client sees."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import functions_framework
import pytest
from http_support import revoked_in_shard

import seatlease_cli as cli
from seatlease.api import auth
from seatlease.apikeys import hash_key
from seatlease.events.pubsub import outbox_events
from seatlease.records import db, store
from seatlease.seats import keys, redisconn
from seatlease_cli.procs import free_port

REPO = Path(__file__).resolve().parent.parent


def app(name: str):
    return functions_framework.create_app(name, str(REPO / "functions" / name / "main.py"))


@pytest.fixture(scope="module")
def clients():
    return {name: app(name).test_client() for name in ("acquire", "heartbeat")}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("seatlease: ")
    return lines[0]


def new_key(capsys, tenant: str = "acme") -> str:
    code, out, err = run(capsys, "apikey", "create", "--tenant", tenant)
    assert code == 0, err
    return out.splitlines()[-1]


def setup_license(capsys, seats: int = 3, **flags: int) -> str:
    """Tenant acme, license cad, and an API key for acme."""
    assert run(capsys, "tenant", "create", "acme", "--name", "Acme Corp")[0] == 0
    extra = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    code, _, err = run(
        capsys,
        "license",
        "create",
        "--tenant",
        "acme",
        "--license",
        "cad",
        "--seats",
        str(seats),
        *extra,
    )
    assert code == 0, err
    return new_key(capsys)


def acquire(clients, key: str, client_id: str, **extra):
    return clients["acquire"].post(
        "/",
        json={"license_id": "cad", "client_id": client_id, **extra},
        headers={"Authorization": f"Bearer {key}"},
    )


# -- tenants ---------------------------------------------------------------------------


def test_tenant_create_list_and_duplicate(stack, capsys):
    code, out, err = run(capsys, "tenant", "create", "acme", "--name", "Acme Corp")
    assert (code, out.strip(), err) == (0, "created tenant acme (Acme Corp)", "")
    assert run(capsys, "tenant", "create", "globex")[0] == 0

    code, out, _ = run(capsys, "tenant", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["TENANT_ID", "NAME", "RATE_LIMIT_PER_SECOND", "CREATED_AT"]
    assert lines[1].startswith("acme") and "Acme Corp" in lines[1]
    assert lines[2].startswith("globex")
    tenants = run_json(capsys, "tenant", "list")["tenants"]
    assert [t["tenant_id"] for t in tenants] == ["acme", "globex"]
    assert tenants[0]["created_at"].endswith("Z")

    code, out, err = run(capsys, "tenant", "create", "acme")
    assert code == cli.EXIT_CONFLICT and out == ""
    assert "already exists" in one_line_error(err)


def test_tenant_rate_limit_create_update_show(stack, capsys):
    assert run(capsys, "tenant", "create", "acme", "--rate-limit", "40")[0] == 0
    assert run_json(capsys, "tenant", "show", "acme")["tenant"]["rate_limit_per_second"] == 40
    code, out, err = run(capsys, "tenant", "update", "acme", "--rate-limit", "0")
    assert code == 0, err
    assert out.startswith("updated tenant acme, no rate limit")
    code, out, _ = run(capsys, "tenant", "show", "acme")
    assert out.splitlines()[1].split()[:2] == ["acme", "0"]
    code, out, err = run(capsys, "tenant", "update", "acme", "--rate-limit", "-3")
    assert code != 0 and out == ""
    assert "rate_limit_per_second" in one_line_error(err)
    assert run_json(capsys, "tenant", "show", "acme")["tenant"]["rate_limit_per_second"] == 0


def test_tenant_id_is_validated(stack, capsys):
    code, _, err = run(capsys, "tenant", "create", "no/slash")
    assert code == cli.EXIT_USAGE
    assert "tenant_id" in one_line_error(err)
    assert store.list_tenants() == []


# -- API keys --------------------------------------------------------------------------


def test_apikey_create_prints_the_key_last_and_it_authenticates(stack, capsys, clients):
    key = setup_license(capsys)
    assert key.startswith("sl_")
    response = acquire(clients, key, "c1")
    assert response.status_code == 201, response.json
    assert response.json["seats_used"] == 1

    code, out, err = run(capsys, "apikey", "create", "--tenant", "acme", "--label", "ci")
    assert code == 0 and err == ""
    assert "shown only once" in out and "'ci'" in out
    second = out.splitlines()[-1]
    assert second != key and out.count(second) == 1
    assert acquire(clients, second, "c2").status_code == 201

    created = run_json(capsys, "apikey", "create", "--tenant", "acme")
    assert created["key"].startswith(created["prefix"] + "_")

    listed = run_json(capsys, "apikey", "list", "--tenant", "acme")["api_keys"]
    assert [k["label"] for k in listed] == ["", "ci", ""]
    assert all(k["active"] for k in listed)
    assert all("key" not in k for k in listed)  # only prefixes are ever shown again
    code, out, _ = run(capsys, "apikey", "list", "--tenant", "acme")
    assert out.splitlines()[0].split() == [
        "PREFIX", "LABEL", "SCOPE", "ACTIVE", "CREATED_AT", "REVOKED_AT"
    ]  # fmt: skip


def test_apikey_errors(stack, capsys):
    code, _, err = run(capsys, "apikey", "create", "--tenant", "nobody")
    assert code == cli.EXIT_NOT_FOUND and "nobody" in one_line_error(err)
    code, _, err = run(capsys, "apikey", "list", "--tenant", "nobody")
    assert code == cli.EXIT_NOT_FOUND and "nobody" in one_line_error(err)
    code, _, err = run(capsys, "apikey", "revoke", "sl_0123abcd")
    assert code == cli.EXIT_NOT_FOUND and "sl_0123abcd" in one_line_error(err)
    code, _, err = run(capsys, "apikey", "revoke", "not-a-prefix")
    assert code == cli.EXIT_USAGE and "prefix" in one_line_error(err)


def test_revoked_key_is_refused(stack, capsys, clients, redis_client):
    """Revocation drops the key's Redis cache entry and this process's copy at once.
    Another running instance would keep its in-process copy for up to LOCAL_TTL (15 s);
    waiting that out is too slow for a test, so the test checks both caches directly."""
    key = setup_license(capsys)
    assert acquire(clients, key, "c1").status_code == 201  # fills both caches
    key_hash = hash_key(key)
    assert redis_client.get(keys.api_key_cache_key(key_hash)) == "seat acme"
    assert auth.cached_locally(key_hash)
    prefix = key[: len("sl_") + 8]

    code, out, err = run(capsys, "apikey", "revoke", prefix)
    assert code == 0, err
    assert f"revoked API key {prefix}" in out and "15 s" in out
    assert redis_client.get(keys.api_key_cache_key(key_hash)) is None
    assert not auth.cached_locally(key_hash)
    response = acquire(clients, key, "c1")
    assert response.status_code == 401
    assert response.json["error"]["code"] == "unauthenticated"

    listed = run_json(capsys, "apikey", "list", "--tenant", "acme")["api_keys"]
    assert listed[0]["active"] is False and listed[0]["revoked_at"]
    assert run(capsys, "apikey", "revoke", prefix)[0] == 0  # idempotent


def test_revoke_help_states_the_local_cache_ttl(stack, capsys):
    with pytest.raises(SystemExit):
        cli.main(["apikey", "revoke", "--help"])
    out = capsys.readouterr().out
    assert f"{auth.LOCAL_TTL:.0f} s" in out and "LOCAL_TTL" in out


# -- licenses --------------------------------------------------------------------------


def test_license_create_show_list(stack, capsys):
    assert run(capsys, "tenant", "create", "acme")[0] == 0
    assert run(capsys, "tenant", "create", "globex")[0] == 0
    code, out, err = run(
        capsys,
        "license",
        "create",
        "--tenant",
        "acme",
        "--license",
        "cad",
        "--seats",
        "10",
        "--lease-seconds",
        "120",
        "--max-lease-seconds",
        "600",
        "--overage-percent",
        "20",
    )
    assert code == 0, err
    assert out.splitlines()[0] == "created license acme/cad"
    assert "cache               refreshed" in out
    made = run_json(
        capsys, "license", "create", "--tenant", "globex", "--license", "cad", "--seats", "1"
    )
    assert made["cache_refreshed"] is True
    assert made["license"]["lease_seconds"] == 360 and made["license"]["max_lease_seconds"] == 3600

    shown = run_json(capsys, "license", "show", "--tenant", "acme", "--license", "cad")["license"]
    assert {
        k: shown[k]
        for k in (
            "seats",
            "seat_limit",
            "lease_seconds",
            "max_lease_seconds",
            "overage_percent",
            "suspended",
        )
    } == {
        "seats": 10,
        "seat_limit": 12,
        "lease_seconds": 120,
        "max_lease_seconds": 600,
        "overage_percent": 20,
        "suspended": False,
    }
    code, out, _ = run(capsys, "license", "show", "--tenant", "acme", "--license", "cad")
    assert "seat_limit          12" in out

    everything = run_json(capsys, "license", "list")["licenses"]
    assert [(x["tenant_id"], x["license_id"]) for x in everything] == [
        ("acme", "cad"),
        ("globex", "cad"),
    ]
    assert len(run_json(capsys, "license", "list", "--tenant", "acme")["licenses"]) == 1
    code, out, _ = run(capsys, "license", "list", "--tenant", "acme")
    assert out.splitlines()[0].split()[:4] == ["TENANT_ID", "LICENSE_ID", "SEATS", "SEAT_LIMIT"]
    assert out.splitlines()[1].split()[:4] == ["acme", "cad", "10", "12"]


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["create", "--tenant", "acme", "--license", "cad", "--seats", "5"], 4, "already exists"),
        (["create", "--tenant", "nobody", "--license", "x", "--seats", "5"], 3, "nobody"),
        (["create", "--tenant", "acme", "--license", "x", "--seats", "-1"], 2, "seats"),
        (
            [
                "create",
                "--tenant",
                "acme",
                "--license",
                "x",
                "--seats",
                "1",
                "--lease-seconds",
                "900",
                "--max-lease-seconds",
                "600",
            ],
            2,
            "max_lease_seconds",
        ),
        (
            [
                "create",
                "--tenant",
                "acme",
                "--license",
                "x",
                "--seats",
                "1",
                "--overage-percent",
                "5000",
            ],
            2,
            "overage_percent",
        ),
        (["update", "--tenant", "acme", "--license", "nope", "--seats", "3"], 3, "nope"),
        (["update", "--tenant", "acme", "--license", "cad", "--seats", "-3"], 2, "seats"),
        (["update", "--tenant", "acme", "--license", "cad"], 2, "at least one of"),
        (["suspend", "--tenant", "acme", "--license", "nope"], 3, "nope"),
        (["show", "--tenant", "acme", "--license", "nope"], 3, "nope"),
        (["list", "--tenant", "nobody"], 3, "nobody"),
    ],
)
def test_license_errors(stack, capsys, argv, code, words):
    setup_license(capsys)
    got, out, err = run(capsys, "license", *argv)
    assert got == code
    assert words in one_line_error(err)
    assert out == ""
    cad = store.get_license("acme", "cad")
    assert cad["seats"] == 3 and cad["suspended"] is False  # nothing changed


@pytest.mark.parametrize(
    "argv",
    [
        ["license", "show", "--tenant", "acm", "--license", "cad"],
        ["license", "update", "--tenant", "acm", "--license", "cad", "--seats", "4"],
        ["license", "suspend", "--tenant", "acm", "--license", "cad"],
        ["status", "--tenant", "acm", "--license", "cad"],
    ],
)
def test_an_unknown_tenant_is_named_not_the_license(stack, capsys, argv):
    """A mistyped tenant ("acm" for "acme") used to say the license was not found."""
    setup_license(capsys)
    got, out, err = run(capsys, *argv)
    line = one_line_error(err)
    assert got == 3 and out == ""
    assert "tenant 'acm' not found" in line.lower() and "license" not in line


def test_license_changes_reach_the_next_acquire_at_once(stack, capsys, clients):
    key = setup_license(capsys, seats=1)
    assert acquire(clients, key, "c1").status_code == 201
    full = acquire(clients, key, "c2")
    assert full.status_code == 409 and full.json["error"]["seats_total"] == 1

    code, out, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--seats", "2"
    )
    assert code == 0, err
    assert "updated license acme/cad" in out
    assert acquire(clients, key, "c2").status_code == 201  # no wait for the cache TTL

    assert run(capsys, "license", "suspend", "--tenant", "acme", "--license", "cad")[0] == 0
    suspended = acquire(clients, key, "c3")
    assert suspended.status_code == 403
    assert suspended.json["error"]["code"] == "license_suspended"
    body = run_json(capsys, "license", "resume", "--tenant", "acme", "--license", "cad")
    assert body["license"]["suspended"] is False and body["cache_refreshed"] is True
    assert acquire(clients, key, "c3").status_code == 409  # resumed, and 2 seats are in use

    body = run_json(
        capsys,
        "license",
        "update",
        "--tenant",
        "acme",
        "--license",
        "cad",
        "--overage-percent",
        "50",
        "--suspend",
    )
    assert body["license"]["suspended"] is True and body["license"]["seat_limit"] == 3
    assert acquire(clients, key, "c3").status_code == 403
    assert (
        run(capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--resume")[0] == 0
    )
    assert acquire(clients, key, "c3").status_code == 201  # the overage seat


def test_license_create_replaces_a_cached_not_found(stack, capsys, clients):
    key = setup_license(capsys)
    early = clients["acquire"].post(
        "/",
        json={"license_id": "cam", "client_id": "c1"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert early.status_code == 404  # now negatively cached in Redis for 30 s
    code, _, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cam", "--seats", "1"
    )
    assert code == 0, err
    late = clients["acquire"].post(
        "/",
        json={"license_id": "cam", "client_id": "c1"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert late.status_code == 201


def test_changes_with_redis_down_are_kept(stack, capsys, monkeypatch):
    key = setup_license(capsys, seats=3)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    redisconn.reset()
    code, out, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--seats", "5"
    )
    assert code == 6
    line = one_line_error(err)
    assert "warning" in line and "600 s" in line
    assert "cache               stale" in out
    assert store.get_license("acme", "cad")["seats"] == 5

    code, out, err = run(
        capsys, "license", "suspend", "--tenant", "acme", "--license", "cad", "--json"
    )
    assert code == 6 and json.loads(out)["cache_refreshed"] is False
    assert store.get_license("acme", "cad")["suspended"] is True
    code, _, err = run(capsys, "status")
    assert code == cli.EXIT_UNAVAILABLE and "redis" in one_line_error(err)

    prefix = key[: len("sl_") + 8]
    code, out, err = run(capsys, "apikey", "revoke", prefix)
    assert code == 6 and f"revoked API key {prefix}" in out
    assert "75 s" in one_line_error(err)
    assert store.tenant_for_key_hash(hash_key(key)) is None  # revoked in the database


def test_database_down_is_exit_5_in_one_line(stack, capsys, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    for argv in (["tenant", "list"], ["license", "list"], ["apikey", "revoke", "sl_0123abcd"]):
        code, out, err = run(capsys, *argv)
        assert code == cli.EXIT_UNAVAILABLE, err
        assert "database" in one_line_error(err) and out == ""


# -- status and revoke -----------------------------------------------------------------


def test_status_lists_leases_with_user_and_host(stack, capsys, clients):
    key = setup_license(capsys, seats=3, overage_percent=50)
    first = acquire(clients, key, "ws1-cad", metadata={"user": "alice", "host": "ws1"})
    second = acquire(clients, key, "ws2-cad", metadata={"user": "bob", "host": "ws2", "pid": 7})
    assert first.status_code == second.status_code == 201

    code, out, err = run(capsys, "status", "--tenant", "acme")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["TENANT_ID", "LICENSE_ID", "USED", "LIMIT", "OVERAGE", "SUSPENDED"]
    assert lines[1].split() == ["acme", "cad", "2/3", "4", "50%", "no"]
    assert "acme/cad: 2 live leases" in out
    header = next(line for line in lines if "SESSION_ID" in line).split()
    assert header == [
        "SESSION_ID", "CLIENT_ID", "USER", "HOST", "ACQUIRED_AT", "EXPIRES_IN", "STATE"
    ]  # fmt: skip
    row = next(line for line in lines if first.json["session_id"] in line).split()
    assert row[1:4] == ["ws1-cad", "alice", "ws1"]
    assert row[5].startswith("5m") or row[5] == "6m00s"  # 360 s leases
    assert row[6] == "live"

    body = run_json(capsys, "status", "--tenant", "acme", "--license", "cad")
    (lic,) = body["licenses"]
    assert (lic["seats_used"], lic["seats"], lic["seat_limit"]) == (2, 3, 4)
    leases = {lease["session_id"]: lease for lease in lic["leases"]}
    assert set(leases) == {first.json["session_id"], second.json["session_id"]}
    bob = leases[second.json["session_id"]]
    assert (bob["client_id"], bob["user"], bob["host"]) == ("ws2-cad", "bob", "ws2")
    assert bob["metadata"] == {"user": "bob", "host": "ws2", "pid": 7}
    assert 355 <= bob["expires_in_seconds"] <= 360
    assert bob["acquired_at"].endswith("Z") and bob["expires_at"] == second.json["lease_expires_at"]

    assert len(run_json(capsys, "status")["licenses"]) == 1


def test_status_shows_each_leases_seats_when_one_counts_several(stack, capsys, clients):
    """A render node's lease of 4 seats beside a plain one: USED counts weights (5/8),
    the heading says so and the leases get a SEATS column; plain leases alone read as
    before (no column). JSON: every lease's ``seats``."""
    key = setup_license(capsys, seats=8)
    plain = acquire(clients, key, "ws1-cad", metadata={"user": "alice", "host": "ws1"})
    assert plain.status_code == 201
    out = run(capsys, "status", "--tenant", "acme")[1]
    assert "SEATS" not in out and "holding" not in out

    node = acquire(clients, key, "render-1", seats=4, metadata={"user": "farm", "host": "r1"})
    assert node.status_code == 201 and node.json["seats"] == 4
    code, out, err = run(capsys, "status", "--tenant", "acme")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["acme", "cad", "5/8"]
    assert "acme/cad: 2 live leases holding 5 seats" in out
    header = next(line for line in lines if "SESSION_ID" in line).split()
    assert header[:3] == ["SESSION_ID", "CLIENT_ID", "SEATS"]
    rows = {line.split()[1]: line.split()[2] for line in lines
            if "-cad" in line or "render-" in line}  # fmt: skip
    assert rows == {"render-1": "4", "ws1-cad": "1"}

    (lic,) = run_json(capsys, "status", "--tenant", "acme")["licenses"]
    assert (lic["seats_used"], lic["overage_in_use"]) == (5, False)
    weights = {lease["client_id"]: lease["seats"] for lease in lic["leases"]}
    assert weights == {"render-1": 4, "ws1-cad": 1}


def test_status_shows_a_waiting_tickets_seats():
    """The queue's table gets a SEATS column when a ticket waits for several seats."""
    from seatlease_cli.status import render_status

    lease = {
        "session_id": "s1",
        "client_id": "ws1",
        "user": "a",
        "host": "h",
        "acquired_at": "2026-11-26T10:00:00Z",
        "expires_in_seconds": 30,
        "seats": 1,
    }
    ticket = {"position": 1, "client_id": "render-2", "user": "farm", "host": "r2",
              "waiting_seconds": 12, "seat_held": False, "seats": 4}  # fmt: skip
    body = {"licenses": [{"tenant_id": "acme", "license_id": "cad", "seats_used": 1,
                          "seats": 4, "seat_limit": 4, "overage_percent": 0,
                          "suspended": False, "leases": [lease], "queue": [ticket]}]}  # fmt: skip
    lines = render_status(body).splitlines()
    assert "acme/cad: 1 live lease" in lines  # one plain lease: no SEATS column for it
    assert next(line for line in lines if "SESSION_ID" in line).split()[2] == "USER"
    queue_head = next(line for line in lines if "POSITION" in line).split()
    assert queue_head[:3] == ["POSITION", "CLIENT_ID", "SEATS"]
    assert next(line for line in lines if "render-2" in line).split()[:3] == ["1", "render-2", "4"]


def test_status_errors(stack, capsys):
    setup_license(capsys)
    code, _, err = run(capsys, "status", "--license", "nope")
    assert code == cli.EXIT_NOT_FOUND and "'nope' not found in any tenant" in one_line_error(err)
    code, _, err = run(capsys, "status", "--tenant", "nobody")
    assert code == cli.EXIT_NOT_FOUND and "nobody" in one_line_error(err)
    code, _, err = run(capsys, "status", "--tenant", "acme", "--license", "nope")
    assert code == cli.EXIT_NOT_FOUND and "nope" in one_line_error(err)
    assert run(capsys, "tenant", "create", "empty")[0] == 0
    assert run(capsys, "status", "--tenant", "empty")[1].strip() == "no licenses"


def test_revoke_ends_the_lease_with_an_event(stack, capsys, clients, redis_client):
    key = setup_license(capsys)
    lease = acquire(clients, key, "ws1-cad", metadata={"user": "alice", "host": "ws1"}).json
    session = lease["session_id"]

    code, out, err = run(
        capsys, "revoke", "--tenant", "acme", "--license", "cad", "--session", session
    )
    assert code == 0, err
    assert f"revoked session {session} on acme/cad" in out
    assert "client ws1-cad" in out and "user alice" in out and "host ws1" in out
    assert "seats in use now 0/3" in out

    beat = clients["heartbeat"].post(
        "/",
        json={"license_id": "cad", "session_id": session},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert beat.status_code == 410
    assert beat.json["error"]["code"] == "session_expired"
    assert beat.json["error"]["reason"] == "revoked"  # (its client learns it)

    outbox = keys.outbox_key(keys.shard_of("acme", "cad"))
    events = outbox_events(redis_client, outbox)
    revoked = [e for e in events if e["type"] == "lease.revoked"]
    assert len(revoked) == 1
    assert revoked[0]["session_id"] == session and revoked[0]["client_id"] == "ws1-cad"
    assert revoked[0]["metadata"] == {"user": "alice", "host": "ws1"}
    assert revoked[0]["seats_used"] == 0

    status = run_json(capsys, "status", "--tenant", "acme")["licenses"][0]
    assert status["seats_used"] == 0 and status["leases"] == []

    code, out, err = run(
        capsys, "revoke", "--tenant", "acme", "--license", "cad", "--session", session
    )
    assert code == cli.EXIT_NOT_FOUND and out == ""
    assert session in one_line_error(err)
    code, _, err = run(
        capsys, "revoke", "--tenant", "acme", "--license", "nope", "--session", session
    )
    assert code == cli.EXIT_NOT_FOUND and "nope" in one_line_error(err)


def test_revoke_without_tenant(stack, capsys, clients, redis_client):
    """``revoke --license L --session S`` (the lmremove form): the one tenant with L."""
    key = setup_license(capsys)
    session = acquire(clients, key, "ws1-cad", metadata={"user": "alice"}).json["session_id"]

    # In exactly one tenant: that one.
    code, out, err = run(capsys, "revoke", "--license", "cad", "--session", session)
    assert code == 0, err
    assert f"revoked session {session} on acme/cad" in out and "user alice" in out
    assert revoked_in_shard("acme", "cad") == [session]

    # In none: not found (exit 3).
    code, out, err = run(capsys, "revoke", "--license", "nope", "--session", session)
    assert code == cli.EXIT_NOT_FOUND and out == ""
    assert one_line_error(err) == "seatlease: License 'nope' not found in any tenant"

    # In several: exit 2, naming them; nothing is revoked until --tenant says which.
    second = acquire(clients, key, "ws2-cad").json["session_id"]
    for tenant in ("globex", "initech"):
        assert run(capsys, "tenant", "create", tenant)[0] == 0
        code, _, err = run(
            capsys, "license", "create", "--tenant", tenant, "--license", "cad", "--seats", "1"
        )
        assert code == 0, err
    code, out, err = run(capsys, "revoke", "--license", "cad", "--session", second, "--json")
    assert code == cli.EXIT_USAGE and out == ""
    assert one_line_error(err) == (
        "seatlease: license 'cad' exists in several tenants (acme, globex, initech); "
        "choose one with --tenant"
    )
    assert run_json(capsys, "status", "--tenant", "acme")["licenses"][0]["seats_used"] == 1
    body = run_json(capsys, "revoke", "--tenant", "acme", "--license", "cad", "--session", second)
    assert (body["revoked"], body["tenant_id"], body["seats_used"]) == (True, "acme", 0)


def test_revoke_by_user_or_host_ends_each_of_their_leases(stack, capsys, clients, redis_client):
    """``revoke --license L --user ann`` (lmremove by user): ann's two leases end, each by
    the single-session revoke (its lease.revoked event, its ended note), bob's stays;
    ``status --license L`` without --tenant (the one tenant that has L) shows it."""
    key = setup_license(capsys, seats=4)
    ann = [
        acquire(clients, key, client, metadata={"user": "ann", "host": host}).json["session_id"]
        for client, host in (("ann-1", "ws1"), ("ann-2", "ws2"))
    ]
    bob = acquire(clients, key, "bob-1", metadata={"user": "bob", "host": "ws2"}).json
    before = run_json(capsys, "status", "--license", "cad")["licenses"]
    assert [(lic["tenant_id"], lic["seats_used"]) for lic in before] == [("acme", 3)]

    code, out, err = run(capsys, "revoke", "--license", "cad", "--user", "ann")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all("on acme/cad" in line and "user ann" in line for line in lines)
    assert {line.split()[2] for line in lines} == set(ann)
    assert sorted(revoked_in_shard("acme", "cad")) == sorted(ann)
    events = outbox_events(redis_client, keys.outbox_key(keys.shard_of("acme", "cad")))
    assert sorted(e["session_id"] for e in events if e["type"] == "lease.revoked") == sorted(ann)

    code, out, err = run(capsys, "status", "--license", "cad")
    assert code == 0, err
    assert "acme/cad: 1 live lease" in out and bob["session_id"] in out
    assert not any(session in out for session in ann)

    # Nothing (left) of ann: exit 3 in one line; --host picks by host, with --user both.
    code, out, err = run(capsys, "revoke", "--license", "cad", "--user", "ann")
    assert code == cli.EXIT_NOT_FOUND and out == ""
    assert one_line_error(err) == "seatlease: user 'ann' holds no seat on acme/cad"
    code, _, err = run(capsys, "revoke", "--license", "cad", "--user", "bob", "--host", "ws1")
    assert code == cli.EXIT_NOT_FOUND and "user 'bob' host 'ws1'" in one_line_error(err)
    body = run_json(capsys, "revoke", "--license", "cad", "--host", "ws2")
    assert [r["session_id"] for r in body["revoked"]] == [bob["session_id"]]
    assert run_json(capsys, "status", "--license", "cad")["licenses"][0]["leases"] == []

    # One way of choosing only; and several tenants with the license: name them.
    code, out, err = run(capsys, "revoke", "--license", "cad", "--user", "ann", "--client", "x")
    assert code == cli.EXIT_USAGE and "one of --session, --client" in one_line_error(err)
    assert run(capsys, "tenant", "create", "globex")[0] == 0
    assert run(capsys, "license", "create", "--tenant", "globex", "--license", "cad",
               "--seats", "1")[0] == 0  # fmt: skip
    for argv in (["status"], ["revoke", "--user", "ann"]):
        code, out, err = run(capsys, *argv, "--license", "cad")
        assert code == cli.EXIT_USAGE and out == ""
        assert one_line_error(err) == (
            "seatlease: license 'cad' exists in several tenants (acme, globex); "
            "choose one with --tenant"
        )


def test_revoke_help_says_tenant_is_optional(capsys):
    with pytest.raises(SystemExit):
        cli.main(["revoke", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "[--tenant TENANT] --license LICENSE (--session SESSION | --client CLIENT | "
        "[--user USER] [--host HOST])" in out
    )
    assert "exit code 2 if several have it" in out


# -- choosing a backend: the CLI never guesses -----------------------------------------

BACKEND_VARS = ("DATABASE_URL", "REDIS_URL", "CLOUD_SQL_INSTANCE", "SEATLEASE_ADMIN_URL")
BACKEND_COMMANDS = [
    ["tenant", "list"],
    ["status"],
    ["license", "list"],
    ["apikey", "create", "--tenant", "acme"],
    ["revoke", "--license", "cad", "--session", "s1"],
    ["report", "usage", "--tenant", "acme"],
]


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


@pytest.fixture
def nothing_configured(tmp_path, monkeypatch):
    """A folder with no local stack and an environment with no backend."""
    monkeypatch.chdir(tmp_path)
    for var in BACKEND_VARS:
        monkeypatch.delenv(var, raising=False)
    db.reset()
    redisconn.reset()
    yield tmp_path
    db.reset()
    redisconn.reset()


def cli_process(cwd: Path, *argv: str, env: dict | None = None, before: str = ""):
    """``seatlease ARGV`` in a fresh interpreter (``before``: Python run first, e.g. to
    make a module missing), with only ``env`` added to an environment that names no
    backend."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k not in BACKEND_VARS}
    code = f"{before}\nfrom seatlease_cli import main\nraise SystemExit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("argv", BACKEND_COMMANDS)
def test_no_backend_says_how_to_get_one_and_creates_nothing(nothing_configured, capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == cli.EXIT_USAGE and out == ""
    line = one_line_error(err)
    assert "no backend" in line
    for hint in ("make run", "seatlease local", "DATABASE_URL and REDIS_URL", "--admin-url"):
        assert hint in line, hint
    assert "SEATLEASE_ADMIN_URL" in line
    assert files_under(nothing_configured) == []  # no .seatlease/seatlease.db here


def test_no_backend_from_the_installed_command(tmp_path):
    """The real entry point in a folder without a stack: exit 2, one line, no file (it
    used to create .seatlease/seatlease.db and answer 'a backend is unavailable')."""
    proc = cli_process(tmp_path, "tenant", "list")
    assert proc.returncode == cli.EXIT_USAGE, proc.stderr
    assert proc.stdout == "" and "no backend to work on" in one_line_error(proc.stderr)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(("have", "lack"), [("REDIS_URL", "DATABASE_URL"),
                                            ("DATABASE_URL", "REDIS_URL")])  # fmt: skip
def test_half_a_direct_configuration_is_refused(nothing_configured, capsys, monkeypatch,
                                                have, lack, redis_server):  # fmt: skip
    """One of the two is not enough: no default fills in the other (``status`` used to
    answer "0 live leases", exit 0, from whatever Redis listened on 127.0.0.1:6379)."""
    value = redis_server.url if have == "REDIS_URL" else "postgresql://u@127.0.0.1:1/x"
    monkeypatch.setenv(have, value)
    for argv in (["status"], ["tenant", "list"]):
        code, out, err = run(capsys, *argv)
        assert code == cli.EXIT_USAGE and out == ""
        line = one_line_error(err)
        assert f"{have} is set but {lack} is not" in line
        assert "make run" in line and "--admin-url" in line
    assert files_under(nothing_configured) == []


def stale_state(folder: Path, port: int, pid: int) -> Path:
    state = folder / ".seatlease" / "local.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"base_url": f"http://127.0.0.1:{port}", "pid": pid}))
    return state


def dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


@pytest.mark.parametrize("argv", [*BACKEND_COMMANDS, ["demo"]])
def test_a_stopped_local_stack_is_named_not_replaced(nothing_configured, capsys, argv):
    state = stale_state(nothing_configured, free_port(), dead_pid())
    code, out, err = run(capsys, *argv)
    assert code == cli.EXIT_UNAVAILABLE and out == ""
    line = one_line_error(err)
    assert "the local stack in ./.seatlease is not running" in line
    assert "start it with `make run`" in line
    assert files_under(nothing_configured) == [state.parent, state]


def test_a_stale_state_file_whose_port_another_program_took(nothing_configured, capsys):
    """The port answers, but the process that wrote local.json is gone: not our stack."""
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        stale_state(nothing_configured, other.getsockname()[1], dead_pid())
        code, _, err = run(capsys, "status")
    assert code == cli.EXIT_UNAVAILABLE
    assert "is not running" in one_line_error(err)


def test_a_subfolder_finds_the_stack_of_its_parent_folder(stack, capsys, tmp_path):
    """The CLI run from docs/ while the stack started at the project's root runs: it finds
    ../.seatlease/local.json as git finds .git (it used to say "start the local stack
    ... in this folder", inviting a second stack)."""
    import os

    from http_support import serving

    from seatlease_cli import devserver

    setup_license(capsys)
    docs = tmp_path / "docs" / "deeper"
    docs.mkdir(parents=True)
    state = tmp_path / ".seatlease" / "local.json"
    state.parent.mkdir()
    with serving(devserver.create_app(["admin"]), quiet=True) as url:
        state.write_text(json.dumps({"base_url": url, "pid": os.getpid()}))
        proc = cli_process(docs, "license", "list", "--tenant", "acme", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [lic["license_id"] for lic in json.loads(proc.stdout)["licenses"]] == ["cad"]
    # Stopped: the message names the folder it found, not "this folder".
    proc = cli_process(docs, "status")
    assert proc.returncode == cli.EXIT_UNAVAILABLE
    line = one_line_error(proc.stderr)
    assert f"the local stack in {state.parent} is not running" in line
    assert f"start it with `make run` (or `seatlease local`) in {tmp_path}" in line


def test_no_stack_anywhere_names_the_folders_searched(nothing_configured, capsys, monkeypatch):
    (nothing_configured / "docs").mkdir()
    monkeypatch.chdir(nothing_configured / "docs")
    code, _, err = run(capsys, "status")
    assert code == cli.EXIT_USAGE
    assert "no .seatlease/local.json in this folder or its parents" in one_line_error(err)


def test_db_upgrade_and_replay_need_database_url(nothing_configured, capsys):
    for argv in (
        ["db", "upgrade"],
        ["audit", "replay-dead-letters", "--subscription", "s", "--project", "p"],
    ):
        code, out, err = run(capsys, *argv)
        assert code == cli.EXIT_USAGE and out == ""
        line = one_line_error(err)
        assert "set DATABASE_URL" in line and "no default database" in line
    assert files_under(nothing_configured) == []


def test_explicit_configuration_wins_over_a_stale_stack(stack, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stale_state(tmp_path, free_port(), dead_pid())
    assert run(capsys, "tenant", "create", "acme")[0] == 0  # DATABASE_URL + REDIS_URL
    assert [t["tenant_id"] for t in store.list_tenants()] == ["acme"]


# -- options before the command --------------------------------------------------------


def test_json_before_the_command(stack, capsys):
    setup_license(capsys)
    code, out, err = run(capsys, "--json", "status")
    assert code == 0, err
    assert [x["license_id"] for x in json.loads(out)["licenses"]] == ["cad"]
    code, out, err = run(
        capsys, "--json", "license", "show", "--tenant", "acme", "--license", "cad"
    )
    assert code == 0 and json.loads(out)["license"]["seats"] == 3
    code, out, _ = run(capsys, "status", "--json")  # after it, as before
    assert json.loads(out)["licenses"][0]["seats_used"] == 0


def test_admin_url_before_the_command(stack, capsys):
    """DATABASE_URL and REDIS_URL are set and work, so only the URL given before the
    command can make these fail the way they do."""
    url = f"http://127.0.0.1:{free_port()}/admin"
    for argv in (["--admin-url", url, "status"], ["status", "--admin-url", url],
                 ["--admin-url", url, "--json", "tenant", "list"]):  # fmt: skip
        code, out, err = run(capsys, *argv)
        assert code == cli.EXIT_UNAVAILABLE and out == ""
        assert f"cannot reach the admin function at {url}" in one_line_error(err)
    assert run(capsys, "status")[0] == 0  # direct, without the option


def test_global_options_on_a_command_that_does_not_take_them(capsys):
    for argv in (["--admin-url", "http://127.0.0.1:1/admin", "db", "upgrade"],
                 ["--json", "local"]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == cli.EXIT_USAGE
        assert "does not take --" in capsys.readouterr().err


# -- optional extras -------------------------------------------------------------------


def test_chart_without_matplotlib_names_the_extra(stack, tmp_path):
    import os

    env = {"DATABASE_URL": os.environ["DATABASE_URL"], "REDIS_URL": os.environ["REDIS_URL"]}
    proc = cli_process(
        tmp_path, "report", "usage", "--tenant", "acme", "--chart", "usage.png",
        env=env, before="import sys; sys.modules['matplotlib'] = None",
    )  # fmt: skip
    assert proc.returncode == cli.EXIT_FAILED and proc.stdout == ""
    line = one_line_error(proc.stderr)
    assert "--chart needs matplotlib" in line and "pip install 'seatlease[charts]'" in line
    assert files_under(tmp_path) == []


def test_demo_without_the_client_names_the_extra(tmp_path):
    proc = cli_process(
        tmp_path, "demo", before="import sys; sys.modules['seatlease_client'] = None"
    )
    assert proc.returncode == cli.EXIT_FAILED and proc.stdout == ""
    line = one_line_error(proc.stderr)
    assert "seatlease-client" in line and "pip install 'seatlease[demo]'" in line
    assert files_under(tmp_path) == []


def test_a_closed_pipe_ends_the_command_quietly(stack, capsys):
    """`seatlease status | head -1` said "cannot reach a backend: [Errno 32] Broken pipe"
    and exited 5 (issue 42): a reader that went away ends the command quietly."""
    import subprocess

    for n in range(300):  # more than a pipe's buffer of output
        store.create_tenant(f"t{n:03d}", name="x" * 200)
    command = [sys.executable, "-c", "import sys, seatlease_cli; sys.exit(seatlease_cli.main())",
               "tenant", "list"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # head -1
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err


def test_revoke_by_client_id(stack, capsys, clients, redis_client):
    """`seatlease revoke --client C` ends the lease C holds (the README's tour frees
    laptop-1 and laptop-2 so, without copying a session id); exactly one of --session and
    --client."""
    key = setup_license(capsys)
    for client in ("laptop-1", "laptop-2"):
        assert acquire(clients, key, client).status_code == 201
    code, out, err = run(capsys, "revoke", "--license", "cad", "--client", "laptop-1")
    assert code == 0, err
    assert out.startswith("revoked session ") and "client laptop-1" in out, out
    code, out, err = run(capsys, "revoke", "--license", "cad", "--client", "laptop-1")
    assert code == cli.EXIT_NOT_FOUND and "Client 'laptop-1' holds no seat" in err, err
    with pytest.raises(SystemExit):
        cli.main(["revoke", "--license", "cad", "--client", "x", "--session", "y"])
    capsys.readouterr()
