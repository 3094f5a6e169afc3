"""The stack's HCL as Terraform's graph of references, read offline (python-hcl2).

Nodes are ``(path, kind, name)``: ``path`` the module calls from the stack down (``()``
is modules/stack, ``("functions",)`` its ``module "functions"``), ``kind`` one of
``resource`` (name ``TYPE.NAME``, data sources ``data.TYPE.NAME``), ``var``, ``local``,
``output``, ``call`` (a module call's count, for_each and depends_on). An edge goes from
a node to every node its expressions name, as Terraform's own graph does: a resource to
the variables, locals, resources and module outputs in its body (depends_on included), a
module's variable to the expression its caller passes, an output to its value, and every
resource of a called module to the call's count/for_each/depends_on.

``closure(targets)`` is what ``terraform apply -target=...`` plans: the targeted
resources and everything they depend on. ``region_of`` says where a resource lives, read
from its ``region``/``location`` (followed up through the module variables to the stack)
or from the resource it belongs to (a database user is where its instance is).

Over-approximation on purpose: a name anywhere in a body counts (a conditional's both
branches, as Terraform does), instances are not told apart (``x["a"]`` is ``x``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfconfig import META, Config, load

Node = tuple[tuple[str, ...], str, str]

A, B, SERVING, BOTH, GLOBAL = "A", "B", "serving", "A and B", "global"

_VAR = re.compile(r"\bvar\.(\w+)")
_LOCAL = re.compile(r"\blocal\.(\w+)")
_MODULE = re.compile(r"\bmodule\.(\w+)(?:\[[^\]]*\])?\.(\w+)")
_DATA = re.compile(r"\bdata\.(\w+)\.(\w+)")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if k in META:
                continue
            out.append(k)
            out.extend(_strings(v))
        return out
    return []


@dataclass
class Graph:
    stack_dir: Path
    configs: dict[tuple[str, ...], Config] = field(default_factory=dict)
    edges: dict[Node, set[Node]] = field(default_factory=dict)

    # ---- construction -------------------------------------------------------------

    @classmethod
    def of(cls, tf: Path) -> Graph:
        load.cache_clear()  # another tree (a test's copy) may sit at another path
        g = cls(stack_dir=tf / "modules" / "stack")
        g._add_module((), g.stack_dir)
        return g

    def _add_module(self, path: tuple[str, ...], directory: Path) -> None:
        cfg = load(directory)
        self.configs[path] = cfg
        for (rtype, name), body in cfg.resources.items():
            self.edges[(path, "resource", f"{rtype}.{name}")] = self._refs(path, body)
        for (rtype, name), body in cfg.data.items():
            self.edges[(path, "resource", f"data.{rtype}.{name}")] = self._refs(path, body)
        for name, value in cfg.locals.items():
            self.edges[(path, "local", name)] = self._refs(path, value)
        for name, body in cfg.outputs.items():
            self.edges[(path, "output", name)] = self._refs(path, body.get("value"))
        for name in cfg.variables:
            self.edges.setdefault((path, "var", name), set())
        for call, body in cfg.modules.items():
            child = (*path, call)
            self._add_module(child, (directory / body["source"]).resolve())
            meta = {k: body[k] for k in ("count", "for_each", "depends_on") if k in body}
            self.edges[(path, "call", call)] = self._refs(path, meta)
            for key, value in body.items():
                if key in META or key in ("source", "count", "for_each", "depends_on"):
                    continue
                self.edges[(child, "var", key)] = self._refs(path, value)
            for node in list(self.edges):
                if node[0] == child and node[1] == "resource":
                    self.edges[node].add((path, "call", call))

    def _refs(self, path: tuple[str, ...], value: Any) -> set[Node]:
        cfg = self.configs[path]
        refs: set[Node] = set()
        for text in _strings(value):
            refs |= {(path, "var", v) for v in _VAR.findall(text)}
            refs |= {(path, "local", v) for v in _LOCAL.findall(text)}
            refs |= {((*path, m), "output", o) for m, o in _MODULE.findall(text)}
            refs |= {(path, "resource", f"data.{t}.{n}") for t, n in _DATA.findall(text)}
            for rtype, name in cfg.resources:
                if re.search(rf"(?<![\w.]){rtype}\.{name}\b", text):
                    refs.add((path, "resource", f"{rtype}.{name}"))
        return refs

    # ---- queries ------------------------------------------------------------------

    def resources(self) -> list[Node]:
        return [n for n in self.edges if n[1] == "resource"]

    def closure(self, nodes: set[Node]) -> set[Node]:
        seen: set[Node] = set()
        todo = list(nodes)
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            todo.extend(self.edges.get(node, ()))
        return seen

    def target(self, address: str) -> set[Node]:
        """The resources ``-target=ADDRESS`` names, ADDRESS in the envs' form
        (``module.seatlease.module.X[...]...``; instance keys ignored)."""
        parts = re.sub(r"\[[^\]]*\]", "", address).split(".")
        assert parts[:2] == ["module", "seatlease"], address
        parts = parts[2:]
        path: tuple[str, ...] = ()
        while parts[:1] == ["module"]:
            path = (*path, parts[1])
            parts = parts[2:]
        assert path in self.configs, f"{address}: no module {path}"
        name = ".".join(parts)
        found = {
            n
            for n in self.resources()
            if n[0][: len(path)] == path and (not parts or (n[0] == path and n[2] == name))
        }
        assert found, f"{address} names no resource"
        return found

    def address(self, node: Node) -> str:
        return ".".join(["module.seatlease", *(f"module.{p}" for p in node[0]), node[2]])

    def _resolve(self, path: tuple[str, ...], text: str) -> tuple[tuple[str, ...], str]:
        """Follow ``${var.X}`` up to the stack (``${local.X}`` too when it is one name)."""
        while True:
            match = re.fullmatch(r"\$\{var\.(\w+)\}", text)
            if match and path:
                caller = self.configs[path[:-1]].modules[path[-1]]
                value = caller.get(match.group(1))
                if not isinstance(value, str):
                    return path, text
                path, text = path[:-1], value
                continue
            return path, text

    def region_of(self, node: Node) -> str:
        path, _, name = node
        if name.startswith("data."):
            return GLOBAL
        rtype, rname = name.split(".")
        body = self.configs[path].resources[(rtype, rname)]
        for key in ("region", "location"):
            if isinstance(body.get(key), str):
                where, text = self._resolve(path, body[key])
                if where == ():
                    known = {"${var.region}": A, "${var.secondary_region}": B,
                             "${local.serving_region}": SERVING}  # fmt: skip
                    if text in known:
                        return known[text]
                if text == "${each.value.region}":
                    return BOTH
                return f"other: {text}"
        # A part of another resource lives where it does (a database user, an object).
        for key in ("instance", "bucket"):
            if isinstance(body.get(key), str):
                for ref in self._refs(path, body[key]):
                    if ref[1] == "resource":
                        return self.region_of(ref)
                    if ref[1] in ("var", "output"):
                        for dep in self.closure({ref}):
                            if dep[1] == "resource" and dep[2].startswith(
                                "google_sql_database_instance."
                            ):
                                return self.region_of(dep)
        return GLOBAL

    def depends_on_var(self, node: Node, stack_vars: set[str]) -> bool:
        wanted = {((), "var", v) for v in stack_vars}
        return bool(self.closure({node}) & wanted)
