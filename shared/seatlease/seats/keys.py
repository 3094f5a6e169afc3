"""Redis key layout.

Every key one script touches carries the same hash tag ``{shard}``, so each script runs
on one Redis Cluster slot (no CROSSSLOT errors on Memorystore for Redis Cluster). A
license lives in shard ``crc32("<tenant>/<license>") mod 256``; per shard there is one
deadline index (ZSET) and one outbox (STREAM), which the reaper reads without SCAN.
Identifiers are restricted to ``A-Z a-z 0-9 . _ : @ -``, so ``/`` and ``|`` are safe
separators and no id can smuggle in a ``{``.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass
from functools import lru_cache

SHARDS = 256
PREFIX = "sl"


def license_key(tenant_id: str, license_id: str) -> str:
    return f"{tenant_id}/{license_id}"


def shard_of(tenant_id: str, license_id: str) -> int:
    return zlib.crc32(license_key(tenant_id, license_id).encode()) % SHARDS


def shard_prefix(shard: int) -> str:
    return f"{PREFIX}:{{{shard}}}"


def deadlines_key(shard: int) -> str:
    return f"{shard_prefix(shard)}:deadlines"


def outbox_key(shard: int) -> str:
    return f"{shard_prefix(shard)}:outbox"


def denials_key(shard: int) -> str:
    return f"{shard_prefix(shard)}:denials"


def ticket_index_key(shard: int) -> str:
    """The shard's index of wait-queue tickets, ``"<tenant>/<license>|<client_id>"`` -> when
    each drops out: the reaper sweeps lapsed tickets from it as it does leases."""
    return f"{shard_prefix(shard)}:ticket-deadlines"


def notices_key(shard: int) -> str:
    """The shard's notice index: ``<tenant>/<license>`` -> when its next term notice is
    due (ms; lua/notices.lua), for the licenses of the shard that have an end."""
    return f"{shard_prefix(shard)}:notices"


def refused_due_key(shard: int) -> str:
    """The shard's index of licenses with refusals not yet flushed: ``<tenant>/<license>``
    -> the earliest such minute (ms; lua/_refusals.lua, read by the reaper)."""
    return f"{shard_prefix(shard)}:refused-due"


def shard_mark_key(shard: int) -> str:
    """The shard's mark (seats/failover.py): when this Redis's data of the shard began, and
    whether it began again after the service found it gone (a recovery window opened)."""
    return f"{shard_prefix(shard)}:data"


def recovered_key(shard: int) -> str:
    """The shard's count of leases re-admitted by their tokens (acquire.lua)."""
    return f"{shard_prefix(shard)}:recovered"


def reaper_lock_key(shard: int) -> str:
    return f"{shard_prefix(shard)}:reaper-lock"


def rate_key(shard: int, tenant_id: str) -> str:
    """A tenant's call budget in one shard (lua/_ratelimit.lua): in the slot of the
    license keys it guards, so the seat script stays in one slot."""
    return f"{shard_prefix(shard)}:rate:{tenant_id}"


def tenant_rate_cache_key(tenant_id: str) -> str:
    """The cached rate limit of a tenant (seatlease/api/tenantlimits.py), read by single
    commands."""
    return f"{PREFIX}:tenant-rate:{tenant_id}"


def tenant_licenses_cache_key(tenant_id: str) -> str:
    """The cached license ids of a tenant (seatlease/api/tenantlicenses.py), read by
    single commands."""
    return f"{PREFIX}:tenant-licenses:{tenant_id}"


def api_key_cache_key(key_hash: str) -> str:
    return f"{PREFIX}:apikey:{key_hash}"


@dataclass(frozen=True, slots=True)
class LicenseKeys:
    """All Redis keys of one license (one shard, one hash tag)."""

    tenant_id: str
    license_id: str
    shard: int
    cfg: str
    leases: str
    sessions: str
    clients: str
    deadlines: str
    outbox: str
    denials: str
    rate: str  # the tenant's call budget in this shard
    replies: tuple[str, str]  # the reply hashes of generations 0 and 1 (lua/_lib.lua)
    # The license policy's and the wait queue's state (acquire.lua only, _policy.lua)
    users: str  # HASH "u:<user>" / "g:<group>" -> the session ids held, "qseq" -> counter
    queue: str  # ZSET client_id -> join sequence (FIFO order)
    tickets: str  # HASH client_id -> JSON ticket record
    ticket_deadlines: str  # ZSET client_id -> when its ticket (or its hold) runs out
    ticket_index: str  # the shard's ZSET "<tenant>/<license>|<client_id>" -> the same
    # The term's notices (lua/notices.lua): the shard's index, and this license's state
    notices: str  # ZSET per shard "<tenant>/<license>" -> next notice due (ms)
    notice: str  # HASH exp, g (the term armed), term, sent (the notices sent for it)
    # Weighted leases (lua/_lib.lua, add_weight): their extra seats
    wsum: str  # STRING the sum of w - 1 over the license's leases of weight w > 1
    # The release before's weighted leases: a member per seat past the first (O(w) a call)
    units: str  # ZSET "<session_id>#<n>" -> the lease's deadline, n = 2 .. its weight
    # Who was refused, per minute, until the reaper flushes it (lua/_refusals.lua)
    refused: str  # HASH client_id -> its minutes' refusals; "#<minute>", "+<minute>" counts
    refusing: str  # ZSET client_id (or "#<minute>") -> its earliest minute not flushed
    refused_due: str  # the shard's ZSET "<tenant>/<license>" -> the same, per license
    # Leases ended while a token of them may be valid (released, revoked, reclaimed after a
    # call moved their deadline down): no token brings them back (acquire.lua), pruned
    # once every token of them has expired (lua/_lib.lua's note_end)
    ended: str  # ZSET session_id -> the latest expiry of its tokens (ms; + 0.5: revoked)
    # Idle seats (lua/_idle.lua): the leases warned for being idle
    idlers: str  # ZSET session_id -> when it is reclaimed (ms)
    # A failover's recovery (seats/failover.py, acquire.lua's re-admission)
    lmax: str  # STRING "<lease ms>:<when noted>": the longest lease granted recently
    mark: str  # the shard's mark (shard_mark_key)
    recovered: str  # the shard's count of re-admissions (recovered_key)

    @classmethod
    def of(cls, tenant_id: str, license_id: str) -> LicenseKeys:
        return _license_keys(cls, tenant_id, license_id)

    @classmethod
    def build(cls, tenant_id: str, license_id: str) -> LicenseKeys:
        shard = shard_of(tenant_id, license_id)
        base = f"{shard_prefix(shard)}:{license_key(tenant_id, license_id)}"
        return cls(
            tenant_id=tenant_id,
            license_id=license_id,
            shard=shard,
            cfg=f"{base}:cfg",
            leases=f"{base}:leases",
            sessions=f"{base}:sessions",
            clients=f"{base}:clients",
            deadlines=deadlines_key(shard),
            outbox=outbox_key(shard),
            denials=denials_key(shard),
            rate=rate_key(shard, tenant_id),
            replies=(f"{base}:replies:0", f"{base}:replies:1"),
            users=f"{base}:users",
            queue=f"{base}:queue",
            tickets=f"{base}:tickets",
            ticket_deadlines=f"{base}:ticket-deadlines",
            ticket_index=ticket_index_key(shard),
            notices=notices_key(shard),
            notice=f"{base}:notice",
            wsum=f"{base}:wsum",
            units=f"{base}:units",
            refused=f"{base}:refused",
            refusing=f"{base}:refusing",
            refused_due=refused_due_key(shard),
            ended=f"{base}:ended",
            idlers=f"{base}:idlers",
            lmax=f"{base}:lmax",
            mark=shard_mark_key(shard),
            recovered=recovered_key(shard),
        )

    @property
    def license_key(self) -> str:
        """``<tenant>/<license>``: the license in the shard's indexes."""
        return license_key(self.tenant_id, self.license_id)

    @staticmethod
    def reply_field(call: str, subject: str, request_id: str) -> str:
        """A seat call's field in the license's reply hashes (lua/_replies.lua, ``replay``):
        a 72-bit digest of the operation, the client (acquire) or session (heartbeat,
        release) and the request id, so two callers that pick the same request id never
        read each other's answer. 12 characters, whatever the ids' lengths (a collision
        within one license's replies of one generation: about n^2 / 2^73, 1e-10 at a
        million replies)."""
        digest = hashlib.blake2b(f"{call}|{subject}|{request_id}".encode(), digest_size=9)
        return base64.urlsafe_b64encode(digest.digest()).decode()

    @property
    def lease_keys(self) -> list[str]:
        """KEYS[1..6] of heartbeat.lua and release.lua (acquire.lua adds denials)."""
        return [self.cfg, self.leases, self.sessions, self.clients, self.deadlines, self.outbox]

    @property
    def weight_keys(self) -> list[str]:
        """A weighted lease's keys, in the scripts' order: units (the release before's),
        wsum."""
        return [self.units, self.wsum]

    @property
    def refusal_keys(self) -> list[str]:
        """KEYS[18..20] of acquire.lua: the license's refused clients and the shard's
        index of them."""
        return [self.refused, self.refusing, self.refused_due]

    @property
    def policy_keys(self) -> list[str]:
        """KEYS[11..15] of acquire.lua: the policy's and the queue's state."""
        return [self.users, self.queue, self.tickets, self.ticket_deadlines, self.ticket_index]


@lru_cache(maxsize=65_536)  # the hot path builds the same few key sets over and over
def _license_keys(cls: type[LicenseKeys], tenant_id: str, license_id: str) -> LicenseKeys:
    return cls.build(tenant_id, license_id)


def rate_limit_key(scope: str, who: str, window: int) -> str:
    """One fixed window's counter of ``who``'s calls to ``scope`` (seatlease/seats/ratelimit.py)."""
    return f"{PREFIX}:rl:{scope}:{who}:{window}"
