"""Licenses: create, update, suspend and resume, show, list. Every change refreshes the
license's cached config in Redis at once (or says it could not)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator
from redis.exceptions import RedisError

from seatlease.admin.common import (
    Action,
    BorrowSeconds,
    LeaseSeconds,
    LingerSeconds,
    OveragePercent,
    Seats,
    iso_time,
    license_rows,
    require_license,
)
from seatlease.errors import BackendUnavailable
from seatlease.fields import Identifier
from seatlease.licenses import LICENSE_FIELDS, LicenseConfig
from seatlease.logs import log
from seatlease.records import store
from seatlease.seats.engine import CONFIG_TTL_SECONDS
from seatlease.seats.policy import LicensePolicy, parse_policy


class LicenseCreate(Action):
    action: Literal["license.create"]
    tenant_id: Identifier
    license_id: Identifier
    seats: Seats
    lease_seconds: LeaseSeconds = 360
    max_lease_seconds: LeaseSeconds | None = None
    overage_percent: OveragePercent = 0
    max_borrow_seconds: BorrowSeconds = 0
    linger_seconds: LingerSeconds = 0
    policy: LicensePolicy | None = None  # seatlease.seats.policy; absent: none


class LicenseUpdate(Action):
    action: Literal["license.update"]
    tenant_id: Identifier
    license_id: Identifier
    seats: Seats | None = None
    lease_seconds: LeaseSeconds | None = None
    max_lease_seconds: LeaseSeconds | None = None
    overage_percent: OveragePercent | None = None
    suspended: bool | None = None
    max_borrow_seconds: BorrowSeconds | None = None
    linger_seconds: LingerSeconds | None = None
    policy: LicensePolicy | None = None  # replaces the license's policy as a whole
    clear_policy: bool = False  # the license has no policy any more

    @model_validator(mode="after")
    def _changes_something(self) -> LicenseUpdate:
        if self.policy is not None and self.clear_policy:
            raise ValueError("give policy or clear_policy, not both")
        if not self.changes():
            fields = ", ".join((*LICENSE_FIELDS, "policy", "clear_policy"))
            raise ValueError(f"give at least one of {fields}")
        return self

    def changes(self) -> dict[str, Any]:
        changes = {f: getattr(self, f) for f in LICENSE_FIELDS if getattr(self, f) is not None}
        if self.policy is not None:
            changes["policy"] = self.policy.as_dict()
        if self.clear_policy:
            changes["policy"] = {}
        return changes


class LicenseSuspend(Action):
    action: Literal["license.suspend", "license.resume"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseShow(Action):
    action: Literal["license.show"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseList(Action):
    action: Literal["license.list"]
    tenant_id: Identifier | None = None


def license_view(row: dict[str, Any]) -> dict[str, Any]:
    config = LicenseConfig.from_row(row)
    return {
        "tenant_id": row["tenant_id"],
        "license_id": row["license_id"],
        "seats": config.seats,
        "seat_limit": config.seat_limit,
        "overage_percent": config.overage_percent,
        "lease_seconds": config.lease_seconds,
        "max_lease_seconds": config.max_lease_seconds,
        "max_borrow_seconds": config.max_borrow_seconds,
        "linger_seconds": config.linger_seconds,
        "suspended": bool(config.suspended),
        "policy": _policy_view(row.get("policy")),
        "created_at": iso_time(row.get("created_at")),
        "updated_at": iso_time(row.get("updated_at")),
    }


def _policy_view(stored: Any) -> dict[str, Any] | None:
    """The license's policy with every field (defaults included), None for none."""
    policy = parse_policy(stored)
    return None if policy is None else policy.as_dict()


def _refresh_cache(tenant_id: str, license_id: str) -> dict[str, Any]:
    """Write the database's view of a license into Redis now; a Redis outage only
    delays the change until the cached copy expires."""
    from seatlease.api.runtime import refresh_license_cache

    try:
        refresh_license_cache(tenant_id, license_id)
    except (RedisError, BackendUnavailable) as exc:
        log(
            "WARNING",
            "admin: license cache refresh failed",
            tenant_id=tenant_id,
            license_id=license_id,
            error=type(exc).__name__,
        )
        return {
            "cache_refreshed": False,
            "warning": f"saved in the database, but Redis is unreachable: the license cache "
            f"refreshes within {CONFIG_TTL_SECONDS} s",
        }
    return {"cache_refreshed": True}


def _license_create(req: LicenseCreate) -> tuple[int, dict[str, Any]]:
    row = store.create_license(
        req.tenant_id,
        req.license_id,
        req.seats,
        lease_seconds=req.lease_seconds,
        max_lease_seconds=req.max_lease_seconds,
        overage_percent=req.overage_percent,
        max_borrow_seconds=req.max_borrow_seconds,
        linger_seconds=req.linger_seconds,
        policy=req.policy.as_dict() if req.policy and not req.policy.is_empty else None,
    )
    return 201, {"license": license_view(row), **_refresh_cache(req.tenant_id, req.license_id)}


def _license_change(tenant_id: str, license_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    store.update_license(tenant_id, license_id, **changes)
    row = require_license(tenant_id, license_id)  # as stored (updated_at included)
    return {"license": license_view(row), **_refresh_cache(tenant_id, license_id)}


def _license_update(req: LicenseUpdate) -> tuple[int, dict[str, Any]]:
    return 200, _license_change(req.tenant_id, req.license_id, req.changes())


def _license_suspend(req: LicenseSuspend) -> tuple[int, dict[str, Any]]:
    suspended = req.action == "license.suspend"
    return 200, _license_change(req.tenant_id, req.license_id, {"suspended": suspended})


def _license_show(req: LicenseShow) -> tuple[int, dict[str, Any]]:
    return 200, {"license": license_view(require_license(req.tenant_id, req.license_id))}


def _license_list(req: LicenseList) -> tuple[int, dict[str, Any]]:
    return 200, {"licenses": [license_view(r) for r in license_rows(req.tenant_id)]}


HANDLERS = {
    LicenseCreate: _license_create,
    LicenseUpdate: _license_update,
    LicenseSuspend: _license_suspend,
    LicenseShow: _license_show,
    LicenseList: _license_list,
}
