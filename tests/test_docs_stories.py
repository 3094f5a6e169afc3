"""The docs tell the stories the code tells (issue 42): read as a user reads them.

- A suspension: new seats are refused (403 license_suspended) while held seats keep
  heartbeating (docs/design.md); docs/client.md once said a 403 on a heartbeat ends the
  seat, which a suspended license never answers to a heartbeat.
- The clients' prerequisites are named where the README's `hold` commands are, with one
  install line (the C client's libcurl, libsodium and cJSON; the Java client's gson)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_suspension_keeps_held_seats_in_every_doc() -> None:
    client = (REPO / "docs" / "client.md").read_text()
    design = (REPO / "docs" / "design.md").read_text()
    assert "A suspended license refuses new acquires (`403`); leases already held run" in design
    # docs/client.md: the shared behaviour, and the Python table's row
    assert "**A suspension keeps held seats.**" in client
    row = next(
        line for line in client.splitlines() if line.startswith("| the license is suspended")
    )
    assert "stay held" in row and "heartbeats go on" in row, row
    # no row of a table says a heartbeat's 403 ends the seat for a suspension
    for line in client.splitlines():
        if line.startswith("|") and "heartbeat" in line and "403" in line:
            assert "license_suspended" not in line or "stay" in line, line


def test_the_readme_names_the_clients_prerequisites_beside_hold() -> None:
    readme = (REPO / "README.md").read_text()
    at = readme.index("shared/clients/c/hold http://")
    nearby = readme[at : at + 2500]
    for package in ("libcurl", "libsodium", "libcjson", "libgoogle-gson-java"):
        assert package in nearby, package
    assert re.search(r"apt-get install [^\n]*libsodium-dev[^\n]*libgoogle-gson-java", nearby)
