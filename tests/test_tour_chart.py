"""The README tour's chart step: the picture it makes (docs/usage-chart.png, rendered by
tools/tour_chart.py) is checked by rendering it again after the same short scripted hold
on a real local stack and reading its series back from the PNG (not its pixels)."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest

from seatlease_cli.report import AVERAGE_LABEL, PEAK_LABEL, read_chart_series

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.usefixtures("restore_environment")


def tour_chart():
    spec = importlib.util.spec_from_file_location("tour_chart", REPO / "tools" / "tour_chart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_tour_chart_shows_the_hold_as_it_was(tmp_path):
    tool = tour_chart()
    began = datetime.now(UTC)
    out = tmp_path / "usage.png"
    done = tool.render(out, tmp_path)
    ended = datetime.now(UTC)
    assert "Seats in use (peak and average) and denials per minute" in done.stdout
    (line,) = read_chart_series(out)
    assert line["license_id"] == "demo-app"
    assert set(line["labels"]) >= {AVERAGE_LABEL, f"{PEAK_LABEL} (per minute)", "seats (limit)"}
    edges = [when(e) for e in line["edges"]]
    # One point per minute (the hold is about 10 s long: one or two minutes), nothing
    # drawn after now: neither the last period nor the axis.
    assert 1 <= len(line["peak"]) == len(line["average"]) == len(edges) - 1 <= 2
    assert all((b - a).total_seconds() <= 60 for a, b in pairwise(edges))
    assert began.replace(second=0, microsecond=0) <= edges[0] and edges[-1] <= ended
    assert when(line["xlim"][1]) <= ended
    assert max(line["peak"]) == 2  # both laptops at once
    # laptop-1 about 8.5 s, laptop-2 about 6.5 s: 15 seat-seconds over at most two minutes
    seconds = [
        average * (b - a).total_seconds()
        for average, (a, b) in zip(line["average"], pairwise(edges), strict=True)
    ]
    assert sum(seconds) == pytest.approx(15, abs=2.5)
    assert all(a <= p for a, p in zip(line["average"], line["peak"], strict=True))


def test_the_readme_shows_the_committed_picture():
    readme = (REPO / "README.md").read_text()
    assert "![" in readme and "docs/usage-chart.png" in readme
    (line,) = read_chart_series(REPO / "docs" / "usage-chart.png")
    assert line["license_id"] == "demo-app" and max(line["peak"]) == 2
    assert len(line["average"]) == len(line["peak"]) >= 1
