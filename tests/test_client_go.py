"""The Go client (shared/clients/go) against the served functions: its own tests
(``go test -race``: the token vectors, the lease life, a stalled server, borrow, typed
errors, and no goroutine left running) run as a subprocess against
tests/client_harness.py's server on real Redis and PostgreSQL; the hold example; and the
module built with no network."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import ClientStack, client_stack
from http_support import post_json

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "shared" / "clients" / "go"


def offline_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """No module proxy and no checksum database: the module must need neither."""
    return {**(base or os.environ), "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOSUMDB": "off"}


def go(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["go", *args],
        cwd=GO_DIR,
        env=offline_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def go_tool() -> str:
    found = shutil.which("go")
    assert found, "go is missing: make test installs it (apt-get install golang-go; README)"
    version = subprocess.run(
        [found, "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout
    major, minor = map(int, re.match(r"go(\d+)\.(\d+)", version).groups())  # type: ignore[union-attr]
    assert (major, minor) >= (1, 19), version
    return found


@pytest.fixture
def stack(redis_url: str, database_url: str) -> Iterator[ClientStack]:
    with client_stack() as served:
        yield served


def test_the_go_client_passes_its_tests_with_race_detection(go_tool, stack):
    result = go(["test", "-race", "-count=1", "-v", "./..."], stack.env())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    assert "--- SKIP" not in output, output  # the live tests ran against the stack
    passed = re.findall(r"--- PASS: (\S+)", output)
    assert len([name for name in passed if name.startswith("TestEveryVector/")]) >= 30
    for name in (
        "TestLeaseLifePastThreeLeasesAndARedisFlush",
        "TestAStalledServerAnswersTheRetryFromTheFirstRun",
        "TestBorrowLoadRefuseAnEditedFileReturnEarly",
        "TestTypedErrors",
        "TestA500IsASeatErrorNotRetried",
        "TestUnreachableURLAndCancelledContext",
    ):
        assert name in passed, output[-4000:]


def test_the_go_hold_example_holds_a_verified_seat_until_stdin_closes(go_tool, stack):
    post_json(f"{stack.url}/_test/license", {"license_id": "go-hold", "lease_seconds": 2})
    example = subprocess.Popen(
        ["go", "run", "./examples/hold", stack.url, stack.api_key, "go-hold", "pc-1"],
        cwd=GO_DIR,
        env=offline_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert example.stdout is not None and example.stdin is not None
        line = json.loads(example.stdout.readline() or "{}")
        assert set(line) == {"session_id", "seats_used", "verified"}, line
        assert (line["seats_used"], line["verified"]) == (1, True)
        _, live = post_json(f"{stack.url}/_test/live?license_id=go-hold", {})
        assert live == [{"session_id": line["session_id"], "client_id": "pc-1"}]
        example.stdin.close()
        assert example.wait(timeout=60) == 0, example.stderr.read() if example.stderr else ""
    finally:
        example.kill()
        example.wait()
    _, live = post_json(f"{stack.url}/_test/live?license_id=go-hold", {})
    assert live == []


def test_the_go_module_builds_without_network_and_needs_nothing_but_the_standard_library(
    go_tool, tmp_path
):
    env = {**os.environ, "GOPATH": str(tmp_path / "gopath"), "GOMODCACHE": str(tmp_path / "mod")}
    built = go(["build", "./..."], env)
    assert built.returncode == 0, built.stderr
    modules = go(["list", "-m", "all"], env)
    assert modules.stdout.split() == ["github.com/seatlease/seatlease/shared/clients/go"]
    imports = go(["list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."], env)
    assert imports.stdout.split() == ["github.com/seatlease/seatlease/shared/clients/go"]
    assert not (GO_DIR / "go.sum").exists()
