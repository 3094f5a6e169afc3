"""audit: store lease events in the audit table (CloudEvent function, entry point
``audit``, triggered by the seat-events topic).

Malformed messages are logged at ERROR and acknowledged (a poison message must not retry
forever). Any other failure (a database outage) is logged as one JSON ERROR line, with
its stack trace as a field for Error Reporting, and answered 503: Pub/Sub retries with
backoff and finally dead-letters the message (replay: ``seatlease audit
replay-dead-letters``). Answering rather than raising keeps the Functions Framework from
printing a plain-text traceback on stderr. Inserts are idempotent.
"""

import traceback
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent
from werkzeug.exceptions import ServiceUnavailable

from seatlease.api.http import guard_bodies
from seatlease.api.startup import wait_for_backends
from seatlease.config import Readiness
from seatlease.errors import NotConfigured
from seatlease.events.audit import MalformedMessage, decode_events, decode_pubsub_data, store
from seatlease.logs import log

# Cold start: a missing database setting is said once, as one CRITICAL line.
READINESS = Readiness("audit", ("database",), wait_for_backends)
# A Pub/Sub push carries one message of at most 10 MB, its data base64-encoded in a JSON
# envelope: at most about 13.4 MB. The body is read here, bounded in size and time,
# before functions-framework would read it whole (413, 408, 400 for bad chunking: the
# contract's JSON errors; Pub/Sub retries any of them, then dead-letters).
MAX_PUSH_BODY_BYTES = 14 * 1024 * 1024
guard_bodies("audit", ("POST",), read_max_bytes=MAX_PUSH_BODY_BYTES)


@functions_framework.cloud_event
def audit(event: CloudEvent) -> None:
    data: Any = event.data if isinstance(event.data, dict) else {}
    message = data.get("message") or {}
    message_id = message.get("messageId") or message.get("message_id")
    try:
        READINESS.check()
    except NotConfigured as exc:  # an operator's omission: no stack trace, Pub/Sub retries
        log("ERROR", "audit: not configured, message not stored; Pub/Sub will retry it",
            message_id=message_id, not_configured=str(exc))  # fmt: skip
        raise ServiceUnavailable("audit: not configured; retry later") from None
    try:
        _store(message, message_id)
    except Exception as exc:
        log("ERROR", "audit: message not stored; Pub/Sub will retry it",
            message_id=message_id, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            stack_trace=traceback.format_exc())  # fmt: skip
        # An HTTP error, which Flask answers without logging: any non-2xx makes Pub/Sub
        # redeliver (with the subscription's backoff).
        raise ServiceUnavailable("audit: message not stored; retry later") from None


def _store(message: dict[str, Any], message_id: str | None) -> None:
    try:
        decoded = decode_events(decode_pubsub_data(message))
    except MalformedMessage as exc:
        log("ERROR", "audit: malformed message acknowledged", message_id=message_id,
            error=str(exc))  # fmt: skip
        return
    if decoded.rejected:  # bad events are dropped one by one; the others are stored
        log("ERROR", "audit: invalid events acknowledged", message_id=message_id,
            rejected=decoded.rejected)  # fmt: skip
    rejected: list[str] = []
    inserted = store(decoded.events, rejected)  # raises on a database outage: Pub/Sub retries
    log("INFO", "audit stored", message_id=message_id, received=len(decoded.events),
        inserted=inserted, duplicates=len(decoded.events) - inserted - len(rejected),
        rejected=len(decoded.rejected) + len(rejected))  # fmt: skip
    for event in decoded.events:
        # A license's term notice: one WARNING line each, which the license-expiring
        # alert matches (terraform/modules/monitoring); rare, at most a few per license.
        if event.type.startswith("license."):
            log("WARNING", "license notice", type=event.type, tenant_id=event.tenant_id,
                license_id=event.license_id, **(event.metadata or {}))  # fmt: skip
