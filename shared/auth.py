"""API key authentication. ``Authorization: Bearer <key>`` -> tenant id.

Lookups are cached so the hot path does not touch the database: in-process for
``LOCAL_TTL`` seconds, then in Redis for ``REDIS_TTL`` seconds, then the database.
Revoking a key deletes its Redis entry at once, so a revocation takes effect everywhere
within ``LOCAL_TTL`` (15 s). Only the key's SHA-256 is ever stored or cached.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time

from shared.errors import Unauthenticated
from shared.keys import api_key_cache_key
from shared.redisconn import get_redis

LOCAL_TTL = 15.0
REDIS_TTL = 60
NEGATIVE_TTL = 10
_LOCAL_MAX = 10_000
_KEY_SHAPE = re.compile(r"^sl_[0-9a-f]{8}_[A-Za-z0-9_-]{16,64}$")
_NO_TENANT = "-"

_local: dict[str, tuple[str, float]] = {}
_local_lock = threading.Lock()


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _remember(key_hash: str, tenant: str) -> None:
    with _local_lock:
        if len(_local) >= _LOCAL_MAX:
            _local.clear()
        _local[key_hash] = (tenant, time.monotonic() + LOCAL_TTL)


def _lookup(key_hash: str) -> str:
    hit = _local.get(key_hash)
    if hit and hit[1] > time.monotonic():
        return hit[0]
    redis = get_redis()
    cache_key = api_key_cache_key(key_hash)
    tenant = redis.get(cache_key)
    if tenant is None:
        from shared import store

        tenant = store.tenant_for_key_hash(key_hash) or _NO_TENANT
        redis.set(cache_key, tenant, ex=REDIS_TTL if tenant != _NO_TENANT else NEGATIVE_TTL)
    _remember(key_hash, tenant)
    return tenant


def authenticate(header: str | None) -> str:
    """The tenant id of a valid, unrevoked key, else ``Unauthenticated``."""
    if not header:
        raise Unauthenticated("missing Authorization header: send 'Authorization: Bearer <key>'")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthenticated("malformed Authorization header: expected 'Bearer <api key>'")
    if not _KEY_SHAPE.match(key):
        raise Unauthenticated("malformed API key")
    tenant = _lookup(hash_key(key))
    if tenant == _NO_TENANT:
        raise Unauthenticated("unknown or revoked API key")
    return tenant


def forget(key_hash: str) -> None:
    """Drop a key from the caches (after revocation)."""
    get_redis().delete(api_key_cache_key(key_hash))
    with _local_lock:
        _local.pop(key_hash, None)
