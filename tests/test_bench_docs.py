"""docs/benchmarks.md is the benches' short current summary and bench/NOTEBOOK.md their lab
notebook: the summary names every bench script and no script that is gone, stays short
(new runs go to the notebook), and every link into the notebook lands on a section."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUMMARY = REPO / "docs" / "benchmarks.md"
NOTEBOOK = REPO / "bench" / "NOTEBOOK.md"
# The summary is a page, the notebook a record: a new run's write-up belongs there.
SUMMARY_MAX_BYTES = 16_000


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_summary_names_every_bench_script_and_only_those() -> None:
    text = SUMMARY.read_text()
    scripts = {p.name for p in (REPO / "bench").glob("*.py")}
    named = set(re.findall(r"`bench/([a-z_0-9]+\.py)`", text))
    assert named == scripts, named ^ scripts
    for folder in ("bare", "floor"):  # the HTTP bench's own functions
        assert f"`bench/{folder}/`" in text


def test_the_summary_stays_short_and_points_at_the_notebook() -> None:
    assert len(SUMMARY.read_bytes()) < SUMMARY_MAX_BYTES
    assert "](../bench/NOTEBOOK.md)" in SUMMARY.read_text()
    assert NOTEBOOK.read_text().startswith("# Benchmarks\n")


def test_every_link_into_the_notebook_lands_on_a_section() -> None:
    sections = {anchor(m) for m in re.findall(r"^#+ (.*)$", NOTEBOOK.read_text(), re.M)}
    docs = [REPO / "README.md", REPO / "terraform" / "README.md", *(REPO / "docs").glob("*.md")]
    links = 0
    for doc in docs:
        for target, section in re.findall(
            r"\]\(([^)#\s]*NOTEBOOK\.md)(?:#([^)]*))?\)", doc.read_text()
        ):
            assert (doc.parent / target).resolve() == NOTEBOOK, (doc.name, target)
            assert not section or section in sections, (doc.name, section)
            links += 1
    assert links >= 3
