"""Input and output tables of a Terraform module, rendered from its variables.tf and
outputs.tf, for the module READMEs.

    python tests/terraform/tfdoc.py           # rewrite the tables in every module README
    python tests/terraform/tfdoc.py --check   # exit 1 when a README is out of date

The tables sit between ``<!-- BEGIN TFDOC -->`` and ``<!-- END TFDOC -->``; the rest of
a README is written by hand. test_readmes.py fails when a table differs from what this
renders, so a changed variable or output cannot leave its README behind.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from tfconfig import META, Config, attr, expr, load, module_dirs

BEGIN, END = "<!-- BEGIN TFDOC -->", "<!-- END TFDOC -->"


def _cell(text: str) -> str:
    return text.replace('\\"', '"').replace("|", "\\|").replace("\n", " ")


def _type(value: Any) -> str:
    text = expr(value)
    text = re.sub(r"object\(\{.*\}\)", "object({...})", text, flags=re.S)
    return f"`{text}`"


def _default(var: dict) -> str:
    if "default" not in var:
        return "*(required)*"
    value = var["default"]
    if isinstance(value, str):
        return f"`{_cell(expr(value))}`" if value else '`""`'
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in META}
    return f"`{_cell(json.dumps(value))}`"


def render(cfg: Config) -> str:
    """The two tables of one module, between the markers."""
    lines = [BEGIN, "", "| input | type | default | description |", "|---|---|---|---|"]
    for name, var in cfg.variables.items():
        description = _cell(attr(var, "description", ""))
        flags = [f for f in ("sensitive", "ephemeral") if attr(var, f) is True]
        if flags:
            description += f" ({', '.join(flags)})"
        lines.append(f"| `{name}` | {_type(attr(var, 'type'))} | {_default(var)} | {description} |")
    lines += ["", "| output | description |", "|---|---|"]
    for name, out in cfg.outputs.items():
        description = _cell(attr(out, "description", ""))
        flags = [f for f in ("sensitive", "ephemeral") if attr(out, f) is True]
        if flags:
            description += f" ({', '.join(flags)})"
        lines.append(f"| `{name}` | {description} |")
    return "\n".join([*lines, "", END])


def tables_in(readme: str) -> str | None:
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), readme, flags=re.S)
    return match.group(0) if match else None


def update(directory: Path, check: bool) -> bool:
    """Rewrite (or, with check, compare) one module README; True when up to date."""
    readme = directory / "README.md"
    text = readme.read_text(encoding="utf-8")
    current = tables_in(text)
    assert current is not None, f"{readme}: no {BEGIN} ... {END} section"
    wanted = render(load(directory))
    if current == wanted:
        return True
    if not check:
        readme.write_text(text.replace(current, wanted), encoding="utf-8")
    return False


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = [d.name for d in module_dirs() if not update(d, check)]
    for name in stale:
        print(f"terraform/modules/{name}/README.md: {'out of date' if check else 'updated'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
