"""admin: operator actions over HTTP (HTTP Cloud Function, entry point ``admin``).

``POST`` a JSON object ``{"action": "status" | "revoke" | "license.update" | ...}``; the
actions, their fields and answers are in docs/admin.md and live in shared/seatlease/admin/ (the
``seatlease`` CLI runs the same code when it talks to the database directly).

Authentication is Cloud Run IAM's job: the function is deployed without
``allUsers`` invoker, so Cloud Run has already checked the caller's Google identity token
(``roles/run.invoker``) before this code runs, and the function trusts its caller. The
local stack serves it unauthenticated on loopback only. Errors use the same body and
statuses as the client functions (shared/seatlease/api/http.py).
"""

from typing import Any

import functions_framework
from flask import Request

from seatlease import admin as actions
from seatlease.api.http import AnyObject, BodyCutShort, Call, endpoint, identity_email

_LOGGED = ("action", "tenant_id", "license_id", "session_id", "prefix")  # never a key


def _caller(request: Request) -> dict[str, Any]:
    return {"caller": identity_email(request)}  # who did it, on every line


def _line(call: Call, status: int) -> tuple[str, str]:
    """Changes are NOTICEs: an operator's action is worth keeping apart from traffic. A
    4xx is the caller's answer (a typo, a license not found, a conflict), which the caller
    was told: INFO, not a WARNING that fills the CI log; a 5xx is the service's: ERROR. A
    body cut short stays a WARNING, as in every function (the caller was never told)."""
    cut_short = call.log.get("outcome") == BodyCutShort.outcome
    severity = (
        "ERROR" if status >= 500
        else "NOTICE" if status < 400
        else "WARNING" if cut_short
        else "INFO"
    )  # fmt: skip
    return severity, f"admin {status} {call.log.get('action', '')}".strip()


@functions_framework.http
@endpoint(
    "admin",
    AnyObject,
    authenticate=False,
    log_fields=_caller,
    log_line=_line,
    needs=("redis", "database"),
)
def admin(call: Call, body: AnyObject) -> tuple[int, dict[str, Any]]:
    parsed = actions.parse(body.root)
    call.log.update({k: getattr(parsed, k) for k in _LOGGED if getattr(parsed, k, None)})
    return actions.execute(parsed)
