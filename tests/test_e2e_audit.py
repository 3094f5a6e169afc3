"""End to end with the real pieces: engine -> outbox -> reaper -> Pub/Sub emulator ->
audit function -> PostgreSQL. Exactly one audit row per event, whatever the redelivery,
and nothing lost while the database is down."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter

import functions_framework
import pytest
from http_support import push_to_audit

from seatlease.events.pubsub import Publisher
from seatlease.events.reaper import Reaper
from seatlease.records import db, event_log, store
from seatlease.seats.engine import SeatRequest
from seatlease_cli.procs import free_port


@pytest.fixture
def audit_client():
    return functions_framework.create_app("audit", "functions/audit/main.py").test_client()


def test_every_lease_change_becomes_exactly_one_audit_row(
    redis_client, database_url, pubsub, audit_client, monkeypatch
):
    from seatlease.api.runtime import seat_engine

    store.create_tenant("acme")
    store.create_license("acme", "cad", seats=3, lease_seconds=1)
    engine = seat_engine()
    kept = engine.acquire(
        SeatRequest("acme", "cad", "ann", metadata={"user": "ann", "host": "pc1"})
    )
    gone = engine.acquire(SeatRequest("acme", "cad", "bob"))
    engine.acquire(SeatRequest("acme", "cad", "cat"))  # crashes: never heartbeats
    engine.release("acme", "cad", gone.session_id)
    engine.release("acme", "cad", kept.session_id, revoke=True)
    for client in ("dan", "eve"):
        engine.acquire(SeatRequest("acme", "cad", client))
    with pytest.raises(Exception, match="seats"):
        engine.acquire(SeatRequest("acme", "cad", "fay"))
    time.sleep(1.1)

    report = Reaper(redis_client, Publisher()).run()
    messages = pubsub.pull()
    for i, message in enumerate(messages):
        assert push_to_audit(audit_client, message.data, str(i)).status_code == 200
    for i, message in enumerate(messages):  # Pub/Sub redelivers: nothing is added
        assert push_to_audit(audit_client, message.data, f"again-{i}").status_code == 200

    rows = event_log.list_events("acme", "cad")
    assert len(rows) == report.published == len({r["event_id"] for r in rows})
    assert Counter(r["type"] for r in rows) == {
        "lease.acquired": 5,
        "lease.released": 1,
        "lease.revoked": 1,
        "lease.reclaimed": 3,
        "lease.denied": 1,
    }
    first = next(r for r in rows if r["session_id"] == kept.session_id)
    assert first["metadata"] == {"user": "ann", "host": "pc1"} and first["seats_total"] == 3
    assert next(r for r in rows if r["type"] == "lease.denied")["count"] == 1


def test_a_malformed_message_is_acknowledged_and_logged(database_url, audit_client, capsys):
    for bad in (b"not json", b'[{"event_id": "x"}]', b'{"type": "lease.acquired"}'):
        assert push_to_audit(audit_client, bad).status_code == 200
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    errors = [line for line in logged if line["severity"] == "ERROR"]
    assert [line["message"] for line in errors] == [
        "audit: malformed message acknowledged",
        "audit: invalid events acknowledged",
        "audit: invalid events acknowledged",
    ]
    assert event_log.list_events("acme") == []


def _event(event_id: str, **changes):
    return {
        "event_id": event_id,
        "type": "lease.acquired",
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": f"s-{event_id}",
        "client_id": "c1",
        "occurred_at": "2026-11-22T12:00:00.000Z",
        "seats_used": 1,
        "seats_total": 3,
        "metadata": {"user": "ann"},
        **changes,
    }


def test_one_bad_event_is_dropped_and_the_rest_of_its_message_is_stored(
    database_url, audit_client, capsys
):
    """PostgreSQL's jsonb refuses NUL and unpaired surrogates, its integer columns refuse
    2**40: such an event is rejected on its own (logged, acknowledged), never retried
    until the whole message is dead-lettered."""
    events = [
        _event("good-1"),
        _event("nul", metadata={"user": "a\x00b"}),
        _event("surrogate", metadata={"host\ud800": "pc"}),
        _event("huge", seats_used=2**40),
        _event("good-2", type="lease.released"),
    ]
    data = json.dumps(events).encode()  # ensure_ascii: \u0000 and \ud800 escapes
    assert push_to_audit(audit_client, data).status_code == 200
    assert (
        push_to_audit(audit_client, data, "again").status_code == 200
    )  # redelivery: nothing added
    assert [r["event_id"] for r in event_log.list_events("acme")] == ["good-1", "good-2"]
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    rejected = [line for line in logged if line["message"] == "audit: invalid events acknowledged"]
    assert len(rejected) == 2 and len(rejected[0]["rejected"]) == 3
    assert all(
        f"'{eid}'" in " ".join(rejected[0]["rejected"]) for eid in ("nul", "surrogate", "huge")
    )
    stored = [line for line in logged if line["message"] == "audit stored"]
    assert [(s["inserted"], s["duplicates"], s["rejected"]) for s in stored] == [
        (2, 0, 3),
        (0, 2, 3),
    ]


def test_an_event_the_database_refuses_does_not_hold_back_its_batch(database_url):
    """Should an event the validation let through still be refused by PostgreSQL (data,
    not connection), the batch is stored event by event and only that event is dropped."""
    from seatlease.events import audit

    good = [audit.LeaseEvent.model_validate(_event(f"ok-{i}")) for i in range(3)]
    bad = audit.LeaseEvent.model_construct(**{**good[0].model_dump(), "event_id": "bad",
                                              "metadata": {"user": "a\x00b"}})  # fmt: skip
    rejected: list[str] = []
    assert audit.store([good[0], bad, good[1], good[2]], rejected) == 3
    assert len(rejected) == 1 and "'bad'" in rejected[0]
    assert sorted(r["event_id"] for r in event_log.list_events("acme")) == ["ok-0", "ok-1", "ok-2"]


def test_database_down_raises_then_the_retry_inserts_once(database_url, audit_client, monkeypatch):
    event = {
        "event_id": "evt-1",
        "type": "lease.acquired",
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": "s1",
        "client_id": "c1",
        "occurred_at": "2026-11-22T12:00:00.000Z",
        "seats_used": 1,
        "seats_total": 3,
        "metadata": {},
    }
    data = json.dumps([event]).encode()
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    down = push_to_audit(audit_client, data)
    assert down.status_code == 503  # not stored: a non-2xx makes Pub/Sub redeliver
    monkeypatch.setenv("DATABASE_URL", database_url)
    db.reset()
    assert push_to_audit(audit_client, data).status_code == 200
    assert push_to_audit(audit_client, data).status_code == 200
    assert [r["event_id"] for r in event_log.list_events("acme")] == ["evt-1"]


def test_a_binary_mode_cloudevent_from_eventarc_is_stored(database_url, audit_client):
    """Eventarc delivers Pub/Sub messages as binary-mode CloudEvents (ce-* headers, the
    Pub/Sub message as the JSON body): the same events, the same idempotent insert."""
    event = {
        "event_id": "evt-ce",
        "type": "lease.released",
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": "s1",
        "client_id": "c1",
        "occurred_at": "2026-11-22T12:00:00.000Z",
        "seats_used": 0,
        "seats_total": 3,
        "metadata": {"user": "ann"},
    }
    body = {
        "message": {"data": base64.b64encode(json.dumps([event]).encode()).decode(),
                    "messageId": "42"},
        "subscription": "projects/p/subscriptions/eventarc-sub",
    }  # fmt: skip
    headers = {
        "ce-id": "42",
        "ce-specversion": "1.0",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "ce-source": "//pubsub.googleapis.com/projects/p/topics/seat-events",
    }
    for _ in range(2):
        assert audit_client.post("/", json=body, headers=headers).status_code == 200
    rows = event_log.list_events("acme")
    assert [(r["event_id"], r["type"]) for r in rows] == [("evt-ce", "lease.released")]
