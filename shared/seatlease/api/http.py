"""The HTTP boundary, in one place: method and content checks, JSON parsing, request
validation, authentication, the mapping of every domain error to a status, code and body,
and the per-request log line.

A function's entry point is ``@endpoint(name, Model)`` around a handler that gets the
call and the validated body and returns ``(status, body)`` (or ``(status, body,
headers)``); the handler raises domain
errors (``seatlease.errors``), never HTTP ones. Every failure becomes
``{"error": {"code", "message", ...}}`` with the right status; nothing escapes as a 500
with a stack trace. The options cover the functions that are not the client API: the
admin function and the reaper (Cloud Run IAM checks their callers, see ``endpoint``).

The body is the one part of a request a client controls in size, so it is read last and
never whole: 405, 415 and 401 are decided on the headers, a ``Content-Length`` over
``MAX_BODY_BYTES`` is a 413 before a byte is read, and a body without one (chunked) is
read up to the cap and no further. What a refused client still sends is never read by
this process (``_leave_the_rest_unread``).
"""

from __future__ import annotations

import base64
import functools
import gc
import io
import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from flask import Request, Response
from pydantic import BaseModel, RootModel, ValidationError
from werkzeug.exceptions import ClientDisconnected

from seatlease.api import auth, bodies
from seatlease.api.startup import wait_for_backends
from seatlease.clock import rfc3339
from seatlease.config import Readiness
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
    NoSeatsAvailable,
    NotConfigured,
    NotEntitled,
    NotFound,
    QueueFull,
    RateLimited,
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
from seatlease.fields import invalid_request
from seatlease.logs import log

MAX_BODY_BYTES = 16 * 1024
# Retry-After of a function that is not configured: an operator has to act (redeploy
# with the setting, or publish the first signing key), which takes minutes, not seconds.
NOT_CONFIGURED_RETRY_SECONDS = 60

# Retry-After of a full wait queue: places free as tickets are granted or lapse.
QUEUE_FULL_RETRY_SECONDS = 10

Body = TypeVar("Body", bound=BaseModel)


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


class BodyCutShort(ApiError):
    """The body ended before its ``Content-Length`` or its last chunk: the client (or a
    proxy on its way) went away mid-upload. That is not a server error: a 400, logged at
    WARNING with outcome ``client_disconnected`` and no stack trace."""

    outcome = "client_disconnected"

    def __init__(self, declared: int | None) -> None:
        where = "its Content-Length" if declared is not None else "its last chunk"
        super().__init__(400, "invalid_request", f"The request body ended before {where}.")


class AnyObject(RootModel[dict[str, Any]]):
    """Any JSON object: for a function that validates the body itself (admin)."""


@dataclass
class Call:
    """One request; handlers add log fields to ``log``. ``tenant_id`` is the API key's
    tenant (empty for a function without API keys); ``error`` is set when the request
    failed, for a ``log_line`` hook."""

    function: str
    tenant_id: str = ""
    key_prefix: str = ""  # the API key's public id (sl_xxxxxxxx), never the key
    log: dict[str, Any] = field(default_factory=dict)
    error: ApiError | None = None


def json_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status=status,
        mimetype="application/json",
        headers=headers or {},
    )


def json_error(error: ApiError) -> Response:
    return json_response(error.status, error.body, error.headers)


def to_api_error(exc: Exception) -> ApiError:
    """Every domain error (and every backend outage) -> the contract's status, code and
    body; anything else is a bug and is re-raised."""
    match exc:
        case ApiError():
            return exc
        case ClientDisconnected():  # werkzeug's, should anything but read_body read the body
            return BodyCutShort(0)
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
            ended = rfc3339(exc.ended_at_ms)
            return ApiError(
                403,
                "license_expired",
                f"This license expired at {ended}; renew it to take seats again.",
                expires_at=rfc3339(exc.expires_at_ms),
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


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400 overflows to inf, which json.dumps writes as Infinity
        raise ValueError(f"number out of range: {text[:20]}")
    return value


def _not_json(name: str) -> NoReturn:
    # Python's json accepts NaN and Infinity; they are not JSON, and metadata carrying them
    # would reach the audit log as text PostgreSQL's jsonb refuses.
    raise ValueError(f"{name} is not valid JSON")


def _check_media_type(request: Request) -> None:
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported_media_type", "Send the body as application/json.")


def _too_large() -> ApiError:
    return ApiError(413, "payload_too_large", f"The body may be at most {MAX_BODY_BYTES} B.")


def read_body(request: Request) -> bytes:
    """The body, at most ``MAX_BODY_BYTES`` of it ever in memory: 413 on a
    ``Content-Length`` over the cap before anything is read, and as soon as a body
    without one (chunked) passes the cap; ``BodyCutShort`` when it ends early.

    ``request.stream``, not ``get_data()``: werkzeug's stream stops at the
    ``Content-Length`` (and raises ``ClientDisconnected`` when the connection ends first);
    gunicorn's, which werkzeug passes through as it de-chunks and bounds the body itself,
    just ends short, hence the length check after the loop."""
    declared = request.content_length  # None when chunked
    if declared is not None and declared > MAX_BODY_BYTES:
        raise _too_large()
    stream = request.stream
    # A chunked body may be read one byte past the cap: that byte is what tells it is over.
    limit = declared if declared is not None else MAX_BODY_BYTES + 1
    chunks: list[bytes] = []
    size = 0
    failure: ApiError | None = None
    # A slow client: past BODY_READ_SECONDS its connection's reads end (a 408).
    watch = bodies.WATCHDOG.arm(request.environ, bodies.BODY_READ_SECONDS)
    try:
        while size < limit:
            chunk = stream.read(limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except (ClientDisconnected, OSError):  # a reset, a timeout, gunicorn's NoMoreData
        failure = BodyCutShort(declared)
    except Exception:  # the WSGI server's own parse errors: gunicorn's InvalidChunkSize...
        failure = ApiError(400, "invalid_request", "The body's chunking is malformed.")
    if bodies.WATCHDOG.disarm(watch):
        error = bodies.timed_out()
        timeout = ApiError(error.status, error.code, error.message)
        timeout.outcome = error.outcome
        raise timeout
    if failure is not None:
        raise failure
    if size > MAX_BODY_BYTES:
        raise _too_large()
    if declared is not None and size < declared:
        raise BodyCutShort(declared)
    return b"".join(chunks)


def parse_body(request: Request, model: type[Body]) -> Body:
    _check_media_type(request)
    raw = read_body(request)
    try:
        data = json.loads(raw, parse_float=_finite_float, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_request", "The body is not valid JSON.") from None
    except RecursionError:  # "[[[[..." a few thousand deep: Python's parser gives up
        raise ApiError(
            400, "invalid_request", "The body is not valid JSON here: nested too deeply."
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", "The body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from None


def identity_email(request: Request) -> str | None:
    """The e-mail in the Google identity token Cloud Run already verified, for the log
    line only: the payload is read, not verified again (access control is Cloud Run
    IAM's). None when there is no readable one."""
    header = request.headers.get("X-Serverless-Authorization") or request.headers.get(
        "Authorization"
    )
    scheme, _, token = (header or "").partition(" ")
    parts = token.strip().split(".")
    if scheme.lower() != "bearer" or len(parts) < 2:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    email = payload.get("email") if isinstance(payload, dict) else None
    return email if isinstance(email, str) else None


# (severity, message) of a request's log line, from the call and the status answered.
LogLine = Callable[[Call, int], tuple[str, str]]


def client_log_line(call: Call, status: int) -> tuple[str, str]:
    """The client API's line: ``acquire 201 acquired``; refused keys and bodies cut short
    are WARNINGs."""
    warning = status in (401, 403) or call.log.get("outcome") == BodyCutShort.outcome
    severity = "ERROR" if status >= 500 else "WARNING" if warning else "INFO"
    return severity, f"{call.function} {status} {call.log.get('outcome', '')}".strip()


# A handler returns (status, body) or (status, body, headers).
Handler = Callable[[Call, Any], tuple[Any, ...]]


def _leave_the_rest_unread(request: Request) -> None:
    """Nothing after the handler may read the body: functions-framework's after-request
    hook (``read_request``) calls ``get_data()``, which would read all a refused client
    still sends into memory (and would hold the answer until it has), or raise on a body
    cut short. The rest is the WSGI server's to discard: gunicorn drains a little, then
    closes the connection; werkzeug closes it."""
    request.stream = io.BytesIO()


def guard_bodies(
    name: str, body_methods: tuple[str, ...] = ("POST",), read_max_bytes: int | None = None
) -> None:
    """Put the function's app (functions-framework runs its module inside the app's
    context) behind ``seatlease.api.bodies.guard``: bodies of other methods are never
    read; with ``read_max_bytes`` the body is read there, bounded, before the framework
    would read it whole. Outside an app (an import by a test or a tool), nothing."""
    from flask import current_app, has_app_context

    if has_app_context():
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        app.wsgi_app = bodies.guard(  # type: ignore[method-assign]
            app.wsgi_app, name, body_methods=body_methods, read_max_bytes=read_max_bytes
        )


def _identify(call: Call, request: Request, scope: str) -> None:
    caller = auth.identify(request.headers.get("Authorization"), scope)
    call.tenant_id, call.key_prefix = caller.tenant_id, caller.prefix


def endpoint(
    name: str,
    model: type[BaseModel] | None,
    *,
    authenticate: bool = True,
    scope: str = auth.SEAT,
    log_fields: Callable[[Request], dict[str, Any]] | None = None,
    log_line: LogLine = client_log_line,
    needs: tuple[str, ...] = (),
) -> Callable[[Handler], Callable]:
    """Wrap a handler into a functions-framework HTTP entry point named ``name``.

    ``model``: the body's pydantic model (``AnyObject`` for any JSON object; None: the
    body is not read, as for the reaper, which Cloud Scheduler POSTs with none).
    ``authenticate``: require a tenant's API key; False for a function Cloud Run IAM
    protects (deployed without ``allUsers`` invoker), whose callers are operators or
    the scheduler. ``scope``: the API key scope the function takes (``seat``: the client
    API; ``admin``: the tenant portal); a key of the other scope is a 403.
    ``log_fields``: fields of the log line taken from the request before anything else
    (even for a 405). ``log_line``: the line's severity and message.
    ``needs``: the configuration the function cannot work without (``Readiness``).
    """

    def decorate(handler: Handler) -> Callable[[Request], Response]:
        readiness = Readiness(name, needs, wait_for_backends)  # at import: the cold start
        guard_bodies(name, ("POST",) if model is not None else ())

        @functools.wraps(handler)
        def entry_point(request: Request) -> Response:
            started = time.perf_counter()
            call = Call(function=name)
            if authenticate:  # license_id is on every client line (None until parsed)
                call.log["license_id"] = None
            if log_fields is not None:
                call.log.update(log_fields(request))
            status, body, headers = 500, {}, {}
            try:
                readiness.check()
                if request.method != "POST":
                    raise ApiError(
                        405, "method_not_allowed", f"Use POST for {name}.", {"Allow": "POST"}
                    )
                parsed = None
                if model is not None:
                    _check_media_type(request)  # 415 before authentication
                    if authenticate:
                        _identify(call, request, scope)
                    parsed = parse_body(request, model)
                    if authenticate:
                        call.log["license_id"] = getattr(parsed, "license_id", None)
                elif authenticate:
                    _identify(call, request, scope)
                status, body, *extra = handler(call, parsed)
                if extra:
                    headers = extra[0]
            except Exception as exc:  # every failure becomes a contract error body
                try:
                    error = to_api_error(exc)
                except Exception:
                    log(
                        "ERROR",
                        f"{name}: unexpected error",
                        function=name,
                        error=type(exc).__name__,
                        stack_trace=traceback.format_exc(),
                    )
                    error = ApiError(500, "internal_error", "Internal error; it has been logged.")
                status, headers = error.status, error.headers
                body = error.body
                call.error = error
                call.log.setdefault("outcome", error.outcome or error.code)
                if error.log_fields:
                    call.log.update(error.log_fields)
            _leave_the_rest_unread(request)
            latency_ms = round((time.perf_counter() - started) * 1000, 2)
            severity, message = log_line(call, status)
            fields: dict[str, Any] = {"function": name, "status": status}
            if authenticate:
                fields["tenant_id"] = call.tenant_id or None
            log(severity, message, **{**fields, "latency_ms": latency_ms, **call.log})
            # Every answer is this caller's alone, and some carry secrets (a new API key,
            # lease tokens): no cache on the way may keep one.
            return json_response(status, body, {"Cache-Control": "no-store", **headers})

        # Everything imported so far lives as long as the instance: keep it out of the
        # garbage collector's generations, so the first full collection does not stall
        # a request for tens of milliseconds (measured: 59-86 ms, docs/benchmarks.md).
        gc.freeze()
        return entry_point

    return decorate
