"""The local stack heals as a supervisor would and loses no audit event, against real
components: a private PostgreSQL that goes down for 30 s under a running stack, the
stack's own redis-server and Pub/Sub emulator killed with SIGKILL, and the audit function
served by the Functions Framework with its database down."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import hcl2
import pytest
from http_support import post_json as post
from procs import start_postgres

from seatlease.events import reaper
from seatlease.records import db, event_log, store
from seatlease.seats import redisconn
from seatlease_cli.localstack import (
    AUDIT_DELIVERY,
    DEMO_LICENSE,
    DEMO_TENANT,
    PROJECT,
    LocalStack,
)
from seatlease_cli.procs import Proc, free_port, port_open

REPO = Path(__file__).resolve().parent.parent
PUBSUB_MODULE = REPO / "terraform" / "modules" / "pubsub"
OUTAGE_SECONDS = 30


# -- helpers ------------------------------------------------------------------------


def acquire(stack_state: dict, client_id: str) -> str:
    status, lease = post(
        f"{stack_state['base_url']}/acquire",
        {"license_id": DEMO_LICENSE, "client_id": client_id},
        stack_state["api_key"],
    )
    assert status == 201, lease
    return lease["session_id"]


def release(stack_state: dict, session_id: str) -> None:
    status, body = post(
        f"{stack_state['base_url']}/release",
        {"license_id": DEMO_LICENSE, "session_id": session_id},
        stack_state["api_key"],
    )
    assert status == 200 and body["released"] is True, body


def audited(sessions: set[str], types: set[str], timeout: float) -> set[tuple[str, str]]:
    """Wait until each session has an event of each type in the audit table; returns
    the (session, type) pairs still missing."""
    wanted = {(s, t) for s in sessions for t in types}
    deadline = time.monotonic() + timeout
    while True:
        stored = {(e["session_id"], e["type"]) for e in event_log.list_events(DEMO_TENANT)}
        if wanted <= stored or time.monotonic() > deadline:
            return wanted - stored
        time.sleep(0.5)


def json_lines(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


class Output:
    """Everything the stack printed so far (capsys hands out each piece once)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys, self.out, self.err = capsys, "", ""

    def read(self) -> Output:
        got = self.capsys.readouterr()
        self.out += got.out
        self.err += got.err
        return self

    def warnings(self, text: str) -> list[dict]:
        return [
            e
            for e in json_lines(self.read().out)
            if e.get("severity") == "WARNING" and text in e.get("message", "")
        ]


def wait_for(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.1)


def unquote(value):
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def hcl_blocks(path: Path, kind: str) -> dict[tuple[str, ...], dict]:
    """``resource``/``variable``/``module`` blocks of one .tf file by their labels
    (python-hcl2 >= 8 keeps the quotes of labels and strings)."""
    with path.open(encoding="utf-8") as fh:
        doc = hcl2.load(fh)
    found: dict[tuple[str, ...], dict] = {}
    for entry in doc.get(kind, []):
        for first, body in entry.items():
            if kind == "resource":
                for second, inner in body.items():
                    found[(unquote(first), unquote(second))] = inner
            else:
                found[(unquote(first),)] = body
    return found


def start_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs) -> LocalStack:
    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC", "CLOUD_SQL_INSTANCE"):
        os.environ.pop(var, None)
    redisconn.reset()
    db.reset()
    reaper.reset()  # publish to this stack's emulator
    return LocalStack(port=free_port(), say=lambda _line: None, **kwargs)


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[Proc]:
    """A PostgreSQL of our own (the machine's server is shared): this one goes down."""
    handle = start_postgres()
    engine = db.make_engine(handle.url)
    store.upgrade(engine)
    engine.dispose()
    yield handle
    handle.stop()


# -- the delivery policy ------------------------------------------------------------


def test_the_local_audit_delivery_policy_is_terraforms():
    """One policy: AUDIT_DELIVERY holds the audit subscription's values in
    terraform/modules/pubsub (backoff, attempts, ack deadline), and no caller of the
    module overrides them."""
    resources = hcl_blocks(PUBSUB_MODULE / "main.tf", "resource")
    audit = resources[("google_pubsub_subscription", "audit")]
    (retry,) = audit["retry_policy"]
    assert unquote(retry["minimum_backoff"]) == f"{AUDIT_DELIVERY.minimum_backoff_seconds}s"
    assert unquote(retry["maximum_backoff"]) == f"{AUDIT_DELIVERY.maximum_backoff_seconds}s"
    (dead_letter,) = audit["dead_letter_policy"]
    assert dead_letter["max_delivery_attempts"] == "${var.max_delivery_attempts}"
    assert audit["ack_deadline_seconds"] == "${var.audit_ack_deadline_seconds}"
    variables = {
        labels[0]: body
        for tf in PUBSUB_MODULE.glob("*.tf")
        for labels, body in hcl_blocks(tf, "variable").items()
    }
    assert variables["max_delivery_attempts"]["default"] == AUDIT_DELIVERY.max_delivery_attempts
    assert variables["audit_ack_deadline_seconds"]["default"] == AUDIT_DELIVERY.ack_deadline_seconds
    callers = [
        body
        for tf in (REPO / "terraform").rglob("*.tf")
        if ".terraform" not in tf.parts
        for body in hcl_blocks(tf, "module").values()
        if unquote(body.get("source", "")).rstrip("/").endswith("/pubsub")
    ]
    assert callers, "the pubsub module is called somewhere"
    assert all(
        "max_delivery_attempts" not in body and "audit_ack_deadline_seconds" not in body
        for body in callers
    )


# -- a 30 s database outage ----------------------------------------------------------


def test_a_30_s_database_outage_loses_no_audit_event(
    tmp_path, monkeypatch, restore_environment, private_postgres, capsys
):
    """The stack's audit database (PostgreSQL) goes down for 30 s while leases come and
    go: every event reaches the audit table afterwards, without a manual replay, and
    nothing is left dead-lettered. The emulator retries each push every second and
    dead-letters it after Terraform's 10 attempts; the stack's supervisor stores the
    dead-lettered messages once the database is back (with Terraform's backoff instead,
    the emulator lost 4 of 60 events in CI and 30 of 62 here under CPU load: see
    seatlease_cli.localstack.AuditDelivery)."""
    os.environ["DATABASE_URL"] = private_postgres.url
    output = Output(capsys)
    stack = start_stack(tmp_path, monkeypatch, reaper_interval=0.5)
    try:
        state = stack.start()
        from google.cloud import pubsub_v1

        subscriber = pubsub_v1.SubscriberClient()
        topic = os.environ["PUBSUB_TOPIC"]
        push = subscriber.get_subscription(
            subscription=subscriber.subscription_path(PROJECT, f"{topic}-audit")
        )
        assert not type(push).pb(push).HasField("retry_policy")  # the emulator's loses messages
        assert push.dead_letter_policy.max_delivery_attempts == 10
        assert push.ack_deadline_seconds == 60
        # Before: the pipeline works (and the API key is in Redis's cache, so acquire
        # keeps working without the database).
        first = acquire(state, "before")
        release(state, first)
        assert not audited({first}, {"lease.acquired", "lease.released"}, timeout=30)

        private_postgres.halt()
        assert not port_open(int(private_postgres.url.rsplit(":", 1)[1].split("/")[0]))
        sessions: set[str] = set()
        down_until = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < down_until:
            session = acquire(state, f"during-{len(sessions)}")
            release(state, session)
            sessions.add(session)
            time.sleep(1)
        private_postgres.restart()

        # Messages pushed in the last 10 s of the outage are retried until they succeed;
        # the others were dead-lettered and come back with the supervisor's next replay
        # (every 5 s). The limit only bounds a broken run.
        missing = audited(sessions, {"lease.acquired", "lease.released"}, timeout=120)
        assert not missing, f"{len(missing)} of {2 * len(sessions)} events never stored"
        assert len(sessions) >= 20
        assert not [line for line in output.read().out.splitlines() if "could not replay" in line]
        hold = subscriber.pull(
            request={
                "subscription": subscriber.subscription_path(PROJECT, f"{topic}-dead-letter-hold"),
                "max_messages": 100,
                "return_immediately": True,
            },
            timeout=10,
        )
        assert not hold.received_messages, "nothing is left dead-lettered"

        # A message the emulator dead-lettered is stored by the supervisor's next replay
        # (only a replay reads the dead-letter topic), which says so in a WARNING line.
        publisher = pubsub_v1.PublisherClient()
        event = {"event_id": f"dead-{time.time_ns()}", "type": "lease.acquired",
                 "tenant_id": DEMO_TENANT, "license_id": DEMO_LICENSE, "session_id": "dead",
                 "occurred_at": "2026-11-23T12:00:00Z"}  # fmt: skip
        publisher.publish(
            publisher.topic_path(PROJECT, f"{topic}-dead-letter"), json.dumps([event]).encode()
        ).result(timeout=30)
        assert not audited({"dead"}, {"lease.acquired"}, timeout=30)
        replayed = "stored the events the emulator dead-lettered"
        wait_for(lambda: output.warnings(replayed), 10, "the replay said so")
        assert sum(line["inserted"] for line in output.warnings(replayed)) >= 1
    finally:
        stack.stop()


# -- healing -------------------------------------------------------------------------


def test_the_stack_restarts_a_dead_redis_server_and_emulator(
    tmp_path, monkeypatch, restore_environment, capsys
):
    """kill -9 of the redis-server, then of the emulator, the stack started; then the
    emulator loses its topics (as when it restarts): each time the stack heals within
    seconds, says so in one JSON WARNING line, and acquire, the reaper and the audit
    trail work again."""
    output = Output(capsys)
    stack = start_stack(tmp_path, monkeypatch, reaper_interval=0.5)
    try:
        state = stack.start()
        redis, emulator = stack.services["redis-server"], stack.services["Pub/Sub emulator"]
        held = acquire(state, "before-redis-dies")
        assert not audited({held}, {"lease.acquired"}, timeout=30)

        redis.kill()
        wait_for(lambda: output.warnings("redis-server died"), 5, "redis-server restarted")
        assert redis.alive() and redis.url == os.environ["REDIS_URL"]
        (line,) = output.warnings("redis-server died")
        assert line["service"] == "redis-server"
        # Its data came back (append-only file): the lease is still there.
        status, body = post(
            f"{state['base_url']}/admin", {"action": "status", "tenant_id": DEMO_TENANT}
        )
        assert status == 200, body
        (tour,) = [lic for lic in body["licenses"] if lic["license_id"] == DEMO_LICENSE]
        assert [lease["session_id"] for lease in tour["leases"]] == [held]
        release(state, held)
        after_redis = acquire(state, "after-redis-restart")
        release(state, after_redis)
        status, _ = post(f"{state['base_url']}/reaper", {})
        assert status == 200
        assert not audited({held, after_redis}, {"lease.acquired", "lease.released"}, 30)

        emulator.kill()
        # The JVM takes a few seconds to start; then the topics are created again.
        wait_for(lambda: output.warnings("created the Pub/Sub topics"), 30, "emulator healed")
        assert emulator.alive() and emulator.url == os.environ["PUBSUB_EMULATOR_HOST"]
        assert len(output.warnings("Pub/Sub emulator died")) == 1
        after_emulator = acquire(state, "after-emulator-restart")
        release(state, after_emulator)
        assert not audited({after_emulator}, {"lease.acquired", "lease.released"}, 30)

        # The emulator forgets everything (as after a restart the stack did not do).
        from google.cloud import pubsub_v1

        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        topic = os.environ["PUBSUB_TOPIC"]
        for name in (f"{topic}-audit", f"{topic}-dead-letter-hold"):
            subscriber.delete_subscription(subscription=subscriber.subscription_path(PROJECT, name))
        for name in (topic, f"{topic}-dead-letter"):
            publisher.delete_topic(topic=publisher.topic_path(PROJECT, name))
        lost = {topic, f"{topic}-dead-letter", f"{topic}-audit", f"{topic}-dead-letter-hold"}

        def recreated() -> set[str]:  # by the heals after the emulator's restart
            lines = output.warnings("created the Pub/Sub topics")[1:]
            return {name for line in lines for name in line["recreated"]}

        wait_for(lambda: recreated() == lost, 10, "topics and subscriptions recreated")
        last = acquire(state, "after-topics-lost")
        release(state, last)
        assert not audited({last}, {"lease.acquired", "lease.released"}, 30)
    finally:
        stack.stop()
    assert not redis.alive() and not emulator.alive()


# -- audit failures are JSON ---------------------------------------------------------


def test_an_audit_failure_is_one_json_error_line_and_a_retry(private_postgres, tmp_path):
    """The audit function served as in the cloud (the Functions Framework's server, in its
    own process), its database down: it answers non-2xx (Pub/Sub retries) and logs one
    JSON ERROR line carrying the stack trace; nothing prints a plain traceback on stdout
    or stderr. Once the database is back, the same delivery is stored."""
    port = free_port()
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    env = {
        **os.environ,
        "DATABASE_URL": private_postgres.url,
        "PYTHONUNBUFFERED": "1",
        "FUNCTION_SIGNATURE_TYPE": "http",  # as deployed: a push subscription, no trigger
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "functions_framework", "--target", "audit",
         "--source", str(REPO / "functions" / "audit" / "main.py"),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=stdout.open("wb"), stderr=stderr.open("wb"), env=env, cwd=tmp_path,
    )  # fmt: skip
    event = {
        "event_id": f"audit-down-{time.time_ns()}",
        "type": "lease.acquired",
        "tenant_id": "t-audit-down",
        "license_id": "lic",
        "session_id": "s1",
        "occurred_at": "2026-01-01T00:00:00Z",
    }
    push = {
        "message": {
            "data": base64.b64encode(json.dumps([event]).encode()).decode(),
            "messageId": "m-1",
            "publishTime": "2026-01-01T00:00:00Z",
        },
        "subscription": "projects/p/subscriptions/seat-events-audit",
    }
    url = f"http://127.0.0.1:{port}/projects/p/topics/seat-events"
    try:
        wait_for(lambda: port_open(port), 30, "the audit function serving")
        private_postgres.halt()
        try:
            down, _ = post(url, push)
        finally:
            private_postgres.restart()
        back, _ = post(url, push)
    finally:
        server.terminate()
        server.wait(timeout=30)
    out, err = stdout.read_text(), stderr.read_text()
    assert not 200 <= down < 300, "Pub/Sub must retry"
    assert back == 200
    lines = (out + err).splitlines()
    assert not [line for line in lines if line.lstrip().startswith("Traceback")], err
    errors = [e for e in json_lines(out + err) if e.get("severity") == "ERROR"]
    assert len(errors) == 1, out + err
    (entry,) = errors
    assert entry["message"] == "audit: message not stored; Pub/Sub will retry it"
    assert entry["message_id"] == "m-1" and entry["error"]
    assert entry["stack_trace"].startswith("Traceback (most recent call last):")
    engine = db.make_engine(private_postgres.url)
    try:
        stored = event_log.list_events("t-audit-down", engine=engine)
    finally:
        engine.dispose()
    assert [e["event_id"] for e in stored] == [event["event_id"]]
