"""The store against a private database on the real PostgreSQL server (and SQLite, the
embedded default for a local run)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, select, text

from seatlease.apikeys import hash_key
from seatlease.errors import BackendUnavailable
from seatlease.records import db, event_log, partitions, store
from seatlease.records.tables import api_keys, metadata


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
    # Partitioned by month: a unique key must hold the partition key (docs/design.md).
    uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("lease_events")}
    assert ("event_id", "occurred_at") in uniques
    with db.get_engine().connect() as conn:
        kind = conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'lease_events'"))
        assert kind.scalar() == "p"


def test_api_keys_are_stored_hashed_with_a_prefix(database_url):
    store.create_tenant("acme", "Acme Corp")
    new = store.create_api_key("acme", label="ci")
    assert new.key.startswith(new.prefix + "_") and len(new.key) > 40
    with db.get_engine().connect() as conn:
        row = conn.execute(select(api_keys)).mappings().one()
    assert row["key_hash"] == hash_key(new.key) and new.key not in str(dict(row))
    assert store.tenant_for_key_hash(hash_key(new.key)) == "acme"
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
    assert event_log.insert_events(batch) == 2
    assert event_log.insert_events(batch) == 0  # a redelivered message adds nothing
    assert event_log.insert_events([_event("e2"), _event("e3")]) == 1
    denied = _event("e4", type="lease.denied", session_id=None, client_id=None, count=17)
    assert event_log.insert_events([denied]) == 1
    rows = event_log.list_events("acme", "cad")
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
    assert event_log.insert_events([_event("e1"), _event("e1")]) == 1
    assert event_log.insert_events([_event("e1"), _event("e2")]) == 1
    assert store.license_config("acme", "cad").seats == 2
    db.reset()


def test_postgres_urls_use_pg8000(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@db:5432/seatlease")
    assert db.database_url() == "postgresql+pg8000://u:p@db:5432/seatlease"


def test_unreachable_database_is_backend_unavailable(monkeypatch):
    from seatlease_cli.procs import free_port

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
    assert event_log.insert_events([late]) == 1 and event_log.insert_events([early]) == 1
    assert [r["event_id"] for r in event_log.list_events("acme", "cad")] == ["early", "late"]


def _partitions() -> dict:
    from seatlease.records import partitions

    with db.get_engine().connect() as conn:
        return partitions.partitions(conn)


def test_partitions_are_created_ahead_and_strays_move_in(database_url):
    """The migration (and the audit path, once per process and month) creates this
    month's and the next months' partitions; an event of a month without one lands in the
    default partition and moves into its month's partition when that is created."""

    now = datetime.now(UTC)
    names = set(_partitions())
    assert {partitions.partition_name(m) for m in partitions.months_ahead(now)} <= names
    assert "lease_events_default" in names
    far = datetime(2031, 5, 17, 8, 0, tzinfo=UTC)
    assert event_log.insert_events([_event("far", occurred_at=far)]) == 1
    with db.get_engine().begin() as conn:
        assert partitions.ensure_partitions(conn, [far]) == ["lease_events_2031_05"]
        where = conn.execute(
            text("SELECT tableoid::regclass::text FROM lease_events WHERE event_id = 'far'")
        )
        assert where.scalar() == "lease_events_2031_05"
        assert partitions.ensure_partitions(conn, [far]) == []
    assert event_log.insert_events([_event("far", occurred_at=far)]) == 0  # still found


def test_prune_drops_old_months_and_keeps_the_rollups(database_url):
    from seatlease.records import reports

    old = datetime(2024, 3, 10, 9, 0, tzinfo=UTC)
    events = [
        _event("a", session_id="s1", occurred_at=old, seats_used=1),
        _event("r", type="lease.released", session_id="s1", seats_used=0,
               occurred_at=datetime(2024, 3, 10, 9, 30, tzinfo=UTC)),
        _event("new", session_id="s2", occurred_at=datetime(2026, 11, 22, 12, tzinfo=UTC)),
    ]  # fmt: skip
    assert event_log.insert_events(events) == 3
    with db.get_engine().begin() as conn:
        partitions.ensure_partitions(conn, [old])
    window = reports.Window("acme", "cad", datetime(2024, 3, 10, tzinfo=UTC),
                            datetime(2024, 3, 11, tzinfo=UTC))  # fmt: skip
    before = reports.usage_report(window, "day").as_dict()
    pruned = event_log.prune_events(datetime(2024, 4, 15, tzinfo=UTC))
    assert pruned.horizon == datetime(2024, 4, 1, tzinfo=UTC)  # whole months only
    assert pruned.events_deleted == 2 and pruned.partitions_dropped == ["lease_events_2024_03"]
    assert [r["event_id"] for r in event_log.list_events("acme")] == ["new"]
    assert reports.usage_report(window, "day").as_dict() == before  # rollups outlive events
    assert before["usage"][0]["peak_seats"] == 1
    assert before["durations"][0]["total_seconds"] == 1800.0
    # A late redelivery of a pruned event is not stored, so it is not counted twice.
    assert event_log.insert_events(events[:2]) == 0
    assert reports.usage_report(window, "day").as_dict() == before
    assert event_log.prune_events(datetime(2020, 1, 1, tzinfo=UTC)).horizon == pruned.horizon


def test_prune_on_sqlite(tmp_path):
    from seatlease.records import reports

    engine = db.make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        store.upgrade(engine)
        old = datetime(2024, 3, 10, 9, 0, tzinfo=UTC)
        assert event_log.insert_events([_event("a", occurred_at=old), _event("b")], engine) == 2
        pruned = event_log.prune_events(datetime(2024, 5, 2, tzinfo=UTC), engine)
        assert (pruned.events_deleted, pruned.partitions_dropped) == (1, [])
        assert [r["event_id"] for r in event_log.list_events("acme", engine=engine)] == ["b"]
        assert event_log.insert_events([_event("a", occurred_at=old)], engine) == 0
        usage = reports.peak_usage(reports.Window("acme", until=datetime(2024, 3, 11, tzinfo=UTC)),
                                   "day", engine)  # fmt: skip
        assert [(u.period_start.date().isoformat(), u.peak_seats) for u in usage] == [
            ("2024-03-10", 1)
        ]
    finally:
        engine.dispose()


def test_statement_timeout_is_backend_unavailable(database_url):
    """A query the server cancels (statement_timeout) is an outage to retry (503), not a
    bug; so is the client's socket timeout."""
    with pytest.raises(BackendUnavailable):
        with store.transaction() as conn:
            conn.execute(text("SET LOCAL statement_timeout = 50"))
            conn.execute(text("SELECT pg_sleep(1)"))
    from sqlalchemy import create_engine

    impatient = create_engine(database_url, connect_args={"timeout": 0.3})
    try:
        with pytest.raises(BackendUnavailable):
            with store.transaction(impatient) as conn:
                conn.execute(text("SELECT pg_sleep(1)"))
    finally:
        impatient.dispose()


def test_both_ends_of_a_lease_in_concurrent_transactions_are_paired(database_url):
    """The acquire and the release of one lease stored by two audit instances at once:
    the second transaction waits on the first's row in usage_leases and pairs the lease
    (its duration is counted once)."""
    import threading

    from seatlease.records import rollups
    from seatlease.records.tables import usage_client_rollups, usage_leases

    acquire = _event("acq", session_id="s9", client_id="c9")
    release = _event("rel", type="lease.released", session_id="s9", seats_used=0,
                     occurred_at=datetime(2026, 11, 22, 12, 30, tzinfo=UTC))  # fmt: skip
    event_log.insert_events([_event("warm", session_id=None)])  # partitions checked once
    engine = db.get_engine()
    done = []
    with engine.begin() as first:
        assert rollups.insert_postgres(first, rollups.as_json([acquire])) == 1
        other = threading.Thread(target=lambda: done.append(event_log.insert_events([release])))
        other.start()
        other.join(0.5)
        assert other.is_alive()  # waits for the first transaction's row
    other.join(10)
    assert done == [1]
    with engine.connect() as conn:
        row = conn.execute(select(usage_client_rollups).where(
            usage_client_rollups.c.client_id == "c9")).mappings().one()  # fmt: skip
        assert (row["acquired"], row["ended"], row["total_ms"]) == (1, 1, 1_800_000)
        lease = conn.execute(select(usage_leases)).mappings().one()
        assert (lease["client_id"], lease["end_type"]) == ("c9", "lease.released")


def test_cli_audit_prune(database_url, capsys):
    import json

    from seatlease_cli import main

    old = datetime.now(UTC).replace(year=datetime.now(UTC).year - 3)
    assert event_log.insert_events([_event("old", occurred_at=old), _event("new")]) == 2
    assert main(["audit", "prune", "--older-than", "400d", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["events_deleted"] == 1 and result["horizon"].endswith("-01T00:00:00Z")
    assert [r["event_id"] for r in event_log.list_events("acme")] == ["new"]
    assert main(["audit", "prune"]) == 0
    assert "usage rollups kept" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["audit", "prune", "--older-than", "0d"])
    assert bad.value.code == 2 and "between 1d and 36500d" in capsys.readouterr().err


def test_cli_audit_prune_needs_a_database(capsys, monkeypatch):
    from seatlease_cli import main

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("CLOUD_SQL_INSTANCE", raising=False)
    assert main(["audit", "prune"]) == 2
    assert "set DATABASE_URL" in capsys.readouterr().err


def _rollup_rows(tenant: str) -> dict[str, list[dict]]:
    from seatlease.records.tables import usage_client_rollups, usage_leases, usage_rollups

    found = {}
    with db.get_engine().connect() as conn:
        for table in (usage_rollups, usage_client_rollups, usage_leases):
            rows = conn.execute(select(table).where(table.c.tenant_id == tenant)).mappings()
            found[table.name] = sorted(
                (
                    {k: v.replace(tenant, "") if isinstance(v, str) else v for k, v in r.items()}
                    for r in rows
                ),
                key=repr,
            )
    return found


def test_the_audit_insert_runs_as_a_function_with_the_plain_statements_rows(database_url):
    """The audit path calls the insert through a PL/pgSQL function named by the digest of
    its body (created on first use); it stores exactly what the plain statement stores."""
    from seatlease.records import rollups

    def batch(tenant: str) -> list[dict]:
        return [
            _event(f"{tenant}-a{i}", tenant_id=tenant, session_id=f"{tenant}{i}",
                   client_id=f"c{i % 3}", seats_used=i + 1,
                   occurred_at=datetime(2026, 11, 22, 12, i, tzinfo=UTC))
            for i in range(20)
        ] + [
            _event(f"{tenant}-r{i}", tenant_id=tenant, type="lease.released",
                   session_id=f"{tenant}{i}", seats_used=19 - i,
                   occurred_at=datetime(2026, 11, 22, 13, i, tzinfo=UTC))
            for i in range(0, 20, 2)
        ] + [_event(f"{tenant}-d", tenant_id=tenant, type="lease.denied", session_id=None,
                    count=4, seats_used=20)]  # fmt: skip

    function = rollups.insert_function()
    assert rollups.insert_function().name == function.name  # the digest is stable
    assert event_log.insert_events_json(rollups.as_json(batch("via-fn")).encode()) == 31
    assert event_log.insert_events_json(rollups.as_json(batch("via-fn")).encode()) == 0
    with db.get_engine().begin() as conn:
        assert conn.execute(text("SELECT to_regproc(:n)"), {"n": function.name}).scalar()
        plain = rollups.insert_postgres(conn, rollups.as_json(batch("plain")))
    assert plain == 31
    via_function, via_plain = _rollup_rows("via-fn"), _rollup_rows("plain")
    assert via_function["usage_rollups"] and via_function == via_plain
    # The function dropped under a running process (a restored backup): made again.
    with db.get_engine().begin() as conn:
        conn.execute(text(f"DROP FUNCTION {function.name}"))
    assert event_log.insert_events_json(rollups.as_json([_event("after-drop")]).encode()) == 1
    with db.get_engine().connect() as conn:
        assert conn.execute(text("SELECT to_regproc(:n)"), {"n": function.name}).scalar()


def test_a_role_that_cannot_create_functions_keeps_the_plain_statement(database_url, capsys):
    """A database role allowed to write the tables but not to create objects: the insert
    function cannot be made, the events are still stored (plain statement), said once."""
    from sqlalchemy.engine import make_url

    from seatlease.records import rollups

    event_log.insert_events([_event("warm", session_id=None)])  # this month's partitions
    role = f"writer_{abs(hash(database_url)) % 10**8}"
    admin = db.get_engine()
    with admin.begin() as conn:
        conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(text(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}"))
        conn.execute(text(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"))
        conn.execute(text(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {role}"))
        for name in conn.execute(text(
            "SELECT proname FROM pg_proc WHERE proname LIKE 'seatlease_insert_events_%'"
        )).scalars():  # fmt: skip
            conn.execute(text(f"DROP FUNCTION {name}"))
    limited = db.make_engine(
        make_url(database_url).set(username=role).render_as_string(hide_password=False)
    )
    try:
        event_log._insert_function_ready.pop(str(limited.url), None)
        event_log._partitions_ready.pop(str(limited.url), None)
        event_log._partitions_ready[str(limited.url)] = event_log._partitions_ready[str(admin.url)]
        assert event_log.insert_events_json(rollups.as_json([_event("e1")]).encode(), limited) == 1
        assert event_log.insert_events_json(rollups.as_json([_event("e2")]).encode(), limited) == 1
        assert event_log._insert_function_ready[str(limited.url)] is False
    finally:
        limited.dispose()
        with admin.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE {role}"))
    warnings = [line for line in capsys.readouterr().out.splitlines() if "insert function" in line]
    assert len(warnings) == 1 and '"WARNING"' in warnings[0]
    assert {r["event_id"] for r in event_log.list_events("acme")} == {"warm", "e1", "e2"}
