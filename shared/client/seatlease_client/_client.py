"""``SeatClient``: the HTTP calls (retried with backoff), the plain acquire, heartbeat
and release, the held leases, and the release at exit and on SIGTERM."""

from __future__ import annotations

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
import uuid
from collections.abc import Sequence
from types import FrameType
from typing import Any

from seatlease_client import _borrow
from seatlease_client._borrow import BorrowedSeat
from seatlease_client._errors import (
    _CODES,
    _CONFLICT_CODES,
    _ERRORS,
    BackendUnavailable,
    NoSeatsAvailable,
    SeatError,
    _retry_after_header,
)
from seatlease_client._lease import Lease, LeaseContext, OnLost, OnRegained, _Keeper
from seatlease_client._version import __version__

log = logging.getLogger("seatlease.client")


def _token_verifier(fetch: Any, pinned: Any, tenant_id: Any, leeway: float) -> Any:
    # Imported only when asked for: the core client has no dependencies; the ImportError
    # of a missing extra names it.
    from seatlease_client._verify import TokenVerifier

    return TokenVerifier(fetch, pinned_keys=pinned, tenant_id=tenant_id, leeway=leeway)


def _new_nonce() -> str:
    from seatlease_client._verify import new_nonce

    return new_nonce()


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
    between attempts (doubled each time, with jitter; never shorter than Retry-After,
    never longer than ``max_backoff`` whatever Retry-After says).
    ``max_wait_poll``: the longest pause between two acquires while waiting for a seat
    (a seat released early is noticed this soon even when Retry-After is long).
    ``release_timeout``: time budget of a release on exit, atexit or SIGTERM.
    ``handle_sigterm``: install the SIGTERM handler (default True).

    ``verify``: check the signed token of every answer (the ``verify`` extra), so that a
    forged, tampered, replayed, expired or wrong-audience grant raises a ``TokenError``
    and never counts. ``pinned_keys``: the vendor's Ed25519 public keys (JWKs, PEM, or
    the JWK's ``x``); giving them turns ``verify`` on, and only tokens they signed pass.
    ``tenant_id``: the tenant expected in the tokens' ``aud``. ``token_leeway``: seconds
    of clock difference allowed. ``jwks_url``: default ``<base_url>/keys``.
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
        verify: bool = False,
        pinned_keys: Sequence[Any] | None = None,
        tenant_id: str | None = None,
        token_leeway: float = 60.0,
        machine_id: str | None = None,
        jwks_url: str | None = None,
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
        self._verifier: Any = None
        self.jwks_url = jwks_url or f"{self.base_url}/keys"
        # Kept for verifying a saved borrowed seat offline (load_borrowed).
        self._pinned_keys = list(pinned_keys or ())
        self._tenant_id, self._token_leeway = tenant_id, token_leeway
        self._machine_id = machine_id  # None: the system's (seatlease_client._machine)
        if verify or pinned_keys:
            self._verifier = _token_verifier(self._fetch_jwks, pinned_keys, tenant_id, token_leeway)

    def __repr__(self) -> str:
        return f"SeatClient({self.base_url!r}, api_key=<hidden>)"

    # -- HTTP --------------------------------------------------------------------------

    def _send(self, function: str, body: dict[str, Any], timeout: float | None = None) -> Any:
        """One POST; the decoded JSON body of a 2xx, else a typed ``SeatError`` (with
        ``verify``: a ``TokenError`` when the answer's token does not hold)."""
        url = f"{self.base_url}/{function}"
        if self._verifier is not None and "nonce" not in body:
            body = {**body, "nonce": _new_nonce()}  # each request its own (borrow keeps its)
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
            reply = json.loads(raw)
        except ValueError:
            raise SeatError(status, "invalid_response", f"{url} answered non-JSON") from None
        # A place in the wait queue (202) grants nothing: it carries no token to check.
        if self._verifier is not None and not (status == 202 and isinstance(reply, dict)):
            self._verifier.check(function, body, reply, status)
        return reply

    def _fetch_jwks(self) -> bytes:
        """GET the deployment's JWKS (no API key: it is public)."""
        request = urllib.request.Request(  # noqa: S310 (scheme checked in __init__)
            self.jwks_url,
            headers={"Accept": "application/json", "User-Agent": f"seatlease-python/{__version__}"},
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as err:
            raise self._error_from(err) from None
        except (OSError, http.client.HTTPException) as exc:
            raise BackendUnavailable(0, "network_error", f"{self.jwks_url}: {exc}") from None

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
        if err.code == 403:
            kind = _CODES.get(str(error.get("code")), kind)
        elif err.code == 409:
            kind = _CONFLICT_CODES.get(str(error.get("code")), kind)
        default_code = "backend_unavailable" if kind is BackendUnavailable else "http_error"
        return kind(
            err.code,
            str(error.get("code") or default_code),
            str(error.get("message") or f"HTTP {err.code} {err.reason}"),
            error,
            _retry_after_header(err.headers.get("Retry-After") if err.headers else None),
        )

    def _backoff_delay(self, attempt: int, retry_after: float | None, cap: float) -> float:
        """The pause before attempt ``attempt + 1``: the backoff (doubled per attempt, at
        most ``cap``, with jitter), never shorter than the server's Retry-After, and never
        longer than ``max_backoff`` whatever the server asks: a ``Retry-After: 3600``
        from a proxy must not leave the product asleep for an hour."""
        delay = min(cap, self.backoff * 2 ** max(0, attempt))
        delay = random.uniform(delay / 2, delay)
        return min(max(delay, retry_after or 0.0), self.max_backoff)

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
        at most ``retries`` times and within ``budget`` seconds; ``stop`` interrupts.

        Every attempt carries the same ``request_id``: should a reply be lost (a timeout,
        a dropped connection), the server answers the retry with what the first attempt
        did, so a retried acquire is still told 201 and a retried release "released"."""
        body = {**body, "request_id": body.get("request_id") or uuid.uuid4().hex}
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
        **fields: Any,
    ) -> dict[str, Any]:
        """The acquire body; ``fields`` (user, host, queue, ticket) are sent when set."""
        body: dict[str, Any] = {"license_id": license_id, "client_id": client_id}
        if lease_seconds is not None:
            body["lease_seconds"] = lease_seconds
        if metadata is not None:
            body["metadata"] = metadata
        body.update({name: value for name, value in fields.items() if value is not None})
        return body

    def acquire(
        self,
        license_id: str,
        client_id: str,
        *,
        lease_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        user: str | None = None,
        host: str | None = None,
        queue: bool | None = None,
        ticket: str | None = None,
        entitlements: list[str] | None = None,
        version: str | None = None,
        seats: int | None = None,
    ) -> dict[str, Any]:
        """POST /acquire (retried); the response body. No heartbeats: see ``lease()``.
        ``user`` and ``host``: who asks (a license's policy may require ``user``).
        ``entitlements``: what the product needs (``NotEntitled`` names the missing);
        ``version``: the product's (``VersionNotEntitled`` above the license's).
        ``seats``: the lease's weight (it counts as that many seats; not sent when None:
        1 for a new lease, the held lease's weight on renewal; another weight than the
        held lease's raises ``SeatsMismatch``); the answer's ``seats`` says it.
        ``queue=True`` on a full license with a wait queue answers ``{"queued": true,
        "position", "ticket", "retry_after_seconds"}`` (a 202): call again with that
        ``ticket`` after ``retry_after_seconds`` to keep the place."""
        body = self._acquire_body(
            license_id, client_id, lease_seconds, metadata,
            user=user, host=host, queue=queue, ticket=ticket,
            entitlements=entitlements, version=version, seats=seats,
        )  # fmt: skip
        return self._call("acquire", body)

    def heartbeat(self, license_id: str, session_id: str) -> dict[str, Any]:
        """POST /heartbeat (retried); raises ``SessionExpired`` when the seat is gone."""
        return self._call("heartbeat", {"license_id": license_id, "session_id": session_id})

    def release(self, license_id: str, session_id: str) -> dict[str, Any]:
        """POST /release (retried, idempotent): ``{"released": bool, "seats_used": n}``."""
        return self._call("release", {"license_id": license_id, "session_id": session_id})

    # -- borrowed seats (the verify extra) ---------------------------------------------

    def borrow(
        self,
        license_id: str,
        client_id: str,
        seconds: int,
        *,
        path: str | os.PathLike[str],
        metadata: dict[str, Any] | None = None,
    ) -> BorrowedSeat:
        """Borrow a seat for ``seconds`` (no heartbeats until it ends; at most the
        license's ``max_borrow_seconds``), save it with its signed token to ``path``
        and return it verified. Acquiring with the same ``client_id`` while it lasts
        returns it unchanged; a lease this client holds becomes the borrowed one."""
        return _borrow.borrow(self, license_id, client_id, seconds, path, metadata)

    def load_borrowed(self, path: str | os.PathLike[str]) -> BorrowedSeat:
        """The borrowed seat saved at ``path``, its token verified offline (no request):
        ``TokenExpired`` once it has ended, another ``TokenError`` if the file was
        altered; pin the vendor's keys so that an edited file cannot pass."""
        return _borrow.load(self, path)

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
        user: str | None = None,
        host: str | None = None,
        entitlements: list[str] | None = None,
        version: str | None = None,
        seats: int | None = None,
    ) -> LeaseContext:
        """A context manager holding one seat; ``as`` gives the ``Lease``.

        ``client_id`` identifies this running copy (acquiring again with it returns the
        same seat). ``wait``: wait for a seat instead of raising ``NoSeatsAvailable``,
        for at most ``timeout`` seconds (None: forever); on a license with a wait queue
        it waits in line (``"queue": true``, keeping its place with the ticket) rather
        than racing other clients' retries. ``user`` and ``host``: who asks (a license's
        policy may require ``user``). ``entitlements`` and ``version``: what the product
        needs (a license without them raises ``NotEntitled``/``VersionNotEntitled``);
        ``lease.entitlements``, ``lease.license_expires_at`` and ``lease.in_grace`` say
        what the license gives. ``on_lost(lease, reason)`` and ``on_regained(lease)`` are
        called from the heartbeat thread (reason ``expired``, ``unknown``, ``revoked``
        when an operator freed the seat, ``unreachable``, or ``license_expired`` when the
        license's term ended its leases; a re-acquire refused with a 403 is then asked
        again only every 5 minutes). A 403 to the first acquire is raised at once, even
        with ``wait``. ``seats``: the lease's weight (``lease.seats``), sent with the
        first acquire and with every re-acquire after a loss, so a regained seat has it.
        """
        lease = Lease(license_id, client_id, metadata)
        keeper = _Keeper(self, lease, lease_seconds, on_lost, on_regained)
        keeper.identity = {
            "user": user, "host": host, "entitlements": entitlements, "version": version,
            "seats": seats,
        }  # fmt: skip
        return LeaseContext(keeper, wait, timeout)

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
