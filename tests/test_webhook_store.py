"""The webhooks' store (seatlease.webhooks.store) and migration 0019, on the real
PostgreSQL database and on SQLite (the local stack's), with a real receiver where a
delivery is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, func, inspect, select, text
from standardwebhooks import Webhook
from webhook_receiver import receiving

from seatlease import clock
from seatlease.errors import Conflict, InvalidRequest, NotFound
from seatlease.records import db
from seatlease.records import store as records
from seatlease.records.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from seatlease.webhooks import crypto, deliver, store

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
TABLES = ("webhook_attempts", "webhook_deliveries", "webhook_endpoints")


@pytest.fixture
def hooks(database, monkeypatch):
    """PostgreSQL's private database or a new SQLite file, without webhooks; tenants acme
    and globex; a WEBHOOK_KEY; the local stack's URL allowance."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    with db.get_engine().begin() as conn:
        for table in TABLES:
            conn.execute(text(f"DELETE FROM {table}"))
    records.create_tenant("acme")
    records.create_tenant("globex")
    return database


def event(event_id: str, type: str = "lease.acquired", tenant: str = "acme", **extra) -> dict:
    return {
        "event_id": event_id,
        "type": type,
        "tenant_id": tenant,
        "license_id": "cad",
        "session_id": "s1",
        "occurred_at": "2026-11-29T08:00:00.000Z",
        "seats_used": 1,
        "seats_total": 5,
        "metadata": {"user": "ann"},
        **extra,
    }


def rows(table) -> list[dict]:
    with db.get_engine().connect() as conn:
        return [dict(r) for r in conn.execute(select(table)).mappings()]


def test_an_endpoints_secret_is_shown_once_and_stored_sealed(hooks, capsys):
    endpoint, secret = store.create_endpoint(
        "acme", "http://127.0.0.1:9/hook", ["lease.released", "lease.acquired"], ["cad"]
    )
    assert secret.startswith("whsec_") and len(secret) == 6 + 32
    assert endpoint["id"].startswith("whe_") and endpoint["state"] == "ok"
    assert endpoint["event_types"] == ["lease.acquired", "lease.released"]
    assert endpoint["license_ids"] == ["cad"]
    assert "secret_enc" not in endpoint and secret not in str(endpoint)
    (stored,) = rows(webhook_endpoints)
    assert secret not in str(stored) and stored["secret_enc"].startswith("v1.")
    assert crypto.decrypt_secret(stored["secret_enc"], context=endpoint["id"]) == secret
    (listed,) = store.list_endpoints("acme")
    assert listed == {**endpoint, "pending": 0} and store.list_endpoints("globex") == []
    assert secret not in capsys.readouterr().out  # never logged


def test_refused_endpoints_say_which_field_and_store_nothing(hooks, monkeypatch):
    cases = [
        ({"url": "http://10.1.2.3/hook"}, "url"),
        ({"url": "http://169.254.169.254/computeMetadata/v1/"}, "url"),
        ({"url": "ftp://127.0.0.1:21/x"}, "url"),
        ({"url": "http://127.0.0.1:9/h", "event_types": ["lease.nope"]}, "event_types"),
        ({"url": "http://127.0.0.1:9/h", "license_ids": ["bad id"]}, "license_ids"),
        ({"url": "http://127.0.0.1:9/h", "license_ids": [f"l{i}" for i in range(101)]},
         "license_ids"),
    ]  # fmt: skip
    for kwargs, field in cases:
        with pytest.raises(InvalidRequest) as refused:
            store.create_endpoint("acme", **kwargs)
        assert [d["field"] for d in refused.value.fields["details"]] == [field], kwargs
    with pytest.raises(NotFound):
        store.create_endpoint("nobody", "http://127.0.0.1:9/hook")
    monkeypatch.delenv("SEATLEASE_LOCAL")  # the cloud: loopback refused, http refused
    for url in ("http://127.0.0.1:9/hook", "https://127.0.0.1:9/hook"):
        with pytest.raises(InvalidRequest):
            store.create_endpoint("acme", url)
    assert rows(webhook_endpoints) == []


def test_a_tenant_has_at_most_max_endpoints(hooks, monkeypatch):
    monkeypatch.setattr(store, "MAX_ENDPOINTS", 2)
    for _ in range(2):
        store.create_endpoint("acme", "http://127.0.0.1:9/hook")
    with pytest.raises(Conflict, match="delete one first"):
        store.create_endpoint("acme", "http://127.0.0.1:9/hook")
    store.create_endpoint("globex", "http://127.0.0.1:9/hook")  # another tenant's own count


def test_enqueue_matches_type_license_and_tenant_and_is_idempotent(hooks):
    everything, _ = store.create_endpoint("acme", "http://127.0.0.1:9/all")
    releases, _ = store.create_endpoint("acme", "http://127.0.0.1:9/r", ["lease.released"])
    cam_only, _ = store.create_endpoint("acme", "http://127.0.0.1:9/cam", license_ids=["cam"])
    others, _ = store.create_endpoint("globex", "http://127.0.0.1:9/g")
    batch = [
        event("e1"),
        event("e2", type="lease.released"),
        event("e3", license_id="cam"),
        event("e4", tenant="globex"),
        event("e5", tenant="initech"),  # a tenant with no endpoint
    ]
    assert store.enqueue(batch, now=T0) == 6
    assert store.enqueue(batch, now=T0) == 0  # a redelivered message adds nothing
    assert store.enqueue([*batch[:2], event("e6")], now=T0) == 1
    queued = {(r["endpoint_id"], r["event_id"]) for r in rows(webhook_deliveries)}
    assert queued == {
        (everything["id"], "e1"), (everything["id"], "e2"), (everything["id"], "e3"),
        (everything["id"], "e6"), (releases["id"], "e2"), (cam_only["id"], "e3"),
        (others["id"], "e4"),
    }  # fmt: skip
    assert {e["id"]: e["pending"] for e in store.list_endpoints("acme")} == {
        everything["id"]: 4,
        releases["id"]: 1,
        cam_only["id"]: 1,
    }
    # a test event for one endpoint, its filters aside
    test_event = event("t1", type="webhook.test", license_id=None)
    assert store.enqueue([test_event], endpoint_id=cam_only["id"], now=T0) == 1
    assert store.enqueue([test_event], endpoint_id=cam_only["id"], now=T0) == 0
    assert store.enqueue([], now=T0) == 0


def test_a_full_message_to_every_endpoint_is_queued_byte_for_byte(hooks):
    """The largest enqueue a caller can cause: a Pub/Sub message's most events, each to
    a tenant's most endpoints (on PostgreSQL one JSON array parameter carries the rows:
    what it cannot carry exactly would show here). Awkward text and payloads at the bound
    arrive as the payload's own JSON, timestamps to the microsecond."""
    from seatlease.events.pubsub import EVENTS_PER_MESSAGE
    from seatlease.webhooks.payload import payload_of

    endpoints = [
        store.create_endpoint("acme", f"http://127.0.0.1:9/hook{n}")[0]["id"]
        for n in range(store.MAX_ENDPOINTS)
    ]
    awkward = 'quote " backslash \\ newline \n tab \t nul-escape \\u0000 é ü 中文 🪑 \u2028'
    batch = [
        event(f"e{n:04d}", metadata={"user": f"ann{n}", "note": awkward * (n % 3)})
        for n in range(EVENTS_PER_MESSAGE)
    ]
    # two at the payload bound exactly, one just over (refused, recorded final)
    for n, extra in ((0, 0), (1, 0), (2, 1)):
        pad = store.MAX_PAYLOAD_BYTES - len(store._body(event(f"e{n:04d}", metadata={}))[0])
        pad -= len('{"p":""}') - 2 - extra
        batch[n] = event(f"e{n:04d}", metadata={"p": "x" * pad})
    when = T0 + timedelta(microseconds=123457)
    total = EVENTS_PER_MESSAGE * store.MAX_ENDPOINTS
    assert store.enqueue(batch, now=when) == total
    assert store.enqueue(batch, now=when) == 0  # redelivered: nothing added
    stored = rows(webhook_deliveries)
    assert len(stored) == total and {r["endpoint_id"] for r in stored} == set(endpoints)
    expected = {e["event_id"]: store._body(e)[0] for e in batch}
    assert len(expected["e0000"].encode()) == store.MAX_PAYLOAD_BYTES
    for row in stored:
        assert clock.utc(row["next_attempt_at"]) == when == clock.utc(row["created_at"])
        if row["event_id"] == "e0002":
            assert row["state"] == "final" and row["payload"] == ""
            assert "over the 65536-byte bound" in row["last_error"]
            continue
        assert row["state"] == "pending" and row["last_error"] is None
        assert row["payload"] == expected[row["event_id"]]
    assert payload_of(batch[5])["data"]["metadata"]["note"] == awkward * 2


def test_bounds_are_enforced_and_the_reason_recorded(hooks, monkeypatch):
    endpoint, _ = store.create_endpoint("acme", "http://127.0.0.1:9/hook")
    monkeypatch.setattr(store, "MAX_PENDING", 3)
    monkeypatch.setattr(store, "MAX_PAYLOAD_BYTES", 2000)
    big = event("big", metadata={"note": "x" * 2000})
    assert store.enqueue([event(f"e{i}") for i in range(5)] + [big], now=T0) == 6
    by_id = {r["event_id"]: r for r in rows(webhook_deliveries)}
    assert [by_id[f"e{i}"]["state"] for i in range(5)] == ["pending"] * 3 + ["final"] * 2
    assert by_id["e4"]["last_error"] == "not sent: the endpoint already has 3 deliveries waiting"
    assert by_id["e4"]["payload"] == ""
    assert (
        by_id["big"]["state"] == "final"
        and "over the 2000-byte bound" in by_id["big"]["last_error"]
    )
    listed = {x["event_id"]: x for x in store.deliveries("acme", endpoint["id"])}
    assert listed["big"]["error"] == by_id["big"]["last_error"] and listed["big"]["attempt"] == 0
    assert listed["e0"]["state"] == "pending" and listed["e0"]["next_attempt_at"] == T0
    claimed = deliver.claim_due(T0, 100, 40)  # what was refused is never sent
    assert sorted(c.event_id for c in claimed) == ["e0", "e1", "e2"]


def test_a_rotated_secret_signs_beside_the_new_one_for_24_hours(hooks, monkeypatch):
    with receiving() as receiver:
        endpoint, old = store.create_endpoint("acme", receiver.url("/hook"))
        new = store.rotate_secret("acme", endpoint["id"])
        assert new != old and new.startswith("whsec_")
        (listed,) = store.list_endpoints("acme")
        until = listed["old_secret_until"]
        assert timedelta(hours=23, minutes=59) < until - datetime.now(UTC) <= timedelta(hours=24)
        store.enqueue([event("e1")])
        assert deliver.deliver_due()["delivered"] == 1
        (request,) = receiver.at("/hook")
        for secret in (new, old):  # a receiver with either secret verifies it
            assert Webhook(secret).verify(request.body, request.headers)["id"] == "e1"
        signatures = request.headers["webhook-signature"].split()
        assert [s.split(",")[0] for s in signatures] == ["v1", "v1", "v1a"]
    (stored,) = rows(webhook_endpoints)
    assert store.signing_secrets(stored, until - timedelta(seconds=1)) == [new, old]
    assert store.signing_secrets(stored, until) == [new]  # the overlap is over
    with pytest.raises(NotFound):
        store.rotate_secret("globex", endpoint["id"])


def test_deliveries_lists_attempts_newest_first_for_the_tenant_only(hooks):
    with receiving() as receiver:
        receiver.statuses["/hook"] = [500]
        endpoint, _ = store.create_endpoint("acme", receiver.url("/hook"))
        store.enqueue([event("e1"), event("e2", type="lease.released")], now=T0)
        deliver.deliver_due(T0)
        deliver.deliver_due(T0 + timedelta(hours=1))
    listed = store.deliveries("acme")
    assert sorted((x["event_id"], x["attempt"]) for x in listed) == [
        ("e1", 1), ("e1", 2), ("e2", 1)
    ] or sorted((x["event_id"], x["attempt"]) for x in listed) == [
        ("e1", 1), ("e2", 1), ("e2", 2)
    ]  # fmt: skip
    retried = next(x for x in listed if x["attempt"] == 2)
    first = next(x for x in listed if x["event_id"] == retried["event_id"] and x["attempt"] == 1)
    assert listed.index(retried) < listed.index(first)
    assert (first["status"], first["error"], retried["status"]) == (500, "HTTP 500: nope", 200)
    assert {x["type"] for x in listed} == {"lease.acquired", "lease.released"}
    assert len(store.deliveries("acme", limit=1)) == 1
    assert store.deliveries("globex") == []
    with pytest.raises(NotFound):
        store.deliveries("globex", endpoint["id"])


def test_deleting_an_endpoint_removes_its_deliveries_and_attempts(hooks):
    with receiving() as receiver:
        endpoint, _ = store.create_endpoint("acme", receiver.url("/hook"))
        kept, _ = store.create_endpoint("acme", receiver.url("/kept"))
        store.enqueue([event("e1")], now=T0)
        deliver.deliver_due(T0)
    with pytest.raises(NotFound):
        store.delete_endpoint("globex", endpoint["id"])
    store.delete_endpoint("acme", endpoint["id"])
    with pytest.raises(NotFound):
        store.delete_endpoint("acme", endpoint["id"])
    assert [e["id"] for e in store.list_endpoints("acme")] == [kept["id"]]
    assert {r["endpoint_id"] for r in rows(webhook_deliveries)} == {kept["id"]}
    assert {r["endpoint_id"] for r in rows(webhook_attempts)} == {kept["id"]}


def test_prune_forgets_old_finished_deliveries_only(hooks):
    with receiving() as receiver:
        store.create_endpoint("acme", receiver.url("/hook"))
        store.enqueue([event("old")], now=T0)
        deliver.deliver_due(T0)
        store.enqueue([event("waiting")], now=T0)
        store.enqueue([event("new")], now=T0 + timedelta(days=40))
    assert store.prune(T0 + timedelta(days=30)) == 1
    assert sorted(r["event_id"] for r in rows(webhook_deliveries)) == ["new", "waiting"]
    with db.get_engine().connect() as conn:
        assert conn.execute(select(func.count()).select_from(webhook_attempts)).scalar() == 0


def test_migration_0019_creates_the_tables_and_downgrades(migration_urls):
    for url in migration_urls:
        engine = db.make_engine(url)
        records.upgrade(engine, "0019")
        names = set(inspect(engine).get_table_names())
        assert set(TABLES) <= names, url
        uniques = inspect(engine).get_unique_constraints("webhook_deliveries")
        assert [u["column_names"] for u in uniques] == [["endpoint_id", "event_id"]], url
        records.downgrade(engine, "0018")
        assert not set(TABLES) & set(inspect(engine).get_table_names()), url
        engine.dispose()
    create_engine(migration_urls[1]).dispose()
