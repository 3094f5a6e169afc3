"""portal: a tenant's own view of its seats (HTTP Cloud Function, entry point ``portal``;
public, authenticated by a tenant admin key).

``GET`` serves the page (shared/seatlease/portal/static/portal.*, assembled and given its
Content-Security-Policy by shared/seatlease/portal/page.py). ``POST`` a JSON object
``{"action": "status" | "revoke" | "usage" | "keys.list" | "keys.create" | "keys.revoke",
...}`` with ``Authorization: Bearer <tenant admin key>``; the actions live in
shared/seatlease/portal/actions.py and run the operator's implementations bound to the key's
tenant. A seat key is a 403; calls are limited per key (429); every parsed action is
recorded with the key's prefix in ``portal_actions``.
"""

from typing import Any

import functions_framework
from flask import Request, Response

from seatlease.api.auth import ADMIN
from seatlease.api.http import AnyObject, ApiError, Call, endpoint, json_error, to_api_error
from seatlease.portal import actions
from seatlease.portal.page import page


def _line(call: Call, status: int) -> tuple[str, str]:
    """A change or a refusal is worth a NOTICE/WARNING; a look (status, usage) is INFO."""
    changes = call.log.get("action") in actions.CHANGES
    severity = "ERROR" if status >= 500 else "WARNING" if status >= 400 else "INFO"
    if severity == "INFO" and changes:
        severity = "NOTICE"
    return severity, f"portal {status} {call.log.get('action', '')}".strip()


def _status_of(exc: Exception) -> int:
    try:
        return to_api_error(exc).status
    except Exception:  # a bug: the boundary answers 500 and logs it
        return 500


@endpoint("portal", AnyObject, scope=ADMIN, log_line=_line, needs=("redis", "database"))
def _api(call: Call, body: AnyObject) -> tuple[int, dict[str, Any]]:
    call.log["key_prefix"] = call.key_prefix
    actions.limit(call.key_prefix)
    request = actions.parse(body.root)
    named = {k: v for k, v in actions.targets(request).items() if v}
    call.log.update(action=request.action, **named)
    try:
        status, answer = actions.execute(call.tenant_id, request)
    except Exception as exc:
        actions.record(call.tenant_id, call.key_prefix, request, _status_of(exc))
        raise
    actions.record(call.tenant_id, call.key_prefix, request, status, answer)
    return status, answer


@functions_framework.http
def portal(request: Request) -> Response:
    if request.method in ("GET", "HEAD"):
        html, headers = page()
        return Response(b"" if request.method == "HEAD" else html, 200, headers)
    if request.method != "POST":
        allow = {"Allow": "GET, HEAD, POST"}
        return json_error(ApiError(405, "method_not_allowed", "Use GET or POST for portal.", allow))
    return _api(request)
