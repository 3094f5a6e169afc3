"""One contract for the holdout of every client: each client folder has an executable
``hold`` at its root; ``./hold URL API_KEY LICENSE_ID CLIENT_ID`` builds what it needs,
takes a seat, prints one JSON line, byte for byte the same in every language:

    {"session_id": "...", "seats_used": 1, "seats_total": 3, "seats": 1, "verified": "unpinned"}

(keys in that order, ``", "`` and ``": "`` between them, as Python's ``json.dumps``
writes it), keeps the seat by heartbeats until its standard input closes, then releases
it and exits 0. Verified by default (issue 48): the lease token must be signed by one of
the vendor's pinned keys (``SEATLEASE_PINNED_KEYS``: the keys' ``x``, comma separated),
and ``verified`` is ``true``. Without pinned keys a hold takes no seat: one line on
standard error naming ``SEATLEASE_PINNED_KEYS`` and exit status 2, unless the loud
opt-out ``SEATLEASE_INSECURE_SKIP_VERIFY=1`` is set: then ``verified`` is ``false``
(nothing was verified). A refused seat (none free) is one line on standard error and exit
status 1, never a stack trace. Checked here for the C, Java, Node, Go and Python clients
against the served functions."""

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


def pinned_keys(url: str) -> str:
    """The deployment's public keys' ``x``, comma separated (a vendor pins its own)."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/keys", timeout=10) as answer:
        return ",".join(key["x"] for key in json.load(answer)["keys"])


def hold_env(pinned: str | None, insecure: bool = False) -> dict[str, str]:
    env = {**os.environ, "PYTHON": sys.executable}
    for name in ("SEATLEASE_PINNED_KEYS", "SEATLEASE_INSECURE_SKIP_VERIFY"):
        env.pop(name, None)
    if pinned:
        env["SEATLEASE_PINNED_KEYS"] = pinned
    if insecure:
        env["SEATLEASE_INSECURE_SKIP_VERIFY"] = "1"
    return env


@pytest.mark.parametrize("pinned", [False, True], ids=["insecure", "pinned"])
@pytest.mark.parametrize("client", sorted(HOLDS))
def test_hold_keeps_a_verified_seat_until_stdin_closes_then_releases_it(
    client, pinned, client_functions
):
    license_id = f"hold-{client}-{pinned}"
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": license_id, "seats": 3, "lease_seconds": 2},
    )
    folder = HOLDS[client]
    assert os.access(folder / "hold", os.X_OK), f"{folder}/hold is not executable"
    if pinned:
        env = hold_env(pinned_keys(client_functions.url))
    else:
        env = hold_env(None, insecure=True)
    args = ["./hold", client_functions.url, client_functions.api_key, license_id, "pc-1"]
    hold = Popen(args, cwd=folder, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True)
    try:
        assert hold.stdout is not None and hold.stdin is not None
        raw = hold.stdout.readline()  # after building what it needs
        assert raw, hold.stderr.read() if hold.poll() is not None and hold.stderr else raw
        line = json.loads(raw)
        expected = {
            "session_id": line["session_id"],
            "seats_used": 1,
            "seats_total": 3,
            "seats": 1,
            "verified": pinned,
        }
        assert raw == json.dumps(expected) + "\n", raw  # the same bytes in every language
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


@pytest.mark.parametrize("client", sorted(HOLDS))
def test_a_refused_hold_is_one_line_on_stderr_and_exit_1(client, client_functions):
    """No seat free (a license of none): one line saying so, no stack trace."""
    license_id = f"hold-none-{client}"
    post_json(f"{client_functions.url}/_test/license", {"license_id": license_id, "seats": 0})
    folder = HOLDS[client]
    env = hold_env(pinned_keys(client_functions.url))
    args = ["./hold", client_functions.url, client_functions.api_key, license_id, "pc-1"]
    hold = Popen(args, cwd=folder, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True)
    out, err = hold.communicate(timeout=300)
    assert hold.returncode == 1, (hold.returncode, out, err)
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert "no_seats_available" in lines[0] or "seats" in lines[0], lines
    assert "Traceback" not in err and "at io.seatlease" not in err and "    at " not in err


@pytest.mark.parametrize("client", sorted(HOLDS))
def test_a_hold_without_pinned_keys_takes_no_seat(client, client_functions):
    """Verified by default: no pinned key and no opt-out is exit 2 and one line naming
    SEATLEASE_PINNED_KEYS, before any request (the license keeps its seats free)."""
    license_id = f"hold-unpinned-{client}"
    post_json(f"{client_functions.url}/_test/license", {"license_id": license_id, "seats": 3})
    folder = HOLDS[client]
    args = ["./hold", client_functions.url, client_functions.api_key, license_id, "pc-1"]
    hold = Popen(args, cwd=folder, env=hold_env(None), stdin=PIPE, stdout=PIPE, stderr=PIPE,
                 text=True)  # fmt: skip
    out, err = hold.communicate(timeout=300)
    assert hold.returncode == 2, (hold.returncode, out, err)
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and "SEATLEASE_PINNED_KEYS" in lines[0], err
    assert "Traceback" not in err and "    at " not in err
    _, live = post_json(f"{client_functions.url}/_test/live?license_id={license_id}", {})
    assert live == []


def test_the_five_holds_say_a_refusal_in_the_same_line(client_functions):
    """The same refusal is the same line on standard error in every language (a script
    that wraps any of them reads one format): ``hold: <code>: <the server's message>``."""
    license_id = "hold-none-same"
    post_json(f"{client_functions.url}/_test/license", {"license_id": license_id, "seats": 0})
    lines = {}
    for client in sorted(HOLDS):
        args = ["./hold", client_functions.url, client_functions.api_key, license_id, "pc-1"]
        hold = Popen(args, cwd=HOLDS[client], env=hold_env(pinned_keys(client_functions.url)),
                     stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True)  # fmt: skip
        _, err = hold.communicate(timeout=300)
        assert hold.returncode == 1, (client, err)
        lines[client] = err.strip()
    assert set(lines.values()) == {lines["python"]}, lines
    assert lines["python"].startswith("hold: no_seats_available: "), lines["python"]
