"""reaper: reclaim expired leases and publish lease events (HTTP Cloud Function, entry
point ``reaper``). Cloud Scheduler POSTs here every minute with an OIDC token; Cloud Run
checks the token, so only the scheduler's service account can invoke it.

200 with the run's counts; 503 ``backend_unavailable`` when Redis or Pub/Sub cannot be
reached (nothing is lost: what was not published stays in the outbox for the next run).
The logic lives in shared/reaper.py.
"""

import functions_framework
from flask import Request, Response

from shared.http import ApiError, json_error, json_response, to_api_error
from shared.logs import log
from shared.reaper import default_reaper


@functions_framework.http
def reaper(request: Request) -> Response:
    if request.method != "POST":
        return json_error(
            ApiError(405, "method_not_allowed", "Use POST for reaper.", {"Allow": "POST"})
        )
    try:
        report = default_reaper().run()
    except Exception as exc:
        error = to_api_error(exc)  # Redis unreachable -> 503; anything else re-raises
        log("ERROR", "reaper run failed", error=error.message, status=error.status)
        return json_error(error)
    fields = report.as_dict()
    if report.publish_errors:
        log("ERROR", "reaper run", **fields)
        return json_error(
            ApiError(
                503,
                "backend_unavailable",
                "Pub/Sub did not confirm some events; they stay in the outbox for the next run.",
                {"Retry-After": "30"},
                retry_after_seconds=30,
                **fields,
            )
        )
    log("INFO", "reaper run", **fields)
    return json_response(200, fields)
