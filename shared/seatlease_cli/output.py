"""Printing for the CLI: a readable table by default, JSON with ``--json``.

Everything the CLI prints passes ``visible`` (``main`` wraps stdout and stderr in
``VisibleControls``): a control character in a key label, a user or a host name (which
customers and their end users choose) is shown as ``\x1b``, never sent to the
operator's terminal, where an escape sequence could retitle it, clear it or rewrite what
it shows. Only newline, tab and CSV's line end (CR LF) pass as they are. JSON output
escapes them itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

# C0 controls but newline and tab, DEL, and the C1 controls (U+0080..U+009F: a terminal
# may read U+009B as CSI, the start of an escape sequence).
_SHOWN = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if chr(code) not in "\n\t"
}


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab written out (``\\x1b``);
    a carriage return right before a newline (CSV's line end) stays."""
    return "\r\n".join(part.translate(_SHOWN) for part in text.split("\r\n"))


class VisibleControls:
    """A text stream that writes what it is given through ``visible``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, fileno, ...
        return getattr(self.stream, name)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return visible(str(value))  # before the widths are measured


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


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
