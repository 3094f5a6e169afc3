"""reaper: reclaim expired leases and publish lease events (HTTP Cloud Function, entry
point ``reaper``). Cloud Scheduler POSTs here every minute with an OIDC token; Cloud Run
checks the token, so only the scheduler's service account can invoke it.

200 with the run's counts; 503 ``backend_unavailable`` when Redis or Pub/Sub cannot be
reached (nothing is lost: what was not published stays in the outbox for the next run).
Each run logs one ``reaper run`` line with its counts (the monitoring's log-based metrics
read it). The logic lives in shared/seatlease/events/reaper.py.
"""

from typing import Any

import functions_framework

from seatlease.api.http import Call, endpoint
from seatlease.errors import EventsNotPublished
from seatlease.events.reaper import default_reaper


def _line(call: Call, status: int) -> tuple[str, str]:
    if status == 200:
        return "INFO", "reaper run"
    if "reclaimed" in call.log:  # the run ended, some events unpublished: its counts
        return "ERROR", "reaper run"
    if status >= 500:
        call.log["error"] = call.error.message if call.error else None
        return "ERROR", "reaper run failed"
    return "WARNING", f"reaper {status} {call.log.get('outcome', '')}".strip()


@functions_framework.http
@endpoint("reaper", None, authenticate=False, log_line=_line, needs=("redis",))
def reaper(call: Call, _body: None) -> tuple[int, dict[str, Any]]:
    report = default_reaper().run()
    fields = report.as_dict()
    call.log.update(fields)
    if report.publish_errors:
        raise EventsNotPublished(fields)
    return 200, fields
