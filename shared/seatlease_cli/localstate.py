"""Where ``seatlease local`` keeps its files: ``.seatlease/`` in the folder it was started
from, and in it ``local.json``, the record by which the CLI in a second terminal finds
the running stack. Written by ``localstack``, read by ``backend``: neither imports the
other for it. ``running`` tells a live record from a stale one, for both.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any

STATE_DIR = Path(".seatlease")
STATE_FILE = STATE_DIR / "local.json"


def record_port(state: Any) -> int | None:
    """The port of a record's ``base_url``; None when it has none (a damaged file)."""
    base = str(state.get("base_url", "")) if isinstance(state, dict) else ""
    try:
        return urllib.parse.urlsplit(base).port if base.startswith("http") else None
    except ValueError:
        return None


def running(state: Any) -> bool:
    """Whether the stack a record names still runs: its port answers and its process
    (when the record names one) exists."""
    from seatlease_cli.procs import port_open

    port = record_port(state)
    pid = state.get("pid") if isinstance(state, dict) else None
    return bool(port) and port_open(port) and (not isinstance(pid, int) or alive(pid))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


class AlreadyRunning(Exception):
    """This folder's stack (its ``.seatlease/local.json``) still runs: a second one would
    share its database and overwrite its record."""

    def __init__(self, port: int | None, pid: Any) -> None:
        super().__init__(
            f"a local stack is already running in this folder, on port {port} (pid {pid}, "
            f"{STATE_FILE}): use that one, or stop it first (Ctrl-C in its terminal, or "
            f"kill {pid}); a second stack needs its own folder"
        )
        self.port = port
        self.pid = pid


def claim_folder(say: Any) -> None:
    """Before ``seatlease local`` starts anything: ``AlreadyRunning`` when this folder's
    record names a stack that still runs; a record of one that stopped (its process gone
    or its port closed) is said to be replaced (the new stack writes its own)."""
    import json

    try:
        state = json.loads(STATE_FILE.read_text())
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        state = {}
    if running(state):
        raise AlreadyRunning(record_port(state), state.get("pid"))
    pid = state.get("pid") if isinstance(state, dict) else None
    say(
        f"  {STATE_FILE} is left from an earlier run (pid {pid if pid is not None else '?'}, "
        f"port {record_port(state) or '?'}: not running): replacing it"
    )
