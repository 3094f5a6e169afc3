"""The runtime's rooms (docs/design.md, "Package layout and layering"): the map names
every folder of the package and nothing else, and every module stays small enough to
read at once."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNTIME = REPO / "shared" / "seatlease"
MAX_LINES = 600


def test_no_runtime_module_is_over_600_lines():
    too_long = {
        path.relative_to(RUNTIME).as_posix(): lines
        for path in RUNTIME.rglob("*.py")
        # a migration's frozen copy of old code is kept as it was released
        if not path.name.startswith("_frozen_")
        and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, too_long


def test_the_design_map_names_every_room_and_only_those():
    design = (REPO / "docs" / "design.md").read_text()
    section = design.split("## Package layout and layering", 1)[1].split("\n## ", 1)[0]
    mapped = set(re.findall(r"^\s*\| `([a-z_]+)/` \|", section, re.MULTILINE))
    rooms = {
        path.parent.name
        for path in RUNTIME.glob("*/__init__.py")
        if path.parent.name != "__pycache__"
    }
    assert mapped == rooms, mapped ^ rooms
    leaves = {p.stem for p in RUNTIME.glob("*.py")} - {"__init__", "_version"}
    leaf_row = next(line for line in section.splitlines() if line.strip().startswith("| leaves"))
    assert leaves == set(re.findall(r"`([a-z_]+)`", leaf_row.split("|")[2])), leaf_row
