"""Webhook deliveries (seatlease.webhooks.deliver and functions/webhooks) on the real
PostgreSQL database, to a real HTTP receiver in a thread of this process
(tests/webhook_receiver.py). Every delivery a test checks is verified with the
``standardwebhooks`` library, the one receivers use."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import functions_framework
import pytest
from http_support import push_to_audit
from sqlalchemy import select, text
from standardwebhooks import Webhook
from webhook_receiver import Receiver, receiving

from seatlease.api import tokens
from seatlease.records import db
from seatlease.records import store as records
from seatlease.records.tables import webhook_deliveries, webhook_endpoints
from seatlease.webhooks import crypto, deliver, signing, store
from seatlease_cli.procs import free_port

REPO = Path(__file__).resolve().parent.parent
TABLES = "webhook_attempts, webhook_deliveries, webhook_endpoints"
T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


@pytest.fixture
def receiver(database_url, monkeypatch):
    """The private database without webhooks, tenants acme and globex, the local stack's
    URL allowance (a receiver on 127.0.0.1), a WEBHOOK_KEY, the cloud's first retry step
    (30 s), and the receiver."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    monkeypatch.setenv("WEBHOOK_RETRY_FIRST_SECONDS", "30")
    with db.get_engine().begin() as conn:
        conn.execute(
            text(
                "TRUNCATE webhook_attempts, webhook_deliveries, webhook_endpoints RESTART IDENTITY"
            )
        )
    records.create_tenant("acme")
    records.create_tenant("globex")
    with receiving() as served:
        yield served


def event(event_id: str, type: str = "lease.acquired", tenant: str = "acme", **extra) -> dict:
    return {
        "event_id": event_id,
        "type": type,
        "tenant_id": tenant,
        "license_id": "cad",
        "session_id": "s1",
        "client_id": "c1",
        "occurred_at": "2026-11-29T08:00:00.000Z",
        "seats_used": 1,
        "seats_total": 5,
        "metadata": {"user": "ann"},
        **extra,
    }


def verified(request, secret: str) -> dict:
    return Webhook(secret).verify(request.body, request.headers)


def row_of(event_id: str) -> dict:
    with db.get_engine().connect() as conn:
        found = conn.execute(
            select(webhook_deliveries).where(webhook_deliveries.c.event_id == event_id)
        )
        return dict(found.mappings().one())


def test_500_twice_then_200_gets_the_same_webhook_id_three_times(receiver: Receiver):
    receiver.statuses["/hook"] = [500, 500]
    endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    assert secret.startswith("whsec_")
    assert store.enqueue([event("evt-1")], now=T0) == 1

    assert deliver.deliver_due(T0)["retrying"] == 1
    first = row_of("evt-1")
    wait = (first["next_attempt_at"] - T0).total_seconds()
    assert 30 * 0.75 <= wait <= 30 * 1.25 + 1, wait  # the first step, jittered
    assert deliver.deliver_due(T0 + timedelta(seconds=5))["claimed"] == 0  # not due yet
    assert deliver.deliver_due(T0 + timedelta(minutes=1))["retrying"] == 1
    second = row_of("evt-1")
    wait = (second["next_attempt_at"] - T0 - timedelta(minutes=1)).total_seconds()
    assert 60 * 0.75 <= wait <= 60 * 1.25 + 1, wait  # doubled
    assert deliver.deliver_due(T0 + timedelta(minutes=5))["delivered"] == 1
    assert deliver.deliver_due(T0 + timedelta(hours=5))["claimed"] == 0  # delivered once

    got = receiver.at("/hook")
    assert [r.status for r in got] == [500, 500, 200]
    assert {r.headers["webhook-id"] for r in got} == {"evt-1"}
    for request in got:  # each attempt signed afresh, each verifies
        payload = verified(request, secret)
        assert payload["id"] == "evt-1" and payload["type"] == "lease.acquired"
        assert payload["data"]["metadata"] == {"user": "ann"}
    listed = store.deliveries("acme", endpoint["id"])
    assert [(x["attempt"], x["status"], x["state"]) for x in listed] == [
        (3, 200, "delivered"),
        (2, 500, "delivered"),
        (1, 500, "delivered"),
    ]
    assert listed[1]["error"] == "HTTP 500: nope" and listed[0]["error"] is None
    assert all(x["latency_ms"] >= 0 and x["at"] is not None for x in listed)


def test_the_v1a_signature_verifies_with_the_deployments_public_key(receiver: Receiver):
    store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-a")], now=T0)
    deliver.deliver_due(T0)
    (request,) = receiver.at("/hook")
    v1a = [s for s in request.headers["webhook-signature"].split() if s.startswith("v1a,")]
    assert len(v1a) == 1
    public = tokens.keyring().signing_key().private.public_key()
    content = signing.signed_content("evt-a", int(request.headers["webhook-timestamp"]),
                                     request.body)  # fmt: skip
    public.verify(base64.b64decode(v1a[0][4:]), content)  # raises if it does not verify


def test_a_retry_runs_on_the_real_clock_with_a_short_first_step(receiver, monkeypatch):
    """The local stack's schedule: a first step of a fraction of a second, and the third
    attempt comes within the same second or two."""
    monkeypatch.setenv("WEBHOOK_RETRY_FIRST_SECONDS", "0.2")
    receiver.statuses["/hook"] = [500, 500]
    _endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-rt")])
    started = time.monotonic()
    while row_of("evt-rt")["state"] == "pending" and time.monotonic() - started < 10:
        deliver.deliver_due()
        time.sleep(0.05)
    assert row_of("evt-rt")["state"] == "delivered"
    assert time.monotonic() - started < 5
    assert [r.status for r in receiver.at("/hook")] == [500, 500, 200]
    assert all(verified(r, secret)["id"] == "evt-rt" for r in receiver.at("/hook"))


@pytest.mark.parametrize("status", [400, 404, 410, 301])
def test_a_4xx_or_a_redirect_is_final_after_one_attempt(receiver: Receiver, status: int):
    receiver.statuses["/hook"] = [status]
    receiver.headers["/hook"] = {"Location": receiver.url("/elsewhere")}
    endpoint, _secret = store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-4")], now=T0)
    assert deliver.deliver_due(T0)["final"] == 1
    assert deliver.deliver_due(T0 + timedelta(days=1))["claimed"] == 0
    assert len(receiver.at("/hook")) == 1 and receiver.at("/elsewhere") == []
    row = row_of("evt-4")
    assert (row["state"], row["attempts"], row["last_status"]) == ("final", 1, status)
    assert (
        store.list_endpoints("acme")[0]["state"] == "ok"
    )  # one delivery's end, not the endpoint's
    assert store.deliveries("acme", endpoint["id"])[0]["status"] == status


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_408_429_and_5xx_are_retried_and_retry_after_is_heeded(receiver: Receiver, status):
    receiver.statuses["/hook"] = [status]
    receiver.headers["/hook"] = {"Retry-After": "600"}
    store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-r")], now=T0)
    assert deliver.deliver_due(T0)["retrying"] == 1
    row = row_of("evt-r")
    assert (row["state"], row["attempts"], row["last_status"]) == ("pending", 1, status)
    assert (row["next_attempt_at"] - T0).total_seconds() >= 600  # not the 30 s step
    assert deliver.deliver_due(T0 + timedelta(minutes=11))["delivered"] == 1


def test_a_timeout_is_retried(receiver: Receiver):
    receiver.delays["/slow"] = 1.5
    endpoint, secret = store.create_endpoint("acme", receiver.url("/slow"))
    store.enqueue([event("evt-t")], now=T0)
    started = time.monotonic()
    report = deliver.deliver_due(T0, timeout_seconds=0.4)
    assert report["retrying"] == 1 and time.monotonic() - started < 1.4
    row = row_of("evt-t")
    assert row["state"] == "pending" and row["last_status"] is None
    assert row["last_error"] == "timeout: no answer within 0.4 s"
    (attempt,) = store.deliveries("acme", endpoint["id"])
    assert attempt["status"] is None and 350 <= attempt["latency_ms"] < 1400
    receiver.delays["/slow"] = 0.0
    assert deliver.deliver_due(T0 + timedelta(hours=1), timeout_seconds=0.4)["delivered"] == 1
    receiver.wait_for("/slow", 2)
    assert {r.headers["webhook-id"] for r in receiver.at("/slow")} == {"evt-t"}
    assert verified(receiver.at("/slow")[-1], secret)["id"] == "evt-t"


def test_a_refused_connection_is_retried(receiver: Receiver):
    store.create_endpoint("acme", f"http://127.0.0.1:{free_port()}/hook")
    store.enqueue([event("evt-c")], now=T0)
    assert deliver.deliver_due(T0)["retrying"] == 1
    row = row_of("evt-c")
    assert row["last_error"] == "connection refused" and row["state"] == "pending"


def test_a_slow_endpoint_does_not_delay_a_fast_one(receiver: Receiver):
    """Another tenant's endpoint sleeps 3 s per request: while its first four (its whole
    concurrency) still wait, every one of the fast endpoint's 40 deliveries is done."""
    receiver.delays["/slow"] = 3.0
    store.create_endpoint("globex", receiver.url("/slow"))
    store.create_endpoint("acme", receiver.url("/fast"))
    store.enqueue([event(f"slow-{i}", tenant="globex") for i in range(8)], now=T0)
    store.enqueue([event(f"fast-{i}") for i in range(40)], now=T0)
    started = time.monotonic()
    done = threading.Thread(target=deliver.deliver_due, args=(T0,), kwargs={"budget_seconds": 3})
    done.start()
    fast = receiver.wait_for("/fast", 40, seconds=10)
    fast_done = max(r.answered for r in fast)
    slow_first = min(r.came for r in receiver.at("/slow"))
    assert not any(r.answered for r in receiver.at("/slow"))  # still waiting
    assert fast_done < slow_first + 3.0 and fast_done - started < 3.0
    done.join(timeout=20)
    assert receiver.most_active["/slow"] == deliver.PER_ENDPOINT_CONCURRENCY
    assert receiver.most_active["/fast"] <= deliver.PER_ENDPOINT_CONCURRENCY
    assert len({r.headers["webhook-id"] for r in fast}) == 40


def test_a_slow_send_at_a_runs_end_does_not_leave_a_fast_endpoint_idle(receiver: Receiver):
    """A run's budget ends while one endpoint's sends take 2 s: the run waits for them,
    and meanwhile goes on sending to the fast endpoint (what ended a run beside a slow
    endpoint was a pause of the fast one's deliveries). Alone, the fast endpoint's run
    ends with its budget: nothing is claimed after it."""
    receiver.delays["/slow"] = 2.0
    store.create_endpoint("acme", receiver.url("/fast"))
    store.create_endpoint("acme", receiver.url("/slow"))
    store.enqueue([event(f"e-{i}") for i in range(3000)], now=T0)  # owed to both
    started = time.monotonic()
    report = deliver.deliver_due(T0, budget_seconds=0.3, timeout_seconds=5.0)
    ended = time.monotonic()
    slow = receiver.at("/slow")
    assert len(slow) == deliver.PER_ENDPOINT_CONCURRENCY  # claimed before the budget ended
    slow_answered = max(r.answered for r in slow)
    fast_after = [r for r in receiver.at("/fast") if r.came > started + 0.6]
    assert fast_after, "the fast endpoint was idle while the run waited on the slow one"
    assert max(r.came for r in fast_after) > slow_answered - 0.5  # served to the end
    assert ended - started < 0.3 + 2 * 5.0  # the run's bound: its budget and two timeouts
    assert report["delivered"] == len(receiver.at("/fast")) + len(slow)
    assert receiver.most_active["/fast"] <= deliver.PER_ENDPOINT_CONCURRENCY

    # alone: the run ends with its budget (and its sends in flight)
    receiver.requests.clear()
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM webhook_endpoints WHERE url LIKE '%/slow'"))
    started = time.monotonic()
    deliver.deliver_due(T0, budget_seconds=0.3, timeout_seconds=5.0)
    assert receiver.at("/fast") and all(r.came < started + 0.6 for r in receiver.at("/fast"))


def test_two_runs_at_once_claim_each_delivery_once_and_keep_the_bound(receiver: Receiver):
    """Two instances (two engines, two threads) on one queue: SKIP LOCKED claims, the
    endpoint's concurrency counted across them, no delivery sent twice."""
    receiver.delays["/hook"] = 0.2
    store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event(f"e-{i}") for i in range(24)], now=T0)
    engines = [db.make_engine(os.environ["DATABASE_URL"]) for _ in range(2)]
    runs = [threading.Thread(target=deliver.deliver_due, args=(T0,), kwargs={"engine": engine})
            for engine in engines]  # fmt: skip
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=30)
    for engine in engines:
        engine.dispose()
    ids = [r.headers["webhook-id"] for r in receiver.at("/hook")]
    assert sorted(ids) == sorted(f"e-{i}" for i in range(24))
    assert receiver.most_active["/hook"] <= deliver.PER_ENDPOINT_CONCURRENCY


def test_after_three_days_of_failures_the_delivery_fails_and_the_endpoint_says_why(receiver):
    receiver.statuses["/hook"] = [503] * 3
    endpoint, _secret = store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-f")], now=T0)
    deliver.deliver_due(T0)
    deliver.deliver_due(T0 + timedelta(days=2, hours=23))
    row = row_of("evt-f")
    assert row["state"] == "pending"
    assert row["next_attempt_at"] <= T0 + timedelta(days=3)  # the last try at the window's end
    report = deliver.deliver_due(T0 + timedelta(days=3))
    assert report["failed"] == 1
    assert row_of("evt-f")["state"] == "failed"
    (listed,) = store.list_endpoints("acme")
    assert listed["state"] == "failing"
    assert "3 attempts over 3 days failed" in listed["failing_reason"]
    assert "HTTP 503" in listed["failing_reason"]
    since = listed["failing_since"] - (T0 + timedelta(days=3))
    assert timedelta(0) <= since < timedelta(seconds=1)  # the run's clock, from its start
    assert deliver.deliver_due(T0 + timedelta(days=9))["claimed"] == 0  # failed is the end
    # a later delivery that succeeds makes the endpoint ok again
    store.enqueue([event("evt-ok")], now=T0 + timedelta(days=4))
    deliver.deliver_due(T0 + timedelta(days=4))
    assert store.get_endpoint("acme", endpoint["id"])["state"] == "ok"


def test_an_unreadable_secret_holds_only_its_own_endpoints_deliveries(receiver, capsys):
    """A sealed secret copied onto another endpoint does not open there (bound to its
    endpoint): that endpoint's delivery waits, saying so without the reason (the
    operator's log has it); the other endpoint's goes out."""
    good, secret = store.create_endpoint("acme", receiver.url("/good"))
    bad, _ = store.create_endpoint("acme", receiver.url("/bad"))
    endpoints = webhook_endpoints
    with db.get_engine().begin() as conn:
        sealed = conn.execute(
            select(endpoints.c.secret_enc).where(endpoints.c.id == good["id"])
        ).scalar_one()
        conn.execute(
            endpoints.update().where(endpoints.c.id == bad["id"]).values(secret_enc=sealed)
        )
    store.enqueue([event("evt-u"), event("bad id")], now=T0)
    report = deliver.deliver_due(T0)
    assert (report["delivered"], report["retrying"], report["final"]) == (1, 2, 1)
    assert [verified(r, secret)["id"] for r in receiver.at("/good")] == ["evt-u"]
    assert receiver.at("/bad") == []
    waiting = [x for x in store.deliveries("acme", bad["id"]) if x["event_id"] == "evt-u"]
    assert waiting[0]["error"] == (
        "not sent: the endpoint's secret cannot be read; the operator is told"
    )
    assert any(
        json.loads(line).get("message", "").startswith("webhooks: an endpoint's secret")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{")
    )
    final = [x for x in store.deliveries("acme", good["id"]) if x["event_id"] == "bad id"]
    assert final[0]["state"] == "final" and final[0]["error"].startswith("not sent:")


RUN_DUE = """
import json, sys
from datetime import datetime
from seatlease.webhooks import deliver
now = datetime.fromisoformat(sys.argv[1]) if len(sys.argv) > 1 else None
print(json.dumps(deliver.deliver_due(now, budget_seconds=5)))
"""


def _run_in_new_process(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN_DUE, *args], cwd=REPO, env=dict(os.environ),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_new_process_sends_what_an_earlier_one_queued_or_claimed_and_died(receiver):
    _endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-q"), event("evt-d")], now=T0)
    # A run claims both, then dies before sending: nothing recorded, nothing sent.
    claimed = deliver.claim_due(T0, 10, 40)
    assert sorted(c.event_id for c in claimed) == ["evt-d", "evt-q"]
    db.reset()
    assert _run_in_new_process(T0.isoformat())["claimed"] == 0  # claimed: not due
    later = _run_in_new_process((T0 + timedelta(seconds=41)).isoformat())
    assert later["delivered"] == 2
    assert sorted(r.headers["webhook-id"] for r in receiver.at("/hook")) == ["evt-d", "evt-q"]
    assert all(verified(r, secret) for r in receiver.at("/hook"))
    # the dead run's claims are gone: recording under them changes nothing
    counts: dict = deliver.Counter()
    outcome = deliver.Outcome(T0, "delivered", 200, 1, None)
    deliver.record([(claimed[0], outcome)], 30.0, counts)
    assert counts["lost_claims"] == 1


def test_a_deleted_endpoints_send_in_flight_records_nothing(receiver: Receiver):
    endpoint, _secret = store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-x")], now=T0)
    (claimed,) = deliver.claim_due(T0, 10, 40)
    store.delete_endpoint("acme", endpoint["id"])
    outcome = deliver.send(claimed, 5.0, True, None)
    counts: dict = deliver.Counter()
    deliver.record([(claimed, outcome)], 30.0, counts)
    assert counts["lost_claims"] == 1 and outcome.status == 200


# -- the function ----------------------------------------------------------------------


@pytest.fixture
def push_client():
    return functions_framework.create_app("webhooks", "functions/webhooks/main.py").test_client()


@pytest.fixture
def retry_client():
    return functions_framework.create_app(
        "webhooks_retry", "functions/webhooks/main.py"
    ).test_client()


def test_the_push_queues_and_sends_and_a_redelivery_adds_nothing(receiver, push_client):
    _endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    data = json.dumps([event("evt-p1"), event("evt-p2", type="lease.released"),
                       event("evt-other", tenant="globex")]).encode()  # fmt: skip
    assert push_to_audit(push_client, data).status_code == 200
    assert push_to_audit(push_client, data, "again").status_code == 200
    got = receiver.wait_for("/hook", 2)
    assert sorted((verified(r, secret)["id"], verified(r, secret)["type"]) for r in got) == [
        ("evt-p1", "lease.acquired"),
        ("evt-p2", "lease.released"),
    ]
    time.sleep(0.2)
    assert len(receiver.at("/hook")) == 2


def test_a_malformed_push_is_acknowledged(receiver, push_client):
    assert push_to_audit(push_client, b"not json").status_code == 200
    assert push_to_audit(push_client, b'[{"event_id": "x"}]').status_code == 200


def test_a_database_outage_answers_503_then_the_retry_delivers_once(
    receiver, push_client, database_url, monkeypatch
):
    _endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    data = json.dumps([event("evt-o")]).encode()
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    assert push_to_audit(push_client, data).status_code == 503  # Pub/Sub redelivers
    monkeypatch.setenv("DATABASE_URL", database_url)
    db.reset()
    assert push_to_audit(push_client, data).status_code == 200
    assert push_to_audit(push_client, data).status_code == 200
    (request,) = receiver.wait_for("/hook", 1)
    assert verified(request, secret)["id"] == "evt-o"


def test_the_retry_run_sends_what_is_due_and_answers_503_on_an_outage(
    receiver, retry_client, database_url, monkeypatch
):
    store.create_endpoint("acme", receiver.url("/hook"))
    store.enqueue([event("evt-s")])
    answer = retry_client.post("/")
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["delivered"] == 1
    assert [r.headers["webhook-id"] for r in receiver.at("/hook")] == ["evt-s"]
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    down = retry_client.post("/")
    assert down.status_code == 503
    assert down.get_json()["error"]["code"] == "backend_unavailable"


def test_without_a_webhook_key_the_retry_run_is_a_503_and_the_push_still_queues(
    receiver, retry_client, push_client, monkeypatch
):
    """Sealed secrets cannot open without WEBHOOK_KEY: the retry run answers 503
    not_configured; the push still queues (no secret needed) and acknowledges, and once
    the key is back the delivery goes out."""
    _endpoint, secret = store.create_endpoint("acme", receiver.url("/hook"))
    key = os.environ["WEBHOOK_KEY"]
    monkeypatch.delenv("WEBHOOK_KEY")
    assert push_to_audit(push_client, json.dumps([event("evt-k")]).encode()).status_code == 200
    assert row_of("evt-k")["state"] == "pending" and receiver.at("/hook") == []
    down = retry_client.post("/")
    assert down.status_code == 503 and down.get_json()["error"]["code"] == "not_configured"
    monkeypatch.setenv("WEBHOOK_KEY", key)
    assert retry_client.post("/").get_json()["delivered"] == 1
    assert verified(receiver.at("/hook")[0], secret)["id"] == "evt-k"


def _certificate(folder: Path, name: str) -> tuple[str, str]:
    """A self-signed certificate for ``name`` (DNS only), trusted as its own CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(datetime.now(UTC) - timedelta(hours=1))
        .not_valid_after(datetime.now(UTC) + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return str(cert_file), str(key_file)


def test_https_goes_to_the_checked_address_with_the_urls_name_verified(
    receiver, tmp_path, monkeypatch
):
    """https://localhost:PORT: the connection goes to the address the check resolved,
    the TLS handshake names localhost (SNI) and the certificate must be for it. The same
    receiver at https://127.0.0.1:PORT (a certificate not for that address) is refused
    by the verification, as an untrusted certificate is: attempts to retry, never sent."""
    cert_file, key_file = _certificate(tmp_path, "localhost")
    monkeypatch.setenv("SSL_CERT_FILE", cert_file)  # the default context's trust store
    with receiving(tls=(cert_file, key_file)) as tls:
        _good, secret = store.create_endpoint("acme", f"https://localhost:{tls.port}/hook",
                                              event_types=["lease.acquired"])  # fmt: skip
        store.create_endpoint("globex", f"https://127.0.0.1:{tls.port}/hook")
        store.enqueue([event("evt-tls"), event("evt-ip", tenant="globex")], now=T0)
        report = deliver.deliver_due(T0)
        assert (report["delivered"], report["retrying"]) == (1, 1)
        (request,) = tls.at("/hook")
        assert request.headers["host"] == f"localhost:{tls.port}"
        assert verified(request, secret)["id"] == "evt-tls"
    assert row_of("evt-ip")["last_error"].startswith("TLS: IP address mismatch")
    monkeypatch.delenv("SSL_CERT_FILE")  # not trusted at all: refused the same way
    with receiving(tls=(cert_file, key_file)) as tls:
        store.create_endpoint("acme", f"https://localhost:{tls.port}/untrusted",
                              event_types=["lease.released"])  # fmt: skip
        store.enqueue([event("evt-untrusted", type="lease.released")], now=T0)
        deliver.deliver_due(T0)
        assert tls.at("/untrusted") == []
    assert row_of("evt-untrusted")["last_error"] == "TLS: self-signed certificate"
