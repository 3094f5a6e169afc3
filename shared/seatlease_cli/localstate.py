"""Where ``seatlease local`` keeps its files: ``.seatlease/`` in the folder it was started
from, and in it ``local.json``, the record by which the CLI in a second terminal finds
the running stack. Written by ``localstack``, read by ``backend``: neither imports the
other for it.
"""

from __future__ import annotations

from pathlib import Path

STATE_DIR = Path(".seatlease")
STATE_FILE = STATE_DIR / "local.json"
