"""Helpers for the HTTP contract tests (tests/test_http_*.py).

Each function is loaded exactly as Cloud Functions loads it,
``functions_framework.create_app(target, source)``, and called through Flask's test
client; tenants, API keys and licenses are created in the real database through
``seatlease.records.store``. Nothing is mocked.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import functions_framework
from werkzeug.test import TestResponse

from seatlease.api import runtime
from seatlease.clock import server_time_ms
from seatlease.events.pubsub import outbox_events
from seatlease.records import store
from seatlease.seats.keys import LicenseKeys, outbox_key, shard_of
from seatlease.seats.redisconn import get_redis

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = ("acquire", "heartbeat", "release")
_apps: dict[str, Any] = {}


def app(name: str) -> Any:
    """The function's functions-framework app, built once per process (create_app
    appends to sys.path on every call)."""
    if name not in _apps:
        _apps[name] = functions_framework.create_app(
            name, str(REPO / "functions" / name / "main.py")
        )
    return _apps[name]


@dataclass
class Tenant:
    tenant_id: str
    key: str
    prefix: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def new_tenant(tenant_id: str = "acme") -> Tenant:
    store.create_tenant(tenant_id)
    created = store.create_api_key(tenant_id)
    return Tenant(tenant_id, created.key, created.prefix)


def new_license(tenant: Tenant, license_id: str = "cad", seats: int = 2, **kwargs: Any) -> str:
    """Create a license as an admin does: in the database, then refresh the Redis cache
    (which may hold a negative entry from an earlier 404)."""
    store.create_license(tenant.tenant_id, license_id, seats=seats, **kwargs)
    runtime.refresh_license_cache(tenant.tenant_id, license_id)
    return license_id


def call(
    name: str,
    body: Any = None,
    *,
    tenant: Tenant | None = None,
    headers: dict[str, str] | None = None,
    data: str | bytes | None = None,
    content_type: str | None = "application/json",
    method: str = "POST",
) -> TestResponse:
    """One request to a function. ``body`` is sent as JSON, ``data`` as is."""
    all_headers = dict(tenant.auth if tenant else {})
    all_headers.update(headers or {})
    if data is None and body is not None:
        data = json.dumps(body)
    client = app(name).test_client()
    return client.open(
        "/", method=method, data=data, headers=all_headers, content_type=content_type
    )


def acquire(tenant: Tenant, license_id: str, client_id: str, **fields: Any) -> TestResponse:
    return call(
        "acquire", {"license_id": license_id, "client_id": client_id, **fields}, tenant=tenant
    )


def heartbeat(tenant: Tenant, license_id: str, session_id: str, **fields: Any) -> TestResponse:
    body = {"license_id": license_id, "session_id": session_id, **fields}
    return call("heartbeat", body, tenant=tenant)


def release(tenant: Tenant, license_id: str, session_id: str, **fields: Any) -> TestResponse:
    body = {"license_id": license_id, "session_id": session_id, **fields}
    return call("release", body, tenant=tenant)


def error_of(response: TestResponse, status: int, code: str) -> dict[str, Any]:
    """Assert the contract's error shape and return the ``error`` object."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    text = response.get_data(as_text=True)
    assert "Traceback" not in text and 'File "' not in text
    error = response.get_json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and len(error["message"]) > 5
    return error


def parse_time(text: str) -> datetime:
    assert text.endswith("Z"), text
    parsed = datetime.fromisoformat(text[:-1] + "+00:00")
    assert parsed.tzinfo == UTC or parsed.utcoffset().total_seconds() == 0
    return parsed


def redis_now() -> datetime:
    return datetime.fromtimestamp(server_time_ms(get_redis()) / 1000, UTC)


def live_sessions(tenant: Tenant, license_id: str) -> list[str]:
    """Session ids of every lease Redis holds for the license (live or not yet pruned)."""
    return list(get_redis().zrange(LicenseKeys.of(tenant.tenant_id, license_id).leases, 0, -1))


def outbox_types(tenant: Tenant, license_id: str) -> list[str]:
    """Event types in the shard outbox for this license, oldest first."""
    keys = LicenseKeys.of(tenant.tenant_id, license_id)
    return [
        event["type"]
        for event in outbox_events(get_redis(), keys.outbox)
        if event["license_id"] == license_id and event["tenant_id"] == tenant.tenant_id
    ]


def log_lines(out: str) -> list[dict[str, Any]]:
    """The JSON log lines among captured stdout."""
    lines = []
    for line in out.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def revoked_in_shard(tenant_id: str, license_id: str) -> list[str]:
    """Session ids of every ``lease.revoked`` event in the outbox of this license's shard,
    oldest first (any license of the shard: a stray revocation shows up too)."""
    outbox = outbox_key(shard_of(tenant_id, license_id))
    events = outbox_events(get_redis(), outbox)
    return [e["session_id"] for e in events if e["type"] == "lease.revoked"]


def post_json(
    url: str, body: dict, key: str | None = None, timeout: float = 30
) -> tuple[int, dict]:
    """POST ``body`` as JSON over a real socket (a served stack); returns the status and
    the JSON answer, or ``{"text": ...}`` for a plain-text one (the audit function's:
    Pub/Sub reads only its status)."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, {"text": raw.decode(errors="replace")}


@contextmanager
def serving(wsgi_app: Any, quiet: bool = False) -> Iterator[str]:
    """``wsgi_app`` on a free loopback port in a background thread (werkzeug, threaded);
    yields its base URL and stops the server after. ``quiet``: no access-log line per
    request (for tests that read the process's own output)."""
    from werkzeug.serving import make_server

    from seatlease_cli.devserver import RequestHandler  # what `seatlease local` serves with
    from seatlease_cli.procs import free_port

    class QuietHandler(RequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    port = free_port()
    handler = QuietHandler if quiet else RequestHandler
    server = make_server("127.0.0.1", port, wsgi_app, threaded=True, request_handler=handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# -- the audit function, fed as a Pub/Sub push subscription feeds it --------------------


def push_to_audit(client: Any, data: bytes, message_id: str = "1") -> TestResponse:
    """Deliver one message to the audit function's test client the way a Pub/Sub push
    subscription does (the raw push body, which functions-framework turns into the
    CloudEvent Eventarc would send)."""
    body = {
        "message": {"data": base64.b64encode(data).decode(), "messageId": message_id},
        "subscription": "projects/seatlease-test/subscriptions/audit",
    }
    return client.post("/", json=body)


def push_all_to_audit(client: Any, messages: list[Any]) -> None:
    """Every message pulled from the emulator's subscription, each acknowledged (200)."""
    for i, message in enumerate(messages):
        assert push_to_audit(client, message.data, str(i)).status_code == 200
