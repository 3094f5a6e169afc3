"""A new instance takes calls only once its backend answers (issue 33, item 1).

With Direct VPC egress a new Cloud Run instance may not reach Redis or Cloud SQL for a
minute or more. Cloud Run sends an instance calls once its default TCP startup probe
connects to the port, and functions-framework opens the port only after it has imported
the function's main.py. So a deployed function (``K_SERVICE``) waits in its import, up
to ``STARTUP_WAIT_SECONDS``, until its backend answers (``seatlease.config``).

Here functions-framework serves the acquire function as Cloud Run starts it (its CLI, a
port of its own) while its Redis is not there yet: the port stays closed, so a TCP probe
fails and no call reaches the instance; once a real redis-server starts on that address
the port opens and the first call takes a seat (201), where it used to answer 503. With
Redis never there the wait ends at its bound and the instance serves 503s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from http_support import Tenant, log_lines

from seatlease import config
from seatlease.api import startup
from seatlease.records import store
from seatlease_cli.procs import free_port, port_open, start_redis

REPO = Path(__file__).resolve().parent.parent


def _serve(port: int, log: Path, **env: str) -> subprocess.Popen:
    """functions-framework serving acquire on ``port``, deployed (K_SERVICE set)."""
    environment = {**os.environ, "K_SERVICE": "acquire", **env}
    cmd = [sys.executable, "-m", "functions_framework", "--target", "acquire"]
    cmd += ["--source", str(REPO / "functions" / "acquire" / "main.py")]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(
        cmd, env=environment, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=REPO
    )


def _acquire(port: int, tenant: Tenant, license_id: str) -> tuple[int, dict]:
    body = json.dumps({"license_id": license_id, "client_id": "ws-1@host"}).encode()
    headers = {"Content-Type": "application/json", **tenant.auth}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", body, headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _wait_open(port: int, proc: subprocess.Popen, log: Path, within: float) -> float:
    started = time.monotonic()
    while not port_open(port):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() - started < within, f"port never opened:\n{log.read_text()}"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def tenant_with_license(database_url: str) -> tuple[Tenant, str]:
    from http_support import new_tenant

    tenant = new_tenant("acme")
    store.create_license("acme", "cad", seats=3)  # in PostgreSQL only: read through
    return tenant, "cad"


def test_the_port_opens_only_once_redis_answers(tenant_with_license, database_url, tmp_path):
    tenant, license_id = tenant_with_license
    redis_port, http_port = free_port(), free_port()
    log = tmp_path / "ff.log"
    proc = _serve(
        http_port,
        log,
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
        DATABASE_URL=database_url,
        STARTUP_WAIT_SECONDS="60",
    )
    redis = None
    try:
        # The import (a second or two) and then the wait: the port stays closed, as
        # Cloud Run's TCP startup probe would find it, for as long as Redis is away.
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            assert not port_open(http_port), "serving before its Redis answered"
            time.sleep(0.1)
        redis = start_redis(port=redis_port)
        opened = _wait_open(http_port, proc, log, within=30)
        assert opened < 10, opened
        status, body = _acquire(http_port, tenant, license_id)
        assert status == 201, body
        assert (body["seats_used"], body["seats_total"]) == (1, 3)
        [waited] = [
            line for line in log_lines(log.read_text()) if "answered" in line.get("message", "")
        ]
        assert waited["backend"] == "redis" and waited["attempts"] > 1, waited
    finally:
        _stop(proc)
        if redis is not None:
            redis.stop()


def test_the_wait_is_bounded(tenant_with_license, database_url, tmp_path):
    """Redis never answers: after STARTUP_WAIT_SECONDS the instance serves, and says
    503 backend_unavailable (an outage, not a slow start), with one WARNING line."""
    tenant, license_id = tenant_with_license
    http_port = free_port()
    log = tmp_path / "ff.log"
    proc = _serve(
        http_port,
        log,
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        DATABASE_URL=database_url,
        STARTUP_WAIT_SECONDS="3",
    )
    try:
        started = time.monotonic()
        _wait_open(http_port, proc, log, within=60)
        assert time.monotonic() - started >= 3
        status, body = _acquire(http_port, tenant, license_id)
        assert status == 503 and body["error"]["code"] == "backend_unavailable", body
        [warning] = [line for line in log_lines(log.read_text()) if line["severity"] == "WARNING"]
        assert "redis did not answer within 3 s" in warning["message"], warning
    finally:
        _stop(proc)


def test_off_cloud_run_nothing_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local stack and the tests start their functions without waiting."""
    monkeypatch.delenv("K_SERVICE", raising=False)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("STARTUP_WAIT_SECONDS", "30")
    started = time.monotonic()
    config.Readiness("acquire", ("redis",), startup.wait_for_backends)
    assert time.monotonic() - started < 1


def test_the_audit_function_waits_for_its_database(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Redis: the first backend of the audit function is the database."""
    monkeypatch.setenv("STARTUP_WAIT_SECONDS", "5")
    assert startup.wait_for_backends("audit", ("database",))
    monkeypatch.setenv("DATABASE_URL", "postgresql+pg8000://postgres@127.0.0.1:1/none")
    from seatlease.records import db

    db.reset()
    started = time.monotonic()
    assert not startup.wait_for_backends("audit", ("database",))
    assert 5 <= time.monotonic() - started < 20
    db.reset()
