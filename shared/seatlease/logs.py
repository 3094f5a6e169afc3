"""Structured logs through the standard library's ``logging``: every record of the
``seatlease`` logger becomes one JSON object per line, which Cloud Logging parses
(``severity`` and ``message`` become the entry's severity and summary; the other keys
land in ``jsonPayload``). Never pass an API key, password or AUTH string here.

``configure()`` is the one place the handler, the stream and the level are set; the
first ``log()`` call configures the defaults (stdout, ``LOG_LEVEL`` or INFO) when no one
did, so a Cloud Function needs no set-up code. The CLI configures its own (stderr, quiet
unless ``LOG_LEVEL`` says otherwise) so that its stdout stays its answer.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, TextIO

NOTICE = 25  # Cloud Logging's NOTICE: between INFO and WARNING (admin changes)
logging.addLevelName(NOTICE, "NOTICE")

LOGGER = logging.getLogger("seatlease")

# Cloud Logging's LogSeverity names for the standard levels.
_SEVERITY = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    NOTICE: "NOTICE",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}
_LEVEL = {name: level for level, name in _SEVERITY.items()}


class CloudLoggingFormatter(logging.Formatter):
    """One JSON object per record: ``severity``, ``message``, then the record's
    ``fields`` (passed as ``extra={"fields": {...}}``) and, with ``exc_info``, the
    ``stack_trace`` Cloud Error Reporting groups by."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelno, record.levelname),
            "message": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class _CurrentStream(logging.StreamHandler):
    """A handler writing to whatever ``sys.stdout``/``sys.stderr`` is *now* (test
    capture and the CLI swap them), not the object that was current at configure time."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return getattr(sys, self._name)

    @stream.setter
    def stream(self, _value: TextIO) -> None:  # StreamHandler.__init__ assigns it
        pass


_handler: logging.Handler | None = None


def configure(level: str | int | None = None, stream: str = "stdout") -> None:
    """Install the JSON handler on the ``seatlease`` logger (replacing an earlier one).

    ``level``: a severity name or number; default ``LOG_LEVEL`` from the environment,
    else INFO, and at most INFO on Cloud Run (``K_SERVICE`` set), where the monitoring
    counts INFO lines. ``stream``: ``"stdout"`` (Cloud Functions, the local stack) or
    ``"stderr"`` (the CLI). Records do not propagate to the root logger: a host that
    configured root logging would otherwise print each line twice.
    """
    global _handler
    raised = None
    if level is None:
        level = os.environ.get("LOG_LEVEL", "INFO")
        if os.environ.get("K_SERVICE") and _LEVEL.get(level.strip().upper(), 0) > logging.INFO:
            # Deployed (Cloud Run sets K_SERVICE): the request lines and the reaper's
            # "reaper run" line are INFO, and the log-based metrics count them (the 5xx
            # ratio's denominator, the "no successful reaper run" alert). Above INFO they
            # would vanish and the alerts with them: a deployed function never runs above
            # INFO.
            raised, level = level, "INFO"
    if isinstance(level, str):
        level = _LEVEL.get(level.strip().upper(), logging.INFO)
    handler = _CurrentStream(stream)
    handler.setFormatter(CloudLoggingFormatter())
    if _handler is not None:
        LOGGER.removeHandler(_handler)
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
    LOGGER.propagate = False
    _handler = handler
    if raised is not None:
        log(
            "WARNING",
            f"LOG_LEVEL={raised} ignored: INFO is the highest level a deployed function "
            "runs at (the monitoring's log-based metrics read INFO lines)",
        )


def log(severity: str, message: str, **fields: Any) -> None:
    """Log ``message`` at a Cloud Logging severity with structured ``fields``."""
    handler = _handler
    if handler is None:
        configure()
        handler = _handler
    level = _LEVEL.get(severity, logging.INFO)
    if not LOGGER.isEnabledFor(level):
        return
    if _writes_alone(handler, level):
        # The line the formatter would write, written the way the handler would, without
        # a LogRecord (its caller lookup walks the stack, its constructor reads the time,
        # the thread and the process): a third of a request's logging cost, and every
        # client request logs one line (py-spy, docs/benchmarks.md).
        line = json.dumps(
            {"severity": _SEVERITY.get(level, severity), "message": message, **fields},
            default=str,
        )
        handler.acquire()
        try:
            stream = handler.stream
            stream.write(line + "\n")
            stream.flush()
            written = True
        except Exception:  # never the caller's failure: the handler reports it below
            written = False
        finally:
            handler.release()
        if written:
            return
    LOGGER.log(level, message, extra={"fields": fields})


def _writes_alone(handler: logging.Handler | None, level: int) -> bool:
    """Is ``handler`` (this module's) the only place a record of ``level`` goes? Then a
    line can be written directly; anyone else listening (a test's capture, a host's
    handler or filter) gets real LogRecords."""
    return (
        handler is not None
        and LOGGER.handlers == [handler]
        and not LOGGER.propagate
        and not LOGGER.filters
        and not handler.filters
        and level >= handler.level
        and type(handler.formatter) is CloudLoggingFormatter
    )
