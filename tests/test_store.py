"""The store against a private database on the real PostgreSQL server (and SQLite, the
embedded default for a local run)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, select, text

from shared import db, store
from shared.errors import BackendUnavailable
from shared.tables import api_keys, metadata


def _event(event_id: str, **extra) -> dict:
    return {
        "event_id": event_id,
        "type": "lease.acquired",
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": "s1",
        "client_id": "c1",
        "occurred_at": datetime(2026, 11, 22, 12, 0, tzinfo=UTC),
        "seats_used": 1,
        "seats_total": 5,
        "metadata": {"user": "ann"},
        **extra,
    }


def test_migrations_create_exactly_the_declared_schema(database_url):
    inspector = inspect(db.get_engine())
    assert set(inspector.get_table_names()) >= set(metadata.tables)
    for name, table in metadata.tables.items():
        migrated = {c["name"] for c in inspector.get_columns(name)}
        assert migrated == {c.name for c in table.columns}, name
    uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("lease_events")}
    assert ("event_id",) in uniques


def test_api_keys_are_stored_hashed_with_a_prefix(database_url):
    store.create_tenant("acme", "Acme Corp")
    new = store.create_api_key("acme", label="ci")
    assert new.key.startswith(new.prefix + "_") and len(new.key) > 40
    with db.get_engine().connect() as conn:
        row = conn.execute(select(api_keys)).mappings().one()
    assert row["key_hash"] == store.hash_api_key(new.key) and new.key not in str(dict(row))
    assert store.tenant_for_key_hash(store.hash_api_key(new.key)) == "acme"
    listed = store.list_api_keys("acme")
    assert [k["prefix"] for k in listed] == [new.prefix] and listed[0]["revoked_at"] is None
    assert store.revoke_api_key(new.prefix) == row["key_hash"]
    assert store.tenant_for_key_hash(row["key_hash"]) is None
    with pytest.raises(store.NotFound):
        store.revoke_api_key("sl_00000000")
    with pytest.raises(store.NotFound):
        store.create_api_key("nobody")


def test_tenants_and_licenses(database_url):
    store.create_tenant("acme")
    with pytest.raises(store.Conflict):
        store.create_tenant("acme")
    lic = store.create_license("acme", "cad", seats=5)
    assert (lic["lease_seconds"], lic["max_lease_seconds"], lic["overage_percent"]) == (
        360,
        3600,
        0,
    )
    with pytest.raises(store.Conflict):
        store.create_license("acme", "cad", seats=1)
    with pytest.raises(store.NotFound):
        store.create_license("nobody", "cad", seats=1)
    updated = store.update_license("acme", "cad", seats=7, suspended=True)
    assert updated["seats"] == 7 and updated["suspended"] is True
    cfg = store.license_config("acme", "cad")
    assert cfg is not None and (cfg.seats, cfg.suspended) == (7, True)
    assert store.license_config("acme", "nope") is None
    with pytest.raises(store.StoreError):
        store.update_license("acme", "cad", lease_seconds=7200)  # above max_lease_seconds
    with pytest.raises(store.StoreError):
        store.create_license("acme", "neg", seats=-1)
    with pytest.raises(store.NotFound):
        store.update_license("acme", "nope", seats=1)
    assert [row["license_id"] for row in store.list_licenses("acme")] == ["cad"]


def test_insert_events_is_idempotent_on_event_id(database_url):
    batch = [_event("e1"), _event("e2", type="lease.released", seats_used=0)]
    assert store.insert_events(batch) == 2
    assert store.insert_events(batch) == 0  # a redelivered message adds nothing
    assert store.insert_events([_event("e2"), _event("e3")]) == 1
    denied = _event("e4", type="lease.denied", session_id=None, client_id=None, count=17)
    assert store.insert_events([denied]) == 1
    rows = store.list_events("acme", "cad")
    assert [r["event_id"] for r in rows] == ["e1", "e2", "e3", "e4"]
    assert rows[0]["metadata"] == {"user": "ann"} and rows[3]["count"] == 17
    assert rows[0]["occurred_at"] == datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_sqlite_is_the_embedded_default(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("CLOUD_SQL_INSTANCE", raising=False)
    monkeypatch.chdir(tmp_path)
    db.reset()
    assert db.database_url() == f"sqlite:///{tmp_path}/.seatlease/seatlease.db"
    store.upgrade()
    store.create_tenant("acme")
    store.create_license("acme", "cad", seats=2)
    assert store.insert_events([_event("e1"), _event("e1")]) == 1
    assert store.insert_events([_event("e1"), _event("e2")]) == 1
    assert store.license_config("acme", "cad").seats == 2
    db.reset()


def test_postgres_urls_use_pg8000(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@db:5432/seatlease")
    assert db.database_url() == "postgresql+pg8000://u:p@db:5432/seatlease"


def test_unreachable_database_is_backend_unavailable(monkeypatch):
    from shared.localprocs import free_port

    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    with pytest.raises(BackendUnavailable):
        store.license_config("acme", "cad")
    db.reset()


def test_check_constraints_hold_in_the_database(database_url):
    store.create_tenant("acme")
    with pytest.raises(Exception, match="ck_licenses_seats"):
        with db.get_engine().begin() as conn:
            conn.execute(
                text("INSERT INTO licenses (tenant_id, license_id, seats) VALUES ('acme','x',-1)")
            )


def test_events_are_listed_in_the_order_they_happened(database_url):
    """Pub/Sub push may deliver a later message first: the trail still reads in order."""
    late = _event(
        "late", type="lease.released", occurred_at=datetime(2026, 11, 22, 12, 5, tzinfo=UTC)
    )
    early = _event("early", occurred_at=datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    assert store.insert_events([late]) == 1 and store.insert_events([early]) == 1
    assert [r["event_id"] for r in store.list_events("acme", "cad")] == ["early", "late"]
