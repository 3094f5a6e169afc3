"""The habits an operator brings from lmstat/lmremove and other CLIs (issue 52): ``seatlease
--version``; a second ``seatlease local`` in the folder of a running one is refused
(naming its port and pid) and a stale record is replaced, saying so; ``--since 7d`` /
``--until 1h`` as lengths back from now wherever ``--expiring 7d`` takes a length."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest
from http_support import post_json

import seatlease_cli as cli
from seatlease import clock
from seatlease._version import __version__
from seatlease.records import store
from seatlease_cli.procs import free_port, port_open

CLI = [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())"]


def test_version_prints_the_version_and_exits_0():
    proc = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"seatlease {__version__}"


# -- a second `seatlease local` in the same folder ------------------------------------------


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def wait_for_record(folder, pid: int, proc: subprocess.Popen, timeout: float = 90) -> dict:
    record = folder / ".seatlease" / "local.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"seatlease local exited {proc.returncode}: {proc.stderr.read()}")
        try:
            state = json.loads(record.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("pid") == pid:
            return state
        time.sleep(0.1)
    pytest.fail("seatlease local did not record itself")


def second_local(folder, env: dict, port: int) -> tuple[int, str, str]:
    """``seatlease local`` run a second time in ``folder``: its exit code and output; if it
    started instead (the old behaviour), it is stopped as Ctrl-C would, and the test fails."""
    proc = subprocess.Popen([*CLI, "local", "--no-pubsub", "--port", str(port)], cwd=folder,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"a second seatlease local started in the same folder: {err}")
    return proc.returncode, out, err


def test_a_second_local_stack_in_the_same_folder_is_refused(tmp_path):
    """The first stack (a real `seatlease local --no-pubsub`, replacing a stale record of
    an earlier run, and saying so) keeps running; a second one in its folder, on another
    port, is refused before it starts anything, in one line naming the first one's port and
    pid; the first one's record and service are untouched."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["LOG_LEVEL"] = "ERROR"
    stale_port, gone = free_port(), dead_pid()
    (tmp_path / ".seatlease").mkdir()
    (tmp_path / ".seatlease" / "local.json").write_text(
        json.dumps({"base_url": f"http://127.0.0.1:{stale_port}", "pid": gone})
    )
    port = free_port()
    first = subprocess.Popen([*CLI, "local", "--no-pubsub", "--port", str(port),
                              "--reaper-interval", "60"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        state = wait_for_record(tmp_path, first.pid, first)
        assert state["base_url"] == f"http://127.0.0.1:{port}"
        record = (tmp_path / ".seatlease" / "local.json").read_bytes()

        second_port = free_port()
        code, out, err = second_local(tmp_path, env, second_port)
        assert code != 0 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith("seatlease: a local stack is already running in this folder")
        assert f"port {port}" in lines[0] and f"pid {first.pid}" in lines[0]
        # Nothing of the second one started, and the first one's record and service stand.
        assert not port_open(second_port)
        assert (tmp_path / ".seatlease" / "local.json").read_bytes() == record
        assert first.poll() is None
        status, body = post_json(f"http://127.0.0.1:{port}/admin",
                                 {"action": "status", "tenant_id": "demo"}, timeout=10)  # fmt: skip
        assert status == 200, body
        # And the CLI in a second terminal still finds the first one (not "not running").
        found = subprocess.run([*CLI, "status", "--json"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert found.returncode == 0, found.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            _, first_err = first.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            _, first_err = first.communicate()
    said = [line for line in first_err.splitlines() if "left from an earlier run" in line]
    assert len(said) == 1, first_err
    assert f"pid {gone}" in said[0] and f"port {stale_port}" in said[0]
    assert "replacing it" in said[0]


def test_a_stale_record_is_replaced_saying_so(tmp_path, monkeypatch, capsys):
    """A record whose process is gone does not stop a new start: one line says it is
    replaced (here the start then stops at its busy port, before anything starts)."""
    import socket

    monkeypatch.chdir(tmp_path)
    gone = dead_pid()
    (tmp_path / ".seatlease").mkdir()
    (tmp_path / ".seatlease" / "local.json").write_text(
        json.dumps({"base_url": "http://127.0.0.1:8080", "pid": gone})
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code = cli.main(["local", "--port", str(busy.getsockname()[1])])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED and "in use" in err
    assert f".seatlease/local.json is left from an earlier run (pid {gone}, port 8080" in err
    assert "Traceback" not in err


# -- relative windows -----------------------------------------------------------------------


@pytest.fixture
def acme_direct(database_url, monkeypatch):
    """Tenant ``acme`` with license ``cad`` (3 seats), for the CLI in direct mode on the test
    database and no Redis (reports do not use Redis)."""
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    store.create_tenant("acme")
    store.create_license("acme", "cad", 3)


def parsed(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("report", ["usage", "sizing"])
def test_since_and_until_take_a_length_back_from_now(acme_direct, capsys, report):
    before = clock.now()
    code = cli.main(["report", report, "--tenant", "acme", "--since", "7d", "--until", "1h",
                     "--json"])  # fmt: skip
    after = clock.now()
    out, err = capsys.readouterr()
    assert code == 0, err
    body = json.loads(out)
    since, until = parsed(body["since"]), parsed(body["until"])
    slack = timedelta(seconds=1)
    assert before - timedelta(days=7) - slack <= since <= after - timedelta(days=7) + slack
    assert before - timedelta(hours=1) - slack <= until <= after - timedelta(hours=1) + slack


def test_report_usage_since_7d_as_a_table(acme_direct, capsys):
    code = cli.main(["report", "usage", "--tenant", "acme", "--since", "7d"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("Usage of tenant acme, ")


@pytest.mark.parametrize(("value", "words"), [
    ("0d", "expected a positive length"),
    ("7y", "not an ISO 8601 time"),
    ("yesterday", "a length back from now (7d, 12h, 30m)"),
])  # fmt: skip
def test_a_bad_window_is_usage_exit_2(acme_direct, capsys, value, words):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "usage", "--tenant", "acme", "--since", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


# -- a mistyped subcommand or option: that subcommand's usage --------------------------------


@pytest.mark.parametrize(("argv", "prog", "words"), [
    (["license", "craete"], "seatlease license", "argument ACTION: invalid choice: 'craete'"),
    (["status", "--tenat", "acme"], "seatlease status", "unrecognized arguments: --tenat acme"),
    (["license", "show", "--tenant", "a", "--license", "b", "--bogus"], "seatlease license show",
     "unrecognized arguments: --bogus"),
    (["report", "usage", "--tenant", "a", "--sinse", "7d"], "seatlease report usage",
     "unrecognized arguments: --sinse 7d"),
    (["--bogus", "status"], "seatlease", "unrecognized arguments: --bogus"),
])  # fmt: skip
def test_a_mistyped_subcommand_prints_its_own_usage(capsys, argv, prog, words):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"usage: {prog} ")
    assert f"\n{prog}: error: {words}" in err
