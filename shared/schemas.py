"""Request bodies of the HTTP contract (DESIGN.md, openapi.yaml), validated by pydantic.

Strict: unknown fields are rejected, types are not coerced ("5" is not an integer).
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:@-]{1,128}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
MetadataValue = str | int | float | bool | None
METADATA_MAX_BYTES = 4096
MAX_LEASE_SECONDS = 7 * 24 * 3600  # no license may allow more; each license sets its own max


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


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AcquireRequest(_Body):
    license_id: Identifier
    client_id: Identifier
    lease_seconds: Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)] | None = None
    metadata: dict[str, MetadataValue] | None = None

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
