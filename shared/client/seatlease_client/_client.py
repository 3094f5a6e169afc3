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
import urllib.parse
import uuid
from collections.abc import Sequence
from types import FrameType
from typing import Any

from seatlease_client import _borrow, _http
from seatlease_client._borrow import BorrowedSeat
from seatlease_client._claims import _parse_time
from seatlease_client._errors import (
    _BY_CODE,
    _ERRORS,
    BackendUnavailable,
    InvalidResponse,
    NoSeatsAvailable,
    SeatError,
    ServiceError,
    TokenError,
    _retry_after_header,
)
from seatlease_client._lease import (
    Lease,
    LeaseContext,
    OnIdleWarning,
    OnLost,
    OnRegained,
    _Keeper,
)
from seatlease_client._machine import this_machine
from seatlease_client._transport import MAX_ANSWER, Redirected, TooLarge, Transport
from seatlease_client._verify import TokenVerifier, new_nonce
from seatlease_client._version import __version__

log = logging.getLogger("seatlease.client")

_PIN_THE_KEY = (
    "pin the vendor's public key: SeatClient(..., pinned_keys=[...]) with the x of each "
    "key of the deployment's JWKS (GET <base_url>/keys), a JWK or a PEM public key; or "
    "opt out of verification with insecure_skip_verify=True (then any server answering "
    "at base_url can grant seats)"
)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        _parse_time(value)
    except ValueError:
        return False
    return True


# The fields a 2xx answer must have, by function: (name, check, required). A field that
# is optional may be absent or null; present, it must be of its type.
_SHAPES: dict[str, list[tuple[str, Any, bool]]] = {
    "acquire": [
        ("session_id", lambda v: isinstance(v, str) and v != "", True),
        ("lease_expires_at", _is_time, True),
        ("lease_seconds", lambda v: _is_int(v) and v >= 1, True),
        ("heartbeat_interval_seconds", _is_int, False),
        ("seats_used", _is_int, False),
        ("seats_total", _is_int, False),
        ("seats", _is_int, False),
    ],
    "heartbeat": [
        ("lease_expires_at", _is_time, True),
        ("session_id", lambda v: isinstance(v, str) and v != "", False),
        ("lease_seconds", _is_int, False),
        ("heartbeat_interval_seconds", _is_int, False),
        ("seats_used", _is_int, False),
        ("seats_total", _is_int, False),
        ("seats", _is_int, False),
        ("idle_reclaim_at", _is_time, False),  # only while warned for idleness
    ],
    "release": [
        ("released", lambda v: isinstance(v, bool), True),
        ("seats_used", _is_int, False),
    ],
}


def _shape_problems(function: str, reply: Any) -> list[str]:
    """What makes ``reply`` not a 2xx answer of ``function`` (empty: none)."""
    if not isinstance(reply, dict):
        return ["not a JSON object"]
    problems = []
    for name, good, required in _SHAPES[function]:
        value = reply.get(name)
        if value is None:
            if required:
                problems.append(f"{name} missing")
        elif not good(value):
            problems.append(f"{name} of the wrong type")
    return problems


class SeatClient:
    """A seatlease client for one API key. Thread-safe; share one per process.

    ``timeout``: seconds a whole HTTP exchange may take (connect, headers and body; an
    answer still arriving then is abandoned as a network error). ``retries``: extra
    attempts of a plain call after a network error or 503. ``backoff``/``max_backoff``:
    first and largest pause between attempts (doubled each time, with jitter; never
    shorter than Retry-After, never longer than ``max_backoff`` whatever Retry-After
    says). ``max_wait_poll``: the longest pause between two acquires while waiting for a
    seat (a seat released early is noticed this soon even when Retry-After is long).
    ``release_timeout``: the time a release on leaving ``with``, ``close``, atexit or
    SIGTERM may take, retries included. ``handle_sigterm``: install the SIGTERM handler
    (default True).

    Verified by default: ``pinned_keys`` (required) are the vendor's Ed25519 public keys
    (each the ``x`` of a key of the deployment's JWKS, or the JWK, or a PEM public key);
    the signed token of every answer must be signed by one of them, for this license,
    session, client and request, so that a forged, tampered, replayed, expired or
    wrong-audience grant raises a ``TokenError`` and never counts (a refused grant's
    session is released at once). The standard library verifies (no extra needed).
    ``insecure_skip_verify=True`` opts out: no token is checked and any server answering
    at ``base_url`` can grant seats. ``verify`` (default True) is kept for old code:
    ``verify=False`` without ``insecure_skip_verify=True`` is refused. ``tenant_id``: the
    tenant expected in the tokens' ``aud``. ``token_leeway``: seconds of clock difference
    allowed. ``jwks_url``: default ``<base_url>/keys``. ``machine_id``: this machine's id
    (default the system's), whose fingerprint binds borrowed seats.

    Redirects are never followed: a ``3xx`` is a ``ServiceError`` naming its Location.
    ``transport``: what carries each request (``seatlease_client._transport.Transport``);
    default HTTP over urllib, with the environment's proxies except to a loopback address.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        pinned_keys: Sequence[Any] | None = None,
        insecure_skip_verify: bool = False,
        verify: bool = True,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_wait_poll: float = 30.0,
        release_timeout: float = 5.0,
        handle_sigterm: bool = True,
        tenant_id: str | None = None,
        token_leeway: float = 60.0,
        machine_id: str | None = None,
        jwks_url: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an http:// or https:// URL")
        pinned = list(pinned_keys or ())
        if insecure_skip_verify:
            if pinned:
                raise ValueError(
                    "pinned_keys and insecure_skip_verify=True contradict each other: "
                    "drop insecure_skip_verify to verify against the pinned keys"
                )
        elif not verify:
            raise ValueError(
                "verify=False is refused: pass insecure_skip_verify=True to opt out of "
                "verifying answers (insecure: any server answering at base_url can grant "
                "seats), or pin the vendor's keys (pinned_keys=[...])"
            )
        elif not pinned:
            raise ValueError(f"SeatClient verifies every answer by default: {_PIN_THE_KEY}")
        if timeout <= 0 or release_timeout <= 0:
            raise ValueError("timeout and release_timeout must be positive (seconds)")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout, self.retries = timeout, retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.max_wait_poll, self.release_timeout = max_wait_poll, release_timeout
        self.handle_sigterm = handle_sigterm
        # Proxies from the environment apply, except to a loopback address (the local
        # stack), which a corporate proxy cannot reach. Redirects are never followed.
        self._transport: Transport = (
            transport if transport is not None
            else _http.HttpTransport(direct=_is_loopback(parts.hostname))
        )  # fmt: skip
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler may interrupt us
        # The deadline of the exchange under way in this thread: the JWKS fetched to
        # check its answer counts against it.
        self._local = threading.local()
        self._keepers: dict[int, _Keeper] = {}
        self._previous_sigterm: Any = None
        self._sigterm_installed = False
        self.jwks_url = jwks_url or f"{self.base_url}/keys"
        # Kept for verifying a saved borrowed seat offline (load_borrowed).
        self._pinned_keys = pinned
        self._tenant_id, self._token_leeway = tenant_id, token_leeway
        self._machine_id = machine_id  # None: the system's (seatlease_client._machine)
        self.insecure_skip_verify = bool(insecure_skip_verify)
        self.verify = not self.insecure_skip_verify
        self._verifier: TokenVerifier | None = None
        if self.verify:
            self._verifier = TokenVerifier(
                self._fetch_jwks, pinned_keys=pinned, tenant_id=tenant_id, leeway=token_leeway
            )

    def __repr__(self) -> str:
        return f"SeatClient({self.base_url!r}, api_key=<hidden>)"

    # -- HTTP --------------------------------------------------------------------------

    def _exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout: float,
    ) -> tuple[int, Any, bytes]:
        """One exchange through the transport within ``timeout`` seconds: (status,
        headers, body), whatever the status; a redirect is a ``ServiceError``, no complete
        answer a ``BackendUnavailable`` (status 0, ``network_error``)."""
        try:
            return self._transport.exchange(method, url, headers, body, timeout)
        except Redirected as moved:
            raise ServiceError(
                moved.status, "redirected",
                f"{url} answered {moved.status}, a redirect to {moved.location}: not "
                "followed (a redirect is not the service's answer; check base_url)",
                {"location": moved.location},
            ) from None  # fmt: skip
        except TooLarge:
            raise InvalidResponse(
                0, "invalid_response", f"{url} answered more than {MAX_ANSWER} bytes"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            # No answer (refused, reset, timed out, DNS): the same as a 503 for retries.
            raise BackendUnavailable(0, "network_error", f"{url}: {exc}") from None

    def _send(self, function: str, body: dict[str, Any], timeout: float | None = None) -> Any:
        """One POST, within ``timeout`` (default the client's) seconds; the decoded JSON
        body of a 2xx, else a typed ``SeatError``: an ``InvalidResponse`` when a 2xx is
        not the service's answer, a ``TokenError`` when its token does not verify (then
        a granted session is released at once: it is no seat of ours)."""
        url = f"{self.base_url}/{function}"
        if self._verifier is not None and "nonce" not in body:
            body = {**body, "nonce": new_nonce()}  # each request its own (borrow keeps its)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"seatlease-python/{__version__}",
            "Authorization": f"Bearer {self._api_key}",
        }
        seconds = timeout or self.timeout
        # Saved and put back: a SIGTERM handler's release may run inside an exchange of
        # the same thread, whose deadline must survive it.
        outer = getattr(self._local, "deadline", None)
        self._local.deadline = time.monotonic() + seconds
        try:
            answer = self._exchange("POST", url, headers, json.dumps(body).encode(), seconds)
            return self._answer(function, url, body, *answer)
        finally:
            self._local.deadline = outer

    def _answer(self, function: str, url: str, body: dict[str, Any], status: int,
                headers: Any, raw: bytes) -> Any:  # fmt: skip
        """The 2xx answer to ``body``, checked (see ``_send``), else its typed error."""
        if not 200 <= status < 300:
            raise self._error_from(url, status, headers, raw)
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError):
            raise InvalidResponse(
                status, "invalid_response", f"{url} answered {status} with no JSON"
            ) from None
        # A place in the wait queue (202) grants nothing: it carries no token to check.
        if status == 202 and function == "acquire" and isinstance(reply, dict):
            if reply.get("queued") is True and isinstance(reply.get("ticket"), str):
                return reply
        # A grant refused for its shape or its token is released at once; never one whose
        # check could not be made (the JWKS unreachable, a 5xx, a timeout: transient,
        # retried with the same request_id, which a real server answers from its store
        # with this very grant: released, it would be a seat the server no longer holds).
        problems = _shape_problems(function, reply)
        if problems:
            if function == "acquire":
                self._release_refused(body, reply)
            raise InvalidResponse(
                status, "invalid_response",
                f"{url} answered {status} without the service's fields "
                f"({', '.join(problems)})",
            )  # fmt: skip
        if self._verifier is not None:
            try:
                self._verifier.check(
                    function, body, reply, status, getattr(self._local, "deadline", None)
                )
            except TokenError:
                if function == "acquire":
                    self._release_refused(body, reply)
                raise
        return reply

    def _release_refused(self, body: dict[str, Any], reply: Any) -> None:
        """A grant refused (a bad token, a wrong shape) is no seat: its session, when it
        names one, is released at once (best effort, within ``release_timeout``), so that
        it does not stay held on the server for the whole lease."""
        session = reply.get("session_id") if isinstance(reply, dict) else None
        if isinstance(session, str) and session:
            log.warning("seatlease: a refused grant of %s released", body.get("license_id"))
            self._release_quietly(str(body.get("license_id")), session)

    def _fetch_jwks(self) -> bytes:
        """GET the deployment's JWKS (no API key: it is public)."""
        headers = {"Accept": "application/json", "User-Agent": f"seatlease-python/{__version__}"}
        deadline = getattr(self._local, "deadline", None)
        seconds = self.timeout
        if deadline is not None:  # checking an answer: within that exchange's time
            seconds = max(0.05, min(seconds, deadline - time.monotonic()))
        status, answered, raw = self._exchange("GET", self.jwks_url, headers, None, seconds)
        if not 200 <= status < 300:
            raise self._error_from(self.jwks_url, status, answered, raw)
        return raw

    @staticmethod
    def _error_from(url: str, status: int, headers: Any, raw: bytes) -> SeatError:
        """The typed error of a non-2xx answer: by the server's ``error.code`` first,
        by status when the code is unknown or absent (a front end's 503); a 404 that is
        not ``license_not_found`` is a ``ServiceError`` naming the URL."""
        try:
            payload = json.loads(raw or b"{}")
        except (ValueError, RecursionError):
            payload = {}
        error = payload.get("error") if isinstance(payload, dict) else None
        error = error if isinstance(error, dict) else {}
        code = error.get("code") if isinstance(error.get("code"), str) else None
        kind = _BY_CODE.get(code or "") or _ERRORS.get(status, ServiceError)
        message = error.get("message") if isinstance(error.get("message"), str) else None
        if kind is ServiceError:
            code = code or f"http_{status}"
            message = f"{url} answered {status} {code}" + (f": {message}" if message else "")
        elif kind is BackendUnavailable:
            code = code or "backend_unavailable"
        reason = http.client.responses.get(status, "")
        retry_after = headers.get("Retry-After") if headers is not None else None
        return kind(
            status,
            code or "http_error",
            message or f"HTTP {status} {reason}".rstrip(),
            error,
            _retry_after_header(retry_after),
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
        request_id: str | None = None,
        fingerprint: str | bool | None = None,
    ) -> dict[str, Any]:
        """POST /acquire (retried); the response body. No heartbeats: see ``lease()``.
        ``request_id``: this call's idempotency key (default a fresh one, reused by the
        client's own retries): a retry of your own with the same id is answered with the
        first call's answer, never a second seat. ``fingerprint``: bind the seat to this
        machine (the token's ``cnf.machine``): ``True`` for this machine's
        (``SeatClient(machine_id=...)`` or the system's), or a fingerprint's 64 hex.
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
            fingerprint=self._fingerprint(fingerprint), request_id=request_id,
        )  # fmt: skip
        return self._call("acquire", body)

    def _fingerprint(self, fingerprint: str | bool | None) -> str | None:
        """``fingerprint`` as sent: True is this machine's, False or None none."""
        if fingerprint is True:
            return this_machine(self._machine_id)
        if fingerprint is None or fingerprint is False:
            return None
        return str(fingerprint)

    def heartbeat(
        self,
        license_id: str,
        session_id: str,
        *,
        idle_seconds: int | None = None,
        busy: bool | None = None,
    ) -> dict[str, Any]:
        """POST /heartbeat (retried); raises ``SessionExpired`` when the seat is gone
        (``reason`` ``idle`` when it was reclaimed for idleness). ``idle_seconds``: how
        long the product saw no user activity; ``busy``: it does work that must not be
        interrupted (neither sent when None: never idle). The answer's
        ``idle_reclaim_at`` says when an idle seat may be reclaimed."""
        body: dict[str, Any] = {"license_id": license_id, "session_id": session_id}
        if idle_seconds is not None:
            body["idle_seconds"] = idle_seconds
        if busy is not None:
            body["busy"] = busy
        return self._call("heartbeat", body)

    def release(self, license_id: str, session_id: str) -> dict[str, Any]:
        """POST /release (retried, idempotent): ``{"released": bool, "seats_used": n}``."""
        return self._call("release", {"license_id": license_id, "session_id": session_id})

    # -- borrowed seats ----------------------------------------------------------------

    def borrow(
        self,
        license_id: str,
        client_id: str,
        seconds: int,
        *,
        path: str | os.PathLike[str],
        metadata: dict[str, Any] | None = None,
        user: str | None = None,
        host: str | None = None,
        entitlements: list[str] | None = None,
        version: str | None = None,
        seats: int | None = None,
        request_id: str | None = None,
    ) -> BorrowedSeat:
        """Borrow a seat for ``seconds`` (no heartbeats until it ends; at most the
        license's ``max_borrow_seconds``), bound to this machine, save it with its signed
        token to ``path`` and return it verified. Acquiring with the same ``client_id``
        while it lasts returns it unchanged; a lease this client holds becomes the
        borrowed one. ``user``, ``host``, ``entitlements``, ``version``, ``seats`` and
        ``request_id`` as for ``acquire`` (a license's policy may require ``user``)."""
        identity = {
            "user": user, "host": host, "entitlements": entitlements, "version": version,
            "seats": seats, "request_id": request_id,
        }  # fmt: skip
        return _borrow.borrow(self, license_id, client_id, seconds, path, metadata, identity)

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
        on_idle_warning: OnIdleWarning | None = None,
        user: str | None = None,
        host: str | None = None,
        entitlements: list[str] | None = None,
        version: str | None = None,
        seats: int | None = None,
        fingerprint: str | bool | None = None,
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
        when an operator freed the seat, ``idle`` when it was reclaimed for idleness (then
        asked for again only on the next ``lease.touch()`` or ``lease.busy()``),
        ``unreachable``, or ``license_expired`` when the license's term ended its leases; a
        re-acquire refused with a 403 is then asked again only every 5 minutes).
        ``on_idle_warning(lease, reclaim_at)``: called from the heartbeat thread when the
        server warns that the idle seat may be reclaimed from ``reclaim_at`` (aware UTC;
        once per warning), so the product can tell its user; ``lease.touch()`` or
        ``lease.busy()`` before then cancels it. A 403 to the first acquire is raised at once, even
        with ``wait``. ``seats``: the lease's weight (``lease.seats``), sent with the
        first acquire and with every re-acquire after a loss, so a regained seat has it.
        ``fingerprint``: bind the seat to this machine (``True``: this machine's; see
        ``acquire``), sent with every acquire.

        The ``with`` statement's acquire (and its wait) can be cancelled from another
        thread: ``ctx = client.lease(...)``, then ``ctx.cancel()`` while ``with ctx as
        lease:`` waits, which raises ``Cancelled``.
        """
        lease = Lease(license_id, client_id, metadata)
        keeper = _Keeper(self, lease, lease_seconds, on_lost, on_regained, on_idle_warning)
        keeper.identity = {
            "user": user, "host": host, "entitlements": entitlements, "version": version,
            "seats": seats, "fingerprint": self._fingerprint(fingerprint),
        }  # fmt: skip
        return LeaseContext(keeper, wait, timeout)

    def held(self) -> list[Lease]:
        """The leases this client holds now (entered and not yet released)."""
        with self._lock:
            return [keeper.lease for keeper in self._keepers.values()]

    def release_all(self) -> None:
        """Release every seat this client holds (run at exit and on SIGTERM), all within
        ``release_timeout`` seconds."""
        with self._lock:
            keepers = list(self._keepers.values())
        # One time budget for all of them: a SIGTERM grace period is short.
        give_up = time.monotonic() + self.release_timeout
        for keeper in keepers:
            self._close(keeper, max(0.05, give_up - time.monotonic()))

    def close(self) -> None:
        """Release every seat this client holds, within ``release_timeout`` seconds in
        all (``release_all``); the client may be used again afterwards."""
        self.release_all()

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
