"""The ``slow`` marker stays true (tests/slowmarks.py): what it declares exists, and a test
that starts a toolchain, a browser, the Pub/Sub emulator or a local stack is declared, so
``pytest -m "not slow"`` stays the fast inner loop as tests are added.

Read from the source, nothing run: a test "starts" one of these things when its own body,
or a module-level function, fixture or constant of its module it names (by a call, a
reference or a fixture parameter, followed through), contains one of STARTS. Fixtures of
conftest.py that start something slow are SLOW_FIXTURES, marked wherever they are used.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from slowmarks import SLOW_FIXTURES, SLOW_MODULES, SLOW_TESTS

TESTS = Path(__file__).parent

STARTS = {
    "the Pub/Sub emulator": r"\bstart_pubsub_emulator\(",
    "a browser": r"\bwebdriver\.",
    "a local stack": r"\bLocalStack\((?s:.*)\.start\(\)|[\"']local[\"']\s*,\s*[\"']--",
    "a toolchain": r"\[\s*[\"'](go|npm|npx|node|mvn|javac|gradle|cmake|ctest|terraform)[\"']\s*,",
    "a package build or install": (
        r"[\"']-m[\"']\s*,\s*[\"'](venv|build|pip)[\"']|\bvenv\.create\(|[\"']pip[\"']\s*,\s*[\"']install[\"']"
    ),
}

# Tests that name one of STARTS yet start nothing slow, with why.
NOT_SLOW = {
    "test_tokens.py::test_the_local_stack_makes_its_own_key_folder": (
        "makes a LocalStack only to run its key step; starts nothing"
    ),
    **{
        f"terraform/test_provider_schema.py::{name}": (
            "reads the provider's schema from a wheel pip downloads once into ~/.cache/seatlease"
        )
        for name in (
            "test_every_google_block_matches_the_provider_schema",
            "test_check_catches_names_types_and_block_counts",
            "test_check_catches_a_missing_required_argument",
            "test_an_argument_newer_than_the_oldest_allowed_provider_is_caught",
            "test_schema_knows_the_basics",
        )
    },
}


def module_paths() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if ".venv" not in p.parts)


def functions_of(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's top-level functions, classes and constants, by name."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def reached_source(source: str, start: ast.AST, names: dict[str, ast.AST]) -> str:
    """The source of ``start`` and of every module-level name it reaches."""
    lines = source.splitlines()
    seen: set[int] = set()
    todo = [start]
    parts: list[str] = []
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        parts.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))  # type: ignore[attr-defined]
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            used |= {a.arg for a in node.args.args}  # fixtures of the same module
        todo += [names[name] for name in used if name in names]
    return "\n".join(parts)


@functools.cache
def starters() -> dict[str, str]:
    """Every test that starts one of STARTS, as "module::function" -> what it starts."""
    found: dict[str, str] = {}
    for path in module_paths():
        source = path.read_text()
        tree = ast.parse(source)
        names = functions_of(tree)
        module = path.relative_to(TESTS).as_posix()
        for name, node in names.items():
            if not (name.startswith("test") and isinstance(node, ast.FunctionDef)):
                continue
            text = reached_source(source, node, names)
            for what, pattern in STARTS.items():
                if re.search(pattern, text):
                    found[f"{module}::{name}"] = what
                    break
    return found


def test_the_declarations_name_tests_that_exist() -> None:
    modules = {p.relative_to(TESTS).as_posix(): p for p in module_paths()}
    assert not set(SLOW_MODULES) - set(modules), "tests/slowmarks.py names a missing module"
    for key in [*SLOW_TESTS, *NOT_SLOW]:
        module, function = key.split("::")
        assert module in modules, key
        tree = ast.parse(modules[module].read_text())
        assert function in functions_of(tree), key
    assert SLOW_FIXTURES <= set(re.findall(r"def (\w+)\(", (TESTS / "conftest.py").read_text()))


def test_every_test_that_starts_a_toolchain_browser_emulator_or_stack_is_slow() -> None:
    unmarked = {
        key: what
        for key, what in starters().items()
        if key.split("::")[0] not in SLOW_MODULES and key not in SLOW_TESTS and key not in NOT_SLOW
    }
    assert not unmarked, (
        "starts something slow but is not declared in tests/slowmarks.py "
        f"(SLOW_MODULES or SLOW_TESTS): {unmarked}"
    )


def test_the_scan_finds_what_each_declared_module_starts() -> None:
    """The patterns still see the toolchains, browser and stacks the declared modules use:
    a scan that had gone blind would pass the test above with nothing found."""
    found = {key.split("::")[0] for key in starters()}
    for module in ("test_client_c.py", "test_client_go.py", "test_client_java.py",
                   "test_client_node.py", "test_client_wheel.py", "test_localstack.py",
                   "test_local_no_pubsub.py", "test_replay.py"):  # fmt: skip
        assert module in found, module
    assert "test_reaper.py::test_pubsub_down_keeps_the_outbox_and_the_next_run_delivers" in (
        starters()
    )


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ('def test_x():\n    run(["go", "test", "./..."])\n', "a toolchain"),
        ("def test_x(stack):\n    pass\n\ndef stack():\n    LocalStack(port=1).start()\n",
         "a local stack"),
        ('def test_x():\n    e = start_pubsub_emulator("p")\n', "the Pub/Sub emulator"),
        ('def test_x():\n    run(python, "-m", "venv", root)\n', "a package build or install"),
    ],
)  # fmt: skip
def test_the_scan_follows_fixtures_and_helpers(snippet: str, what: str) -> None:
    tree = ast.parse(snippet)
    names = functions_of(tree)
    text = reached_source(snippet, names["test_x"], names)
    assert [w for w, pattern in STARTS.items() if re.search(pattern, text)] == [what]


def test_the_inner_loop_is_pure_and_redis_only(request: pytest.FixtureRequest) -> None:
    """Every collected test whose fixtures reach PostgreSQL or the Pub/Sub emulator is
    marked slow, so ``-m "not slow"`` needs only Redis (the README's inner loop)."""
    items = request.session.items
    heavy = [
        item
        for item in items
        if {"postgres_admin_url", "pubsub_emulator"} & set(getattr(item, "fixturenames", ()))
    ]
    assert all(item.get_closest_marker("slow") for item in heavy), [
        item.nodeid for item in heavy if not item.get_closest_marker("slow")
    ]
