"""The README tour's chart step: the picture it makes (docs/usage-chart.png, rendered by
tools/tour_chart.py) is checked by rendering it again after the same short scripted hold
on a real local stack and reading its series back from the PNG (not its pixels)."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

import pytest

from seatlease_cli.report import LIMIT_LABEL, STEPS_LABEL, read_chart_series

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
    """Ten seconds of use are drawn as ten seconds (exact steps: a change at each acquire
    and release), not as whole minutes of the peak band, and the chart ends at now."""
    tool = tour_chart()
    began = datetime.now(UTC)
    out = tmp_path / "usage.png"
    done = tool.render(out, tmp_path)
    ended = datetime.now(UTC)
    assert "Seats in use (peak and average) and denials per minute" in done.stdout
    (line,) = read_chart_series(out)
    assert line["license_id"] == "demo-app"
    assert set(line["labels"]) == {STEPS_LABEL, LIMIT_LABEL}
    edges = [when(e) for e in line["edges"]]
    # 0 before the first acquire (the report starts at the first event: 1), 2 while both
    # laptops hold, then 1, then 0 up to now.
    assert line["steps"] == [1, 2, 1, 0]
    assert began <= edges[0] and edges[-1] <= ended
    assert when(line["xlim"][1]) == edges[-1]  # the axis ends at now, the last step too
    spans = list(zip(line["steps"], edges, edges[1:], strict=False))  # edges: one more
    held = {n: (b - a).total_seconds() for n, a, b in spans}
    assert held[2] == pytest.approx(tool.HOLD_SECONDS, abs=1.0)
    seat_seconds = sum(n * (b - a).total_seconds() for n, a, b in spans)
    assert seat_seconds == pytest.approx(15, abs=2.5)  # laptop-1 8.5 s, laptop-2 6.5 s
    assert line["overlaps"] == []


def test_the_readme_shows_the_committed_picture():
    readme = (REPO / "README.md").read_text()
    assert "![" in readme and "docs/usage-chart.png" in readme
    (line,) = read_chart_series(REPO / "docs" / "usage-chart.png")
    assert line["license_id"] == "demo-app" and max(line["steps"]) == 2
    assert line["steps"][-1] == 0 and line["overlaps"] == []
