"""One attempt of one delivery: ``send`` (an HTTP POST, signed; never raises), and what
it is given (``Claimed``) and gives back (``Outcome``). ``deliver`` claims, sends on its
threads and records.

The URL is checked again (``urls.resolve_for_send``) and the connection goes to that
checked address, with the URL's host as ``Host``, TLS SNI and the name the certificate
must match; no redirect is followed. The timeout bounds the whole attempt, connection to
answer (a watchdog shuts the socket). Signed with the endpoint's secrets (``v1``) and the
deployment's signing key (``v1a``, when it has one). A 2xx is ``delivered``; a timeout,
a refused or failed connection, a 5xx, 408 or 429 is to be retried (``pending``, with the
receiver's ``Retry-After`` up to an hour); any other answer is ``final``.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from seatlease import clock
from seatlease.errors import InvalidRequest
from seatlease.webhooks import signing, urls
from seatlease.webhooks.store import DELIVERED, FINAL, PENDING

MAX_RETRY_AFTER_SECONDS = 3600.0
MAX_ERROR_CHARS = 500
ANSWER_EXCERPT_BYTES = 200  # of a refusing answer's body, for the tenant's delivery log
USER_AGENT = "seatlease-webhooks/1"


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claimed delivery and what its send needs. ``secrets`` is never shown."""

    id: int
    claim: str
    endpoint_id: str
    tenant_id: str
    url: str
    event_id: str
    payload: str
    attempts: int
    created_at: datetime
    secrets: tuple[str, ...] = ()
    problem: str | None = None  # the secrets do not open: recorded as a failed attempt
    endpoint_failing: bool = False  # when claimed: a 2xx then makes it ok again

    def __repr__(self) -> str:
        return f"Claimed(id={self.id}, endpoint_id={self.endpoint_id!r})"


@dataclass(frozen=True, slots=True)
class Outcome:
    at: datetime
    kind: str  # DELIVERED, FINAL or PENDING (to retry)
    status: int | None
    latency_ms: int
    error: str | None
    retry_after: float | None = None


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a checked address, with the URL's name for SNI and the certificate."""

    def __init__(self, address: str, name: str, port: int, timeout: float) -> None:
        super().__init__(address, port, timeout=timeout, context=ssl.create_default_context())
        self._name = name

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self._name)  # type: ignore[attr-defined]


def send(
    item: Claimed,
    timeout: float,
    local: bool,
    key: Any,
    now: Callable[[], datetime] = clock.now,
) -> Outcome:
    """One attempt of one delivery; never raises."""
    at, started = now(), time.monotonic()

    def outcome(kind: str, status: int | None, error: str | None, **extra: Any) -> Outcome:
        latency = round((time.monotonic() - started) * 1000)
        return Outcome(at, kind, status, latency, error and error[:MAX_ERROR_CHARS], **extra)

    if item.problem:
        return outcome(PENDING, None, item.problem)
    try:
        address, name, port = urls.resolve_for_send(item.url, local)
    except InvalidRequest as exc:  # no address now, or one refused: retried (DNS changes)
        return outcome(PENDING, None, f"not sent: {exc.message}")
    parts = urlsplit(item.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = item.payload.encode("utf-8")
    try:
        headers = signing.signed_headers(item.event_id, body, list(item.secrets), key,
                                         int(time.time()))  # fmt: skip
    except ValueError as exc:  # an event id no header can carry: no attempt will do better
        return outcome(FINAL, None, f"not sent: {exc}")
    headers.update(
        {
            "Host": _host_header(name, port, parts.scheme),
            "User-Agent": USER_AGENT,
            "Content-Type": "application/json",
        }
    )
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = _PinnedHTTPS(address, name, port, timeout)
    else:
        conn = http.client.HTTPConnection(address, port, timeout=timeout)
    cut = threading.Event()
    watchdog = threading.Timer(timeout, _cut, (conn, cut))  # the whole attempt's bound
    watchdog.start()
    try:
        conn.request("POST", path, body, headers)
        answer = conn.getresponse()
        status = answer.status
        excerpt = b"" if 200 <= status < 300 else answer.read(ANSWER_EXCERPT_BYTES)
        retry_after = _retry_after(answer.getheader("Retry-After"))
    except Exception as exc:  # the connection or the answer failed: retried
        return outcome(PENDING, None, _failure(exc, cut.is_set(), timeout))
    finally:
        watchdog.cancel()
        conn.close()
    if 200 <= status < 300:
        return outcome(DELIVERED, status, None)
    error = f"HTTP {status}" + (f": {_printable(excerpt)}" if excerpt.strip() else "")
    if status in (408, 429) or status >= 500:
        return outcome(PENDING, status, error, retry_after=retry_after)
    if 300 <= status < 400:
        error += " (redirects are not followed)"
    return outcome(FINAL, status, error)


def _cut(conn: http.client.HTTPConnection, cut: threading.Event) -> None:
    cut.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


def _failure(exc: Exception, cut: bool, timeout: float) -> str:
    if cut or isinstance(exc, TimeoutError):
        return f"timeout: no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: {exc.verify_message or 'certificate verify failed'}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, http.client.HTTPException):
        return f"bad HTTP answer: {type(exc).__name__} {_printable(str(exc).encode())}".strip()
    return f"connection failed: {type(exc).__name__}: {exc}"


def _host_header(name: str, port: int, scheme: str) -> str:
    host = f"[{name}]" if ":" in name else name
    return host if port == urls.DEFAULT_PORTS.get(scheme) else f"{host}:{port}"


def _printable(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return "".join(c if c.isprintable() else " " for c in text).strip()[:ANSWER_EXCERPT_BYTES]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - clock.now()).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))
