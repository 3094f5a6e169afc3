"""API key authentication. ``Authorization: Bearer <key>`` -> tenant id, for a key of
the scope the function needs: ``seat`` (acquire, heartbeat, release) or ``admin`` (the
tenant's portal). A key of the other scope is ``Forbidden`` (403), after it is known to be
live: a revoked or unknown key is ``Unauthenticated`` (401) whatever it was.

Lookups are cached so the hot path does not touch the database: in-process for
``LOCAL_TTL`` seconds, then in Redis for ``REDIS_TTL`` seconds, then the database.
A key the database does not know (forged with a valid checksum, or revoked) is cached
apart from the live keys, in a bounded LRU of its own, so a flood of forged keys never
evicts a live one; and the database is asked about keys no cache knows at most
``LOOKUPS_PER_SECOND`` times a second per instance (a burst of as many): past that the
call is a 429 ``rate_limited`` with ``Retry-After: 1``, before any query.
Revoking a key deletes its Redis entry at once, so a revocation takes effect everywhere
within ``LOCAL_TTL`` (15 s). A key this deployment could not have issued (its checksum is
wrong, seatlease/apikeys.py) is refused before any cache or backend is asked.

The caches hold ``"<scope> <tenant>"`` (tenant ids have no spaces). An entry written before
scopes existed holds the tenant alone: that key is a seat key, as every older key is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from seatlease.api.ttlcache import TTLCache
from seatlease.apikeys import hash_key, well_formed
from seatlease.errors import Forbidden, KeyLookupsLimited, Unauthenticated
from seatlease.seats.keys import api_key_cache_key
from seatlease.seats.redisconn import get_redis

LOCAL_TTL = 15.0
REDIS_TTL = 60
NEGATIVE_TTL = 10
_LOCAL_MAX = 10_000
_UNKNOWN_MAX = 10_000
# A database lookup is about a millisecond of a small Cloud SQL instance's time: 50 a
# second per instance keeps a flood of forged keys off it, and is far more than live
# keys need (each is looked up once per REDIS_TTL, whatever its traffic).
LOOKUPS_PER_SECOND = 50
_NO_TENANT = "-"
SEAT, ADMIN = "seat", "admin"
PREFIX_LENGTH = len("sl_") + 8  # the key's public id (seatlease/apikeys.py)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called: the key's tenant, scope and prefix (its public id, safe to log)."""

    tenant_id: str
    scope: str
    prefix: str


class Budget:
    """A token bucket: ``per_second`` takes a second, at most that many at once."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self._tokens = float(per_second)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.per_second, self._tokens + (now - self._at) * self.per_second)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True

    def refill(self) -> None:
        with self._lock:
            self._tokens, self._at = float(self.per_second), time.monotonic()


_local: TTLCache[str] = TTLCache(LOCAL_TTL, _LOCAL_MAX)  # key hash -> cache entry (live)
_unknown: TTLCache[str] = TTLCache(LOCAL_TTL, _UNKNOWN_MAX)  # key hash -> _NO_TENANT
_lookups = Budget(LOOKUPS_PER_SECOND)


def _lookup(key_hash: str) -> str:
    hit = _local.get(key_hash) or _unknown.get(key_hash)
    if hit is not None:
        return hit
    redis = get_redis()
    cache_key = api_key_cache_key(key_hash)
    entry = redis.get(cache_key)
    if entry is None:
        if not _lookups.take():  # a flood of unseen keys: refused before any query
            raise KeyLookupsLimited(_lookups.per_second)
        from seatlease.records import store

        found = store.key_for_hash(key_hash)
        entry = _NO_TENANT if found is None else f"{found[1]} {found[0]}"
        redis.set(cache_key, entry, ex=REDIS_TTL if entry != _NO_TENANT else NEGATIVE_TTL)
    if entry == _NO_TENANT:
        _unknown.put(key_hash, entry, LOCAL_TTL)  # read now: a test may shorten it
    else:
        _unknown.pop(key_hash)
        _local.put(key_hash, entry, LOCAL_TTL)
    return entry


def _scope_and_tenant(entry: str) -> tuple[str, str]:
    scope, _, tenant = entry.partition(" ")
    return (scope, tenant) if tenant else (SEAT, entry)  # a pre-scope entry: a seat key


def authenticate(header: str | None, scope: str = SEAT) -> str:
    """The tenant id of a valid, unrevoked key of ``scope``: ``Unauthenticated`` for no
    such key, ``Forbidden`` for a key of the other scope."""
    return identify(header, scope).tenant_id


def identify(header: str | None, scope: str = SEAT) -> Caller:
    """``authenticate``, with the key's scope and prefix."""
    if not header:
        raise Unauthenticated("missing Authorization header: send 'Authorization: Bearer <key>'")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthenticated("malformed Authorization header: expected 'Bearer <api key>'")
    if not well_formed(key):  # no I/O: a made-up key never reaches Redis or the database
        raise Unauthenticated("malformed API key")
    entry = _lookup(hash_key(key))
    if entry == _NO_TENANT:
        raise Unauthenticated("unknown or revoked API key")
    key_scope, tenant = _scope_and_tenant(entry)
    if key_scope != scope:
        raise Forbidden(
            "This is a tenant admin key: it opens the portal and may not take seats; "
            "use a seat key."
            if key_scope == ADMIN
            else "This is a seat key: it may only acquire, heartbeat and release; "
            "the portal needs a tenant admin key."
        )
    return Caller(tenant, key_scope, key[:PREFIX_LENGTH])


def cached_locally(key_hash: str) -> bool:
    """Is this key in this process's cache (fresh or not)?"""
    return key_hash in _local or key_hash in _unknown


def forget_all() -> None:
    """Empty this process's key cache (the Redis cache is untouched): the next call of
    each key asks Redis again. For a process that switched Redis or database."""
    _local.clear()
    _unknown.clear()
    _lookups.refill()


def forget(key_hash: str) -> None:
    """Drop a key from the caches (after revocation)."""
    get_redis().delete(api_key_cache_key(key_hash))
    _local.pop(key_hash)
    _unknown.pop(key_hash)
