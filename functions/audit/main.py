"""audit: store lease events in the audit table (CloudEvent function, entry point
``audit``, triggered by the seat-events topic).

Malformed messages are logged at ERROR and acknowledged (a poison message must not retry
forever). A database outage raises: Pub/Sub retries with backoff and finally dead-letters
the message (replay: ``seatlease audit replay-dead-letters``). Inserts are idempotent.
"""

from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from shared.audit import MalformedMessage, decode_events, decode_pubsub_data, store
from shared.logs import log


@functions_framework.cloud_event
def audit(event: CloudEvent) -> None:
    data: Any = event.data if isinstance(event.data, dict) else {}
    message = data.get("message") or {}
    message_id = message.get("messageId") or message.get("message_id")
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
