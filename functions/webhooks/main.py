"""webhooks: deliver the tenants' events to their webhook endpoints. Two entry points of
this one source (deployed as two functions):

``webhooks`` (CloudEvent, a Pub/Sub push of the seat-events topic): decodes the message as
the audit function does, queues a delivery per event and matching endpoint
(``seatlease.webhooks.store.enqueue``: persisted and idempotent, a redelivered message adds
nothing), then sends what is due for at most ``WEBHOOK_PUSH_BUDGET_SECONDS``. A malformed
message is logged and acknowledged; a database outage while queueing is one JSON ERROR
line and a 503, so Pub/Sub retries (then dead-letters). Once queued, a failed send or an
outage while sending is logged and the message acknowledged: the deliveries wait in the
database for the next run.

``webhooks_retry`` (HTTP, Cloud Scheduler's POST every minute; Cloud Run IAM guards it):
computes the alerts (``seatlease.webhooks.alerts.run_alerts``), sends what is due for at
most ``WEBHOOK_RETRY_BUDGET_SECONDS``, prunes the delivery log older than
``KEEP_DELIVERIES``. 200 with the run's counts; 503 ``backend_unavailable`` on a database
outage. One ``webhooks retry run`` line per run.

functions-framework serves one entry point per instance, named by ``FUNCTION_TARGET``
before this module is imported; each entry point installs its own guard of request bodies
(the push's reads one, bounded; the retry's reads none), so only the served one's is
installed: the retry's would empty the push's body.
"""

import os
import traceback
from datetime import timedelta
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent
from werkzeug.exceptions import ServiceUnavailable

from seatlease import clock
from seatlease.api.http import Call, endpoint, guard_bodies
from seatlease.api.startup import wait_for_backends
from seatlease.config import Readiness
from seatlease.errors import NotConfigured
from seatlease.events.audit import MalformedMessage, decode_events, decode_pubsub_data
from seatlease.logs import log
from seatlease.webhooks import deliver, store

SERVES_PUSH = os.environ.get("FUNCTION_TARGET", "webhooks") != "webhooks_retry"
# A Pub/Sub push: at most 10 MB of data, base64 in a JSON envelope (as the audit's).
MAX_PUSH_BODY_BYTES = 14 * 1024 * 1024
KEEP_DELIVERIES = timedelta(days=30)  # the delivery log a tenant can read
# The retry's instance has its own (``endpoint``'s): this one says nothing there.
READINESS = Readiness("webhooks", ("database",) if SERVES_PUSH else (), wait_for_backends)
if SERVES_PUSH:
    guard_bodies("webhooks", ("POST",), read_max_bytes=MAX_PUSH_BODY_BYTES)


def _budget(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


@functions_framework.cloud_event
def webhooks(event: CloudEvent) -> None:
    data: Any = event.data if isinstance(event.data, dict) else {}
    message = data.get("message") or {}
    message_id = message.get("messageId") or message.get("message_id")
    try:
        READINESS.check()
        queued = _enqueue(message, message_id)
    except NotConfigured as exc:  # an operator's omission: no stack trace, Pub/Sub retries
        log("ERROR", "webhooks: not configured, message not queued; Pub/Sub will retry it",
            message_id=message_id, not_configured=str(exc))  # fmt: skip
        raise ServiceUnavailable("webhooks: not configured; retry later") from None
    except Exception as exc:
        log("ERROR", "webhooks: message not queued; Pub/Sub will retry it",
            message_id=message_id, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            stack_trace=traceback.format_exc())  # fmt: skip
        raise ServiceUnavailable("webhooks: message not queued; retry later") from None
    if queued:
        _send_due(message_id, _budget("WEBHOOK_PUSH_BUDGET_SECONDS", 5.0))


def _enqueue(message: dict[str, Any], message_id: str | None) -> int:
    try:
        decoded = decode_events(decode_pubsub_data(message))
    except MalformedMessage as exc:
        log("ERROR", "webhooks: malformed message acknowledged", message_id=message_id,
            error=str(exc))  # fmt: skip
        return 0
    if decoded.rejected:
        log("ERROR", "webhooks: invalid events acknowledged", message_id=message_id,
            rejected=decoded.rejected)  # fmt: skip
    events = [event.model_dump(mode="json", exclude_unset=True) for event in decoded.events]
    queued = store.enqueue(events)  # raises on a database outage: Pub/Sub retries
    log("INFO", "webhooks queued", message_id=message_id, received=len(events), queued=queued)
    return queued


def _send_due(message_id: str | None, budget: float) -> None:
    """Send now what is due; a failure here loses nothing (the deliveries are stored)."""
    try:
        report = deliver.deliver_due(budget_seconds=budget)
    except Exception as exc:
        log("ERROR", "webhooks: sending failed; the retry run sends them",
            message_id=message_id, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            stack_trace=traceback.format_exc())  # fmt: skip
        return
    log("INFO", "webhooks sent", message_id=message_id, **report)


def _line(call: Call, status: int) -> tuple[str, str]:
    if status == 200:
        return "INFO", "webhooks retry run"
    call.log["error"] = call.error.message if call.error else None
    return "ERROR", "webhooks retry run failed"


def _when_served(handler: Any) -> Any:
    """The retry's entry point, registered under its own name, where this instance serves
    it; elsewhere the plain handler (see the module's docstring)."""
    if SERVES_PUSH:
        return handler
    entry = endpoint("webhooks_retry", None, authenticate=False, log_line=_line,
                     needs=("database",))  # fmt: skip
    return functions_framework.http(entry(handler))


@_when_served
def webhooks_retry(call: Call, _body: None) -> tuple[int, dict[str, Any]]:
    from seatlease.webhooks import alerts

    now = clock.now()
    counts: dict[str, Any] = {"alerts": alerts.run_alerts(now)}
    counts.update(deliver.deliver_due(budget_seconds=_budget("WEBHOOK_RETRY_BUDGET_SECONDS", 30)))
    counts["pruned"] = store.prune(now - KEEP_DELIVERIES)
    call.log.update(counts)
    return 200, counts
