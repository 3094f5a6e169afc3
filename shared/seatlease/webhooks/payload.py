"""What a receiver gets: one event, in the audit's JSON shape, as a webhook payload.

``payload_of(event)`` is ``{"type", "id", "occurred_at", "tenant_id", "license_id",
"sequence", "data"}``: ``id`` is the event's ``event_id`` (also the ``webhook-id`` header:
a receiver dedupes by it, deliveries being at-least-once), ``data`` everything else the
event says (``session_id``, ``client_id``, ``seats_used``, ``seats_total``, ``count``,
``seats``, ``metadata``, ...), as the event says it.

``sequence`` orders a lease's events. Deliveries are retried and sent in parallel, so a
receiver may get them out of order; it keeps, per lease, the event with the highest
``sequence``. It is ``occurred_at`` in milliseconds since the epoch times 1000, plus the
event id's trailing counter (at most 999):

* the seat scripts name their events ``<random prefix>-<n>``, ``n`` counting the events
  of one call from 1 (lua/_lib.lua ``emit``), and every event of one call carries that
  call's time. A lease's events of one call are ordered by ``n``; those of two calls by
  their time (a lease's calls run one after another on its Redis shard);
* an id with no trailing number (an alert's, a test's) counts 0;
* the counter is capped at 999 so that a call's events never reach into the next
  millisecond; only a call of more than 999 events (the reaper's refusal flush, one
  event per refused client, never two for one lease) has events that share a sequence;
* two calls on one lease in the same millisecond share the millisecond, and their events
  are ordered by counter alone: as good as the event times say.

The number stays below 2**53 (until the year 2255), so JavaScript receivers read it
exactly.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime
from typing import Any, get_args

from seatlease.events.audit import EventType

# Computed by the service (webhooks.alerts) and sent to endpoints only: never in the
# audit trail's lease events.
ALERT_TYPES = (
    "license.nearly_full",
    "license.capacity_ok",
    "license.denials",
    "license.term_ending",
)
TEST_TYPE = "webhook.test"
# Every type an endpoint may filter on: every lease, queue and license event the audit
# stores (so a type added there is offered here), the alerts and the test event.
EVENT_TYPES: tuple[str, ...] = (*get_args(EventType), *ALERT_TYPES, TEST_TYPE)

# The payload's own fields: everything else of an event goes into "data".
HEADER_FIELDS = ("event_id", "type", "tenant_id", "license_id", "occurred_at")
COUNTER_LIMIT = 999
_TRAILING_COUNTER = re.compile(r"-([0-9]{1,9})$")


def payload_of(event: dict[str, Any]) -> dict[str, Any]:
    """The webhook payload of ``event`` (the audit's JSON shape: ``occurred_at`` an RFC
    3339 text or an aware datetime). Raises ValueError naming a missing field."""
    required = ("event_id", "type", "tenant_id", "occurred_at")
    missing = [name for name in required if not event.get(name)]
    if missing:
        raise ValueError(f"the event has no {', '.join(missing)}")
    at = _utc(event["occurred_at"])
    data = {key: value for key, value in event.items() if key not in HEADER_FIELDS}
    if isinstance(data.get("metadata"), dict):
        data["metadata"] = dict(data["metadata"])  # the payload shares nothing with the event
    return {
        "type": event["type"],
        "id": event["event_id"],
        "occurred_at": _rfc3339_ms(at),
        "tenant_id": event["tenant_id"],
        "license_id": event.get("license_id"),
        "sequence": sequence_of(event["event_id"], _epoch_ms(at)),
        "data": data,
    }


def sequence_of(event_id: str, occurred_at_ms: int) -> int:
    """``occurred_at_ms * 1000`` plus the id's trailing counter (0 without one, at most
    999): the module's docstring says why that orders a lease's events."""
    match = _TRAILING_COUNTER.search(event_id)
    counter = min(int(match.group(1)), COUNTER_LIMIT) if match else 0
    return occurred_at_ms * 1000 + counter


def _utc(value: str | datetime) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"occurred_at is not an RFC 3339 time: {value[:40]!r}") from None
    if not isinstance(value, datetime):
        raise ValueError("occurred_at is not a time")
    if value.tzinfo is None:  # a naive time from the database is UTC
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _epoch_ms(at: datetime) -> int:
    # Integer arithmetic: a float timestamp could round .xxx999 up into the next ms.
    return calendar.timegm(at.utctimetuple()) * 1000 + at.microsecond // 1000


def _rfc3339_ms(at: datetime) -> str:
    """As the seat scripts write it: ``2026-11-29T07:42:56.123Z``."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
