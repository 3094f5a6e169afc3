"""What every operator action shares: the request base, the field types the requests
validate with, times in and out, and the license lookups several resources make."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from seatlease import apikeys
from seatlease.clock import utc
from seatlease.errors import NotFound
from seatlease.fields import MAX_LEASE_SECONDS
from seatlease.licenses import MAX_BORROW_SECONDS, MAX_LINGER_SECONDS
from seatlease.records import store

MAX_SEATS = 1_000_000
MAX_RATE_LIMIT = 1_000_000  # the tenants table's CHECK constraint
Seats = Annotated[int, Field(ge=0, le=MAX_SEATS)]
LeaseSeconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)]
OveragePercent = Annotated[int, Field(ge=0, le=1000)]
BorrowSeconds = Annotated[int, Field(ge=0, le=MAX_BORROW_SECONDS)]  # 0: no borrowing
LingerSeconds = Annotated[int, Field(ge=0, le=MAX_LINGER_SECONDS)]  # 0: no linger
RateLimit = Annotated[int, Field(ge=0, le=MAX_RATE_LIMIT)]  # calls per second; 0: no limit
KeyPrefix = Annotated[str, StringConstraints(pattern=rf"^{apikeys.PREFIX_PATTERN}$")]


def parse_time(value: Any) -> datetime:
    """An ISO 8601 time as an aware UTC datetime: a date means its midnight UTC, no
    offset means UTC (``2026-11-22``, ``2026-11-22T09:30:00Z``, ``...+01:00``)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value[:40]!r} is not an ISO 8601 time (e.g. 2026-11-22 or 2026-11-22T09:30:00Z)"
            ) from None
    else:
        raise ValueError("must be an ISO 8601 time string")
    try:
        return utc(parsed)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise ValueError(f"{str(value)[:40]!r} is out of range") from None


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value)


OptionalTime = Annotated[datetime | None, BeforeValidator(_optional_time)]


class Action(BaseModel):
    """An operator request: ``{"action": "<name>", ...fields}``, strict, unknown fields
    rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def iso_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    # utc(): SQLite hands back naive UTC datetimes
    return utc(value).isoformat(timespec="seconds").replace("+00:00", "Z")


def require_license(tenant_id: str, license_id: str) -> dict[str, Any]:
    """The license's row; ``NotFound`` naming the tenant when the tenant does not exist
    (a mistyped tenant is not a missing license), else naming the license."""
    row = store.get_license(tenant_id, license_id)
    if row is None:
        store.get_tenant(tenant_id)  # NotFound: "tenant 'acm' not found"
        raise NotFound(f"license {license_id!r} not found for tenant {tenant_id!r}")
    return row


def license_rows(tenant_id: str | None) -> list[dict[str, Any]]:
    """Every license, or a tenant's (an unknown tenant is an error, not an empty list)."""
    if tenant_id is not None:
        store.get_tenant(tenant_id)
    return store.list_licenses(tenant_id)
