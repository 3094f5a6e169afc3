"""Structured logs: one JSON object per line on stdout, which Cloud Logging parses
(``severity`` and ``message`` become the entry's severity and summary). Never pass an API
key, password or AUTH string here."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_LEVELS = {"DEBUG": 10, "INFO": 20, "NOTICE": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


def log(severity: str, message: str, **fields: Any) -> None:
    threshold = _LEVELS.get(os.environ.get("LOG_LEVEL", "INFO").upper(), 20)
    if _LEVELS.get(severity, 20) < threshold:
        return
    line = json.dumps({"severity": severity, "message": message, **fields}, default=str)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
