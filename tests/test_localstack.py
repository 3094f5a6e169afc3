"""The README's run command, in-process: ``LocalStack`` brings up Redis, the database,
the Pub/Sub emulator (push subscription into the audit function), every function on one
port and the scheduler loop; a lease made over HTTP reaches the audit table by itself,
and stop() ends every process it started."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from http_support import post_json

from seatlease.records import db, event_log
from seatlease.seats import redisconn
from seatlease_cli.demo import play
from seatlease_cli.localstack import DEMO_LICENSE, DEMO_TENANT, STORY_LICENSE, LocalStack
from seatlease_cli.procs import free_port, port_open

pytestmark = pytest.mark.usefixtures("restore_environment")


def post(url: str, body: dict, key: str | None = None) -> tuple[int, dict]:
    return post_json(url, body, key, timeout=10)


def admin_status(base: str) -> dict:
    status, body = post(f"{base}/admin", {"action": "status", "tenant_id": DEMO_TENANT})
    assert status == 200, body
    return body


def test_local_stack_runs_the_whole_story(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)
    redisconn.reset()
    db.reset()
    import seatlease.events.reaper

    monkeypatch.setattr(seatlease.events.reaper, "_publisher", None)
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
            [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())",
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
            types = [e["type"] for e in event_log.list_events(DEMO_TENANT, DEMO_LICENSE)]
            if len(types) >= 2:
                break
            time.sleep(0.5)
        assert types == ["lease.acquired", "lease.released"]
        # A second start reuses the demo tenant, license and key.
        again = stack._seed()
        assert again["api_key"] == key
        # `seatlease demo` plays on its own license, so a seat held on the tour's license
        # (as a person following the README does with curl) neither blocks it nor is
        # touched by it: denied, crash, reclaim, the waiter gets the seat, audit trail.
        held = post(f"{base}/acquire", {"license_id": DEMO_LICENSE, "client_id": "laptop-1"}, key)[
            1
        ]["session_id"]
        story_license = state["story_license_id"]
        assert story_license == STORY_LICENSE != DEMO_LICENSE
        said: list[str] = []
        story = play(state, say=said.append, pause=0.1)
        assert story["denied"] is not None and story["denied"].retry_after_seconds >= 1
        assert any("carol gets bob's seat" in line for line in said)
        events = {
            (e["session_id"], e["type"]) for e in event_log.list_events(DEMO_TENANT, story_license)
        }
        assert (story["bob"], "lease.reclaimed") in events
        assert (story["carol"], "lease.acquired") in events
        # The audit trail as the demo printed it (report.usage through the admin function);
        # carol's denial is the reaper's aggregate lease.denied row.
        (outcome,) = story["report"]["outcomes"]
        assert (outcome["acquired"], outcome["released"], outcome["reclaimed"]) == (3, 2, 1)
        assert outcome["revoked"] == 0
        # The summary's "denied N" is the story's: one line per denial carol met (the
        # client's own wait loop used to be denied unseen: "denied 2", one line).
        told = [line for line in said if "carol is denied" in line or "denied again" in line]
        assert outcome["denials"] == story["denials"] == len(told) >= 1
        assert any(f"denied {len(told)} (seatlease report usage" in line for line in said)

        # Carol asks again only once Retry-After has passed (she once asked at once).
        def seconds(line: str) -> float:  # "[  8.1s] ..."
            return float(line[1 : line.index("s]")])

        at = [seconds(line) for line in told]
        first_wait = story["denied"].retry_after_seconds
        assert all(later >= at[0] + first_wait - 0.5 for later in at[1:]), told
        got = next(line for line in said if "carol gets bob's seat" in line)
        assert seconds(got) >= at[0] + first_wait - 0.5
        assert sorted(d["client_id"].split("-")[0] for d in story["report"]["durations"]) == [
            "alice", "bob", "carol",
        ]  # fmt: skip
        assert any(line.startswith("acquired 3, released 2, reclaimed 1") for line in said)
        tour = [lic for lic in admin_status(base)["licenses"] if lic["license_id"] == DEMO_LICENSE]
        assert [lease["session_id"] for lease in tour[0]["leases"]] == [held]
        assert tour[0]["leases"][0]["expires_in_seconds"] > 500  # time to revoke it by hand
        # An interrupted demo's leftovers are revoked by the next run, not waited for.
        post(f"{base}/acquire", {"license_id": story_license, "client_id": "x"}, key)
        post(f"{base}/acquire", {"license_id": story_license, "client_id": "y"}, key)
        again = play(state, say=said.append, pause=0.1)
        assert any("revoked 2 lease(s) an earlier, interrupted demo left" in s for s in said)
        assert again["report"]["outcomes"][0]["reclaimed"] == 1
    finally:
        ports = [int(p.url.rsplit(":", 1)[1].split("/")[0]) for p in stack.procs]
        stack.stop()
        redisconn.reset()
        db.reset()
    assert ports and not any(port_open(p) for p in ports)
    # Stopped, its state file left behind: the CLI says so instead of using anything else.
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    after = subprocess.run(
        [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())",
         "status"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert after.returncode == 5 and after.stdout == ""
    assert "the local stack in ./.seatlease is not running" in after.stderr


def test_a_missing_tool_is_one_clear_line(monkeypatch, capsys, tmp_path):
    from seatlease_cli import main

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

    from seatlease_cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code = main(["local", "--port", str(s.getsockname()[1])])
    assert code == 1 and "in use" in capsys.readouterr().err


def test_a_port_taken_after_the_check_fails_first_naming_the_flags(tmp_path, monkeypatch):
    """Another program takes the port between `seatlease local`'s check and its bind
    (another stack starting at the same moment): the stack says so naming --port and
    PORT=, before starting anything (it used to start Redis, the database and the
    emulator, then exit with werkzeug's "start the server with a different port")."""
    import socket

    from seatlease_cli.localstack import PortInUse

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REDIS_URL", raising=False)
    lines: list[str] = []
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        stack = LocalStack(port=port, say=lines.append)
        with pytest.raises(PortInUse) as raised:
            stack.start()
    message = str(raised.value)
    assert f"port {port} is in use" in message
    assert "--port N" in message and "make run PORT=N" in message
    assert stack.procs == [] and lines == []  # nothing started, nothing said
    assert not (tmp_path / ".seatlease").exists()
    stack.stop()


def test_make_run_passes_the_port():
    """`make run PORT=8091` is `seatlease local --port 8091` (make run took no port)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for argv, want in ((["PORT=8091"], "seatlease local --port 8091"), ([], "seatlease local")):
        proc = subprocess.run(["make", "-n", "-s", "run", *argv], cwd=root,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1].endswith(want), proc.stdout


def test_the_banner_uses_the_chosen_port_everywhere():
    """Every URL, the curl and the portal link the stack prints use its port, and the
    first line says which port that is (the README's examples say 8080)."""
    from seatlease_cli.localstack import banner

    base = LocalStack(port=8091).base_url
    assert base == "http://127.0.0.1:8091"
    text = banner({"base_url": base, "api_key": "k", "license_id": DEMO_LICENSE,
                   "tenant_id": DEMO_TENANT, "portal_url": f"{base}/portal#key=a"})  # fmt: skip
    first = text.strip().splitlines()[0]
    assert "on port 8091" in first and f"use {base}" in first
    rest = text.replace(first, "")
    assert "8080" not in rest
    assert f"curl -s -X POST {base}/acquire" in rest and f"{base}/portal#key=a" in rest
    assert "8080" not in banner({"base_url": "http://127.0.0.1:8080", "api_key": "k",
                                 "license_id": DEMO_LICENSE, "tenant_id": DEMO_TENANT,
                                 "portal_url": "p"}).replace("127.0.0.1:8080/", "")  # fmt: skip
