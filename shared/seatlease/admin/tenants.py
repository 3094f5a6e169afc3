"""Tenants: create, list, show, update (name, per-second rate limit)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator
from redis.exceptions import RedisError

from seatlease.admin.common import Action, RateLimit, iso_time
from seatlease.api.auth import LOCAL_TTL, REDIS_TTL
from seatlease.errors import BackendUnavailable
from seatlease.fields import Identifier, Label
from seatlease.logs import log
from seatlease.records import store


class TenantCreate(Action):
    action: Literal["tenant.create"]
    tenant_id: Identifier
    name: Label = ""
    rate_limit_per_second: RateLimit | None = None  # None: DEFAULT_RATE_LIMIT


class TenantList(Action):
    action: Literal["tenant.list"]


class TenantShow(Action):
    action: Literal["tenant.show"]
    tenant_id: Identifier


class TenantUpdate(Action):
    action: Literal["tenant.update"]
    tenant_id: Identifier
    name: Label | None = None
    rate_limit_per_second: RateLimit | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> TenantUpdate:
        if not self.changes():
            raise ValueError("give at least one of name, rate_limit_per_second")
        return self

    def changes(self) -> dict[str, Any]:
        fields = ("name", "rate_limit_per_second")
        return {f: getattr(self, f) for f in fields if getattr(self, f) is not None}


def _tenant_create(req: TenantCreate) -> tuple[int, dict[str, Any]]:
    store.create_tenant(req.tenant_id, req.name, rate_limit_per_second=req.rate_limit_per_second)
    return 201, {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}


def _tenant_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "tenant_id": row["tenant_id"],
        "name": row["name"],
        "rate_limit_per_second": row["rate_limit_per_second"],
        "created_at": iso_time(row["created_at"]),
    }


def _tenant_show(req: TenantShow) -> tuple[int, dict[str, Any]]:
    return 200, {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}


def _tenant_update(req: TenantUpdate) -> tuple[int, dict[str, Any]]:
    """A new rate limit reaches every function instance within ``LOCAL_TTL``: the shared
    Redis copy is dropped now, the instances' own copies expire."""
    from seatlease.api import tenantlimits

    changes = req.changes()
    store.update_tenant(req.tenant_id, **changes)
    body: dict[str, Any] = {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}
    if "rate_limit_per_second" not in changes:
        return 200, body
    try:
        tenantlimits.forget(req.tenant_id)
        body["cache_refreshed"] = True
    except (RedisError, BackendUnavailable) as exc:
        log("WARNING", "admin: tenant rate cache drop failed", error=type(exc).__name__)
        body["cache_refreshed"] = False
        body["warning"] = (
            f"saved in the database, but Redis is unreachable: the new rate limit applies "
            f"within {REDIS_TTL + LOCAL_TTL:.0f} s"
        )
    return 200, body


def _tenant_list(_req: TenantList) -> tuple[int, dict[str, Any]]:
    return 200, {"tenants": [_tenant_view(r) for r in store.list_tenants()]}


HANDLERS = {
    TenantCreate: _tenant_create,
    TenantList: _tenant_list,
    TenantShow: _tenant_show,
    TenantUpdate: _tenant_update,
}
