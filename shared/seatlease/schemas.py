"""Request bodies of the HTTP contract (docs/design.md, openapi.yaml), validated by pydantic.

Strict: unknown fields are rejected, types are not coerced ("5" is not an integer).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from seatlease.errors import InvalidRequest
from seatlease.licenses import MAX_BORROW_SECONDS

IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:@-]{1,128}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
MetadataValue = str | int | float | bool | None
METADATA_MAX_BYTES = 4096
MAX_LEASE_SECONDS = 7 * 24 * 3600  # no license may allow more; each license sets its own max
NONCE_MAX_CHARS = 128
USER_MAX_CHARS = 128  # `user` and `host` on acquire, and the users a license policy names


def _nonce_text(value: str) -> str:
    if problem := text_problem(value):
        raise ValueError(f"nonce {problem}")
    return value


# Echoed in the answer's signed token, so that a product can refuse a replayed grant.
Nonce = Annotated[
    str, StringConstraints(min_length=1, max_length=NONCE_MAX_CHARS), AfterValidator(_nonce_text)
]


def user_text(field: str) -> Callable[[str], str]:
    """A validator for a user or host name: any text but what ``text_problem`` refuses
    (it reaches the audit log's JSON)."""

    def check(value: str) -> str:
        if problem := text_problem(value):
            raise ValueError(f"{field} {problem}")
        return value

    return check


UserName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=USER_MAX_CHARS),
    AfterValidator(user_text("user")),
]
HostName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=USER_MAX_CHARS),
    AfterValidator(user_text("host")),
]


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as JSON text in PostgreSQL (``jsonb`` refuses the NUL
    character and an unpaired UTF-16 surrogate, which JSON's ``\\u`` escapes can carry),
    or None. Checked at the door so a client's metadata can never stall the audit trail."""
    if "\x00" in text:
        return "contains the NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (not valid Unicode)"
    return None


def check_metadata_text(value: object) -> None:
    """Raise ValueError when a key or string value of a metadata object has a
    ``text_problem``."""
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        for what, text in (("key", key), ("value", item)):
            if isinstance(text, str) and (problem := text_problem(text)):
                shown = ascii(key)[:40]
                raise ValueError(f"metadata {what} of {shown} {problem}")


def invalid_request(exc: ValidationError, what: str = "request") -> InvalidRequest:
    """A pydantic failure as the contract's 400: ``details`` names each field and its
    problem, and the message sums them up (``Invalid request: seats: ...``). A rule on the
    whole body (``field`` ``body``) is stated without a field name. One wording for the
    client functions and the admin actions (``what``: ``revoke request``, ...)."""
    details = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problem = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "value_error" and "error" in err.get("ctx", {}):
            problem = str(err["ctx"]["error"])  # our validators' sentence, no "Value error, "
        details.append({"field": where, "problem": problem})
    summary = "; ".join(
        d["problem"] if d["field"] == "body" else f"{d['field']}: {d['problem']}" for d in details
    )
    return InvalidRequest(f"Invalid {what}: {summary}.", details=details)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AcquireRequest(_Body):
    license_id: Identifier
    client_id: Identifier
    lease_seconds: Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)] | None = None
    metadata: dict[str, MetadataValue] | None = None
    # The call's idempotency key: a repeat with the same request_id is answered with the
    # first run's reply for REPLY_TTL_SECONDS (engine.py). Optional: the server makes one.
    request_id: Identifier | None = None
    nonce: Nonce | None = None
    # A borrowed seat: no heartbeats until it expires (at most the license's
    # max_borrow_seconds, which acquire.lua checks; this is every license's ceiling).
    borrow_seconds: Annotated[int, Field(ge=1, le=MAX_BORROW_SECONDS)] | None = None
    # Who is asking (FlexNet's user and host names): judged by the license's policy and
    # recorded in the lease's metadata as "user" and "host".
    user: UserName | None = None
    host: HostName | None = None
    # On a full license with a queue: wait in line (202 and a ticket) instead of a 409.
    queue: bool = False
    ticket: Identifier | None = None  # the place in line a previous 202 gave

    @field_validator("borrow_seconds")
    @classmethod
    def _not_with_lease_seconds(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("lease_seconds") is not None:
            raise ValueError("not with lease_seconds (a borrow has its own length)")
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _flat(cls, value: object) -> object:
        # Checked before the type so a nested value gets one clear error, instead of one
        # per member of the MetadataValue union ("metadata.a.str", "metadata.a.int", ...).
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, dict | list):
                    kind = "an object" if isinstance(item, dict) else "an array"
                    raise ValueError(
                        f"metadata must be flat: {key!r} is {kind} "
                        "(values are strings, numbers, booleans or null)"
                    )
        check_metadata_text(value)
        return value

    @field_validator("metadata")
    @classmethod
    def _small_enough(cls, value: dict[str, MetadataValue] | None) -> dict | None:
        if value is not None:
            size = len(json.dumps(value, separators=(",", ":")).encode())
            if size > METADATA_MAX_BYTES:
                raise ValueError(f"metadata is {size} bytes, at most {METADATA_MAX_BYTES}")
        return value


class SessionRequest(_Body):
    """heartbeat and release."""

    license_id: Identifier
    session_id: Identifier
    request_id: Identifier | None = None  # as in AcquireRequest
    nonce: Nonce | None = None
