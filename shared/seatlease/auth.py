"""API key authentication. ``Authorization: Bearer <key>`` -> tenant id.

Lookups are cached so the hot path does not touch the database: in-process for
``LOCAL_TTL`` seconds, then in Redis for ``REDIS_TTL`` seconds, then the database.
Revoking a key deletes its Redis entry at once, so a revocation takes effect everywhere
within ``LOCAL_TTL`` (15 s). A key this deployment could not have issued (its checksum is
wrong, seatlease/apikeys.py) is refused before any cache or backend is asked.
"""

from __future__ import annotations

import threading
import time

from seatlease.apikeys import hash_key, well_formed
from seatlease.errors import Unauthenticated
from seatlease.keys import api_key_cache_key
from seatlease.redisconn import get_redis

LOCAL_TTL = 15.0
REDIS_TTL = 60
NEGATIVE_TTL = 10
_LOCAL_MAX = 10_000
_NO_TENANT = "-"

_local: dict[str, tuple[str, float]] = {}
_local_lock = threading.Lock()


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
        from seatlease import store

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
    if not well_formed(key):  # no I/O: a made-up key never reaches Redis or the database
        raise Unauthenticated("malformed API key")
    tenant = _lookup(hash_key(key))
    if tenant == _NO_TENANT:
        raise Unauthenticated("unknown or revoked API key")
    return tenant


def cached_locally(key_hash: str) -> bool:
    """Is this key in this process's cache (fresh or not)?"""
    return key_hash in _local


def forget_all() -> None:
    """Empty this process's key cache (the Redis cache is untouched): the next call of
    each key asks Redis again. For a process that switched Redis or database."""
    with _local_lock:
        _local.clear()


def forget(key_hash: str) -> None:
    """Drop a key from the caches (after revocation)."""
    get_redis().delete(api_key_cache_key(key_hash))
    with _local_lock:
        _local.pop(key_hash, None)
