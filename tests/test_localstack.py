"""The README's run command, in-process: ``LocalStack`` brings up Redis, the database,
the Pub/Sub emulator (push subscription into the audit function), every function on one
port and the scheduler loop; a lease made over HTTP reaches the audit table by itself,
and stop() ends every process it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from shared import db, redisconn, store
from shared.demo import play
from shared.localprocs import free_port, port_open
from shared.localstack import DEMO_LICENSE, DEMO_TENANT, LocalStack


@pytest.fixture(autouse=True)
def restore_environment():
    """LocalStack configures its own process through os.environ (REDIS_URL, LOG_LEVEL,
    PUBSUB_EMULATOR_HOST, ...): put it back for the tests that follow."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def post(url: str, body: dict, key: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_local_stack_runs_the_whole_story(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)
    redisconn.reset()
    db.reset()
    import shared.reaper

    monkeypatch.setattr(shared.reaper, "_publisher", None)
    lines: list[str] = []
    stack = LocalStack(port=free_port(), reaper_interval=0.5, say=lines.append)
    try:
        state = stack.start()
        assert any("Pub/Sub emulator: ok" in line for line in lines)
        assert (tmp_path / ".seatlease" / "seatlease.db").exists()  # SQLite default
        base, key = state["base_url"], state["api_key"]
        status, lease = post(
            f"{base}/acquire",
            {"license_id": DEMO_LICENSE, "client_id": "laptop-1", "metadata": {"user": "ann"}},
            key,
        )
        assert status == 201, lease
        # A second terminal (no REDIS_URL) sees the stack through its admin function.
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        second = subprocess.run(
            [sys.executable, "-c", "from shared.cli import main; raise SystemExit(main())",
             "status", "--json"],
            env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr
        assert lease["session_id"] in second.stdout
        status, body = post(
            f"{base}/release", {"license_id": DEMO_LICENSE, "session_id": lease["session_id"]}, key
        )
        assert status == 200 and body["released"] is True
        deadline = time.monotonic() + 60
        types: list[str] = []
        while time.monotonic() < deadline:  # scheduler -> reaper -> emulator -> audit push
            types = [e["type"] for e in store.list_events(DEMO_TENANT, DEMO_LICENSE)]
            if len(types) >= 2:
                break
            time.sleep(0.5)
        assert types == ["lease.acquired", "lease.released"]
        # A second start reuses the demo tenant, license and key.
        again = stack._seed()
        assert again["api_key"] == key
        # `seatlease demo`: denied, crash, reclaim, the waiter gets the seat, audit rows.
        said: list[str] = []
        story = play(state, say=said.append, pause=0.1)
        assert story["denied"] is not None and story["denied"].retry_after_seconds >= 1
        by_session = {(r["session_id"], r["type"]) for r in story["rows"]}
        assert (story["bob"], "lease.reclaimed") in by_session
        assert (story["carol"], "lease.acquired") in by_session
        # carol's denial reaches the audit trail as the reaper's aggregate row.
        assert any(r["type"] == "lease.denied" and r["count"] >= 1 for r in story["rows"])
        assert any("carol gets bob's seat" in line for line in said)
    finally:
        ports = [int(p.url.rsplit(":", 1)[1].split("/")[0]) for p in stack.procs]
        stack.stop()
        redisconn.reset()
        db.reset()
    assert ports and not any(port_open(p) for p in ports)


def test_a_missing_tool_is_one_clear_line(monkeypatch, capsys, tmp_path):
    from shared.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("REDIS_URL", raising=False)
    code = main(["local", "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 1
    assert "redis-server not found" in err and "Traceback" not in err


@pytest.mark.parametrize("busy", [True])
def test_a_busy_port_is_refused(busy, capsys):
    import socket

    from shared.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code = main(["local", "--port", str(s.getsockname()[1])])
    assert code == 1 and "in use" in capsys.readouterr().err
