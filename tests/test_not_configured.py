"""A misconfigured deployment fails loudly, once (issue 22).

A function checks at cold start (when functions-framework loads its main.py) that its
environment names what it cannot work without (``seatlease.config``): one CRITICAL log
line says what is missing, and every call is then a 503 ``not_configured`` with
Retry-After (never a 500 with a stack trace, never a seat taken) until it is there.
Each function is loaded afresh with ``functions_framework.create_app``, as Cloud
Functions loads it, and called through Flask's test client against a real Redis and
PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import functions_framework
import pytest
from http_support import REPO, Tenant, error_of, live_sessions, log_lines, new_license

from seatlease import config
from seatlease.api import tokens

CLIENT_API = ("acquire", "heartbeat", "release")


def _load(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[Any, list[dict[str, Any]]]:
    """A cold start of ``name``: its test client and the log lines loading it wrote."""
    capsys.readouterr()
    app = functions_framework.create_app(name, str(REPO / "functions" / name / "main.py"))
    return app.test_client(), log_lines(capsys.readouterr().out)


def _critical(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["severity"] == "CRITICAL"]


def _body(name: str, license_id: str) -> dict[str, Any]:
    if name == "acquire":
        return {"license_id": license_id, "client_id": "laptop-1"}
    return {"license_id": license_id, "session_id": "s" * 32}


def _refused(response: Any) -> dict[str, Any]:
    error = error_of(response, 503, "not_configured")
    assert response.headers["Retry-After"] == str(error["retry_after_seconds"])
    assert int(response.headers["Retry-After"]) > 0
    # The client learns that it must wait, not which setting the operator forgot.
    assert "SEATLEASE" not in error["message"] and "REDIS" not in error["message"]
    return error


@pytest.fixture
def unsigned_env(monkeypatch: pytest.MonkeyPatch):
    """The signing settings taken away for one test (the session's key folder stays)."""
    yield monkeypatch
    tokens.reset()


@pytest.mark.parametrize("name", CLIENT_API)
def test_without_an_issuer_one_critical_line_then_every_call_is_a_503(
    name: str, acme: Tenant, unsigned_env: pytest.MonkeyPatch, capsys
) -> None:
    lic = new_license(acme, "cad", seats=1)
    unsigned_env.delenv("SEATLEASE_ISSUER")
    client, lines = _load(name, capsys)
    [line] = _critical(lines)
    assert line["message"].startswith(f"{name}: not configured")
    assert line["missing"] == ["SEATLEASE_ISSUER"] and "SEATLEASE_ISSUER" in line["message"]
    assert line["function"] == name
    for _ in range(3):  # every call, whatever it is: a valid one, a GET, no API key
        _refused(client.post(f"/{name}", json=_body(name, lic), headers=acme.auth))
        _refused(client.get(f"/{name}"))
        _refused(client.post(f"/{name}", json=_body(name, lic)))
    lines = log_lines(capsys.readouterr().out)
    assert not _critical(lines), "said once, at cold start"
    assert [line["status"] for line in lines] == [503] * 9
    assert all(line["outcome"] == "not_configured" for line in lines)
    assert all(line["not_configured"] == "missing SEATLEASE_ISSUER" for line in lines)
    assert not [line for line in lines if "stack_trace" in line]
    assert live_sessions(acme, lic) == []  # refused before anything happened
    # Fixed (here in place; in the cloud by a new revision): served again.
    unsigned_env.setenv("SEATLEASE_ISSUER", "http://seatlease.test")
    served = {"acquire": 201, "heartbeat": 410, "release": 200}  # no such session: gone
    response = client.post(f"/{name}", json=_body(name, lic), headers=acme.auth)
    assert response.status_code == served[name], response.get_data(as_text=True)


def test_without_a_key_source_acquire_names_both_ways_to_give_one(
    acme: Tenant, unsigned_env: pytest.MonkeyPatch, capsys
) -> None:
    lic = new_license(acme, "cad", seats=1)
    unsigned_env.delenv("SIGNING_KEYS_DIR")
    unsigned_env.delenv("SIGNING_KEY_SECRET", raising=False)
    tokens.reset()
    client, lines = _load("acquire", capsys)
    [line] = _critical(lines)
    assert line["missing"] == ["SIGNING_KEY_SECRET or SIGNING_KEYS_DIR"]
    _refused(client.post("/acquire", json=_body("acquire", lic), headers=acme.auth))
    assert live_sessions(acme, lic) == []


def test_the_keys_function_without_a_key_source(unsigned_env: pytest.MonkeyPatch, capsys) -> None:
    unsigned_env.delenv("SIGNING_KEYS_DIR")
    unsigned_env.delenv("SEATLEASE_ISSUER")  # not one of the keys function's needs
    tokens.reset()
    client, lines = _load("keys", capsys)
    [line] = _critical(lines)
    assert line["missing"] == ["SIGNING_KEY_SECRET or SIGNING_KEYS_DIR"]
    _refused(client.get("/keys"))
    [served] = log_lines(capsys.readouterr().out)
    assert served["status"] == 503 and served["severity"] == "ERROR"


@pytest.mark.parametrize(
    ("name", "remove", "expected"),
    [
        ("acquire", ["REDIS_URL"], ["REDIS_URL"]),
        ("heartbeat", ["DATABASE_URL"], ["DATABASE_URL or CLOUD_SQL_INSTANCE"]),
        ("release", ["REDIS_URL", "DATABASE_URL"],
         ["REDIS_URL", "DATABASE_URL or CLOUD_SQL_INSTANCE"]),
        ("admin", ["DATABASE_URL"], ["DATABASE_URL or CLOUD_SQL_INSTANCE"]),
        ("reaper", ["REDIS_URL"], ["REDIS_URL"]),
    ],
)  # fmt: skip
def test_deployed_without_its_backends_a_function_says_which(
    name: str, remove: list[str], expected: list[str], acme: Tenant,
    monkeypatch: pytest.MonkeyPatch, capsys,
) -> None:  # fmt: skip
    """On Cloud Run (K_SERVICE) the development defaults (a Redis on the loopback,
    SQLite) never stand in for a missing REDIS_URL or database."""
    monkeypatch.setenv("K_SERVICE", name)
    for variable in remove:
        monkeypatch.delenv(variable)
    client, lines = _load(name, capsys)
    [line] = _critical(lines)
    assert line["missing"] == expected
    response = client.post(f"/{name}", json=_body(name, "cad"), headers=acme.auth)
    _refused(response)


def test_cloud_sql_without_its_credentials(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("K_SERVICE", "acquire")
    monkeypatch.setenv("REDIS_URL", "redis://10.0.0.3:6379/0")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("CLOUD_SQL_INSTANCE", "p:europe-west1:seatlease-dev")
    monkeypatch.setenv("DB_NAME", "seatlease")
    monkeypatch.delenv("DB_USER", raising=False)
    monkeypatch.delenv("DB_PASSWORD", raising=False)
    client, lines = _load("acquire", capsys)
    [line] = _critical(lines)
    assert line["missing"] == ["DB_USER", "DB_PASSWORD (or DB_IAM_AUTH=1)"]
    _refused(client.post("/acquire", json=_body("acquire", "cad")))
    monkeypatch.setenv("DB_USER", "seatlease-acquire@p.iam")
    monkeypatch.setenv("DB_IAM_AUTH", "1")
    assert config.missing(("signing", "redis", "database")) == []


def test_a_configured_function_logs_no_critical_line(acme: Tenant, capsys) -> None:
    for name in (*CLIENT_API, "keys", "admin", "reaper"):
        _client, lines = _load(name, capsys)
        assert not _critical(lines), name


def test_off_cloud_run_the_development_defaults_still_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("K_SERVICE", raising=False)
    for variable in ("REDIS_URL", "DATABASE_URL", "CLOUD_SQL_INSTANCE"):
        monkeypatch.delenv(variable, raising=False)
    assert config.missing(("redis", "database")) == []
    monkeypatch.setenv("LEASE_TOKENS", "off")  # no tokens: no issuer, no key needed
    monkeypatch.delenv("SEATLEASE_ISSUER")
    assert config.missing(("signing",)) == []


def test_a_key_source_without_a_usable_key_is_a_503_not_a_traceback(
    acme: Tenant, unsigned_env: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    """Configured, but the folder (the secret, before `seatlease keys rotate`) holds no
    key that can sign: found at the first acquire, and refused the same way."""
    lic = new_license(acme, "cad", seats=1)
    unsigned_env.setenv("SIGNING_KEYS_DIR", str(tmp_path))
    tokens.reset()
    client, lines = _load("acquire", capsys)
    assert not _critical(lines)
    _refused(client.post("/acquire", json=_body("acquire", lic), headers=acme.auth))
    [line] = log_lines(capsys.readouterr().out)
    assert line["status"] == 503 and "stack_trace" not in line
    assert str(tmp_path) in line["not_configured"] or "key" in line["not_configured"]
    assert live_sessions(acme, lic) == []


def test_the_audit_function_deployed_without_a_database(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The CloudEvent function: one CRITICAL line at cold start, then every push is a
    503 (Pub/Sub redelivers it, then dead-letters it) without a stack trace, and the
    message is stored once the setting is there."""
    import base64
    import json

    from seatlease.records import db, event_log

    monkeypatch.setenv("K_SERVICE", "audit")
    monkeypatch.delenv("DATABASE_URL")
    client, lines = _load("audit", capsys)
    [line] = _critical(lines)
    assert line["missing"] == ["DATABASE_URL or CLOUD_SQL_INSTANCE"]
    event = {
        "event_id": "evt-1", "type": "lease.acquired", "tenant_id": "acme",
        "license_id": "cad", "session_id": "s1", "client_id": "c1",
        "occurred_at": "2026-11-22T12:00:00.000Z", "seats_used": 1, "seats_total": 3,
        "metadata": {},
    }  # fmt: skip
    data = base64.b64encode(json.dumps([event]).encode()).decode()
    body = {"message": {"data": data, "messageId": "1"}, "subscription": "projects/p/s/a"}
    assert client.post("/", json=body).status_code == 503
    [refused] = log_lines(capsys.readouterr().out)
    assert refused["not_configured"] == "missing DATABASE_URL or CLOUD_SQL_INSTANCE"
    assert "stack_trace" not in refused and refused["severity"] == "ERROR"
    monkeypatch.setenv("DATABASE_URL", database_url)
    db.reset()
    assert client.post("/", json=body).status_code == 200
    assert [r["event_id"] for r in event_log.list_events("acme")] == ["evt-1"]
