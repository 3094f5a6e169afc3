"""The audit side: decode a Pub/Sub message of lease events, validate each event, insert
them idempotently (the unique ``event_id`` makes a redelivered message add nothing).

A message that cannot be decoded or validated is *malformed*: retrying cannot fix it,
so the function logs it and acknowledges it. A database outage raises, so Pub/Sub
retries the message and, after the subscription's attempts, dead-letters it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from seatlease.fields import Identifier, check_metadata_text
from seatlease.logs import log

INT_MAX = 2**31 - 1

# The seats in use change with: acquired and borrowed +seats (the lease's weight, 1 when
# the event has none); released, reclaimed and revoked -seats; the others 0
# (docs/design.md, "Events").
EventType = Literal[
    "lease.acquired",
    "lease.borrowed",
    "lease.renewed",
    "lease.converted",
    "lease.lingering",
    "lease.released",
    "lease.reclaimed",
    "lease.revoked",
    "lease.denied",
    # a lease re-created from its token after a region's loss (no seat changes hands: the
    # holder kept it; docs/design.md, "A region lost")
    "lease.recovered",
    # who was refused a seat in a minute, judged once its true-denial window passed
    # (docs/design.md, "Right-sizing"; no seat changes hands)
    "lease.refused",
    # the license's idle rule (issue 50; no seat changes hands): a lease warned that it
    # will be reclaimed (metadata.idle_seconds, idle_reclaim_at), and the warning
    # cancelled (activity or busy). The reclaim itself is lease.reclaimed, reason idle.
    "lease.idle",
    "lease.active",
    # the wait queue (no seat changes hands): a place taken, given up or run out, served
    "queue.joined",
    "queue.left",
    "queue.granted",
    # a license's term (the reaper's notices; no seat changes hands, no usage)
    "license.expiring",
    "license.expired",
]


class EventFields(BaseModel):
    """A lease event's fields and their bounds (``LeaseEvent`` adds the metadata text
    check, which a message without suspicious escapes can skip: see decode_events)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_id: Annotated[str, Field(min_length=1, max_length=64)]
    type: EventType
    tenant_id: Identifier
    license_id: Identifier
    session_id: Identifier | None = None
    client_id: Identifier | None = None
    occurred_at: AwareDatetime
    # Bounded by PostgreSQL's integer columns: an out-of-range value is a bad event, not a
    # database error that would retry the whole message until it is dead-lettered.
    seats_used: Annotated[int, Field(ge=0, le=INT_MAX)] | None = None
    seats_total: Annotated[int, Field(ge=0, le=INT_MAX)] | None = None
    count: Annotated[int, Field(ge=1, le=INT_MAX)] = 1
    # The lease's (or queue ticket's) weight: how many seats it counts as. Absent or null
    # (an event written before weighted seats, or a license.* / lease.denied event): 1,
    # as the audit insert stores it (lease_events.seats, migration 0012).
    # Strict: a weight of true, 4.0 or "4" is a producer's bug, not a weight to guess.
    seats: Annotated[int, Field(ge=1, le=INT_MAX, strict=True)] | None = None
    metadata: dict[str, str | int | float | bool | None] | None = None

    @model_validator(mode="after")
    def _refusal_minute(self) -> EventFields:
        # The audit insert casts a refusal's minute to a time (usage_refusals.minute): a
        # bad one is this event's problem, not a database error retried until the whole
        # message is dead-lettered.
        if self.type == "lease.refused":
            minute = (self.metadata or {}).get("minute")
            if not isinstance(minute, str) or not _MINUTE.fullmatch(minute):
                raise ValueError("a lease.refused event needs metadata.minute, a UTC minute")
            try:
                datetime.fromisoformat(minute.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError("metadata.minute is not a time") from None
        return self


_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00(\.000)?Z")


class LeaseEvent(EventFields):
    @field_validator("metadata")
    @classmethod
    def _storable(cls, value: dict | None) -> dict | None:
        check_metadata_text(value)
        return value


# A whole message validated in one pass of pydantic-core (JSON parsed in Rust): no Python
# dict and no model_validate per event.
_EVENT_LIST = TypeAdapter(list[LeaseEvent])
# The same without the Python metadata check (half the cost of checking an event):
# what it refuses (NUL, unpaired surrogates) can only reach a JSON text as a \u escape,
# so a message with no \u0000 and no \uD800-\uDFFF escape cannot hold it.
_TRUSTED_TEXT_LIST = TypeAdapter(list[EventFields])
_SUSPICIOUS_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


class MalformedMessage(ValueError):
    pass


@dataclass
class Decoded:
    """The events of one message that passed validation, and why the others did not."""

    events: list[EventFields] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def decode_events(data: bytes) -> Decoded:
    """The events of one message body (a JSON array of events, or one event object),
    validated one by one: a bad event is rejected on its own, the message's other events
    are still stored. Raises MalformedMessage when the body itself is not events."""
    try:
        fast = _SUSPICIOUS_ESCAPE.search(data) is None
        return Decoded(events=(_TRUSTED_TEXT_LIST if fast else _EVENT_LIST).validate_json(data))
    except ValidationError:
        pass  # not an array, or some event is bad: look at each one to say which
    try:
        payload: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise MalformedMessage(f"message data is not JSON: {str(exc)[:200]}") from None
    if isinstance(payload, dict):
        payload = [payload]
    if not isinstance(payload, list):
        raise MalformedMessage("message data is not an event or an array of events")
    decoded = Decoded()
    for index, item in enumerate(payload):
        try:
            decoded.events.append(LeaseEvent.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'event'}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            event_id = item.get("event_id") if isinstance(item, dict) else None
            decoded.rejected.append(f"event {index} ({event_id!r}): {problems}"[:500])
    return decoded


def decode_pubsub_data(message: dict[str, Any]) -> bytes:
    """The raw data of a Pub/Sub message as delivered in a CloudEvent (base64)."""
    try:
        return base64.b64decode(message.get("data") or "", validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise MalformedMessage(f"message data is not base64: {exc}") from None


def store(events: list[EventFields], rejected: list[str] | None = None) -> int:
    """Insert the events (one statement on PostgreSQL); returns the rows added.

    Validation keeps out what the database refuses, but should a batch still fail on its
    data (not on the connection), it is inserted event by event so one bad event cannot
    hold the others back: the events the database refuses are appended to ``rejected``
    (and logged), the rest are stored. A connection failure raises as before."""
    from sqlalchemy.exc import DBAPIError

    from seatlease.records import event_log

    try:
        # pydantic-core writes the JSON array the database statement reads (times as
        # RFC 3339 text): no Python dict per event on the way.
        return event_log.insert_events_json(_TRUSTED_TEXT_LIST.dump_json(events))
    except DBAPIError as exc:
        if not _refused_data(exc):
            raise
    rows = _TRUSTED_TEXT_LIST.dump_python(events, mode="json")
    inserted = 0
    for row in rows:
        try:
            inserted += event_log.insert_events([row])
        except DBAPIError as exc:
            if not _refused_data(exc):
                raise
            problem = f"event {row['event_id']!r}: refused by the database: {str(exc.orig)[:200]}"
            log("ERROR", "audit: event refused by the database", error=problem)
            if rejected is not None:
                rejected.append(problem)
    return inserted


def _refused_data(exc: Exception) -> bool:
    """A database error about the data itself (SQLSTATE class 22, "data exception": bad
    Unicode escape, number out of range, ...), as opposed to a connection or server
    problem. pg8000 reports these as ProgrammingError with the SQLSTATE in its args."""
    from sqlalchemy.exc import DataError

    if isinstance(exc, DataError):
        return True
    details = getattr(exc, "orig", None)
    fields = details.args[0] if details is not None and details.args else None
    return isinstance(fields, dict) and str(fields.get("C", "")).startswith("22")
