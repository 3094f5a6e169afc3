"""Process-wide objects every function shares, built on first use and kept across
invocations (a Cloud Functions instance serves many requests)."""

from __future__ import annotations

from seatlease.licenses import LicenseConfig
from seatlease.seats.engine import SeatEngine
from seatlease.seats.failover import SinceCache
from seatlease.seats.redisconn import get_redis

_engines: dict[int, SeatEngine] = {}
_failover = SinceCache()  # this instance's view of a failover's recovery (every 2 s)


def load_license_config(tenant_id: str, license_id: str) -> LicenseConfig | None:
    """Read-through source of the Redis config cache: the database (imported lazily, so
    the client-facing functions load SQLAlchemy only on a cache miss)."""
    from seatlease.records import store

    return store.license_config(tenant_id, license_id)


class DatabaseHistory:
    """What the database remembers for the seat engine across a loss of Redis's data
    (seatlease/seats/failover.py's ``SeatHistory``; seatlease.records.seat_memory), loaded
    lazily: only a configuration fill and a token's re-admission after a loss ask it."""

    def shard_listed(self, shard: int) -> bool | None:
        from seatlease.errors import BackendUnavailable
        from seatlease.logs import log
        from seatlease.records import seat_memory

        try:
            return seat_memory.shard_listed(shard)
        except BackendUnavailable:
            raise
        except Exception as exc:  # (the table missing: migration 0016 not run yet)
            log("WARNING", "recovery: the database cannot say whether a shard served seats "
                "(run the migrations: seatlease db upgrade); the shard is not marked",
                shard=shard, error=type(exc).__name__)  # fmt: skip
            return None

    def list_shard(self, shard: int) -> None:
        from seatlease.records import seat_memory

        seat_memory.list_shard(shard)

    def ended_before(
        self, tenant_id: str, license_id: str, session_id: str, since_ms: int, before_ms: int
    ) -> str | None:
        from seatlease.records import seat_memory

        return seat_memory.session_ended_before(
            tenant_id, license_id, session_id, since_ms, before_ms
        )


def seat_engine() -> SeatEngine:
    client = get_redis()
    engine = _engines.get(id(client))
    if engine is None:
        engine = _engines[id(client)] = SeatEngine(
            client, load_license_config, history=DatabaseHistory()
        )
    return engine


def refresh_license_cache(tenant_id: str, license_id: str) -> None:
    """After an admin change: write the database's view of the license into Redis now,
    and make it one of the tenant's known licenses (``tenantlicenses``)."""
    from seatlease.api import tenantlicenses

    config = load_license_config(tenant_id, license_id)
    seat_engine().cache_config(tenant_id, license_id, config)
    if config is not None:
        tenantlicenses.learn(tenant_id, license_id)


def failover_began_ms() -> int | None:
    """When the failover's recovery under way began (seatlease/seats/failover.py), as
    this instance last read it (at most 2 s ago), or None."""
    return _failover.since(get_redis())


def forget_failover() -> None:
    """Read the failover mark again at the next call (tests; a process switching Redis)."""
    _failover.forget()
