"""The Python client's ``hold`` (shared/client/hold) run by a Python that cannot import
the client (issue 52): here one that ignores PYTHONPATH and has no site-packages
(``-I -S``: the standard library only, as a bare system Python run without the project's
venv). It says, in one line on stderr, which command to run instead, and exits 2; no
traceback, no request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOLD = REPO / "shared" / "client" / "hold"


def test_hold_without_the_client_names_the_command_to_run(tmp_path) -> None:
    bare = tmp_path / "python-without-the-client"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHON=str(bare), SEATLEASE_INSECURE_SKIP_VERIFY="1")
    # A URL nothing listens on: were a request made, the answer would be another line.
    args = [str(HOLD), "http://127.0.0.1:9", "sl_key", "cad", "pc-1"]
    done = subprocess.run(
        args,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = lines
    assert line.startswith("hold: ") and "cannot import the client seatlease_client" in line
    venv_python = REPO / ".venv" / "bin" / "python"
    assert f"PYTHON={venv_python} {HOLD} URL API_KEY LICENSE_ID CLIENT_ID" in line, line
