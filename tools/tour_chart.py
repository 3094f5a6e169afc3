#!/usr/bin/env python3
"""Render docs/usage-chart.png, the picture the README tour's chart step shows, the way a
reader following the tour makes it: a local stack (``seatlease local`` on a free port, in
a temporary folder, SQLite), a short scripted hold on the demo license (through the
vendor client, laptop-1 takes a seat, laptop-2 a second one 2 s later, both hold
``HOLD_SECONDS`` and release), the audit trail reaching the database (reaper -> Pub/Sub
emulator -> audit), then, from a second process in that folder as from a second terminal,
``seatlease report usage --tenant demo --chart usage.png``.

Usage:
    .venv/bin/python tools/tour_chart.py                 # rewrite docs/usage-chart.png
    .venv/bin/python tools/tour_chart.py --out x.png     # somewhere else

tests/test_tour_chart.py runs the same ``render`` and reads the series back from the PNG
(``seatlease_cli.report.read_chart_series``), not its pixels.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "docs" / "usage-chart.png"
HOLD_SECONDS = 6.0
AUDIT_WAIT_SECONDS = 60.0


def hold(base: str, key: str, license_id: str) -> list[str]:
    """Two seats taken 2 s apart (through the vendor client), held, released: the
    sessions."""
    import json
    import urllib.request

    from seatlease_client import SeatClient

    # Verified, as a product is: pinned to the keys of the local stack it started (issue 48).
    with urllib.request.urlopen(f"{base}/keys", timeout=10) as served:  # noqa: S310
        pinned = [jwk["x"] for jwk in json.load(served)["keys"]]
    client = SeatClient(base, key, pinned_keys=pinned)
    sessions = []
    for name in ("laptop-1", "laptop-2"):
        sessions.append(client.acquire(license_id, name)["session_id"])
        time.sleep(2.0 if name == "laptop-1" else HOLD_SECONDS)
    for session in sessions:
        client.release(license_id, session)
        time.sleep(0.5)
    return sessions


def wait_for_audit(tenant: str, license_id: str, events: int) -> None:
    from seatlease.records import event_log

    deadline = time.monotonic() + AUDIT_WAIT_SECONDS
    while len(event_log.list_events(tenant, license_id)) < events:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the audit trail has not got {events} events after the wait")
        time.sleep(0.5)


def render(out: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """Start a local stack in ``folder``, play the hold, draw the chart to ``out`` with
    the CLI from a second process; returns that process (its output is the report)."""
    from seatlease.records import db
    from seatlease.seats import redisconn
    from seatlease_cli.localstack import DEMO_LICENSE, DEMO_TENANT, LocalStack
    from seatlease_cli.procs import free_port

    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        os.environ.pop(var, None)
    redisconn.reset()
    db.reset()
    previous = Path.cwd()
    os.chdir(folder)
    stack = LocalStack(port=free_port(), reaper_interval=0.5, say=lambda _line: None)
    try:
        state = stack.start()
        hold(state["base_url"], state["api_key"], DEMO_LICENSE)
        wait_for_audit(DEMO_TENANT, DEMO_LICENSE, 4)
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        return subprocess.run(
            [sys.executable, "-c", "from seatlease_cli import main; raise SystemExit(main())",
             "report", "usage", "--tenant", DEMO_TENANT, "--chart", str(out.resolve())],
            env=env, cwd=folder, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    finally:
        stack.stop()
        redisconn.reset()
        db.reset()
        os.chdir(previous)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seatlease-tour-") as folder:
        done = render(args.out, Path(folder))
    print(done.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
