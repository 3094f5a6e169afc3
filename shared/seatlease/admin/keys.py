"""A tenant's API keys: create (the key is answered once), list, revoke (and drop it
from the caches)."""

from __future__ import annotations

from typing import Any, Literal

from redis.exceptions import RedisError

from seatlease.admin.common import Action, KeyPrefix, iso_time
from seatlease.api.auth import LOCAL_TTL, REDIS_TTL
from seatlease.fields import Identifier, Label
from seatlease.logs import log
from seatlease.records import store

Scope = Literal["seat", "admin"]  # store.SCOPES


class ApiKeyCreate(Action):
    action: Literal["apikey.create"]
    tenant_id: Identifier
    label: Label = ""
    scope: Scope = "seat"  # admin: the tenant's portal key


class ApiKeyList(Action):
    action: Literal["apikey.list"]
    tenant_id: Identifier


class ApiKeyRevoke(Action):
    action: Literal["apikey.revoke"]
    prefix: KeyPrefix


def _apikey_create(req: ApiKeyCreate) -> tuple[int, dict[str, Any]]:
    new = store.create_api_key(req.tenant_id, req.label, scope=req.scope)
    return 201, {
        "tenant_id": new.tenant_id,
        "prefix": new.prefix,
        "label": req.label,
        "scope": new.scope,
        "key": new.key,  # shown once: only its hash is stored
    }


def _apikey_list(req: ApiKeyList) -> tuple[int, dict[str, Any]]:
    return 200, {"tenant_id": req.tenant_id, "api_keys": api_key_views(req.tenant_id)}


def api_key_views(tenant_id: str, scope: str | None = None) -> list[dict[str, Any]]:
    """A tenant's keys as the answers show them (never a hash)."""
    return [
        {
            "prefix": k["prefix"],
            "label": k["label"],
            "scope": k["scope"],
            "active": k["revoked_at"] is None,
            "created_at": iso_time(k["created_at"]),
            "revoked_at": iso_time(k["revoked_at"]),
        }
        for k in store.list_api_keys(tenant_id, scope=scope)
    ]


def _apikey_revoke(req: ApiKeyRevoke) -> tuple[int, dict[str, Any]]:
    return 200, revoke_api_key(req.prefix)


def revoke_api_key(
    prefix: str, tenant_id: str | None = None, scope: str | None = None
) -> dict[str, Any]:
    """Revoke a key and drop it from the caches; with ``tenant_id``/``scope`` only a key
    of that tenant and scope (any other is ``NotFound``)."""
    from seatlease.api import auth

    key_hash = store.revoke_api_key(prefix, tenant_id=tenant_id, scope=scope)
    body: dict[str, Any] = {
        "prefix": prefix,
        "revoked": True,
        "local_cache_seconds": LOCAL_TTL,
    }
    try:
        auth.forget(key_hash)
        body["cache_refreshed"] = True
    except RedisError as exc:
        log("WARNING", "admin: API key cache drop failed", error=type(exc).__name__)
        body["cache_refreshed"] = False
        body["warning"] = (
            f"revoked in the database, but Redis is unreachable: cached copies of the key "
            f"expire within {REDIS_TTL + LOCAL_TTL:.0f} s"
        )
    return body


HANDLERS = {
    ApiKeyCreate: _apikey_create,
    ApiKeyList: _apikey_list,
    ApiKeyRevoke: _apikey_revoke,
}
