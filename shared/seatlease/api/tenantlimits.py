"""A tenant's rate limit: its calls per second on acquire, heartbeat and release (the
tenant setting ``rate_limit_per_second``, 0 = no limit), which the seat scripts enforce
on Redis (lua/_ratelimit.lua, docs/design.md "Rate limits").

The hot path does not touch the database for it: the value is cached like an API key's
tenant (seatlease/api/auth.py), in the process for ``LOCAL_TTL`` seconds, then in Redis for
``REDIS_TTL`` seconds. A change (``seatlease tenant update --rate-limit``) drops the Redis
entry at once, so it applies everywhere within ``LOCAL_TTL`` (15 s). A database outage
is never a reason to refuse a seat call: the last known value, or the default, applies.
"""

from __future__ import annotations

from seatlease.api.auth import LOCAL_TTL, REDIS_TTL
from seatlease.api.ttlcache import TTLCache
from seatlease.errors import BackendUnavailable
from seatlease.seats.keys import tenant_rate_cache_key
from seatlease.seats.redisconn import get_redis

# Sized from docs/operations.md ("Capacity"): 500 calls/s in a license shard is the
# heartbeats of 60,000 leases of 360 s, and holds at most 500 x 180 s x 110 B (about
# 10 MB) of replies: a flooding tenant takes a hundredth of the 1 GB dev instance.
DEFAULT_RATE_LIMIT = 500
_LOCAL_MAX = 10_000

_local: TTLCache[int] = TTLCache(LOCAL_TTL, _LOCAL_MAX)  # tenant id -> calls per second


def rate_limit(tenant_id: str) -> int:
    """The tenant's calls per second (0: no limit). A tenant the database does not know
    (deleted since its key was cached) gets the default."""
    hit = _local.peek(tenant_id)
    if hit is not None and hit[1]:
        return hit[0]
    redis = get_redis()
    cache_key = tenant_rate_cache_key(tenant_id)
    cached = redis.get(cache_key)
    if cached is not None:
        limit = int(cached)
    else:
        from seatlease.records import store

        try:
            stored = store.tenant_rate_limit(tenant_id)
        except BackendUnavailable:
            # The database is down: the seat calls go on (Redis holds the leases) with
            # the last value this instance knew, or the default; nothing goes to Redis,
            # so the stored value is read again once the database is back.
            limit = hit[0] if hit else DEFAULT_RATE_LIMIT
            _remember(tenant_id, limit)
            return limit
        limit = DEFAULT_RATE_LIMIT if stored is None else stored
        redis.set(cache_key, limit, ex=REDIS_TTL)
    _remember(tenant_id, limit)
    return limit


def _remember(tenant_id: str, limit: int) -> None:
    _local.put(tenant_id, limit, LOCAL_TTL)


def forget(tenant_id: str) -> None:
    """After a change: drop the Redis entry (running instances keep theirs for at most
    ``LOCAL_TTL``) and this process's."""
    get_redis().delete(tenant_rate_cache_key(tenant_id))
    _local.pop(tenant_id)


def forget_all() -> None:
    """Empty this process's cache (for a process that switched Redis or database)."""
    _local.clear()
