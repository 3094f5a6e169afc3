"""The seat engine: acquire, heartbeat, release and revoke, one EVALSHA each.

All seat rules live in the Lua scripts (shared/lua/); this class picks the keys, passes
the arguments and turns the script's reply into a result or a domain error. The only
extra round trips happen when a license's configuration is not cached in Redis yet: the
engine loads it through ``config_loader`` (the database), caches it, and calls again.

Every call is safe to retry after a lost reply: acquire by the same ``client_id`` returns
the lease it already holds, heartbeat only extends, release is idempotent.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.clock import server_time_ms
from shared.errors import (
    LeaseTooLong,
    LicenseNotFound,
    LicenseSuspended,
    NoSeatsAvailable,
    SessionExpired,
)
from shared.keys import LicenseKeys
from shared.scripts import SeatScripts

CONFIG_TTL_SECONDS = 600  # admin changes refresh the cache at once; the TTL bounds drift
NEGATIVE_TTL_SECONDS = 30  # "no such license" is cached briefly against 404 storms


@dataclass(frozen=True, slots=True)
class LicenseConfig:
    seats: int
    lease_seconds: int = 360
    max_lease_seconds: int = 3600
    overage_percent: int = 0
    suspended: bool = False

    @property
    def seat_limit(self) -> int:
        """Seats plus the overage allowance (Keygen-style: 25 -> 1.25x)."""
        return self.seats * (100 + self.overage_percent) // 100


ConfigLoader = Callable[[str, str], LicenseConfig | None]


@dataclass(frozen=True, slots=True)
class Lease:
    session_id: str
    license_id: str
    client_id: str
    created: bool  # False: the client already held this live lease (extended)
    expires_at_ms: int
    lease_seconds: int
    seats_used: int
    seats_total: int
    seat_limit: int

    @property
    def overage(self) -> bool:
        return self.seats_used > self.seats_total

    @property
    def heartbeat_interval_seconds(self) -> int:
        return heartbeat_interval(self.lease_seconds)


@dataclass(frozen=True, slots=True)
class Renewal:
    session_id: str
    expires_at_ms: int
    lease_seconds: int

    @property
    def heartbeat_interval_seconds(self) -> int:
        return heartbeat_interval(self.lease_seconds)


@dataclass(frozen=True, slots=True)
class Release:
    released: bool
    seats_used: int
    seats_total: int


def heartbeat_interval(lease_seconds: int) -> int:
    """About a third of the lease: two heartbeats can be missed before the seat is lost."""
    return max(1, lease_seconds // 3)


def new_session_id() -> str:
    return secrets.token_urlsafe(18)  # 144 random bits, 24 characters of [A-Za-z0-9_-]


def _event_prefix() -> str:
    return secrets.token_hex(8)


class SeatEngine:
    def __init__(self, redis: Any, config_loader: ConfigLoader) -> None:
        self.redis = redis
        self.scripts = SeatScripts(redis)
        self.config_loader = config_loader

    # -- license configuration cache -------------------------------------------------

    def cache_config(self, tenant_id: str, license_id: str, config: LicenseConfig | None) -> None:
        """Write (or, with None, negatively cache) a license's configuration in Redis."""
        key = LicenseKeys.of(tenant_id, license_id).cfg
        if config is None:
            mapping: dict[str, Any] = {"exists": 0}
            ttl = NEGATIVE_TTL_SECONDS
        else:
            mapping = {
                "exists": 1,
                "seats": config.seats,
                "lease_seconds": config.lease_seconds,
                "max_lease_seconds": config.max_lease_seconds,
                "overage_percent": config.overage_percent,
                "suspended": int(config.suspended),
            }
            ttl = CONFIG_TTL_SECONDS
        pipe = self.redis.pipeline(transaction=False)
        pipe.delete(key)
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, ttl)
        pipe.execute()

    def _fill_config(self, keys: LicenseKeys) -> None:
        self.cache_config(
            keys.tenant_id, keys.license_id, self.config_loader(keys.tenant_id, keys.license_id)
        )

    def _run(self, script: Any, keys: LicenseKeys, key_list: list[str], args: list[Any]) -> list:
        reply = script(keys=key_list, args=args)
        if reply[0] == "missing":
            self._fill_config(keys)
            reply = script(keys=key_list, args=args)
        if reply[0] in ("not_found", "missing"):
            raise LicenseNotFound(f"license {keys.license_id!r} not found")
        return reply

    # -- seat operations -----------------------------------------------------------

    def acquire(
        self,
        tenant_id: str,
        license_id: str,
        client_id: str,
        lease_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Lease:
        keys = LicenseKeys.of(tenant_id, license_id)
        reply = self._run(
            self.scripts.acquire,
            keys,
            [*keys.lease_keys, keys.denials],
            [
                tenant_id,
                license_id,
                client_id,
                new_session_id(),
                lease_seconds or 0,
                json.dumps(metadata or {}, separators=(",", ":")),
                _event_prefix(),
            ],
        )
        status = reply[0]
        if status == "suspended":
            raise LicenseSuspended(f"license {license_id!r} is suspended")
        if status == "lease_too_long":
            raise LeaseTooLong(int(reply[1]))
        if status == "denied":
            used, seats, _limit, retry_ms = (int(x) for x in reply[1:5])
            raise NoSeatsAvailable(used, seats, max(1, math.ceil(retry_ms / 1000)))
        session_id, deadline, lease_ms, used, seats, limit = reply[1:7]
        return Lease(
            session_id=session_id,
            license_id=license_id,
            client_id=client_id,
            created=status == "acquired",
            expires_at_ms=int(deadline),
            lease_seconds=int(lease_ms) // 1000,
            seats_used=int(used),
            seats_total=int(seats),
            seat_limit=int(limit),
        )

    def heartbeat(self, tenant_id: str, license_id: str, session_id: str) -> Renewal:
        keys = LicenseKeys.of(tenant_id, license_id)
        reply = self._run(
            self.scripts.heartbeat,
            keys,
            keys.lease_keys,
            [tenant_id, license_id, session_id, _event_prefix()],
        )
        if reply[0] != "ok":
            raise SessionExpired(reply[0])  # 'expired' or 'unknown'
        return Renewal(session_id, int(reply[1]), int(reply[2]) // 1000)

    def release(
        self, tenant_id: str, license_id: str, session_id: str, *, revoke: bool = False
    ) -> Release:
        """End a lease now. ``revoke=True`` records it as an operator's ``lease.revoked``."""
        keys = LicenseKeys.of(tenant_id, license_id)
        event = "lease.revoked" if revoke else "lease.released"
        reply = self._run(
            self.scripts.release,
            keys,
            keys.lease_keys,
            [tenant_id, license_id, session_id, _event_prefix(), event],
        )
        return Release(reply[0] == "released", int(reply[1]), int(reply[2]))

    # -- read side (status / lmstat) -----------------------------------------------

    def server_time_ms(self) -> int:
        return server_time_ms(self.redis)

    def live_leases(self, tenant_id: str, license_id: str) -> list[dict[str, Any]]:
        """The license's live leases, soonest deadline first (reads, never writes)."""
        keys = LicenseKeys.of(tenant_id, license_id)
        now_ms = self.server_time_ms()
        pipe = self.redis.pipeline(transaction=False)  # both keys share one slot
        pipe.zrange(keys.leases, 0, -1, withscores=True)
        pipe.hgetall(keys.sessions)
        scored, records = pipe.execute()
        leases = []
        for session_id, deadline in scored:
            raw = records.get(session_id)
            if deadline <= now_ms or raw is None:
                continue
            rec = json.loads(raw)
            leases.append(
                {
                    "session_id": session_id,
                    "client_id": rec["c"],
                    "acquired_at_ms": rec["a"],
                    "expires_at_ms": int(deadline),
                    "lease_seconds": rec["l"] // 1000,
                    "metadata": json.loads(rec["m"]),
                }
            )
        return leases
