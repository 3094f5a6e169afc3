"""The HTTP mapping, in one place: method and content checks, JSON parsing, request
validation, authentication, the error body, status codes and the per-request log line.

A function's entry point is ``@endpoint(name, Model)`` around a handler that gets the
authenticated call and the validated body and returns ``(status, body)``. Every failure
becomes ``{"error": {"code", "message", ...}}`` with the right status; nothing escapes as a
500 with a stack trace.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from flask import Request, Response
from pydantic import BaseModel, ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared import auth
from shared.errors import (
    BackendUnavailable,
    LeaseTooLong,
    LicenseNotFound,
    LicenseSuspended,
    NoSeatsAvailable,
    SessionExpired,
    Unauthenticated,
)
from shared.logs import log

MAX_BODY_BYTES = 16 * 1024
BACKEND_RETRY_AFTER = 2

Body = TypeVar("Body", bound=BaseModel)


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

    @property
    def body(self) -> dict[str, Any]:
        """The contract's error body: ``{"error": {"code", "message", ...extra}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


@dataclass
class Call:
    """One authenticated request; handlers add log fields to ``log``."""

    function: str
    tenant_id: str
    log: dict[str, Any] = field(default_factory=dict)


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
    """Domain and backend errors -> the contract's status codes."""
    match exc:
        case ApiError():
            return exc
        case NoSeatsAvailable():
            return ApiError(
                409,
                "no_seats_available",
                f"All {exc.seats_total} seats are in use; retry after {exc.retry_after_seconds} s.",
                {"Retry-After": str(exc.retry_after_seconds)},
                seats_used=exc.seats_used,
                seats_total=exc.seats_total,
                retry_after_seconds=exc.retry_after_seconds,
            )
        case LicenseNotFound():
            return ApiError(404, "license_not_found", "No such license for this API key.")
        case LicenseSuspended():
            return ApiError(403, "license_suspended", "This license is suspended.")
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
        case BackendUnavailable():
            return _unavailable(exc.backend, exc.retry_after_seconds)
        case RedisConnectionError() | RedisTimeoutError():
            return _unavailable("redis", BACKEND_RETRY_AFTER)
        # Full (maxmemory with noeviction) or a replica during a failover: writes fail
        # until an operator or the failover acts; retrying later is the client's move.
        case OutOfMemoryError() | ReadOnlyError():
            return _unavailable("redis", BACKEND_RETRY_AFTER)
        case ResponseError() if any(w in str(exc) for w in ("OOM", "LOADING", "READONLY")):
            return _unavailable("redis", BACKEND_RETRY_AFTER)
        case RedisError() if type(exc).__name__.startswith(("Cluster", "MasterDown", "TryAgain")):
            return _unavailable("redis", BACKEND_RETRY_AFTER)
    raise exc


def _unavailable(backend: str, retry_after: int) -> ApiError:
    return ApiError(
        503,
        "backend_unavailable",
        f"A backend ({backend}) is unavailable; retry after {retry_after} s.",
        {"Retry-After": str(retry_after)},
        retry_after_seconds=retry_after,
    )


def _validation_message(exc: ValidationError) -> tuple[str, list[dict[str, str]]]:
    details = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problem = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "value_error" and "error" in err.get("ctx", {}):
            problem = str(err["ctx"]["error"])  # our validators' sentence, no "Value error, "
        details.append({"field": where, "problem": problem})
    summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details)
    return f"Invalid request: {summary}.", details


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400 overflows to inf, which json.dumps writes as Infinity
        raise ValueError(f"number out of range: {text[:20]}")
    return value


def _not_json(name: str) -> NoReturn:
    # Python's json accepts NaN and Infinity; they are not JSON, and metadata carrying them
    # would reach the audit log as text PostgreSQL's jsonb refuses.
    raise ValueError(f"{name} is not valid JSON")


def parse_body(request: Request, model: type[Body]) -> Body:
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported_media_type", "Send the body as application/json.")
    if (request.content_length or 0) > MAX_BODY_BYTES:
        raise ApiError(413, "payload_too_large", f"The body may be at most {MAX_BODY_BYTES} B.")
    raw = request.get_data(cache=False)
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, "payload_too_large", f"The body may be at most {MAX_BODY_BYTES} B.")
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
        message, details = _validation_message(exc)
        raise ApiError(400, "invalid_request", message, details=details) from None


Handler = Callable[[Call, Any], tuple[int, dict[str, Any]]]


def endpoint(name: str, model: type[BaseModel]) -> Callable[[Handler], Callable]:
    """Wrap a handler into a functions-framework HTTP entry point named ``name``."""

    def decorate(handler: Handler) -> Callable[[Request], Response]:
        @functools.wraps(handler)
        def entry_point(request: Request) -> Response:
            started = time.perf_counter()
            # license_id is logged on every line (None until the body is parsed).
            call = Call(function=name, tenant_id="", log={"license_id": None})
            status, body, headers = 500, {}, {}
            try:
                if request.method != "POST":
                    raise ApiError(
                        405, "method_not_allowed", f"Use POST for {name}.", {"Allow": "POST"}
                    )
                if request.mimetype != "application/json":
                    parse_body(request, model)  # raises the 415
                call.tenant_id = auth.authenticate(request.headers.get("Authorization"))
                parsed = parse_body(request, model)
                call.log["license_id"] = getattr(parsed, "license_id", None)
                status, body = handler(call, parsed)
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
                call.log.setdefault("outcome", error.code)
            latency_ms = round((time.perf_counter() - started) * 1000, 2)
            log(
                "ERROR" if status >= 500 else "WARNING" if status in (401, 403) else "INFO",
                f"{name} {status} {call.log.get('outcome', '')}".strip(),
                function=name,
                status=status,
                tenant_id=call.tenant_id or None,
                latency_ms=latency_ms,
                **call.log,
            )
            return json_response(status, body, headers)

        # Everything imported so far lives as long as the instance: keep it out of the
        # garbage collector's generations, so the first full collection does not stall
        # a request for tens of milliseconds (measured: 59-86 ms, docs/benchmarks.md).
        gc.freeze()
        return entry_point

    return decorate
