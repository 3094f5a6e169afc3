"""API key scopes (migration 0009): a seat key takes seats and nothing else, a tenant admin
key runs the portal and never takes a seat; keys issued before scopes are seat keys. The
portal's side of the separation is in tests/test_portal.py. Real Redis and PostgreSQL
(and SQLite for the migration of existing keys)."""

from __future__ import annotations

import json

import pytest
from http_support import Tenant, acquire, error_of, heartbeat, new_license, release

import seatlease_cli as cli
from seatlease.api import auth
from seatlease.apikeys import generate, hash_key
from seatlease.records import db, store
from seatlease.seats import keys
from seatlease.seats.redisconn import get_redis


def admin_key(tenant: Tenant) -> Tenant:
    made = store.create_api_key(tenant.tenant_id, label="it", scope="admin")
    return Tenant(tenant.tenant_id, made.key, made.prefix)


def test_an_admin_key_may_not_take_heartbeat_or_release_a_seat(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    admin = admin_key(acme)
    held = acquire(acme, lic, "ws-1")
    assert held.status_code == 201
    session = held.get_json()["session_id"]

    error = error_of(acquire(admin, lic, "ws-2"), 403, "forbidden")
    assert "admin key" in error["message"]
    error_of(heartbeat(admin, lic, session), 403, "forbidden")
    error_of(release(admin, lic, session), 403, "forbidden")
    # Nothing changed: the seat key's lease is still the only one.
    assert heartbeat(acme, lic, session).status_code == 200
    assert acquire(acme, lic, "ws-1").get_json()["seats_used"] == 1


def test_a_revoked_admin_key_is_401_not_403(acme: Tenant) -> None:
    """The scope is looked at only for a live key: revoked is revoked, whatever it was."""
    lic = new_license(acme, "cad")
    admin = admin_key(acme)
    error_of(acquire(admin, lic, "ws-1"), 403, "forbidden")
    auth.forget(store.revoke_api_key(admin.prefix))
    error_of(acquire(admin, lic, "ws-1"), 401, "unauthenticated")


def test_the_cache_holds_the_scope_and_an_older_entry_is_a_seat_key(acme: Tenant) -> None:
    lic = new_license(acme, "cad")
    admin = admin_key(acme)
    error_of(acquire(admin, lic, "ws-1"), 403, "forbidden")
    cache = get_redis()
    assert cache.get(keys.api_key_cache_key(hash_key(admin.key))) == "admin acme"
    assert acquire(acme, lic, "ws-1").status_code == 201
    assert cache.get(keys.api_key_cache_key(hash_key(acme.key))) == "seat acme"
    # An entry written before scopes existed holds the tenant alone: a seat key.
    cache.set(keys.api_key_cache_key(hash_key(acme.key)), "acme", ex=60)
    auth.forget_all()
    assert acquire(acme, lic, "ws-2").status_code == 201


def test_unknown_scope_is_refused_by_the_store(acme: Tenant) -> None:
    with pytest.raises(store.StoreError, match="scope"):
        store.create_api_key("acme", scope="root")


def test_keys_issued_before_scopes_become_seat_keys(tmp_path) -> None:
    """Migration 0009 on a database at 0005 holding a key: the key is a seat key."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    store.upgrade(engine, "0005")
    key, prefix = generate()
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO tenants (tenant_id, name) VALUES ('old', '')")
        conn.exec_driver_sql(
            "INSERT INTO api_keys (tenant_id, prefix, key_hash, label) VALUES (?, ?, ?, '')",
            ("old", prefix, hash_key(key)),
        )
    store.upgrade(engine, "head")
    assert store.key_for_hash(hash_key(key), engine) == ("old", "seat")
    assert [k["scope"] for k in store.list_api_keys("old", engine)] == ["seat"]
    engine.dispose()


def test_cli_creates_and_lists_an_admin_key(acme: Tenant, capsys, monkeypatch) -> None:
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    code = cli.main(["apikey", "create", "--tenant", "acme", "--scope", "admin", "--label", "it"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("Tenant admin key sl_")
    key = out.splitlines()[-1]
    assert auth.identify(f"Bearer {key}", auth.ADMIN).tenant_id == "acme"
    assert cli.main(["apikey", "list", "--tenant", "acme", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["api_keys"]
    assert sorted(k["scope"] for k in listed) == ["admin", "seat"]
    with pytest.raises(SystemExit) as refused:  # argparse: usage error, exit 2
        cli.main(["apikey", "create", "--tenant", "acme", "--scope", "root"])
    assert refused.value.code == cli.EXIT_USAGE
    assert "--scope" in capsys.readouterr().err
