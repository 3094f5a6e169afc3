"""seatlease Python client: hold a floating-license seat without thinking about heartbeats.

    from shared.client import SeatClient

    client = SeatClient("https://REGION-PROJECT.cloudfunctions.net", api_key)
    with client.lease("cad-suite", client_id="host-42", metadata={"user": "ann"}) as lease:
        run_the_product()   # heartbeats run in a background thread; released on exit

**One file, standard library only** (Python 3.10 or newer; urllib.request, http.client,
json, threading, random, signal, atexit, logging, asyncio): a vendor can copy this single
file into a product. It imports nothing from the rest of the ``shared`` package.

Behaviour (docs/client.md has the details):

- ``base_url`` is where the functions live: ``POST <base_url>/acquire``, ``/heartbeat``,
  ``/release`` (Cloud Functions' URLs; the local devserver serves the same paths).
- Network errors, ``503`` (and ``429``/``502``/``504`` from a front end) are retried with
  exponential backoff and jitter, never sooner than ``Retry-After``. Every call is safe
  to retry: acquiring again with the same ``client_id`` returns the lease already held,
  a heartbeat only extends, a release is idempotent. Other errors raise typed
  exceptions (``NoSeatsAvailable``, ``LicenseNotFound``, ...; base ``SeatError``).
- A held lease heartbeats every ``heartbeat_interval_seconds`` (told by the server)
  minus up to 25 % jitter, from a daemon thread. When the seat is lost (``410``: the
  lease expired or was revoked; or the service stayed unreachable until the lease ran
  out) the client calls ``on_lost(lease, reason)``, sets ``lease.lost`` and re-acquires
  with the same ``client_id``; a denial (``409``) is retried at ``Retry-After`` until a
  seat frees, then ``on_regained(lease)`` is called and ``lease.lost`` is False again.
- ``wait=True`` waits for a seat (up to ``timeout`` seconds, else ``SeatWaitTimeout``),
  retrying at the ``Retry-After`` of each ``409``.
- The seat is released on leaving the ``with`` block, at interpreter exit (atexit) and
  on SIGTERM (a handler installed only from the main thread, only while a seat is held,
  chained to the previous handler; with no previous Python handler the process then
  terminates by SIGTERM as it would have).
- Thread-safe: one ``SeatClient`` may serve many threads, each holding its own leases.
  No global state. The API key never appears in ``repr``, in logs or in exceptions.
"""

from __future__ import annotations

import asyncio
import atexit
import http.client
import ipaddress
import json
import logging
import os
import random
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime
from types import FrameType, TracebackType
from typing import Any

__all__ = [
    "AsyncSeatClient",
    "BackendUnavailable",
    "InvalidRequest",
    "Lease",
    "LicenseNotFound",
    "LicenseSuspended",
    "NoSeatsAvailable",
    "SeatClient",
    "SeatError",
    "SeatWaitTimeout",
    "SessionExpired",
    "Unauthenticated",
]

__version__ = "0.1.0"

log = logging.getLogger("seatlease.client")

OnLost = Callable[["Lease", str], None]
OnRegained = Callable[["Lease"], None]


# -- errors --------------------------------------------------------------------------


class SeatError(Exception):
    """An error answer from seatlease: HTTP ``status`` (0 when no answer came back),
    machine ``code``, human ``message``; ``body`` is the ``error`` object as sent."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.body: dict[str, Any] = dict(body or {})
        self._retry_after = retry_after

    def _int_field(self, name: str, default: int) -> int:
        value = self.body.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


class InvalidRequest(SeatError):
    """400: the request was refused as invalid (``body`` may hold ``details`` and
    ``max_lease_seconds``)."""


class Unauthenticated(SeatError):
    """401: the API key is missing, unknown or revoked."""


class LicenseSuspended(SeatError):
    """403: the vendor suspended this license."""


class LicenseNotFound(SeatError):
    """404: no such license for this API key's tenant."""


class NoSeatsAvailable(SeatError):
    """409: every seat is taken; a seat may free in ``retry_after_seconds``."""

    @property
    def seats_used(self) -> int:
        return self._int_field("seats_used", 0)

    @property
    def seats_total(self) -> int:
        return self._int_field("seats_total", 0)

    @property
    def retry_after_seconds(self) -> int:
        header = int(self._retry_after) if self._retry_after else 1
        return max(1, self._int_field("retry_after_seconds", header))


class SeatWaitTimeout(NoSeatsAvailable):
    """``wait=True`` and no seat came free within ``timeout`` (a ``NoSeatsAvailable``
    carrying the last denial's numbers)."""


class SessionExpired(SeatError):
    """410: the session no longer holds a seat (``reason``: ``expired`` or ``unknown``)."""

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "unknown"))


class BackendUnavailable(SeatError):
    """The service could not be reached (``status`` 0) or answered 503/429/502/504, and
    kept doing so through every retry."""

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.body.get("retry_after_seconds")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return self._retry_after


_ERRORS: dict[int, type[SeatError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: LicenseSuspended,
    404: LicenseNotFound,
    409: NoSeatsAvailable,
    410: SessionExpired,
    429: BackendUnavailable,
    502: BackendUnavailable,
    503: BackendUnavailable,
    504: BackendUnavailable,
}


def _retry_after_header(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (the service sends integer seconds; an
    HTTP date from some proxy is ignored)."""
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 86400 else None


# -- the lease -----------------------------------------------------------------------


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Lease:
    """A seat held by this process, updated in place by heartbeats and re-acquires.

    ``lost`` is True from the moment the seat is known to be gone until it is regained
    (``lost_reason`` says why). ``expires_at`` is the server's deadline (aware UTC).
    """

    def __init__(
        self, license_id: str, client_id: str, metadata: dict[str, Any] | None = None
    ) -> None:
        self.license_id = license_id
        self.client_id = client_id
        self.metadata = metadata
        self.session_id = ""
        self.expires_at: datetime | None = None
        self.lease_seconds = 0
        self.heartbeat_interval_seconds = 0
        self.seats_used = 0
        self.seats_total = 0
        self.overage = False
        self.lost = False
        self.lost_reason: str | None = None
        self.released = False

    def __repr__(self) -> str:
        return (
            f"Lease(license_id={self.license_id!r}, client_id={self.client_id!r}, "
            f"session_id={self.session_id!r}, expires_at={self.expires_at!r}, "
            f"seats={self.seats_used}/{self.seats_total}, lost={self.lost})"
        )

    def _apply(self, body: dict[str, Any]) -> None:
        self.session_id = str(body.get("session_id", self.session_id))
        if isinstance(body.get("lease_expires_at"), str):
            self.expires_at = _parse_time(body["lease_expires_at"])
        for name in ("lease_seconds", "heartbeat_interval_seconds", "seats_used", "seats_total"):
            if isinstance(body.get(name), int):
                setattr(self, name, body[name])
        if "overage" in body:
            self.overage = bool(body["overage"])


class _Keeper:
    """Keeps one lease: the first acquire, then one heartbeat (or re-acquire while the
    seat is lost) per ``step``; the thread (or asyncio task) only schedules steps."""

    def __init__(
        self,
        client: SeatClient,
        lease: Lease,
        lease_seconds: int | None,
        on_lost: OnLost | None,
        on_regained: OnRegained | None,
    ) -> None:
        self.client, self.lease, self.requested_seconds = client, lease, lease_seconds
        self.on_lost, self.on_regained = on_lost, on_regained
        self.stop = threading.Event()
        # Guards the session id between a late acquire and close(); re-entrant because
        # the SIGTERM handler may run close() in a thread that already holds it.
        self.lock = threading.RLock()
        self.failures = 0
        self.valid_until = 0.0  # monotonic time after which the server surely expired it
        self.thread: threading.Thread | None = None

    # -- requests ----------------------------------------------------------------------

    def _acquire_body(self) -> dict[str, Any]:
        return self.client._acquire_body(
            self.lease.license_id, self.lease.client_id, self.requested_seconds,
            self.lease.metadata,
        )  # fmt: skip

    def _took(self, body: dict[str, Any], received: float) -> None:
        self.lease._apply(body)
        # The server's deadline is (its processing time + lease) < (our receipt + lease).
        self.valid_until = received + self.lease.lease_seconds

    def acquire_first(self, wait: bool, timeout: float | None) -> None:
        """The ``with`` statement's acquire: raises, or waits for a seat if ``wait``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            budget = None if deadline is None else max(0.05, deadline - time.monotonic())
            try:
                body = self.client._call(
                    "acquire", self._acquire_body(), stop=self.stop, budget=budget
                )
            except BackendUnavailable:
                # Waiting for a seat also waits out an outage, within the same timeout.
                out_of_time = deadline is not None and time.monotonic() >= deadline
                if not wait or out_of_time or self.stop.wait(1.0):
                    raise
                continue
            except NoSeatsAvailable as denied:
                left = None if deadline is None else deadline - time.monotonic()
                if not wait:
                    raise
                if left is not None and left <= 0:
                    raise SeatWaitTimeout(
                        409, "seat_wait_timeout",
                        f"No seat on {self.lease.license_id!r} came free within {timeout} s.",
                        denied.body, denied.retry_after_seconds,
                    ) from None  # fmt: skip
                pause = self.client._wait_pause(denied)
                log.info(
                    "seatlease: no seat on %s (%d/%d in use); retrying in %.1f s",
                    self.lease.license_id, denied.seats_used, denied.seats_total, pause,
                )  # fmt: skip
                if self.stop.wait(pause if left is None else min(pause, left)):
                    raise
                continue
            with self.lock:
                if self.stop.is_set():  # cancelled (async) while the acquire was in flight
                    self.client._release_quietly(self.lease.license_id, body["session_id"])
                    raise SeatError(0, "cancelled", "The lease was cancelled while acquiring.")
                self._took(body, time.monotonic())
            return

    # -- the heartbeat loop ------------------------------------------------------------

    def beat_delay(self) -> float:
        """Time to the next heartbeat: the server's interval minus up to 25 % jitter, so
        thousands of copies started together do not beat in step."""
        interval = float(self.lease.heartbeat_interval_seconds or 1)
        if self.lease.lease_seconds:  # the server's whole-second interval is too long for
            interval = min(interval, self.lease.lease_seconds / 3)  # 1-2 s leases
        interval = max(0.2, interval)
        return random.uniform(interval * 0.75, interval)

    def run(self) -> None:
        delay = self.beat_delay()
        while not self.stop.wait(delay):
            delay = self.step()

    def step(self) -> float:
        """One heartbeat, or one re-acquire while the seat is lost; the next delay."""
        try:
            return self._regain() if self.lease.lost else self._beat()
        except BackendUnavailable as exc:
            return self._after_transient(exc)
        except Exception:  # a bug must not end the heartbeats: log it and carry on
            log.exception("seatlease: heartbeat step failed")
            self.failures += 1
            return self._backoff(None)

    def _beat(self) -> float:
        lease = self.lease
        body = {"license_id": lease.license_id, "session_id": lease.session_id}
        try:
            reply = self.client._send("heartbeat", body)
        except SessionExpired as gone:
            if not self.stop.is_set():
                self._lose(gone.reason)
            return 0.0  # ask for the seat again at once
        except BackendUnavailable:
            raise
        except SeatError as refused:  # 401 (key revoked), 403, 404: it cannot be renewed
            if not self.stop.is_set():
                self._lose(refused.code)
            self.failures += 1
            return self._backoff(None, cap=self.client.max_backoff)
        with self.lock:
            if not self.stop.is_set():
                self._took(reply, time.monotonic())
        self.failures = 0
        return self.beat_delay()

    def _regain(self) -> float:
        try:
            reply = self.client._send("acquire", self._acquire_body())
        except NoSeatsAvailable as denied:
            self.failures = 0
            pause = self.client._wait_pause(denied)
            log.info(
                "seatlease: seat on %s still lost (%d/%d in use); retrying in %.1f s",
                self.lease.license_id, denied.seats_used, denied.seats_total, pause,
            )  # fmt: skip
            return pause
        except BackendUnavailable:
            raise
        except SeatError as refused:  # suspended, deleted, key revoked: try now and then
            log.warning("seatlease: re-acquire of %s refused: %s", self.lease.license_id, refused)
            self.failures += 1
            return self._backoff(None, cap=self.client.max_backoff)
        with self.lock:
            if self.stop.is_set():  # closed meanwhile: give the new seat straight back
                self.client._release_quietly(self.lease.license_id, reply["session_id"])
                return 0.0
            self._took(reply, time.monotonic())
            self.lease.lost, self.lease.lost_reason = False, None
        self.failures = 0
        log.warning(
            "seatlease: seat on %s regained (session %s)",
            self.lease.license_id, self.lease.session_id,
        )  # fmt: skip
        self._callback(self.on_regained, self.lease)
        return self.beat_delay()

    def _after_transient(self, exc: BackendUnavailable) -> float:
        self.failures += 1
        if not self.lease.lost and time.monotonic() > self.valid_until:
            self._lose("unreachable")  # no renewal reached the server before the deadline
        log.info("seatlease: %s unreachable (%s); retrying", self.lease.license_id, exc)
        return self._backoff(exc.retry_after_seconds)

    def _backoff(self, retry_after: float | None, cap: float | None = None) -> float:
        # While the lease runs, never wait longer than one heartbeat interval between
        # attempts, and retry faster as the deadline nears (at most a third of the time
        # left): the seat is kept only if a renewal gets through before the deadline.
        if cap is None:
            interval = float(self.lease.heartbeat_interval_seconds or 1)
            cap = min(self.client.max_backoff, max(0.2, interval))
            left = self.valid_until - time.monotonic()
            if not self.lease.lost and left > 0:
                cap = min(cap, max(0.05, left / 3))
        return self.client._backoff_delay(self.failures - 1, retry_after, cap)

    def _lose(self, reason: str) -> None:
        with self.lock:
            if self.lease.lost:
                return
            self.lease.lost, self.lease.lost_reason = True, reason
        log.warning("seatlease: seat on %s lost (%s); re-acquiring", self.lease.license_id, reason)
        self._callback(self.on_lost, self.lease, reason)

    def _callback(self, callback: Callable[..., Any] | None, *args: Any) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:  # the product's callback must not end the heartbeats
            log.exception("seatlease: lease callback %r failed", callback)

    # -- the end -----------------------------------------------------------------------

    def close(self, budget: float | None) -> None:
        """Stop the heartbeats and release the seat (once; safe from any thread)."""
        with self.lock:
            if self.lease.released:
                return
            self.stop.set()
            self.lease.released = True
            session_id, lost = self.lease.session_id, self.lease.lost
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            # A heartbeat in flight is harmless (it answers 410 after the release) and a
            # late re-acquire releases its own seat, so this join only tidies up.
            thread.join(timeout=min(1.0, budget or 1.0))
        if session_id and not lost:
            self.client._release_quietly(self.lease.license_id, session_id, budget)


class LeaseContext:
    """``with client.lease(...) as lease``: acquire on entry, keep, release on exit."""

    def __init__(self, keeper: _Keeper, wait: bool, timeout: float | None) -> None:
        self._keeper, self._wait, self._timeout = keeper, wait, timeout
        self._entered = False

    def __enter__(self) -> Lease:
        if self._entered:
            raise RuntimeError("a lease context can be entered once; call client.lease() again")
        self._entered = True
        keeper, client = self._keeper, self._keeper.client
        # Registered before acquiring so that a SIGTERM during the acquire is handled.
        client._register(keeper)
        try:
            keeper.acquire_first(self._wait, self._timeout)
        except BaseException:
            client._unregister(keeper)
            raise
        keeper.thread = threading.Thread(
            target=keeper.run, name=f"seatlease-heartbeat-{keeper.lease.license_id}",
            daemon=True,
        )  # fmt: skip
        keeper.thread.start()
        return keeper.lease

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._keeper.client._close(self._keeper)


# -- the client ----------------------------------------------------------------------


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SeatClient:
    """A seatlease client for one API key. Thread-safe; share one per process.

    ``timeout``: seconds per HTTP request. ``retries``: extra attempts of a plain call
    after a network error or 503. ``backoff``/``max_backoff``: first and largest pause
    between attempts (doubled each time, with jitter; never shorter than Retry-After).
    ``max_wait_poll``: the longest pause between two acquires while waiting for a seat
    (a seat released early is noticed this soon even when Retry-After is long).
    ``release_timeout``: time budget of a release on exit, atexit or SIGTERM.
    ``handle_sigterm``: install the SIGTERM handler (default True).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_wait_poll: float = 30.0,
        release_timeout: float = 5.0,
        handle_sigterm: bool = True,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout, self.retries = timeout, retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.max_wait_poll, self.release_timeout = max_wait_poll, release_timeout
        self.handle_sigterm = handle_sigterm
        # Proxies from the environment apply, except to a loopback address (the local
        # stack), which a corporate proxy cannot reach.
        handlers = [urllib.request.ProxyHandler({})] if _is_loopback(parts.hostname) else []
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler may interrupt us
        self._keepers: dict[int, _Keeper] = {}
        self._previous_sigterm: Any = None
        self._sigterm_installed = False

    def __repr__(self) -> str:
        return f"SeatClient({self.base_url!r}, api_key=<hidden>)"

    # -- HTTP --------------------------------------------------------------------------

    def _send(self, function: str, body: dict[str, Any], timeout: float | None = None) -> Any:
        """One POST; the decoded JSON body of a 2xx, else a typed ``SeatError``."""
        url = f"{self.base_url}/{function}"
        request = urllib.request.Request(  # noqa: S310 (scheme checked in __init__)
            url,
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": f"seatlease-python/{__version__}",
            },
            method="POST",
        )
        # Never forwarded on a redirect: a 30x to another host must not receive the key.
        request.add_unredirected_header("Authorization", f"Bearer {self._api_key}")
        try:
            with self._opener.open(request, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as err:
            raise self._error_from(err) from None
        except (OSError, http.client.HTTPException) as exc:
            # No answer (refused, reset, timed out, DNS): the same as a 503 for retries.
            raise BackendUnavailable(0, "network_error", f"{url}: {exc}") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise SeatError(status, "invalid_response", f"{url} answered non-JSON") from None

    @staticmethod
    def _error_from(err: urllib.error.HTTPError) -> SeatError:
        try:
            payload = json.loads(err.read() or b"{}")
        except (ValueError, OSError, http.client.HTTPException):
            payload = {}
        finally:
            err.close()
        error = payload.get("error") if isinstance(payload, dict) else None
        error = error if isinstance(error, dict) else {}
        kind = _ERRORS.get(err.code, SeatError)
        default_code = "backend_unavailable" if kind is BackendUnavailable else "http_error"
        return kind(
            err.code,
            str(error.get("code") or default_code),
            str(error.get("message") or f"HTTP {err.code} {err.reason}"),
            error,
            _retry_after_header(err.headers.get("Retry-After") if err.headers else None),
        )

    def _backoff_delay(self, attempt: int, retry_after: float | None, cap: float) -> float:
        delay = min(cap, self.backoff * 2 ** max(0, attempt))
        delay = random.uniform(delay / 2, delay)
        return max(delay, retry_after or 0.0)

    def _wait_pause(self, denied: NoSeatsAvailable) -> float:
        """Pause before asking again for a seat: Retry-After plus up to 20 % jitter (so
        waiters do not stampede), at most ``max_wait_poll``."""
        pause = min(float(denied.retry_after_seconds), self.max_wait_poll)
        return random.uniform(pause, pause * 1.2)

    def _call(
        self,
        function: str,
        body: dict[str, Any],
        *,
        retries: int | None = None,
        budget: float | None = None,
        stop: threading.Event | None = None,
    ) -> Any:
        """``_send`` retried on network errors and 503 with backoff and Retry-After,
        at most ``retries`` times and within ``budget`` seconds; ``stop`` interrupts."""
        retries = self.retries if retries is None else retries
        give_up = None if budget is None else time.monotonic() + budget
        attempt = 0
        while True:
            timeout = self.timeout
            if give_up is not None:
                timeout = max(0.05, min(timeout, give_up - time.monotonic()))
            try:
                return self._send(function, body, timeout)
            except BackendUnavailable as exc:
                if attempt >= retries:
                    raise
                delay = self._backoff_delay(attempt, exc.retry_after_seconds, self.max_backoff)
                if give_up is not None and time.monotonic() + delay >= give_up:
                    raise
                log.info("seatlease: %s failed (%s); retry in %.2f s", function, exc, delay)
                if stop is not None and stop.wait(delay):
                    raise
                if stop is None:
                    time.sleep(delay)
                attempt += 1

    # -- plain calls -------------------------------------------------------------------

    @staticmethod
    def _acquire_body(
        license_id: str,
        client_id: str,
        lease_seconds: int | None,
        metadata: dict[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"license_id": license_id, "client_id": client_id}
        if lease_seconds is not None:
            body["lease_seconds"] = lease_seconds
        if metadata is not None:
            body["metadata"] = metadata
        return body

    def acquire(
        self,
        license_id: str,
        client_id: str,
        *,
        lease_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """POST /acquire (retried); the response body. No heartbeats: see ``lease()``."""
        return self._call(
            "acquire", self._acquire_body(license_id, client_id, lease_seconds, metadata)
        )

    def heartbeat(self, license_id: str, session_id: str) -> dict[str, Any]:
        """POST /heartbeat (retried); raises ``SessionExpired`` when the seat is gone."""
        return self._call("heartbeat", {"license_id": license_id, "session_id": session_id})

    def release(self, license_id: str, session_id: str) -> dict[str, Any]:
        """POST /release (retried, idempotent): ``{"released": bool, "seats_used": n}``."""
        return self._call("release", {"license_id": license_id, "session_id": session_id})

    def _release_quietly(
        self, license_id: str, session_id: str, budget: float | None = None
    ) -> None:
        try:
            self._call(
                "release",
                {"license_id": license_id, "session_id": session_id},
                budget=self.release_timeout if budget is None else budget,
            )
        except SeatError as exc:  # the lease then expires by itself
            log.warning("seatlease: release of %s failed: %s", license_id, exc)

    # -- held leases -------------------------------------------------------------------

    def lease(
        self,
        license_id: str,
        *,
        client_id: str,
        metadata: dict[str, Any] | None = None,
        lease_seconds: int | None = None,
        wait: bool = False,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        on_regained: OnRegained | None = None,
    ) -> LeaseContext:
        """A context manager holding one seat; ``as`` gives the ``Lease``.

        ``client_id`` identifies this running copy (acquiring again with it returns the
        same seat). ``wait``: wait for a seat instead of raising ``NoSeatsAvailable``,
        for at most ``timeout`` seconds (None: forever). ``on_lost(lease, reason)`` and
        ``on_regained(lease)`` are called from the heartbeat thread.
        """
        lease = Lease(license_id, client_id, metadata)
        return LeaseContext(
            _Keeper(self, lease, lease_seconds, on_lost, on_regained), wait, timeout
        )

    def held(self) -> list[Lease]:
        """The leases this client holds now (entered and not yet released)."""
        with self._lock:
            return [keeper.lease for keeper in self._keepers.values()]

    def release_all(self) -> None:
        """Release every seat this client holds (run at exit and on SIGTERM)."""
        with self._lock:
            keepers = list(self._keepers.values())
        # One time budget for all of them: a SIGTERM grace period is short.
        give_up = time.monotonic() + self.release_timeout
        for keeper in keepers:
            self._close(keeper, max(0.1, give_up - time.monotonic()))

    def _close(self, keeper: _Keeper, budget: float | None = None) -> None:
        try:
            keeper.close(self.release_timeout if budget is None else budget)
        finally:
            self._unregister(keeper)

    def _register(self, keeper: _Keeper) -> None:
        with self._lock:
            if not self._keepers:
                atexit.register(self.release_all)
            self._keepers[id(keeper)] = keeper
            self._install_sigterm()  # no-op unless in the main thread and not yet installed

    def _unregister(self, keeper: _Keeper) -> None:
        with self._lock:
            if self._keepers.pop(id(keeper), None) is None or self._keepers:
                return
            atexit.unregister(self.release_all)
            self._restore_sigterm()

    # -- SIGTERM -----------------------------------------------------------------------

    def _install_sigterm(self) -> None:
        if not self.handle_sigterm or self._sigterm_installed:
            return
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works only there; leases of other threads use atexit
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN:
            return  # this process survives SIGTERM, so its seats must stay
        self._previous_sigterm = previous
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._sigterm_installed = True

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        if threading.current_thread() is not threading.main_thread():
            return  # left in place: with nothing held it only chains
        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:  # nobody chained to us
            signal.signal(signal.SIGTERM, self._previous_sigterm or signal.SIG_DFL)
            self._sigterm_installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.release_all()
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        # No Python handler before us: die by SIGTERM exactly as without this client.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


# -- asyncio -------------------------------------------------------------------------


class AsyncSeatClient:
    """The same client for asyncio: each HTTP call runs in a worker thread
    (``asyncio.to_thread``) and a held lease heartbeats from an asyncio task.

        async with AsyncSeatClient(url, key).lease("cad", client_id="h1") as lease: ...

    ``on_lost``/``on_regained`` are plain functions, called from a worker thread.
    """

    def __init__(self, base_url: str, api_key: str, **options: Any) -> None:
        self.sync = SeatClient(base_url, api_key, **options)

    def __repr__(self) -> str:
        return f"AsyncSeatClient({self.sync.base_url!r}, api_key=<hidden>)"

    async def acquire(self, license_id: str, client_id: str, **fields: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.acquire, license_id, client_id, **fields)

    async def heartbeat(self, license_id: str, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.heartbeat, license_id, session_id)

    async def release(self, license_id: str, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.release, license_id, session_id)

    def lease(
        self,
        license_id: str,
        *,
        client_id: str,
        metadata: dict[str, Any] | None = None,
        lease_seconds: int | None = None,
        wait: bool = False,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        on_regained: OnRegained | None = None,
    ) -> AsyncLeaseContext:
        lease = Lease(license_id, client_id, metadata)
        keeper = _Keeper(self.sync, lease, lease_seconds, on_lost, on_regained)
        return AsyncLeaseContext(keeper, wait, timeout)


class AsyncLeaseContext:
    """``async with client.lease(...) as lease``."""

    def __init__(self, keeper: _Keeper, wait: bool, timeout: float | None) -> None:
        self._keeper, self._wait, self._timeout = keeper, wait, timeout
        self._task: asyncio.Task[None] | None = None
        self._entered = False

    async def __aenter__(self) -> Lease:
        if self._entered:
            raise RuntimeError("a lease context can be entered once; call client.lease() again")
        self._entered = True
        keeper = self._keeper
        keeper.client._register(keeper)
        try:
            await asyncio.to_thread(keeper.acquire_first, self._wait, self._timeout)
        except BaseException:
            keeper.stop.set()  # a cancelled wait ends its thread; a late seat is released
            keeper.client._unregister(keeper)
            raise
        self._task = asyncio.create_task(self._beat(), name="seatlease-heartbeat")
        return keeper.lease

    async def _beat(self) -> None:
        keeper = self._keeper
        delay = keeper.beat_delay()
        while not keeper.stop.is_set():
            await asyncio.sleep(delay)
            if keeper.stop.is_set():
                return
            delay = await asyncio.to_thread(keeper.step)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._keeper.stop.set()
        if self._task is not None:
            self._task.cancel()
        await asyncio.to_thread(self._keeper.client._close, self._keeper)
