"""admin: operator actions over HTTP (HTTP Cloud Function, entry point ``admin``).

``POST`` a JSON object ``{"action": "status" | "revoke" | "license.update" | ...}``; the
actions, their fields and answers are in docs/admin.md and live in shared/admin.py (the
``seatlease`` CLI runs the same code when it talks to the database directly).

Authentication is Cloud Run IAM's job: the function is deployed without
``allUsers`` invoker, so Cloud Run has already checked the caller's Google identity token
(``roles/run.invoker``) before this code runs, and the function trusts its caller. The
local stack serves it unauthenticated on loopback only. Errors use the same body and
statuses as the client functions (shared/http.py).
"""

import base64
import json
import time
import traceback
from typing import Any

import functions_framework
from flask import Request, Response
from pydantic import RootModel

from shared import admin as actions
from shared.http import ApiError, json_response, parse_body
from shared.logs import log

_LOGGED = ("action", "tenant_id", "license_id", "session_id", "prefix")  # never a key


class _Object(RootModel[dict[str, Any]]):
    """Any JSON object: parse_body checks media type, size and JSON; actions.parse the rest."""


def _caller(request: Request) -> str | None:
    """The e-mail in the identity token Cloud Run already verified, for the log line only:
    the payload is read, not verified again (access control is Cloud Run IAM's)."""
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


@functions_framework.http
def admin(request: Request) -> Response:
    started = time.perf_counter()
    fields: dict[str, Any] = {"caller": _caller(request)}
    status, body, headers = 500, {}, {}
    try:
        if request.method != "POST":
            raise ApiError(405, "method_not_allowed", "Use POST for admin.", {"Allow": "POST"})
        parsed = actions.parse(parse_body(request, _Object).root)
        fields.update({k: getattr(parsed, k) for k in _LOGGED if getattr(parsed, k, None)})
        status, body = actions.execute(parsed)
    except Exception as exc:  # every failure becomes a contract error body
        try:
            error = actions.api_error(exc)
        except Exception:
            log(
                "ERROR",
                "admin: unexpected error",
                function="admin",
                error=type(exc).__name__,
                stack_trace=traceback.format_exc(),
            )
            error = ApiError(500, "internal_error", "Internal error; it has been logged.")
        status, headers = error.status, error.headers
        body = error.body
        fields["outcome"] = error.code
    log(
        "ERROR" if status >= 500 else "NOTICE" if status < 400 else "WARNING",
        f"admin {status} {fields.get('action', '')}".strip(),
        function="admin",
        status=status,
        latency_ms=round((time.perf_counter() - started) * 1000, 2),
        **fields,
    )
    return json_response(status, body, headers)
