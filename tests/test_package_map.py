"""The runtime package's own map (``seatlease/__init__.py``'s docstring) names every room
and every shared leaf of the tree, and nothing that is not there: a module moved or
added changes the map in the same change."""

from __future__ import annotations

import re
from pathlib import Path

import seatlease

RUNTIME = Path(__file__).resolve().parent.parent / "shared" / "seatlease"


def test_the_package_docstring_maps_every_room_and_leaf_and_only_those():
    # A map line is two spaces, a name, then its job after at least two spaces.
    named = re.findall(r"^  ([a-z_]+)  +\S", seatlease.__doc__, re.MULTILINE)
    assert len(named) == len(set(named)), named
    rooms = {p.parent.name for p in RUNTIME.glob("*/__init__.py")}
    leaves = {p.stem for p in RUNTIME.glob("*.py")} - {"__init__", "_version"}
    assert set(named) == rooms | leaves, set(named) ^ (rooms | leaves)
