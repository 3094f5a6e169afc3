"""Request bodies of the HTTP contract (docs/design.md, api/openapi.yaml), validated by
pydantic, from the field types of ``seatlease.fields``.

Strict: unknown fields are rejected, types are not coerced ("5" is not an integer).
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from seatlease.fields import (
    MAX_LEASE_SECONDS,
    METADATA_MAX_BYTES,
    Entitlements,
    HostName,
    Identifier,
    MetadataValue,
    Nonce,
    UserName,
    Version,
    check_metadata_text,
)
from seatlease.licenses import MAX_BORROW_SECONDS

# The machine a client runs on: the lowercase hex SHA-256 of its stable machine id
# (docs/client.md, "Borrowed seats stay on their machine"). A lease token carries it as
# cnf.machine; the clients refuse a borrowed token on another machine.
# The most seats one lease may count as, whatever its license (acquire.lua bounds it by
# the license's seats).
MAX_LEASE_WEIGHT = 100_000

Fingerprint = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# A lease token (a compact JWS) sent back after a region's loss (seatlease.api.recovery):
# at most 4 KB, which is several times the largest token this service signs.
LeaseToken = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
                           max_length=4096)
]  # fmt: skip


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
    # What the product needs: every entitlement named must be the license's (else 403
    # not_entitled), the version at most its max_version (else 403 version_not_entitled).
    entitlements: Entitlements | None = None
    version: Version | None = None
    fingerprint: Fingerprint | None = None
    # How many seats the lease counts as (a render node: 4): at most the license's seats,
    # which acquire.lua checks; this is every license's ceiling. Absent: 1 for a new lease,
    # the held lease's own for a renewal (another weight: 409 seats_mismatch).
    seats: Annotated[int, Field(ge=1, le=MAX_LEASE_WEIGHT)] | None = None
    # After a region's loss: the lease this client held, when the new primary does not
    # know it (its session is re-admitted from the token, seatlease.api.recovery).
    lease_token: LeaseToken | None = None

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
        check_metadata_text(value, shown=True)
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
    """release (and heartbeat's base)."""

    license_id: Identifier
    session_id: Identifier
    request_id: Identifier | None = None  # as in AcquireRequest
    nonce: Nonce | None = None


# The longest idleness a heartbeat may report: ten years (a number, not a clock: the
# server's own time decides when a warned lease is reclaimed).
MAX_IDLE_SECONDS_SAID = 10 * 365 * 24 * 3600


class HeartbeatRequest(SessionRequest):
    """heartbeat: with ``lease_token`` after a 410 ``unknown``, the lease is re-admitted
    from it (a region's loss: seatlease.api.recovery). ``idle_seconds``: how long the
    product saw no user activity, and ``busy``: it works and must not be interrupted
    (judged by the license's idle rule; neither said: active)."""

    lease_token: LeaseToken | None = None
    idle_seconds: Annotated[int, Field(ge=0, le=MAX_IDLE_SECONDS_SAID)] | None = None
    busy: bool | None = None
