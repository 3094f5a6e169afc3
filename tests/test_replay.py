"""``seatlease audit replay-dead-letters`` against the real Pub/Sub emulator and real
PostgreSQL: stored once, duplicates skipped, malformed messages acknowledged, and nothing
acknowledged when the database cannot take the events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from seatlease.events.pubsub import encode_messages
from seatlease.records import db, event_log
from seatlease_cli import main
from seatlease_cli.procs import Proc, start_pubsub_emulator

PROJECT = "seatlease-replay"


@pytest.fixture(scope="module")
def emulator() -> Iterator[Proc]:
    handle = start_pubsub_emulator(PROJECT)
    yield handle
    handle.stop()


class DeadLetters:
    """A topic and its subscription on the emulator (10 s ack deadline, the minimum)."""

    def __init__(self) -> None:
        from google.cloud import pubsub_v1

        name = f"dead-{uuid.uuid4().hex[:8]}"
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()
        self.topic = self.publisher.topic_path(PROJECT, name)
        self.subscription = self.subscriber.subscription_path(PROJECT, f"{name}-sub")
        self.subscription_id = f"{name}-sub"
        self.publisher.create_topic(name=self.topic)
        self.subscriber.create_subscription(
            name=self.subscription, topic=self.topic, ack_deadline_seconds=10
        )

    def publish(self, *payloads: bytes) -> None:
        for data in payloads:
            self.publisher.publish(self.topic, data).result(timeout=30)

    def waiting(self) -> int:
        """Messages deliverable now (pulled and handed straight back)."""
        resp = self.subscriber.pull(
            request={
                "subscription": self.subscription,
                "max_messages": 100,
                "return_immediately": True,
            },
            timeout=10,
        )
        ack_ids = [m.ack_id for m in resp.received_messages]
        if ack_ids:
            self.subscriber.modify_ack_deadline(
                subscription=self.subscription, ack_ids=ack_ids, ack_deadline_seconds=0
            )
        return len(ack_ids)


@pytest.fixture
def dead_letters(emulator: Proc, monkeypatch: pytest.MonkeyPatch) -> DeadLetters:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", emulator.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    return DeadLetters()


def events(prefix: str, n: int) -> list[dict]:
    return [
        {
            "event_id": f"{prefix}-{i}",
            "type": "lease.acquired",
            "tenant_id": "acme",
            "license_id": "cad",
            "session_id": f"{prefix}s{i}",
            "client_id": f"c{i}",
            "occurred_at": "2026-11-20T09:00:00.000Z",
            "seats_used": i + 1,
            "seats_total": 500,
            "metadata": {"host": f"ws-{i}"},
        }
        for i in range(n)
    ]


def replay(capsys, subscription: str, *extra: str) -> tuple[int, str, str]:
    code = main(["audit", "replay-dead-letters", "--subscription", subscription, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_replay_stores_once_and_empties_the_subscription(database_url, dead_letters, capsys):
    old, new = events("old", 30), events("new", 150)
    assert event_log.insert_events(old) == 30  # stored before the audit function gave up
    (duplicate,) = encode_messages(old)
    first, second = encode_messages(new, per_message=100)  # 100 + 50 events
    good, bad = events("mix", 2)
    bad["metadata"] = {"host": "ws\x00"}  # jsonb refuses NUL: this event alone is dropped
    mixed = json.dumps([good, bad]).encode()
    dead_letters.publish(duplicate, b'{"event_id": "x"', first, second, mixed)

    code, out, err = replay(capsys, dead_letters.subscription_id, "--project", PROJECT)

    assert code == 0, err
    assert out.strip() == (
        f"replayed 4 message(s) from {dead_letters.subscription}: 181 events, "
        "151 inserted, 30 already stored; 1 malformed, 1 invalid event(s) dropped"
    )
    assert "1 invalid event(s) acknowledged and dropped:" in err and "'mix-1'" in err
    assert "1 malformed message(s) acknowledged and dropped:" in err
    assert "message data is not JSON" in err and '{"event_id": "x"' in err
    rows = event_log.list_events("acme")
    assert sorted(r["event_id"] for r in rows) == sorted(e["event_id"] for e in old + new + [good])
    stored = {r["event_id"]: r for r in rows}
    assert stored["new-149"]["metadata"] == {"host": "ws-149"}
    assert stored["new-149"]["seats_used"] == 150
    # Acknowledged, not merely pulled: after the 10 s ack deadline nothing comes back.
    assert dead_letters.waiting() == 0
    time.sleep(11)
    assert dead_letters.waiting() == 0
    code, out, _ = replay(capsys, dead_letters.subscription, "--json")  # full path form
    assert code == 0 and json.loads(out)["messages"] == 0


def test_database_down_acknowledges_nothing(dead_letters, capsys, monkeypatch):
    dead_letters.publish(*encode_messages(events("a", 120), per_message=100))
    monkeypatch.setenv("DATABASE_URL", "postgresql+pg8000://postgres@127.0.0.1:1/none")
    monkeypatch.delenv("CLOUD_SQL_INSTANCE", raising=False)
    db.reset()
    try:
        code, out, err = replay(capsys, dead_letters.subscription_id)
    finally:
        db.reset()
    assert code == 5 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("seatlease: cannot reach")
    assert dead_letters.waiting() == 2


def test_failed_insert_hands_the_batch_back(dead_letters, capsys, monkeypatch, tmp_path):
    """The database fails after the messages were pulled (here: no schema): the batch is
    handed back to Pub/Sub at once (ack deadline 0), not acknowledged."""
    dead_letters.publish(*encode_messages(events("b", 10)))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    db.reset()
    try:
        code, _out, err = replay(capsys, dead_letters.subscription_id, "--max", "5")
    finally:
        db.reset()
    assert code == 5 and "no such table: " in err  # the audit path reads the schema first
    assert "stored 0 events from 0 messages before that, nothing else acknowledged" in err
    assert len(err.strip().splitlines()) == 1
    assert dead_letters.waiting() == 1


def test_limits_and_bad_input(database_url, dead_letters, capsys, monkeypatch):
    dead_letters.publish(*(json.dumps(e).encode() for e in events("one", 3)))  # 1 per message
    code, out, _ = replay(capsys, dead_letters.subscription_id, "--max", "2")
    assert code == 0 and "replayed 2 message(s)" in out
    assert dead_letters.waiting() == 1
    code, _, err = replay(capsys, "does-not-exist")
    assert code == 3 and err.strip().endswith("does-not-exist not found")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    code, _, err = replay(capsys, "sub")
    assert code == 2 and "no project" in err
    with pytest.raises(SystemExit):
        replay(capsys, "sub", "--max", "0")
