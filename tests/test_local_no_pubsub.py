"""``seatlease local --no-pubsub`` (issue 52, item 3): what the missing-gcloud error
suggests must be a stack that works and is quiet. Run as a user runs it (a process of its
own, no Google credentials, no emulator), used for over 20 s (a seat acquired,
heartbeated and released by hand, then ``seatlease demo``: acquires, heartbeats, a denial,
a crash the reaper reclaims, releases; a reaper tick every second): the banner says once
where the events go, the whole log has no ERROR line, and the demo shows the complete
audit trail (the reaper hands the events straight to the audit function)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from http_support import post_json

from seatlease_cli.localstack import DEMO_LICENSE
from seatlease_cli.procs import free_port, port_open

pytestmark = pytest.mark.timeout(300)
CLI = [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())"]


def quiet_env(home: Path) -> dict[str, str]:
    """The user's environment without any backend or Google setting: no credentials."""
    drop = ("REDIS_URL", "DATABASE_URL", "CLOUD_SQL_INSTANCE", "PUBSUB_EMULATOR_HOST",
            "PUBSUB_TOPIC", "LOG_LEVEL", "SIGNING_KEYS_DIR", "SIGNING_KEY_SECRET")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("GOOGLE_")}
    env["CLOUDSDK_CONFIG"] = str(home / "gcloud")  # no gcloud login either
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_no_pubsub_stack_is_quiet_and_keeps_the_audit_trail(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = quiet_env(home)
    port = free_port()
    log_path = tmp_path / "stack.log"
    with log_path.open("w") as log_file:
        stack = subprocess.Popen(
            [*CLI, "local", "--no-pubsub", "--port", str(port), "--reaper-interval", "1"],
            cwd=tmp_path, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    started = time.monotonic()
    try:
        state_file = tmp_path / ".seatlease" / "local.json"
        deadline = time.monotonic() + 120
        while not (state_file.exists() and "Ctrl-C" in log_path.read_text()):
            assert stack.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        assert port_open(port)
        base = f"http://127.0.0.1:{port}"
        key = (tmp_path / ".seatlease" / "demo-api-key").read_text().strip()
        # By hand, as the README's tour does with curl.
        status, lease = post_json(
            f"{base}/acquire", {"license_id": DEMO_LICENSE, "client_id": "laptop-1"}, key
        )
        assert status == 201, lease
        session = {"license_id": DEMO_LICENSE, "session_id": lease["session_id"]}
        status, body = post_json(f"{base}/heartbeat", session, key)
        assert status == 200, body
        status, body = post_json(f"{base}/release", session, key)
        assert status == 200, body
        demo = subprocess.run(
            [*CLI, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=200
        )
        assert demo.returncode == 0, f"{demo.stdout}\n{demo.stderr}"
        assert "carol gets bob's seat" in demo.stdout
        assert "reaper -> audit -> database" in demo.stdout  # no Pub/Sub in the path
        assert "could not show" not in demo.stdout
        summary = re.search(r"acquired (\d+), released (\d+), reclaimed (\d+)", demo.stdout)
        assert summary and summary.groups() == ("3", "2", "1"), demo.stdout
        while time.monotonic() - started < 22:  # a few more reaper ticks, idle
            time.sleep(0.5)
        assert stack.poll() is None, log_path.read_text()
    finally:
        if stack.poll() is None:
            stack.send_signal(signal.SIGTERM)
            try:
                stack.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stack.kill()
                stack.wait()
    log = log_path.read_text()
    print(log)  # the captured log, for the record
    assert time.monotonic() - started >= 20
    assert stack.returncode == 0, log
    said = [line for line in log.splitlines() if "--no-pubsub" in line]
    assert len(said) == 1 and "straight to /audit" in said[0], log
    errors = [line for line in log.splitlines() if re.search(r"ERROR|CRITICAL|Traceback", line)]
    assert errors == [], "\n".join(errors)


@pytest.mark.usefixtures("restore_environment")
def test_demo_says_what_the_audit_trail_lacks_and_fails(tmp_path, monkeypatch, capsys):
    """A stack whose events do not reach the audit table (here: its reaper never runs,
    so they stay in the outbox): `seatlease demo` plays its story, then says in one line
    which of the story's events the audit trail still lacks, and exits non-zero (it
    waited 60 s and exited 0 with an empty table)."""
    import seatlease_cli
    from seatlease.records import db
    from seatlease.seats import redisconn
    from seatlease_cli import demo
    from seatlease_cli.localstack import LocalStack

    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)
    redisconn.reset()
    db.reset()
    monkeypatch.setattr(demo, "AUDIT_WAIT_SECONDS", 2)
    stack = LocalStack(port=free_port(), reaper_interval=3600, pubsub=False, say=lambda _: None)
    try:
        stack.start()
        capsys.readouterr()
        code = seatlease_cli.main(["demo"])
        out, err = capsys.readouterr()
    finally:
        stack.stop()
    assert "carol gets bob's seat" in out
    lacking = [line for line in out.splitlines() if "could not show" in line]
    assert len(lacking) == 1, out
    assert "still lacks 3 acquired, 2 released, 1 reclaimed" in lacking[0], lacking
    assert code == 1 and "the audit trail is incomplete" in err, (code, err)
