"""A seat script's named KEYS and ARGV: ``ScriptSpec`` (its names, in the order the
script receives them), the lists built from names (``ScriptSpec.build``) and the Lua
binding generated from the same names (``ScriptSpec.lua_binding``). The specs themselves
and the builders that use them are in calls.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class ProtocolError(ValueError):
    """A call built with a missing or unknown name: a programming error, never a caller's."""


@dataclass(frozen=True, slots=True)
class Tail:
    """A script's variable-length end of KEYS or ARGV: records of ``fields``, one after
    another. A tail of one field is a list of values (``k.<name>[i]``), of several a list
    of records (``k.<name>[i].<field>``)."""

    name: str
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScriptSpec:
    """One script's named KEYS and ARGV, in the order the lists carry them."""

    name: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    key_tail: Tail | None = None
    arg_tail: Tail | None = None

    def build(self, keys: Mapping[str, Any], args: Mapping[str, Any]) -> tuple[list, list]:
        """The call's KEYS and ARGV lists from ``keys`` and ``args`` by name (a tail: its
        name -> a sequence of records, each a mapping of its fields, or of values for a
        tail of one field). Raises ProtocolError on a missing or unknown name."""
        return (
            _ordered(self.name, "KEYS", self.keys, self.key_tail, keys),
            _ordered(self.name, "ARGV", self.args, self.arg_tail, args),
        )

    def lua_binding(self) -> str:
        """The Lua that binds this script's names: ``local k`` (KEYS) and ``local a``
        (ARGV), tables (Redis's Lua 5.1 allows 200 locals and 60 upvalues a function; a
        table's fields count as neither), tails filled by a loop."""
        lines = [_lua_table("k", "KEYS", self.keys), _lua_table("a", "ARGV", self.args)]
        if self.key_tail is not None:
            lines.append(_lua_tail("k", "KEYS", len(self.keys), self.key_tail))
        if self.arg_tail is not None:
            lines.append(_lua_tail("a", "ARGV", len(self.args), self.arg_tail))
        return "\n".join(lines) + "\n"


def _ordered(
    script: str, which: str, names: tuple[str, ...], tail: Tail | None, given: Mapping[str, Any]
) -> list:
    expected = set(names) if tail is None else {*names, tail.name}
    if given.keys() != expected:
        missing = sorted(expected - given.keys())
        unknown = sorted(given.keys() - expected)
        raise ProtocolError(f"{script}.lua {which}: missing {missing}, unknown {unknown}")
    out = [given[name] for name in names]
    if tail is not None:
        out += _flat_tail(script, which, tail, given[tail.name])
    return out


def _flat_tail(script: str, which: str, tail: Tail, records: Iterable[Any]) -> list:
    if len(tail.fields) == 1:
        return list(records)
    fields = set(tail.fields)
    out: list = []
    for record in records:
        if record.keys() != fields:
            raise ProtocolError(
                f"{script}.lua {which} {tail.name}: a record has {sorted(record)}, "
                f"expected {sorted(fields)}"
            )
        out += [record[field] for field in tail.fields]
    return out


def _lua_table(var: str, source: str, names: tuple[str, ...]) -> str:
    fields = ", ".join(f"{name} = {source}[{i}]" for i, name in enumerate(names, 1))
    return f"local {var} = {{{fields}}}"


def _lua_tail(var: str, source: str, after: int, tail: Tail) -> str:
    width = len(tail.fields)
    if width == 1:
        item = f"{source}[i]"
    else:
        item = (
            "{"
            + ", ".join(
                f"{field} = {source}[i + {j}]" if j else f"{field} = {source}[i]"
                for j, field in enumerate(tail.fields)
            )
            + "}"
        )
    return (
        f"{var}.{tail.name} = {{}}\n"
        f"for i = {after + 1}, #{source}, {width} do "
        f"{var}.{tail.name}[#{var}.{tail.name} + 1] = {item} end"
    )
