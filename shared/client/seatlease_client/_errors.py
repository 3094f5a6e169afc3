"""The client's exceptions: one ``SeatError`` subclass per answer the service can give,
and the mapping from HTTP status to exception."""

from __future__ import annotations

from typing import Any


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


class LicenseNotStarted(LicenseSuspended):
    """403 ``license_not_started``: the license's term begins at ``starts_at`` (RFC 3339;
    a ``LicenseSuspended``, so code written for a refused license handles it)."""

    @property
    def starts_at(self) -> str | None:
        value = self.body.get("starts_at")
        return value if isinstance(value, str) else None


class LicenseExpired(LicenseSuspended):
    """403 ``license_expired``: the license's term and grace ended at ``expired_at``
    (acquire; a heartbeat too when the license ends its leases: the seat is gone)."""

    @property
    def expired_at(self) -> str | None:
        value = self.body.get("expired_at")
        return value if isinstance(value, str) else None


class NotEntitled(LicenseSuspended):
    """403 ``not_entitled``: the license lacks ``missing_entitlements``."""

    @property
    def missing_entitlements(self) -> list[str]:
        value = self.body.get("missing_entitlements")
        return [str(v) for v in value] if isinstance(value, list) else []


class VersionNotEntitled(LicenseSuspended):
    """403 ``version_not_entitled``: the version asked for is above ``max_version``."""

    @property
    def max_version(self) -> str | None:
        value = self.body.get("max_version")
        return value if isinstance(value, str) else None


class LicenseNotFound(SeatError):
    """404 ``license_not_found``: no such license for this API key's tenant. (Any other
    404 is a ``ServiceError``: not the service's answer about a license.)"""


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

    @property
    def seats_held(self) -> int:
        """Free seats held for clients ahead in the license's wait queue (the retry is
        then when the first hold ends)."""
        return self._int_field("seats_held", 0)

    @property
    def seats_reserved(self) -> int:
        """Free seats reserved for groups this ``user`` is not in."""
        return self._int_field("seats_reserved", 0)

    @property
    def seats_requested(self) -> int:
        """The weight asked (``seats``): fewer seats than that were free (1 for a plain
        request)."""
        return self._int_field("seats_requested", 1)


class QueueFull(NoSeatsAvailable):
    """409 ``queue_full``: no seat, and the license's wait queue already holds
    ``queue_max`` clients (no new place in line)."""

    @property
    def queue_max(self) -> int:
        return self._int_field("queue_max", 0)


class SeatsMismatch(SeatError):
    """409 ``seats_mismatch``: this ``client_id`` holds a live lease of ``held_seats``
    seats and the acquire asked for ``seats``. Not a ``NoSeatsAvailable``: waiting does
    not cure it; release the lease to take the other weight, or renew without ``seats``."""

    @property
    def held_seats(self) -> int:
        return self._int_field("held_seats", 0)

    @property
    def seats(self) -> int:
        return self._int_field("seats", 0)


class MachineMismatch(SeatError):
    """409 ``machine_mismatch``: this ``client_id``'s seat was borrowed for another machine
    (its token's ``cnf.machine``), which keeps it until it is returned or the borrow ends.
    Not a ``NoSeatsAvailable``: waiting on this machine does not cure it."""


class SeatWaitTimeout(NoSeatsAvailable):
    """``wait=True`` and no seat came free within ``timeout`` (a ``NoSeatsAvailable``
    carrying the last denial's numbers)."""


class SessionExpired(SeatError):
    """410: the session no longer holds a seat. ``reason``: ``expired`` (the heartbeat came
    after the deadline), ``unknown`` (no such session: released, reclaimed, or lost with
    the server's data) or ``revoked`` (an operator freed the seat: ``seatlease revoke``, the
    portal's "Free seat"; the product can tell its user so)."""

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "unknown"))


class BackendUnavailable(SeatError):
    """The service could not be reached (``status`` 0) or answered 503/429/502/504, and
    kept doing so through every retry."""

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.body.get("retry_after_seconds")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return self._retry_after


class ServiceError(SeatError):
    """An answer that is none of the service's own at this URL: a ``404`` other than
    ``license_not_found`` (the service's ``not_found`` for a wrong ``base_url``, or an
    empty 404 from a proxy), a redirect (``3xx``: never followed; ``location`` says
    where to), or another status the service does not give. ``code`` is the answer's
    ``error.code``, else ``http_<status>`` (``redirect`` for a 3xx); the message names
    the URL asked."""

    @property
    def location(self) -> str | None:
        value = self.body.get("location")
        return value if isinstance(value, str) else None


class InvalidResponse(SeatError):
    """``invalid_response``: a 2xx answer that is not the service's: not JSON, not an
    object, or a required field missing or of the wrong type (a grant with no
    ``session_id``, a renewal with no deadline, ...). It never counts as a seat."""


class Cancelled(SeatError):
    """``cancelled``: ``LeaseContext.cancel()`` (or an asyncio cancellation) ended the
    acquire or the wait for a seat; a seat granted meanwhile was released."""


class TokenError(SeatError):
    """The answer's signed token failed verification (the default; see ``SeatClient``): the
    answer is not trusted and never counts as a seat, a renewal or a release. ``status``
    is the answer's HTTP status; each subclass is one reason."""


class TokenMissing(TokenError):
    """The answer carries no token (an unsigned or fake server)."""


class MalformedToken(TokenError):
    """The token is not an EdDSA JWT with the required claims."""


class UnknownKeyId(TokenError):
    """The token's ``kid`` is not in the deployment's JWKS (even after fetching it again):
    a forgery, or a key retired or revoked since."""


class UntrustedKey(TokenError):
    """The token is signed by a key that is none of the vendor's pinned keys: a server
    with keys of its own (a fake server, or a proxy serving its own JWKS)."""


class BadSignature(TokenError):
    """The signature does not verify with the key its ``kid`` names: the token was
    altered (tampered claims) or signed with another key."""


class WrongAudience(TokenError):
    """The token is for another license or tenant (``aud``)."""


class TokenExpired(TokenError):
    """``exp`` has passed, or ``nbf``/``iat`` are in the future, beyond the leeway."""


class TokenReplayed(TokenError):
    """The token does not carry the nonce of this request: a recorded answer replayed."""


class TokenWrongMachine(TokenError):
    """A borrowed seat's token names another machine (``cnf.machine``): the file was
    copied from the machine that borrowed it."""


class TokenMismatch(TokenError):
    """The token is valid but not for this answer: another kind (``typ``), session or
    client, or a deadline or ``released`` other than the answer's."""


# The type of an error answer by its status, when its code is none of _BY_CODE's (a 404
# is a ServiceError unless its code is license_not_found).
_ERRORS: dict[int, type[SeatError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: LicenseSuspended,
    404: ServiceError,
    409: NoSeatsAvailable,
    410: SessionExpired,
    429: BackendUnavailable,
    502: BackendUnavailable,
    503: BackendUnavailable,
    504: BackendUnavailable,
}


# 403s told apart by their code (any other 403 is a LicenseSuspended)
_CODES: dict[str, type[SeatError]] = {
    "license_not_started": LicenseNotStarted,
    "license_expired": LicenseExpired,
    "not_entitled": NotEntitled,
    "version_not_entitled": VersionNotEntitled,
}

# 409s told apart by their code (any other 409 is a NoSeatsAvailable)
_CONFLICT_CODES: dict[str, type[SeatError]] = {
    "queue_full": QueueFull,
    "seats_mismatch": SeatsMismatch,
    "machine_mismatch": MachineMismatch,
}


# The type of an error answer by the server's error.code: it decides, whatever the status.
_BY_CODE: dict[str, type[SeatError]] = {
    "invalid_request": InvalidRequest,
    "unauthenticated": Unauthenticated,
    "license_suspended": LicenseSuspended,
    "user_denied": LicenseSuspended,
    "forbidden": LicenseSuspended,
    **_CODES,
    "license_not_found": LicenseNotFound,
    "no_seats_available": NoSeatsAvailable,
    "user_limit_reached": NoSeatsAvailable,
    **_CONFLICT_CODES,
    "session_expired": SessionExpired,
    "rate_limited": BackendUnavailable,
    "backend_unavailable": BackendUnavailable,
    "not_configured": BackendUnavailable,
    "recovering": BackendUnavailable,
}


def _retry_after_header(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (the service sends integer seconds; an
    HTTP date from some proxy is ignored)."""
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 86400 else None
