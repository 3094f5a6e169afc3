"""Issue 51's "Done means" on the local stack: ``LocalStack`` (its own redis-server, the
Pub/Sub emulator pushing the seat events into the audit and the webhooks functions, the
reaper and the webhooks_retry job on the local scheduler) on the test session's
PostgreSQL; a real receiver in this process (tests/webhook_receiver.py); every webhook
command is ``seatlease`` run as a second terminal runs it (a process of its own that finds
the stack by .seatlease/local.json); every delivery is verified by
``standardwebhooks.Webhook(secret).verify``, never by the project's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks
from webhook_receiver import Received, Receiver, receiving

from seatlease.api import auth, tenantlicenses, tenantlimits
from seatlease.events import reaper
from seatlease.records import db
from seatlease.seats import redisconn
from seatlease_cli.localstack import DEMO_LICENSE, DEMO_TENANT, LocalStack
from seatlease_cli.procs import free_port

pytestmark = pytest.mark.timeout(300)

REAPER_SECONDS = 1.0
ARRIVAL_SECONDS = 60  # the bound for an acquire's webhook to arrive
RETRY_SECONDS = 120  # ... and for the third attempt after two 500s
# The local stack's steps: 1 s then 2 s (+-25 %), each seen by the next webhooks_retry run
# (every 1.5 s): a third attempt about 3 to 7 s after the first.
LOCAL_RETRY_SECONDS = 20
# A full minute is judged once it is over and ALERT_SETTLE_SECONDS (10 locally) old;
# plus the scheduler's period and a loaded machine's slack.
NEARLY_FULL_SECONDS = 60 + 10 + 30
# What the stack's own process has in its environment and a second terminal has not.
STACK_ONLY_ENV = (
    "REDIS_URL",
    "DATABASE_URL",
    "WEBHOOK_KEY",
    "SEATLEASE_LOCAL",
    "PUBSUB_EMULATOR_HOST",
    "WEBHOOK_RETRY_FIRST_SECONDS",
    "ALERT_SETTLE_SECONDS",
)


@dataclass
class Local:
    base: str
    key: str
    folder: Path
    receiver: Receiver

    def seatlease(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """``seatlease ARGS`` in a second terminal in the stack's folder."""
        env = {k: v for k, v in os.environ.items() if k not in STACK_ONLY_ENV}
        done = subprocess.run(
            [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())",
             *args],
            env=env, capture_output=True, text=True, timeout=60, cwd=self.folder,
        )  # fmt: skip
        if ok:
            assert done.returncode == 0, (done.stdout, done.stderr)
        return done

    def create(self, path: str, *flags: str) -> tuple[str, str]:
        """``webhook create`` for the receiver's ``path``: the endpoint id and its secret."""
        url = self.receiver.url(path)
        done = self.seatlease("webhook", "create", "--tenant", DEMO_TENANT, "--url", url, *flags)
        secret = done.stdout.strip().splitlines()[-1]
        assert secret.startswith("whsec_"), done.stdout
        endpoint_id = next(w for w in done.stdout.split() if w.startswith("whe_"))
        return endpoint_id, secret

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.base}/{path}",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def acquire(self, license_id: str, client_id: str) -> str:
        status, lease = self.post("acquire", {"license_id": license_id, "client_id": client_id})
        assert status == 201, lease
        return lease["session_id"]

    def release(self, license_id: str, session_id: str) -> None:
        status, body = self.post("release", {"license_id": license_id, "session_id": session_id})
        assert status == 200 and body["released"] is True, body


def forget_cached() -> None:
    auth.forget_all()
    tenantlimits.forget_all()
    tenantlicenses.forget_all()
    reaper.reset()
    redisconn.reset()
    db.reset()


@pytest.fixture(scope="module")
def local(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """One local stack and one receiver for the module, the stack in a folder of its own."""
    folder = tmp_path_factory.mktemp("webhooks-stack")
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.chdir(folder)
    for var in ("REDIS_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC", "CLOUD_SQL_INSTANCE",
                "SEATLEASE_ADMIN_URL", "LOG_LEVEL", "WEBHOOK_KEY", "SEATLEASE_LOCAL",
                "WEBHOOK_RETRY_FIRST_SECONDS", "ALERT_SETTLE_SECONDS"):  # fmt: skip
        os.environ.pop(var, None)
    os.environ["DATABASE_URL"] = postgres_url
    forget_cached()
    stack = LocalStack(port=free_port(), reaper_interval=REAPER_SECONDS, say=lambda _line: None)
    try:
        with receiving() as receiver:
            state = stack.start()
            yield Local(state["base_url"], state["api_key"], folder, receiver)
    finally:
        stack.stop()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        forget_cached()


def verified(secret: str, request: Received) -> dict[str, Any]:
    """The payload, as a receiver's standardwebhooks library verifies it (raises if not)."""
    return standardwebhooks.Webhook(secret).verify(request.body, request.headers)


def until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, f"{what}: not within {seconds} s"
            return found
        time.sleep(0.2)


def of_type(local: Local, path: str, secret: str, etype: str, **match: Any) -> list[dict]:
    """The verified payloads of ``etype`` the receiver answered at ``path``."""
    payloads = [verified(secret, r) for r in local.receiver.at(path) if r.answered]
    return [
        p
        for p in payloads
        if p["type"] == etype and all(p["data"].get(k, p.get(k)) == v for k, v in match.items())
    ]


def test_the_stack_is_configured_for_local_webhooks(local):
    """The stack's own key in its folder (0600), the local allowance and first step."""
    key_file = local.folder / ".seatlease" / "webhook-key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert os.environ["WEBHOOK_KEY"] == key_file.read_text().strip()
    assert os.environ["SEATLEASE_LOCAL"] == "1"
    assert os.environ["WEBHOOK_RETRY_FIRST_SECONDS"] == "1"


def test_an_acquire_and_a_release_arrive_signed_within_60_s(local):
    endpoint_id, secret = local.create("/hook")
    started = time.monotonic()
    session = local.acquire(DEMO_LICENSE, "laptop-webhook")
    local.release(DEMO_LICENSE, session)

    def both() -> list[dict]:
        found = [
            of_type(local, "/hook", secret, kind, session_id=session)
            for kind in ("lease.acquired", "lease.released")
        ]
        return found if all(found) else []

    acquired, released = until(both, ARRIVAL_SECONDS, "lease.acquired and lease.released")
    assert time.monotonic() - started < ARRIVAL_SECONDS
    for payload in (acquired[0], released[0]):
        assert payload["tenant_id"] == DEMO_TENANT
        assert payload["license_id"] == DEMO_LICENSE
        assert payload["data"]["session_id"] == session
    # Ordered per lease, and the webhook-id is the event's id (a receiver dedupes by it).
    assert acquired[0]["sequence"] < released[0]["sequence"]
    ids = {r.headers["webhook-id"] for r in local.receiver.at("/hook")}
    assert {acquired[0]["id"], released[0]["id"]} <= ids
    # Signed with another secret, the same request is refused by the library.
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        other = "whsec_" + "QUJD" * 8
        verified(other, local.receiver.at("/hook")[0])
    assert endpoint_id.startswith("whe_")


def test_a_receiver_answering_500_twice_gets_the_same_webhook_id_a_third_time(local):
    local.receiver.statuses["/flaky"] = [500, 500]
    endpoint_id, secret = local.create(
        "/flaky", "--event", "lease.acquired", "--license", DEMO_LICENSE
    )
    session = local.acquire(DEMO_LICENSE, "laptop-flaky")
    try:
        tries = until(
            lambda: (
                [r for r in local.receiver.at("/flaky") if r.answered][:3]
                if len([r for r in local.receiver.at("/flaky") if r.answered]) >= 3
                else []
            ),
            ARRIVAL_SECONDS + RETRY_SECONDS,
            "a third attempt",
        )
    finally:
        local.release(DEMO_LICENSE, session)
    assert [r.status for r in tries] == [500, 500, 200]
    assert len({r.headers["webhook-id"] for r in tries}) == 1
    assert tries[2].came - tries[0].came < RETRY_SECONDS
    # In seconds, as the local stack's schedule starts at one (the cloud's 30 s first
    # step would take about 90 s: 30 then 60, each within +-25 %).
    assert tries[2].came - tries[0].came < LOCAL_RETRY_SECONDS, [r.came for r in tries]
    payloads = [verified(secret, r) for r in tries]  # each attempt signed afresh, all valid
    assert {p["type"] for p in payloads} == {"lease.acquired"}
    assert payloads[0]["data"]["session_id"] == session
    event_id = tries[0].headers["webhook-id"]

    # The deliveries log lists the attempts: status, latency, error, newest first.
    def logged() -> list[dict]:
        done = local.seatlease(
            "webhook", "deliveries", "--tenant", DEMO_TENANT, "--endpoint", endpoint_id, "--json"
        )
        rows = [row for row in json.loads(done.stdout) if row["event_id"] == event_id]
        return rows if len(rows) == 3 and all(r["at"] for r in rows) else []

    rows = until(logged, 10, "three attempts in webhook deliveries --json")
    assert sorted(row["at"] for row in rows) == [row["at"] for row in reversed(rows)]
    assert [row["status"] for row in reversed(rows)] == [500, 500, 200]
    assert all(row["type"] == "lease.acquired" for row in rows)
    assert all(isinstance(row["latency_ms"], int) and row["latency_ms"] >= 0 for row in rows)
    assert rows[0]["state"] == "delivered"


def test_a_private_address_is_refused_at_creation_and_nothing_is_sent(local):
    before = len(local.receiver.requests)
    done = local.seatlease(
        "webhook", "create", "--tenant", DEMO_TENANT, "--url", "http://10.1.2.3/hook", ok=False
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "url" in done.stderr and "private" in done.stderr.lower(), done.stderr
    assert "whsec_" not in done.stdout + done.stderr
    listed = json.loads(
        local.seatlease("webhook", "list", "--tenant", DEMO_TENANT, "--json").stdout
    )
    assert listed["endpoints"] and not [e for e in listed["endpoints"] if "10.1.2.3" in e["url"]]
    # An event now goes to the endpoints there are, and to no other.
    session = local.acquire(DEMO_LICENSE, "laptop-private")
    local.release(DEMO_LICENSE, session)
    until(lambda: len(local.receiver.requests) > before, ARRIVAL_SECONDS, "the /hook delivery")
    log = json.loads(
        local.seatlease("webhook", "deliveries", "--tenant", DEMO_TENANT, "--json").stdout
    )
    urls = {e["id"]: e["url"] for e in listed["endpoints"]}
    assert {row["endpoint_id"] for row in log} <= set(urls)


def test_a_license_filled_to_its_threshold_sends_nearly_full_once(local):
    license_id = "wh-full"
    local.seatlease("license", "create", "--tenant", DEMO_TENANT, "--license", license_id,
                    "--seats", "2", "--lease-seconds", "600")  # fmt: skip
    local.seatlease("license", "update", "--tenant", DEMO_TENANT, "--license", license_id,
                    "--alert-full-percent", "100", "--alert-full-minutes", "1")  # fmt: skip
    _, secret = local.create("/full", "--license", license_id)
    sessions = [local.acquire(license_id, f"cad-{n}") for n in range(2)]
    try:
        alerts = until(
            lambda: of_type(local, "/full", secret, "license.nearly_full"),
            NEARLY_FULL_SECONDS,
            "license.nearly_full",
        )
        # Several more runs of the alerts (every 1.5 s) while the license stays full.
        time.sleep(8)
        alerts = of_type(local, "/full", secret, "license.nearly_full")
        assert len(alerts) == 1, alerts
        assert len({r.headers["webhook-id"] for r in local.receiver.at("/full")
                     if verified(secret, r)["type"] == "license.nearly_full"}) == 1  # fmt: skip
        (alert,) = alerts
        assert alert["license_id"] == license_id and alert["tenant_id"] == DEMO_TENANT
        assert alert["data"]["seats_total"] == 2
        assert not of_type(local, "/full", secret, "license.capacity_ok")
    finally:
        for session in sessions:
            local.release(license_id, session)
