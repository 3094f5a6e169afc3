"""Each function's ``main.py`` does one job: it parses, delegates and answers. The seat
rules live in the engine, the token recovery in ``seatlease.api.recovery``, the answers in
``seatlease.api.answers``; a handler that grows past ``MAX_LINES`` is taking one of their
jobs. And the client-facing functions load at cold start only what their calls need."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = sorted(p.parent.name for p in (REPO / "functions").glob("*/main.py"))
HOT = ("acquire", "heartbeat", "release")
MAX_LINES = 40  # a handler is under this, from its def to its last line

# What a seat call needs beyond functions-framework: the HTTP boundary and its caches,
# tokens, the answers, the seat engine (any of its modules) and the shared leaves.
HOT_API = {
    "seatlease.api",
    "seatlease.api.answers",
    "seatlease.api.auth",
    "seatlease.api.bodies",
    "seatlease.api.errormap",
    "seatlease.api.http",
    "seatlease.api.recovery",
    "seatlease.api.runtime",
    "seatlease.api.schemas",
    "seatlease.api.seatrequest",
    "seatlease.api.signingkeys",
    "seatlease.api.startup",
    "seatlease.api.tenantlicenses",
    "seatlease.api.tenantlimits",
    "seatlease.api.tokens",
    "seatlease.api.ttlcache",
}
# Rooms a seat call never enters at import (a config-cache miss loads the records lazily;
# the reaper publishes, the operator acts), and the packages they would bring.
NEVER_AT_IMPORT = (
    "seatlease.records",
    "seatlease.events",
    "seatlease.admin",
    "seatlease.portal",
    "seatlease.api.secretmanager",
    "seatlease_cli",
    "seatlease_client",
    "sqlalchemy",
    "google.cloud.pubsub",
    "google.cloud.secretmanager",
    "jwt",
)


def _functions_of(name: str) -> list[ast.FunctionDef]:
    tree = ast.parse((REPO / "functions" / name / "main.py").read_text())
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def test_every_function_is_found() -> None:
    assert set(HOT) <= set(FUNCTIONS) and len(FUNCTIONS) >= 8, FUNCTIONS


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_handler_is_under_forty_lines(name: str) -> None:
    """The entry point (named as its function, decorated) and every other function of
    ``main.py``: under ``MAX_LINES`` each."""
    functions = _functions_of(name)
    entry = [f for f in functions if f.name == name]
    assert entry and entry[0].decorator_list, f"{name}/main.py: no decorated {name}()"
    lengths = {f.name: f.end_lineno - f.lineno + 1 for f in functions}  # type: ignore[operator]
    assert all(n < MAX_LINES for n in lengths.values()), (name, lengths)


@pytest.mark.parametrize("name", HOT)
def test_a_seat_calls_main_imports_only_the_boundary(name: str) -> None:
    """A hot function's own imports: functions-framework, the HTTP boundary's modules;
    never the engine's internals or the records (the boundary delegates to them)."""
    tree = ast.parse((REPO / "functions" / name / "main.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert "functions_framework" in imported
    assert imported - {"functions_framework", "seatlease.api"} <= HOT_API, imported - HOT_API


@pytest.mark.parametrize("name", HOT)
def test_a_cold_seat_call_loads_only_what_its_calls_need(name: str) -> None:
    """Importing a hot function's ``main.py`` (as a cold start does) loads of seatlease
    only the boundary modules above, the seat engine and the shared leaves; no room or
    package a seat call does not need (the token's verification loads nothing more: the
    signing key's library is loaded already)."""
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import main; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "functions" / name)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = json.loads(result.stdout.splitlines()[-1])
    never = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NEVER_AT_IMPORT)]
    assert never == [], never
    ours = {m for m in loaded if m.startswith("seatlease.")}
    engine = {m for m in ours if m.startswith("seatlease.seats.") or m == "seatlease.seats"}
    leaves = {m for m in ours if m.count(".") == 1 and m not in HOT_API}
    assert ours - engine - leaves <= HOT_API, sorted(ours - engine - leaves - HOT_API)
    assert "seatlease.api.answers" in ours
