"""The license ids a tenant has, known to the seat functions before any seat call: a
call on a license the tenant does not have is a 404 that costs no SQL query and stores
nothing in Redis (docs/design.md, "Unknown licenses cost nothing").

A tenant's license ids are few, and licenses are never deleted, only created. So the
set of them is cached whole:

- in Redis, ``sl:tenant-licenses:<tenant>`` (a SET, read by single commands, never by a
  script), with the member ``*`` (no identifier has one) saying the set is complete: it
  was filled from the database (one query for all of the tenant's ids), for
  ``REDIS_TTL`` seconds. An admin change adds its license id (``learn``: ``SADD``, which
  commutes with a fill that read the database before the license existed: the union is
  complete); a set without the marker (an ``SADD`` onto an expired set) is filled again.
- in the process for ``LOCAL_TTL`` (1 s): a license created on another instance is
  seen within a second of its admin change, and a flood of unknown ids asks Redis at
  most once a second per tenant and instance.

When the database is down and nothing is cached, nothing is decided here: the seat
call goes on and the engine reads the license (503 if it must, as before).
"""

from __future__ import annotations

from seatlease.api.ttlcache import TTLCache
from seatlease.errors import BackendUnavailable, LicenseNotFound
from seatlease.seats.keys import tenant_licenses_cache_key
from seatlease.seats.redisconn import get_redis

LOCAL_TTL = 1.0
REDIS_TTL = 600  # as a license's cached config (seatlease.seats.engine.CONFIG_TTL_SECONDS)
COMPLETE = "*"
_LOCAL_MAX = 10_000

_local: TTLCache[frozenset[str]] = TTLCache(LOCAL_TTL, _LOCAL_MAX)  # tenant -> its ids


def require_license(tenant_id: str, license_id: str) -> None:
    """``LicenseNotFound`` when the tenant has no license ``license_id``."""
    known = license_ids(tenant_id)
    if known is not None and license_id not in known:
        raise LicenseNotFound(f"license {license_id!r} not found")


def license_ids(tenant_id: str) -> frozenset[str] | None:
    """The tenant's license ids; None when they cannot be known now (database down, no
    copy anywhere)."""
    hit = _local.peek(tenant_id)
    if hit is not None and hit[1]:
        return hit[0]
    redis = get_redis()
    cache_key = tenant_licenses_cache_key(tenant_id)
    members = redis.smembers(cache_key)
    if COMPLETE in members:
        ids = frozenset(members - {COMPLETE})
    else:
        from seatlease.records import store

        try:
            stored = store.license_ids(tenant_id)
        except BackendUnavailable:
            if hit is None:
                return None
            _local.put(tenant_id, hit[0])  # the last known set, until the database is back
            return hit[0]
        ids = frozenset(stored)
        pipe = redis.pipeline(transaction=False)  # one key (a cluster pipeline: no MULTI)
        pipe.sadd(cache_key, COMPLETE, *ids)
        pipe.expire(cache_key, REDIS_TTL)
        pipe.execute()
        ids = ids | (members - {COMPLETE})  # what admin changes added meanwhile
    _local.put(tenant_id, ids)
    return ids


def learn(tenant_id: str, license_id: str) -> None:
    """After an admin change: the license is one of the tenant's, everywhere within
    ``LOCAL_TTL``."""
    get_redis().sadd(tenant_licenses_cache_key(tenant_id), license_id)
    _local.pop(tenant_id)


def forget_all() -> None:
    """Empty this process's copies (for a process that switched Redis or database)."""
    _local.clear()
