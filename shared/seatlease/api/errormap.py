"""Every domain error as an HTTP answer: ``to_api_error`` maps each error of
``seatlease.errors`` (and every backend outage) to the contract's status, code and body
``{"error": {"code", "message", ...}}``, with the messages that say what to do. The HTTP
boundary (``seatlease.api.http``) and the CLI's local backend answer with it."""

from __future__ import annotations

from typing import Any

from seatlease.clock import rfc3339
from seatlease.errors import (
    AmbiguousLicense,
    BackendUnavailable,
    CallOutcomeUnknown,
    Conflict,
    EventsNotPublished,
    Forbidden,
    InvalidRequest,
    LeaseTooLong,
    LicenseExpired,
    LicenseNotFound,
    LicenseNotStarted,
    LicenseSuspended,
    MachineMismatch,
    NoSeatsAvailable,
    NotConfigured,
    NotEntitled,
    NotFound,
    QueueFull,
    RateLimited,
    Recovering,
    SeatsMismatch,
    SessionExpired,
    SessionNotLive,
    StoreError,
    TenantRateLimited,
    Unauthenticated,
    UserDenied,
    UserLimitReached,
    VersionNotEntitled,
    redis_outage,
)

# Retry-After of a function that is not configured: an operator has to act (redeploy
# with the setting, or publish the first signing key), which takes minutes, not seconds.
NOT_CONFIGURED_RETRY_SECONDS = 60

# Retry-After of a full wait queue: places free as tickets are granted or lapse.
QUEUE_FULL_RETRY_SECONDS = 10


def no_seats_message(exc: NoSeatsAvailable) -> str:
    """The 409's message, saying why the seats not in use are not the caller's."""
    retry = f"retry after {exc.retry_after_seconds} s."
    if exc.seats_requested > 1:  # a weighted lease: free seats may not be enough
        retry = f"this lease would count as {exc.seats_requested} seats; {retry}"
    if exc.seats_held:
        held = "a seat is" if exc.seats_held == 1 else f"{exc.seats_held} seats are"
        return (
            f"{exc.seats_used} of {exc.seats_total} seats are in use and {held} held for "
            f"the next in line in the wait queue; {retry}"
        )
    if exc.seats_reserved:
        free = "seat is" if exc.seats_reserved == 1 else "seats are"
        return (
            f"{exc.seats_used} of {exc.seats_total} seats are in use; the {exc.seats_reserved} "
            f"free {free} reserved for groups this user is not in; {retry}"
        )
    if exc.seats_used < exc.seats_total:  # free seats, fewer than the lease would count
        return f"{exc.seats_used} of {exc.seats_total} seats are in use; {retry}"
    return f"All {exc.seats_total} seats are in use; {retry}"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        self.extra = extra

    # The request log line's ``outcome`` when it is not the error code.
    outcome: str | None = None
    # Fields of the request log line only (never in the body).
    log_fields: dict[str, Any] | None = None

    @property
    def body(self) -> dict[str, Any]:
        """The contract's error body: ``{"error": {"code", "message", ...extra}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def to_api_error(exc: Exception) -> ApiError:
    """Every domain error (and every backend outage) -> the contract's status, code and
    body; anything else is a bug and is re-raised. (``seatlease.api.http.to_api_error``
    adds the web framework's own errors.)"""
    match exc:
        case ApiError():
            return exc
        case InvalidRequest():
            return ApiError(400, "invalid_request", exc.message, **exc.fields)
        case NoSeatsAvailable():
            return ApiError(
                409,
                "no_seats_available",
                no_seats_message(exc),
                {"Retry-After": str(exc.retry_after_seconds)},
                seats_used=exc.seats_used,
                seats_total=exc.seats_total,
                seats_held=exc.seats_held,
                seats_reserved=exc.seats_reserved,
                retry_after_seconds=exc.retry_after_seconds,
                **({"seats_requested": exc.seats_requested} if exc.seats_requested > 1 else {}),
            )
        case SeatsMismatch():
            return ApiError(
                409,
                "seats_mismatch",
                f"Client {exc.client_id!r} holds a live lease of {exc.held_seats} seats; a "
                f"lease keeps its weight: release it to take {exc.seats}.",
                held_seats=exc.held_seats,
                seats=exc.seats,
            )
        case MachineMismatch():
            return ApiError(
                409,
                "machine_mismatch",
                f"Client {exc.client_id!r} borrowed its seat for another machine: a borrowed "
                "seat stays on the machine it was borrowed for until it is returned (release) "
                "or its borrow ends.",
            )
        case QueueFull():
            return ApiError(
                409,
                "queue_full",
                f"No seat is free and the wait queue is full ({exc.queue_max} clients "
                f"waiting, its maximum); retry after {QUEUE_FULL_RETRY_SECONDS} s.",
                {"Retry-After": str(QUEUE_FULL_RETRY_SECONDS)},
                queue_max=exc.queue_max,
                seats_used=exc.seats_used,
                seats_total=exc.seats_total,
                retry_after_seconds=QUEUE_FULL_RETRY_SECONDS,
            )
        case Recovering():
            return ApiError(
                503,
                "recovering",
                "The service is recovering from a failover: the seats held before it are "
                "being confirmed by their holders, and no new seat is granted until then; "
                f"retry after {exc.retry_after_seconds} s.",
                {"Retry-After": str(exc.retry_after_seconds)},
                retry_after_seconds=exc.retry_after_seconds,
            )
        case TenantRateLimited():
            return ApiError(
                429,
                "rate_limited",
                f"This tenant's calls per second are spent; nothing changed. Retry after "
                f"{exc.retry_after_seconds} s.",
                {"Retry-After": str(exc.retry_after_seconds)},
                retry_after_seconds=exc.retry_after_seconds,
            )
        case UserLimitReached():
            return ApiError(
                409,
                "user_limit_reached",
                f"This user holds {exc.sessions} seats"
                + (f" and asks {exc.seats_requested} more" if exc.seats_requested > 1 else "")
                + f"; the license allows at most {exc.max_per_user} per user; retry after "
                f"{exc.retry_after_seconds} s.",
                {"Retry-After": str(exc.retry_after_seconds)},
                max_per_user=exc.max_per_user,
                sessions=exc.sessions,
                retry_after_seconds=exc.retry_after_seconds,
                **({"seats_requested": exc.seats_requested} if exc.seats_requested > 1 else {}),
            )
        case UserDenied():
            return ApiError(403, "user_denied", "This user may not take a seat on this license.")
        case LicenseNotFound():
            return ApiError(404, "license_not_found", "No such license for this API key.")
        case LicenseSuspended():
            return ApiError(403, "license_suspended", "This license is suspended.")
        case LicenseNotStarted():
            starts = rfc3339(exc.starts_at_ms)
            return ApiError(
                403,
                "license_not_started",
                f"This license's term starts at {starts}.",
                starts_at=starts,
            )
        case LicenseExpired():
            # Two times, each by its name: the term's end (expires_at) and the grace's,
            # when seats stopped (grace_ends_at; expired_at is the same time, the name
            # the clients before it read).
            expires, ended = rfc3339(exc.expires_at_ms), rfc3339(exc.ended_at_ms)
            if exc.ended_at_ms > exc.expires_at_ms:
                said = (f"This license's term ended at {expires} (expires_at) and its grace "
                        f"at {ended} (grace_ends_at): no seat since")  # fmt: skip
            else:
                said = f"This license's term ended at {expires} (expires_at): no seat since"
            return ApiError(
                403,
                "license_expired",
                f"{said}; renew it to take seats again.",
                expires_at=expires,
                grace_ends_at=ended,
                expired_at=ended,
            )
        case NotEntitled():
            return ApiError(
                403,
                "not_entitled",
                f"This license does not include: {', '.join(exc.missing)}.",
                missing_entitlements=exc.missing,
            )
        case VersionNotEntitled():
            return ApiError(
                403,
                "version_not_entitled",
                f"Version {exc.version} is above this license's max_version {exc.max_version}.",
                version=exc.version,
                max_version=exc.max_version,
            )
        case LeaseTooLong():
            return ApiError(
                400, "invalid_request", str(exc), max_lease_seconds=exc.max_lease_seconds
            )
        case SessionExpired():
            return ApiError(
                410,
                "session_expired",
                "The session has expired or was released, reclaimed or revoked; "
                "acquire a seat again.",
                reason=exc.reason,
            )
        case Unauthenticated():
            return ApiError(401, "unauthenticated", str(exc), {"WWW-Authenticate": "Bearer"})
        case Forbidden():
            return ApiError(403, "forbidden", str(exc))
        case RateLimited():
            return ApiError(
                429,
                "rate_limited",
                f"Too many requests: {exc}; retry after {exc.retry_after_seconds} s.",
                {"Retry-After": str(exc.retry_after_seconds)},
                retry_after_seconds=exc.retry_after_seconds,
            )
        # The operator's (admin) errors: the message is the store's own sentence.
        case SessionNotLive():
            return ApiError(404, "session_not_found", sentence(exc))
        case NotFound():
            return ApiError(404, "not_found", sentence(exc))
        case Conflict():
            return ApiError(409, "conflict", sentence(exc))
        case StoreError():
            return ApiError(400, "invalid_request", sentence(exc))
        case AmbiguousLicense():
            return ApiError(400, "ambiguous_license", str(exc), tenants=exc.tenants)
        case NotConfigured():
            error = ApiError(
                503,
                "not_configured",
                "This service is not configured yet; the operator has been told. "
                f"Retry after {NOT_CONFIGURED_RETRY_SECONDS} s.",
                {"Retry-After": str(NOT_CONFIGURED_RETRY_SECONDS)},
                retry_after_seconds=NOT_CONFIGURED_RETRY_SECONDS,
            )
            error.log_fields = {"not_configured": str(exc)}  # for the operator, not the client
            return error
        case EventsNotPublished():
            return ApiError(
                503,
                "backend_unavailable",
                "Pub/Sub did not confirm some events; they stay in the outbox for the next run.",
                {"Retry-After": str(exc.retry_after_seconds)},
                retry_after_seconds=exc.retry_after_seconds,
                **exc.report,
            )
        case BackendUnavailable():
            return _unavailable(exc)
    outage = redis_outage(exc)
    if outage is not None:
        return _unavailable(outage)
    raise exc


def _unavailable(exc: BackendUnavailable) -> ApiError:
    retry_after = exc.retry_after_seconds
    if isinstance(exc, CallOutcomeUnknown):
        return ApiError(
            503,
            "backend_unavailable",
            f"A backend (redis) did not answer in time; the call may have taken effect. "
            f"Repeat it after {retry_after} s with the same request_id ({exc.request_id}) "
            "to get its result; a new request_id would be a new call.",
            {"Retry-After": str(retry_after)},
            retry_after_seconds=retry_after,
            request_id=exc.request_id,
        )
    return ApiError(
        503,
        "backend_unavailable",
        f"A backend ({exc.backend}) is unavailable; retry after {retry_after} s.",
        {"Retry-After": str(retry_after)},
        retry_after_seconds=retry_after,
    )


def sentence(exc: Exception) -> str:
    """An error's text as a sentence: capitalised (unless it starts with a field name,
    whose spelling stays) and ending in one full stop."""
    text = str(exc).rstrip(".") + "."
    if "_" in text.split(" ", 1)[0]:
        return text
    return text[:1].upper() + text[1:]
