"""This machine's fingerprint: what binds a borrowed seat to the machine it was borrowed
on (docs/client.md, "Borrowed seats stay on their machine"). Every seatlease client
(Python, Node, Go) computes it the same way, and shared/clients/testdata/vectors.json
holds examples:

    fingerprint = lowercase hex SHA-256 of "seatlease-machine/1:" + the machine id,
                  the id trimmed and lowercased (UTF-8)

The machine id is the operating system's own stable one: Linux ``/etc/machine-id`` (else
``/var/lib/dbus/machine-id``), macOS the ``IOPlatformUUID`` (``ioreg -rd1 -c
IOPlatformExpertDevice``), Windows the ``MachineGuid`` under
``HKLM\\SOFTWARE\\Microsoft\\Cryptography``. A product may give its own
(``SeatClient(machine_id=...)``), e.g. in a container whose machine id is not stable.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

PREFIX = "seatlease-machine/1:"
_LINUX_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def fingerprint(machine_id: str) -> str:
    """The fingerprint of a machine id (64 lowercase hex characters)."""
    return hashlib.sha256((PREFIX + machine_id.strip().lower()).encode("utf-8")).hexdigest()


def machine_id() -> str:
    """This machine's id; ``RuntimeError`` when the system has none to give."""
    found = _read()
    if not found or not found.strip():
        raise RuntimeError("this machine has no stable machine id: pass SeatClient(machine_id=...)")
    return found.strip()


def _read() -> str | None:
    if sys.platform == "darwin":
        out = _run(["ioreg", "-rd1", "-c", "IOPlatformExpertDevice"])
        match = re.search(r'"IOPlatformUUID"\s*=\s*"([^"]+)"', out or "")
        return match.group(1) if match else None
    if sys.platform == "win32":
        out = _run(["reg", "query", r"HKLM\SOFTWARE\Microsoft\Cryptography", "/v", "MachineGuid"])
        match = re.search(r"MachineGuid\s+REG_SZ\s+(\S+)", out or "")
        return match.group(1) if match else None
    for path in _LINUX_FILES:
        try:
            with open(path, encoding="utf-8") as source:
                text = source.read().strip()
        except OSError:
            continue
        if text:
            return text
    return None


def _run(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def this_machine(override: str | None = None) -> str:
    """The fingerprint of ``override`` if given, else of this machine's id."""
    return fingerprint(override if override is not None else machine_id())
