"""No import circles: among the modules of each Python package (the runtime ``seatlease``,
the operator CLI ``seatlease_cli``, the vendor client ``seatlease_client``) and among the
Node client's ``src/*.ts``.

Read from the source, nothing imported: every ``import`` / ``from ... import`` counts,
also inside functions (a lazy import is still an edge) and relative ones; only imports
under ``if TYPE_CHECKING:`` are left out (type hints, never run). ``from pkg import name``
is an edge to ``pkg.name`` when that module exists, else to ``pkg`` (its ``__init__``).
A package's ``__init__`` that a submodule's import runs first is not an edge (Python
always does that); ``importlib.import_module`` is not visible statically, so the CLI's
command groups (imported by name from ``GROUPS``) are added by hand.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON_PACKAGES = {
    "seatlease": ROOT / "shared" / "seatlease",
    "seatlease_cli": ROOT / "shared" / "seatlease_cli",
    "seatlease_client": ROOT / "shared" / "client" / "seatlease_client",
}
NODE_SRC = ROOT / "shared" / "clients" / "node" / "src"

Graph = Mapping[str, Iterable[str]]


# -- the cycle finder --------------------------------------------------------------------


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The modules that import one another in a circle: each strongly connected component
    of more than one module, or of one module that imports itself (sorted)."""
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    edges = {n: sorted(set(graph.get(n, ()))) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan; recursion is fine at this size
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges[node]:
                components.append(sorted(component))

    for node in nodes:
        if node not in index:
            connect(node)
    return sorted(components)


def find_cycles(graph: Graph) -> list[list[str]]:
    """One cycle (a path that ends where it starts) per strongly connected component; []
    when the graph is acyclic."""
    edges = {n: sorted(set(targets)) for n, targets in graph.items()}
    return [_cycle_in(component, edges) for component in strongly_connected(graph)]


def _cycle_in(component: list[str], edges: Mapping[str, list[str]]) -> list[str]:
    """A shortest cycle through the component's first module (breadth first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in edges.get(node, []):
            if target == start:
                return [*paths[node], start]
            if target in members and target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle in the component {component}")  # pragma: no cover


def describe(graph: Graph) -> str:
    """Each circle: one cycle through it, and all the modules in it."""
    return "\n".join(
        f"{' -> '.join(cycle)}   (the circle: {', '.join(component)})"
        for cycle, component in zip(find_cycles(graph), strongly_connected(graph), strict=True)
    )


# -- Python: the module graph from the source ---------------------------------------------


def python_modules(package: str, folder: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package's folder."""
    modules = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, anywhere in the module (functions, classes,
    try blocks, ``if``s), except the bodies of ``if TYPE_CHECKING:``."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)  # the body is type hints only
            continue
        todo.extend(ast.iter_child_nodes(node))


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` if it is one of the modules, else its longest prefix that is, else None."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def python_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the same set it imports (at run time)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str | None] = set()
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(_known(alias.name, modules) for alias in node.names)
                continue
            if node.level:
                package = module.split(".")
                if not is_package:
                    package.pop()
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    targets.add(f"{base}.{alias.name}")
                else:
                    targets.add(_known(base, modules))
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


@pytest.mark.parametrize("package", sorted(PYTHON_PACKAGES))
def test_no_import_cycle_in_python_package(package: str) -> None:
    modules = python_modules(package, PYTHON_PACKAGES[package])
    assert len(modules) > 1
    graph = python_graph(modules)
    if package == "seatlease_cli":  # build_parser imports each command group by name
        graph[package] |= {f"{package}.{group}" for group in cli_groups(modules[package])}
    assert not find_cycles(graph), f"import cycles in {package}:\n{describe(graph)}"


def cli_groups(init: Path) -> tuple[str, ...]:
    """``seatlease_cli.GROUPS``, the modules ``build_parser`` imports with importlib."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "GROUPS":
            return ast.literal_eval(node.value)
    raise AssertionError(f"no GROUPS in {init}")


# -- Node: the graph of src/*.ts -----------------------------------------------------------

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
# import x from, import { a, type B } from, import type { A } from, export { a } from,
# export * from, export type { A } from (over several lines too); import "./x.js";
# import("./x.js").
_TS_IMPORT = re.compile(
    r"""(?:^\s*(?:import|export)\b[^;]*?\bfrom\s*|^\s*import\s*|\bimport\s*\(\s*)"""
    r"""["'](\.\.?/[^"']+)["']""",
    re.MULTILINE,
)


def ts_graph(folder: Path) -> dict[str, set[str]]:
    """File stem -> the stems of the files in ``folder`` it imports (``./x.js`` is x.ts)."""
    stems = {path.stem for path in folder.glob("*.ts")}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.ts")):
        text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", path.read_text()))
        targets = set()
        for spec in _TS_IMPORT.findall(text):
            target = (folder / spec).resolve()
            if target.parent == folder.resolve():
                stem = re.sub(r"\.(js|ts|mjs|mts)$", "", target.name)
                if stem in stems and stem != path.stem:
                    targets.add(stem)
        graph[path.stem] = targets
    return graph


def test_no_import_cycle_in_node_client() -> None:
    graph = ts_graph(NODE_SRC)
    assert {"index", "client", "lease", "borrow"} <= set(graph)
    assert "client" in graph["index"]  # the parser sees `export ... from`
    assert not find_cycles(graph), f"import cycles in {NODE_SRC}:\n{describe(graph)}"


# -- the checks fail on a known cycle ------------------------------------------------------


def test_cycle_finder_on_synthetic_graphs() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"a"}}) == [["a", "a"]]
    two = find_cycles({"a": {"b"}, "b": {"a"}, "x": {"y"}, "y": {"z"}, "z": {"x", "a"}})
    assert two == [["a", "b", "a"], ["x", "y", "z", "x"]]
    assert describe({"a": {"b"}, "b": {"a", "c"}, "c": {"b"}}) == (
        "a -> b -> a   (the circle: a, b, c)"
    )


def test_python_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The circle ``audit -> backend -> localstack -> audit`` as the CLI had it (lazy
    imports inside functions), a relative and a ``from . import`` edge, and a circle
    through type hints only, which is allowed."""
    files = {
        "__init__.py": "def main():\n    from pkg.backend import flags\n",
        "audit.py": "from pkg import CommandError\ndef f():\n    from pkg.backend import x\n",
        "backend.py": "def g():\n    from pkg.localstack import STATE_FILE\n",
        "localstack.py": "import pkg.procs\ndef h():\n    from .audit import replay\n",
        "procs.py": "from . import output\n",
        "output.py": "",
        "_client.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ._lease import Lease\nelse:\n    import json\n",
        "_lease.py": "from pkg._client import Client\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    graph = python_graph(python_modules("pkg", tmp_path))
    assert graph["pkg.audit"] == {"pkg", "pkg.backend"}
    assert graph["pkg.localstack"] == {"pkg.procs", "pkg.audit"}
    assert graph["pkg.procs"] == {"pkg.output"}
    assert graph["pkg._client"] == set()  # type hints only
    assert find_cycles(graph) == [["pkg", "pkg.backend", "pkg.localstack", "pkg.audit", "pkg"]]


def test_ts_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """``import type`` is an edge too: the circle it closes is a circle for a reader."""
    (tmp_path / "client.ts").write_text(
        '// import { x } from "./nowhere.js";\n'
        'import { Keeper } from "./lease.js";\nimport {\n  a,\n  b,\n} from "./borrow.js";\n'
    )
    (tmp_path / "lease.ts").write_text('import type { SeatClient } from "./client.js";\n')
    (tmp_path / "borrow.ts").write_text('export * from "./errors.js";\n')
    (tmp_path / "errors.ts").write_text("export class SeatError extends Error {}\n")
    graph = ts_graph(tmp_path)
    assert graph == {
        "client": {"lease", "borrow"},
        "lease": {"client"},
        "borrow": {"errors"},
        "errors": set(),
    }
    assert find_cycles(graph) == [["client", "lease", "client"]]
