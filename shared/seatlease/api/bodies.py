"""Request bodies before any framework touches them: a WSGI layer each function installs
around its app (``seatlease.api.http.guard_bodies``), under the local server and under
gunicorn as Cloud Functions runs it.

- **A body the call does not need is never read.** For a method that takes none (``GET
  /keys``, ``GET /portal``, any call of the reaper) the request's input is replaced by an
  empty one before Flask or functions-framework sees it: functions-framework's
  after-request hook (``read_request``), which reads a whole body into memory, finds
  nothing, and the rest is the server's to discard (gunicorn drains at most 64 KiB for
  5 s, then closes; ``seatlease_cli.devserver`` at most 1 MiB of what has arrived).
- **A body the call needs arrives in bounded time.** ``BODY_READ_SECONDS`` from the
  start of its read, a watchdog shuts the connection's reading side: the read ends and
  the call is a 408 ``request_timeout`` (a slow client cannot hold a thread).
- **A body read here (the audit's CloudEvent, which functions-framework would read
  whole) is bounded** by ``max_bytes`` (413 on a ``Content-Length`` over it before a
  byte is read, and as soon as a chunked body passes it), and a malformed chunked body
  is a 400: the contract's JSON error, never a 500.

This module imports no web framework: it speaks WSGI.
"""

from __future__ import annotations

import heapq
import io
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from seatlease.logs import log

BODY_READ_SECONDS = 10.0
PIECE = 64 * 1024

Environ = dict[str, Any]
WsgiApp = Callable[[Environ, Callable], Iterable[bytes]]


class BodyError(Exception):
    """A body refused while it was read: status, code and message of the answer."""

    def __init__(self, status: int, code: str, message: str, outcome: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.outcome = outcome or code


class _Watch:
    __slots__ = ("done", "fired", "sock")

    def __init__(self, sock: Any) -> None:
        self.sock, self.done, self.fired = sock, False, False


class Watchdog:
    """One thread for the whole process that ends the reads of connections past their
    deadline (``shutdown(SHUT_RD)``: a blocked read returns at once, the answer can still
    be written).

    The thread looks every ``POLL_SECONDS``; arming never wakes it. (It did: a request
    whose body was read before the woken thread ran left the heap empty, so the next
    request woke it again, a notify and a thread switch on every call: 13 % of acquire's
    GIL time under py-spy, docs/benchmarks.md.) A cut then comes at most
    ``POLL_SECONDS`` late, against a deadline of ``BODY_READ_SECONDS``."""

    POLL_SECONDS = 0.25

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, environ: Environ, seconds: float) -> _Watch | None:
        """Watch this request's connection for ``seconds``; None without a socket (a test
        client)."""
        sock = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
        if sock is None:
            return None
        watch = _Watch(sock)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="body-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), watch))
        return watch

    def disarm(self, watch: _Watch | None) -> bool:
        """Stop watching; True if the deadline had already passed (the read was cut)."""
        if watch is None:
            return False
        with self._lock:
            watch.done = True
            return watch.fired

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_SECONDS)
            with self._lock:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
                    watch = heapq.heappop(self._heap)[2]
                    if watch.done:
                        continue
                    watch.done = watch.fired = True
                    try:
                        watch.sock.shutdown(socket.SHUT_RD)
                    except OSError:
                        pass  # already closed


WATCHDOG = Watchdog()


def timed_out() -> BodyError:
    return BodyError(
        408,
        "request_timeout",
        f"The request body did not arrive within {BODY_READ_SECONDS:.0f} s.",
        "body_timeout",
    )


def too_large(max_bytes: int) -> BodyError:
    return BodyError(413, "payload_too_large", f"The body may be at most {max_bytes} B.")


def is_chunked(environ: Environ) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def declared_length(environ: Environ) -> int | None:
    """The ``Content-Length`` (None when absent or unreadable: then chunked or none)."""
    try:
        return max(0, int(environ.get("CONTENT_LENGTH") or ""))
    except ValueError:
        return None


def has_body(environ: Environ) -> bool:
    return is_chunked(environ) or bool(declared_length(environ))


def set_body(environ: Environ, body: bytes) -> None:
    """Make ``body`` the request's whole input, with its length (no chunking left)."""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    environ["wsgi.input_terminated"] = False


def read_bounded(environ: Environ, max_bytes: int) -> bytes:
    """The whole body, at most ``max_bytes`` of it ever in memory and within
    ``BODY_READ_SECONDS``; ``BodyError`` otherwise."""
    declared = declared_length(environ)
    chunked = is_chunked(environ)
    if not chunked and declared is not None and declared > max_bytes:
        raise too_large(max_bytes)
    if not chunked and not declared:
        return b""
    limit = max_bytes + 1 if chunked or declared is None else declared
    stream = environ["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    watch = WATCHDOG.arm(environ, BODY_READ_SECONDS)
    failure: BodyError | None = None
    try:
        while size < limit:
            chunk = stream.read(min(PIECE, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:  # a reset, a timeout, gunicorn's NoMoreData, werkzeug's bad chunk header
        failure = BodyError(400, "invalid_request", _short_or_malformed(chunked))
    except Exception:  # gunicorn's own parse errors (InvalidChunkSize, ...)
        failure = BodyError(400, "invalid_request", "The body's chunking is malformed.")
    if WATCHDOG.disarm(watch):
        raise timed_out()
    if failure is not None:
        raise failure
    if size > max_bytes:
        raise too_large(max_bytes)
    if not chunked and declared is not None and size < declared:
        raise BodyError(
            400,
            "invalid_request",
            "The request body ended before its Content-Length.",
            "client_disconnected",
        )
    return b"".join(chunks)


def _short_or_malformed(chunked: bool) -> str:
    if chunked:
        return "The body's chunking is malformed or it ended before its last chunk."
    return "The request body ended before its Content-Length."


def answer(start_response: Callable, error: BodyError) -> list[bytes]:
    body = json.dumps(
        {"error": {"code": error.code, "message": error.message}}, separators=(",", ":")
    ).encode()
    start_response(
        f"{error.status} {_REASONS.get(error.status, 'Error')}",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ],
    )
    return [body]


_REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large"}


def guard(
    app: WsgiApp, name: str, *, body_methods: tuple[str, ...], read_max_bytes: int | None
) -> WsgiApp:
    """``app`` behind the rules above. ``body_methods``: the methods whose body the
    function needs (others' bodies are never read). ``read_max_bytes``: read the body
    here, bounded (for a function whose framework would read it whole); None: the
    function reads it itself (``seatlease.api.http.read_body``, bounded the same way)."""

    def guarded(environ: Environ, start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in body_methods:
            if has_body(environ):
                set_body(environ, b"")  # never read: the server discards it, or closes
            return app(environ, start_response)
        if read_max_bytes is not None:
            try:
                set_body(environ, read_bounded(environ, read_max_bytes))
            except BodyError as error:
                severity = "WARNING" if error.status != 413 else "NOTICE"
                log(severity, f"{name} {error.status} {error.outcome}", function=name,
                    status=error.status, outcome=error.outcome)  # fmt: skip
                return answer(start_response, error)
        return app(environ, start_response)

    return guarded
