"""One contract for the holdout of every client: each client folder has an executable
``hold`` at its root; ``./hold URL API_KEY LICENSE_ID CLIENT_ID`` builds what it needs,
takes a seat, prints one JSON line ``{"session_id", "seats_used", "seats_total",
"verified": true}`` after verifying the lease token against ``URL/keys``, keeps the seat
by heartbeats until its standard input closes, then releases it and exits 0. Checked
here for the C, Java, Node, Go and Python clients against the served functions."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from subprocess import PIPE, Popen

import pytest
from http_support import post_json

REPO = Path(__file__).resolve().parent.parent
HOLDS = {
    "c": REPO / "shared" / "clients" / "c",
    "java": REPO / "shared" / "clients" / "java",
    "node": REPO / "shared" / "clients" / "node",
    "go": REPO / "shared" / "clients" / "go",
    "python": REPO / "shared" / "client",
}


@pytest.mark.parametrize("client", sorted(HOLDS))
def test_hold_keeps_a_verified_seat_until_stdin_closes_then_releases_it(client, client_functions):
    license_id = f"hold-{client}"
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": license_id, "seats": 3, "lease_seconds": 2},
    )
    folder = HOLDS[client]
    assert os.access(folder / "hold", os.X_OK), f"{folder}/hold is not executable"
    env = {**os.environ, "PYTHON": sys.executable}
    args = ["./hold", client_functions.url, client_functions.api_key, license_id, "pc-1"]
    hold = Popen(args, cwd=folder, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True)
    try:
        assert hold.stdout is not None and hold.stdin is not None
        raw = hold.stdout.readline()  # after building what it needs
        assert raw, hold.stderr.read() if hold.poll() is not None and hold.stderr else raw
        line = json.loads(raw)
        assert set(line) == {"session_id", "seats_used", "seats_total", "verified"}, line
        assert (line["seats_used"], line["seats_total"], line["verified"]) == (1, 3, True)
        live_url = f"{client_functions.url}/_test/live?license_id={license_id}"
        _, live = post_json(live_url, {})
        assert live == [{"session_id": line["session_id"], "client_id": "pc-1"}]
        time.sleep(3)  # past a lease of 2 s: kept by heartbeats
        _, live = post_json(live_url, {})
        assert live == [{"session_id": line["session_id"], "client_id": "pc-1"}]
        assert hold.poll() is None
        hold.stdin.close()
        assert hold.wait(timeout=60) == 0, hold.stderr.read() if hold.stderr else ""
    finally:
        hold.kill()
        hold.wait()
    _, live = post_json(live_url, {})
    assert live == []
