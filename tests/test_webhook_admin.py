"""The operator's webhook actions (issue 51): ``webhook_create``, ``webhook_list``,
``webhook_delete``, ``webhook_rotate_secret``, ``webhook_test``, ``webhook_deliveries``,
through the admin function's test client on real PostgreSQL and redis-server, with a real
HTTP receiver on loopback (the local stack's allowance, ``SEATLEASE_LOCAL=1``). Every
delivery is verified with ``standardwebhooks.Webhook(secret).verify``, never with the
project's own code.

The receiver and the fixtures here are shared with tests/test_webhook_cli.py and
tests/test_portal_webhooks.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from sqlalchemy import text
from standardwebhooks import Webhook, WebhookVerificationError

from seatlease.records import db
from seatlease.webhooks import crypto

REPO = Path(__file__).resolve().parent.parent


class Receiver:
    """A webhook receiver on 127.0.0.1 in a thread: it records each request (headers,
    body) and answers the next of ``statuses`` (then 200)."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests.append(
                        ({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every payload received, each verified by the Standard Webhooks library."""
        with self.lock:
            received = list(self.requests)
        return [Webhook(secret).verify(body, headers) for headers, body in received]


def receiving() -> Iterator[Receiver]:
    """A running ``Receiver``, stopped after (the ``receiver`` fixture's body)."""
    made = Receiver()
    made.thread.start()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiving()


def webhook_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The local stack's settings (loopback receivers allowed, an encryption key for the
    secrets), a retry a minute after a failure (so a test sees the failed attempt alone),
    and no webhook row left from another test (the ``webhook_env`` fixture's body)."""
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("WEBHOOK_RETRY_FIRST_SECONDS", "60")
    clear_webhooks()
    yield
    clear_webhooks()


@pytest.fixture
def webhook_env(stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from webhook_settings(monkeypatch)


def clear_webhooks() -> None:
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM webhook_attempts"))
        conn.execute(text("DELETE FROM webhook_deliveries"))
        conn.execute(text("DELETE FROM webhook_endpoints"))


def endpoint_rows() -> list[dict[str, Any]]:
    with db.get_engine().connect() as conn:
        return [dict(r._mapping) for r in conn.execute(text("SELECT * FROM webhook_endpoints"))]


@pytest.fixture(scope="module")
def admin_client():
    return functions_framework.create_app(
        "admin", str(REPO / "functions" / "admin" / "main.py")
    ).test_client()


def post(client, action: str, **fields):
    return client.post("/", json={"action": action, **fields})


def seeded(client, *tenants: str) -> None:
    """Each tenant with license ``cad``."""
    for tenant in tenants:
        assert post(client, "tenant.create", tenant_id=tenant).status_code == 201
        made = post(client, "license.create", tenant_id=tenant, license_id="cad", seats=2)
        assert made.status_code == 201, made.json


def refusal(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    error = response.json["error"]
    assert error["code"] == code and error["message"], error
    return error


# -- create, list, delete ----------------------------------------------------------------


def test_create_answers_the_secret_once_and_list_never(
    webhook_env, admin_client, receiver: Receiver, capsys
) -> None:
    seeded(admin_client, "acme")
    made = post(
        admin_client,
        "webhook_create",
        tenant_id="acme",
        url=receiver.url,
        event_types=["lease.released", "lease.acquired", "lease.acquired"],
        license_ids=["cad"],
    )
    assert made.status_code == 201, made.json
    secret = made.json["secret"]
    assert secret.startswith("whsec_")
    endpoint = made.json["endpoint"]
    assert endpoint["id"].startswith("whe_") and endpoint["tenant_id"] == "acme"
    assert endpoint["url"] == receiver.url and endpoint["state"] == "ok"
    assert sorted(endpoint["event_types"]) == ["lease.acquired", "lease.released"]
    assert endpoint["license_ids"] == ["cad"]
    assert endpoint["created_at"].endswith("Z")

    listed = post(admin_client, "webhook_list", tenant_id="acme")
    assert listed.status_code == 200
    assert [e["id"] for e in listed.json["endpoints"]] == [endpoint["id"]]
    assert listed.json["endpoints"][0]["pending"] == 0
    assert secret not in listed.get_data(as_text=True)
    assert "secret_enc" not in listed.get_data(as_text=True)
    # stored sealed, never as it was shown, and never logged
    [row] = endpoint_rows()
    assert secret not in json.dumps(row, default=str)
    assert secret not in capsys.readouterr().out


def test_a_private_address_is_refused_and_nothing_is_stored(
    webhook_env, admin_client, monkeypatch
) -> None:
    seeded(admin_client, "acme")
    for url in (
        "http://10.1.2.3/hook",
        "https://10.1.2.3/hook",
        "https://192.168.1.20/hook",
        "https://169.254.169.254/computeMetadata/v1/",
        "https://metadata.google.internal/",
        "https://[fe80::1]/hook",
        "ftp://example.com/hook",
        "https://user:pw@example.com/hook",
    ):
        error = refusal(post(admin_client, "webhook_create", tenant_id="acme", url=url), 400,
                        "invalid_request")  # fmt: skip
        assert [d["field"] for d in error["details"]] == ["url"], (url, error)
        assert error["details"][0]["problem"], url
    # In the cloud, loopback is refused too; on the local stack it is the receiver's place.
    monkeypatch.delenv("SEATLEASE_LOCAL")
    error = refusal(
        post(admin_client, "webhook_create", tenant_id="acme", url="http://127.0.0.1:9/hook"),
        400,
        "invalid_request",
    )
    assert error["details"][0]["field"] == "url"
    assert endpoint_rows() == []
    assert post(admin_client, "webhook_list", tenant_id="acme").json["endpoints"] == []


def test_bad_fields_are_400_and_unknown_things_404(
    webhook_env, admin_client, receiver: Receiver
) -> None:
    seeded(admin_client, "acme")
    error = refusal(
        post(
            admin_client,
            "webhook_create",
            tenant_id="acme",
            url=receiver.url,
            event_types=["lease.acquired", "lease.teleported"],
        ),
        400,
        "invalid_request",
    )
    assert "lease.teleported" in error["message"]
    assert [d["field"] for d in error["details"]] == ["event_types"]
    refusal(post(admin_client, "webhook_create", tenant_id="acme", url=receiver.url,
                 event_types="lease.acquired"), 400, "invalid_request")  # fmt: skip
    refusal(post(admin_client, "webhook_create", tenant_id="acme"), 400, "invalid_request")
    refusal(post(admin_client, "webhook_create", tenant_id="acme", url=receiver.url, extra=1),
            400, "invalid_request")  # fmt: skip
    missing = refusal(
        post(
            admin_client,
            "webhook_create",
            tenant_id="acme",
            url=receiver.url,
            license_ids=["cad", "cda"],
        ),
        404,
        "not_found",
    )
    assert "cda" in missing["message"]
    nobody = refusal(
        post(admin_client, "webhook_create", tenant_id="acm", url=receiver.url), 404, "not_found"
    )
    assert "acm" in nobody["message"]
    refusal(post(admin_client, "webhook_list", tenant_id="acm"), 404, "not_found")
    assert endpoint_rows() == []
    for action in ("webhook_delete", "webhook_rotate_secret", "webhook_test"):
        refusal(post(admin_client, action, tenant_id="acme", endpoint_id="whe_nope"), 404,
                "not_found")  # fmt: skip
        refusal(post(admin_client, action, tenant_id="acme"), 400, "invalid_request")
        refusal(post(admin_client, action, tenant_id="acme", endpoint_id="../x"), 400,
                "invalid_request")  # fmt: skip
    refusal(post(admin_client, "webhook_deliveries", tenant_id="acme", endpoint_id="whe_nope"),
            404, "not_found")  # fmt: skip
    refusal(post(admin_client, "webhook_deliveries", tenant_id="acme", limit=0), 400,
            "invalid_request")  # fmt: skip
    assert receiver.requests == []


def test_another_tenants_endpoint_is_not_found_and_stays(
    webhook_env, admin_client, receiver: Receiver
) -> None:
    seeded(admin_client, "acme", "beta")
    theirs = post(admin_client, "webhook_create", tenant_id="beta", url=receiver.url).json
    their_id = theirs["endpoint"]["id"]
    for action in ("webhook_delete", "webhook_rotate_secret", "webhook_test",
                   "webhook_deliveries"):  # fmt: skip
        mine = post(admin_client, action, tenant_id="acme", endpoint_id=their_id)
        made_up = post(admin_client, action, tenant_id="acme", endpoint_id="whe_made_up")
        refusal(mine, 404, "not_found")
        assert mine.json["error"]["code"] == made_up.json["error"]["code"]
        assert theirs["secret"] not in mine.get_data(as_text=True)
    assert post(admin_client, "webhook_list", tenant_id="acme").json["endpoints"] == []
    [still] = post(admin_client, "webhook_list", tenant_id="beta").json["endpoints"]
    assert still["id"] == their_id
    assert receiver.requests == []  # acme's "test" of beta's endpoint sent nothing


def test_delete_forgets_the_endpoint(webhook_env, admin_client, receiver: Receiver) -> None:
    seeded(admin_client, "acme")
    endpoint_id = post(admin_client, "webhook_create", tenant_id="acme",
                       url=receiver.url).json["endpoint"]["id"]  # fmt: skip
    gone = post(admin_client, "webhook_delete", tenant_id="acme", endpoint_id=endpoint_id)
    assert gone.status_code == 200, gone.json
    assert gone.json == {"tenant_id": "acme", "endpoint_id": endpoint_id, "deleted": True}
    assert post(admin_client, "webhook_list", tenant_id="acme").json["endpoints"] == []
    refusal(post(admin_client, "webhook_delete", tenant_id="acme", endpoint_id=endpoint_id),
            404, "not_found")  # fmt: skip
    refusal(post(admin_client, "webhook_test", tenant_id="acme", endpoint_id=endpoint_id),
            404, "not_found")  # fmt: skip
    assert receiver.requests == []


# -- test, deliveries, rotation ----------------------------------------------------------


def test_test_sends_a_signed_webhook_test_at_once(
    webhook_env, admin_client, receiver: Receiver
) -> None:
    """Even to an endpoint whose filter does not name ``webhook.test``: the test is for it."""
    seeded(admin_client, "acme")
    made = post(admin_client, "webhook_create", tenant_id="acme", url=receiver.url,
                event_types=["lease.acquired"]).json  # fmt: skip
    endpoint_id, secret = made["endpoint"]["id"], made["secret"]
    sent = post(admin_client, "webhook_test", tenant_id="acme", endpoint_id=endpoint_id)
    assert sent.status_code == 200, sent.json
    assert sent.json["state"] == "delivered"
    [attempt] = sent.json["attempts"]
    assert attempt["status"] == 200 and attempt["latency_ms"] >= 0 and attempt["error"] is None
    [payload] = receiver.verified(secret)
    assert payload["type"] == "webhook.test" and payload["tenant_id"] == "acme"
    assert payload["id"] == sent.json["event_id"]
    headers, _body = receiver.requests[0]
    assert headers["webhook-id"] == sent.json["event_id"]
    with pytest.raises(WebhookVerificationError):  # a wrong secret does not verify it
        Webhook(crypto.new_secret()).verify(receiver.requests[0][1], headers)
    assert secret not in sent.get_data(as_text=True)


def test_deliveries_list_each_attempt_time_status_latency_error(
    webhook_env, admin_client, receiver: Receiver
) -> None:
    seeded(admin_client, "acme")
    made = post(admin_client, "webhook_create", tenant_id="acme", url=receiver.url).json
    endpoint_id, secret = made["endpoint"]["id"], made["secret"]
    receiver.statuses = [500]
    before = datetime.now(UTC) - timedelta(seconds=1)
    sent = post(admin_client, "webhook_test", tenant_id="acme", endpoint_id=endpoint_id)
    assert sent.status_code == 202, sent.json  # answered 500: retried on the schedule
    assert sent.json["state"] == "pending"
    assert [a["status"] for a in sent.json["attempts"]] == [500]

    listed = post(admin_client, "webhook_deliveries", tenant_id="acme", endpoint_id=endpoint_id)
    assert listed.status_code == 200, listed.json
    [attempt] = listed.json["attempts"]
    assert attempt["event_id"] == sent.json["event_id"] and attempt["type"] == "webhook.test"
    assert attempt["state"] == "pending" and attempt["status"] == 500
    assert attempt["endpoint_id"] == endpoint_id
    assert isinstance(attempt["latency_ms"], int) and attempt["latency_ms"] >= 0
    assert datetime.fromisoformat(attempt["at"].replace("Z", "+00:00")) >= before
    assert "payload" not in attempt
    everyone = post(admin_client, "webhook_deliveries", tenant_id="acme").json["attempts"]
    assert [a["event_id"] for a in everyone] == [sent.json["event_id"]]
    assert secret not in listed.get_data(as_text=True)
    assert [p["type"] for p in receiver.verified(secret)] == ["webhook.test"]


def test_rotate_secret_answers_the_new_one_once_and_both_sign_a_while(
    webhook_env, admin_client, receiver: Receiver
) -> None:
    seeded(admin_client, "acme")
    made = post(admin_client, "webhook_create", tenant_id="acme", url=receiver.url).json
    endpoint_id, old = made["endpoint"]["id"], made["secret"]
    rotated = post(admin_client, "webhook_rotate_secret", tenant_id="acme", endpoint_id=endpoint_id)
    assert rotated.status_code == 200, rotated.json
    new = rotated.json["secret"]
    assert new.startswith("whsec_") and new != old
    until = datetime.fromisoformat(rotated.json["old_secret_until"].replace("Z", "+00:00"))
    assert timedelta(hours=23) < until - datetime.now(UTC) <= timedelta(hours=24)
    listed = post(admin_client, "webhook_list", tenant_id="acme")
    assert new not in listed.get_data(as_text=True) and old not in listed.get_data(as_text=True)
    assert listed.json["endpoints"][0]["old_secret_until"] == rotated.json["old_secret_until"]

    sent = post(admin_client, "webhook_test", tenant_id="acme", endpoint_id=endpoint_id)
    assert sent.json["state"] == "delivered", sent.json
    # a receiver still on the old secret and one on the new both verify it
    assert [p["id"] for p in receiver.verified(old)] == [sent.json["event_id"]]
    assert [p["id"] for p in receiver.verified(new)] == [sent.json["event_id"]]
