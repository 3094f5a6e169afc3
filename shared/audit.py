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
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from shared.schemas import Identifier

EventType = Literal[
    "lease.acquired",
    "lease.renewed",
    "lease.released",
    "lease.reclaimed",
    "lease.revoked",
    "lease.denied",
]


class LeaseEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    event_id: Annotated[str, Field(min_length=1, max_length=64)]
    type: EventType
    tenant_id: Identifier
    license_id: Identifier
    session_id: Identifier | None = None
    client_id: Identifier | None = None
    occurred_at: AwareDatetime
    seats_used: Annotated[int, Field(ge=0)] | None = None
    seats_total: Annotated[int, Field(ge=0)] | None = None
    count: Annotated[int, Field(ge=1)] = 1
    metadata: dict[str, str | int | float | bool | None] | None = None


_events = TypeAdapter(list[LeaseEvent])


class MalformedMessage(ValueError):
    pass


def decode_events(data: bytes) -> list[LeaseEvent]:
    """The events of one message body: a JSON array of events, or one event object."""
    try:
        payload: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"message data is not JSON: {exc}") from None
    if isinstance(payload, dict):
        payload = [payload]
    try:
        return _events.validate_python(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
        raise MalformedMessage(f"invalid events: {problems}") from None


def decode_pubsub_data(message: dict[str, Any]) -> bytes:
    """The raw data of a Pub/Sub message as delivered in a CloudEvent (base64)."""
    try:
        return base64.b64decode(message.get("data") or "", validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise MalformedMessage(f"message data is not base64: {exc}") from None


def store(events: list[LeaseEvent]) -> int:
    """Insert the events (one statement on PostgreSQL); returns the rows added."""
    from shared import store as database

    return database.insert_events([event.model_dump() for event in events])
