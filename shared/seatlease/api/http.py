"""The HTTP boundary, in one place: method and content checks, JSON parsing, request
validation, authentication, every domain error answered as a status, code and body
(the mapping itself: ``seatlease.api.errormap``), and the per-request log line.

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

from seatlease.api import auth, bodies, errormap
from seatlease.api.errormap import ApiError  # re-exported: the boundary's error type
from seatlease.api.startup import wait_for_backends
from seatlease.config import Readiness
from seatlease.fields import invalid_request
from seatlease.logs import log

MAX_BODY_BYTES = 16 * 1024

Body = TypeVar("Body", bound=BaseModel)


class BodyCutShort(ApiError):
    """The body ended before its ``Content-Length`` or its last chunk: the client (or a
    proxy on its way) went away mid-upload. That is not a server error: a 400, logged at
    WARNING with outcome ``client_disconnected`` and no stack trace."""

    outcome = "client_disconnected"

    def __init__(self, declared: int | None) -> None:
        where = "its Content-Length" if declared is not None else "its last chunk"
        super().__init__(400, "invalid_request", f"The request body ended before {where}.")


def to_api_error(exc: Exception) -> ApiError:
    """Every domain error, backend outage and client disconnect -> the contract's status,
    code and body (``seatlease.api.errormap``); anything else is a bug and is re-raised."""
    if isinstance(exc, ClientDisconnected):  # should anything but read_body read the body
        return BodyCutShort(0)
    return errormap.to_api_error(exc)


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
    """A JSON answer. Every one is its caller's alone, and some carry secrets (a new API
    key, lease tokens): ``Cache-Control: no-store`` unless ``headers`` say otherwise."""
    return Response(
        json.dumps(body, separators=(",", ":")),
        status=status,
        mimetype="application/json",
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def json_error(error: ApiError) -> Response:
    return json_response(error.status, error.body, error.headers)


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


# A key refused (401, or 403 forbidden: a key of the wrong scope) may be an operator's to
# act on; a license's own refusals (suspended, its term, entitlements, a denied user) are
# the client's answer, as a full license's 409 is: INFO, not a WARNING a tour fills a
# terminal with (issue 42).
KEY_REFUSALS = ("unauthenticated", "forbidden")


def client_log_line(call: Call, status: int) -> tuple[str, str]:
    """The client API's line: ``acquire 201 acquired``; refused keys and bodies cut short
    are WARNINGs."""
    outcome = call.log.get("outcome")
    warning = (status in (401, 403) and outcome in KEY_REFUSALS) or (
        outcome == BodyCutShort.outcome
    )
    severity = "ERROR" if status >= 500 else "WARNING" if warning else "INFO"
    if call.log.get("outcome") == "recovering":  # a failover's window: expected, said once
        severity = "INFO"  # by `seatlease failover begin`'s NOTICE
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
            return json_response(status, body, headers)  # (no-store: json_response)

        # Everything imported so far lives as long as the instance: keep it out of the
        # garbage collector's generations, so the first full collection does not stall
        # a request for tens of milliseconds (measured: 59-86 ms, docs/benchmarks.md).
        gc.freeze()
        return entry_point

    return decorate
