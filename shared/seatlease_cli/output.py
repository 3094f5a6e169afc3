"""Printing for the CLI: a readable table by default, JSON with ``--json``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in
              enumerate(columns)]  # fmt: skip
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def emit(data: Any, as_json: bool, columns: Sequence[str] | None = None) -> None:
    """Print ``data`` (a dict or a list of dicts) as JSON or as a table."""
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    elif isinstance(data, list):
        print(table(data, columns or (list(data[0]) if data else [])))
    else:
        width = max((len(k) for k in data), default=0)
        for key, value in data.items():
            print(f"{key.ljust(width)}  {_cell(value)}")


def add_json_flag(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
