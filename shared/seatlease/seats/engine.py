"""The seat engine: acquire, heartbeat, release and revoke, one FCALL each.

All seat rules live in the Lua scripts (shared/seatlease/seats/lua/); this class picks the
keys, passes
the arguments and turns the script's reply into a result or a domain error. The only
extra round trips happen when a license's configuration is not cached in Redis yet: the
engine loads it through ``config_loader`` (the database), caches it, and calls again.

A lease may be *borrowed* (``borrow_seconds``: no heartbeats until it ends) and, on a
license with ``linger_seconds``, a client's release leaves its seat *lingering*: held for
that client alone until the linger ends (docs/design.md, "Borrowing and linger").

Every seat call is exactly-once in effect and in its reply: it carries a request id (the
client's, or one made here), and its script keeps the reply for ``REPLY_TTL_SECONDS``
(seats/protocol/calls.py; to twice that), compactly, in the license's reply hashes
(lua/_replies.lua, ``remember``).
redis-py re-sends a script whose reply timed out (Redis stalled, or a TLS certificate
rotation dropped the connection); the repeat, and a client's own retry with the same
request id, are answered from the first run. When Redis does not answer at all the call
raises ``CallOutcomeUnknown`` naming the request id to repeat.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from seatlease.clock import server_time_ms
from seatlease.errors import (
    CallOutcomeUnknown,
    InvalidRequest,
    LicenseExpired,
    LicenseNotFound,
    LicenseNotStarted,
    SeatError,
    SessionExpired,
    TenantRateLimited,
)
from seatlease.fields import policy_name
from seatlease.licenses import LicenseConfig, epoch_ms
from seatlease.seats.failover import SeatHistory, mark_shard
from seatlease.seats.ids import new_request_id, shown_host, shown_user, with_identity
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.protocol.calls import (
    SPECS,
    acquire_call,
    arm_notice_call,
    cache_config_call,
    cut_held_call,
    heartbeat_call,
    release_call,
)
from seatlease.seats.protocol.replies import (
    Answer,
    Call,
    decode,
    lease_of,
    release_of,
    renewal_of,
)
from seatlease.seats.scripts import SeatScripts
from seatlease.seats.terms import cache_fields
from seatlease.seats.values import (  # the engine's request and answers
    Lease,
    QueuePlace,
    Release,
    Renewal,
    SeatRequest,
    TokenGrant,
)

# Where acquire.lua takes the audit trail's verdict: a call made again with it changes that
# argument alone (the rest, the new session and ticket ids included, stay the first call's).
_AUDIT_VERDICT = SPECS["acquire"].args.index("audit_verdict")

CONFIG_TTL_SECONDS = 600  # admin changes refresh the cache at once; the TTL bounds drift
CUT_CHUNK = 1000  # held leases a script cuts to a new term (lua/cache_config.lua's)
NEGATIVE_TTL_SECONDS = 30  # "no such license" is cached briefly against 404 storms


ConfigLoader = Callable[[str, str], LicenseConfig | None]


# Keys the service writes into a lease's event metadata (lua/_lib.lua's with_reason, a
# failover's grant, a re-admission): a client's own would pass for them (a crash counted
# as ended by the license's term in the reports).
RESERVED_METADATA = frozenset(
    {
        "reason",
        "recovering",
        "recovered",
        "shared_by",
        "shared_sessions",
        "idle_seconds",
        "idle_reclaim_at",
    }
)

# The sharing rule's modes as the seat scripts read them (cfg field "share").
_SHARE_MODE = {"user": "u", "host": "h", "user_host": "uh"}


def checked_metadata(request: SeatRequest) -> dict[str, Any]:
    """The lease's metadata (with the request's user and host), after the rules of an
    acquire that its body's schema cannot say (InvalidRequest when one is broken)."""
    if request.borrow_seconds and request.lease_seconds:
        raise InvalidRequest(
            "Invalid request: borrow_seconds: not with lease_seconds (a borrow has its "
            "own length).",
            details=[{"field": "borrow_seconds", "problem": "not with lease_seconds"}],
        )
    reserved = RESERVED_METADATA.intersection(request.metadata or ())
    if reserved:
        name = sorted(reserved)[0]
        raise InvalidRequest(
            f"Invalid request: metadata.{name}: reserved (the service writes it in a "
            "lease's events: why it ended, how it came back).",
            details=[{"field": f"metadata.{name}", "problem": "reserved for the service"}],
        )
    return with_identity(request.metadata, request.user, request.host)


class SeatEngine:
    """``history``: what the database remembers across a loss of Redis's data (which shards
    served seats before; how a session ended: seats/failover.py). None (tests of the rules
    alone): no shard is marked, and a token's lease is judged by what Redis holds."""

    def __init__(
        self, redis: Any, config_loader: ConfigLoader, history: SeatHistory | None = None
    ) -> None:
        self.redis = redis
        self.scripts = SeatScripts(redis)
        self.config_loader = config_loader
        self.history = history

    # -- license configuration cache -------------------------------------------------

    def cache_config(self, tenant_id: str, license_id: str, config: LicenseConfig | None) -> None:
        """Write (or, with None, negatively cache) a license's configuration in Redis, in
        one atomic step (cache_config.lua): a seat call never sees it half written. When
        the license has no queue (any more), its waiting tickets leave with queue.left."""
        keys = LicenseKeys.of(tenant_id, license_id)
        # Every cached configuration goes with the data when Redis loses it, so a call
        # that fills one is how the loss is found: the shard's mark says whether this
        # Redis's data of the shard is the one that served seats; if the database says
        # the shard served seats and the mark is gone, a recovery window opens
        # (seats/failover.py). Marked before the configuration is written: a call that
        # reads the configuration reads the mark too. (One EXISTS a fill or an admin
        # change.)
        if self.history is not None:
            mark_shard(self.redis, keys.shard, self.history)
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
                "max_borrow_seconds": config.max_borrow_seconds,
                "linger_seconds": config.linger_seconds,
            }
            if config.has_terms:  # absent without: acquire and heartbeat skip them
                mapping.update(cache_fields(config))
            if config.on_failover == "grant":  # absent: hold (acquire.lua reads it only
                mapping["fo"] = "grant"  # in a failover's recovery window)
            if config.idle_timeout_seconds:  # absent: no lease is ever idle (lua/_idle.lua)
                mode = "a" if config.idle_reclaim == "always" else "w"
                mapping["idle"] = f"{config.idle_timeout_seconds * 1000}|{mode}"
            if config.share in _SHARE_MODE:  # absent: no lease shares (lua/_acquire.lua)
                mapping["share"] = f"{_SHARE_MODE[config.share]}|{config.share_limit}"
            if config.policy:  # absent for a license without one: acquire reads nil
                form = json.loads(config.policy)  # seatlease.seats.policy's redis_form()
                mapping["policy"] = json.dumps(form["policy"], separators=(",", ":"))
                mapping.update({f"u:{user}": fact for user, fact in form["users"].items()})
            ttl = CONFIG_TTL_SECONDS
        queue_on = bool(json.loads(mapping.get("policy", "{}")).get("q"))
        reason = "license_gone" if config is None else "queue_off"
        key_list, args = cache_config_call(keys, ttl, "" if queue_on else reason, mapping)
        _left, cut = self.scripts.cache_config(keys=key_list, args=args)
        # The term's cut of the held deadlines (lua/_lib.lua, cut_held) went on past its
        # first chunk: the rest, a chunk a call (each call of the license meanwhile cuts
        # its own lease to the stored term).
        while int(cut) >= CUT_CHUNK:
            key_list, args = cut_held_call(keys, CUT_CHUNK)
            cut = self.scripts.cut_held(keys=key_list, args=args)
        # The license's place in its shard's notice index (the reaper's license.expiring
        # and license.expired, lua/notices.lua): a license without an end leaves it; one
        # with an end is due at once when its end changed (arm_notice.lua), and stays
        # where it is when not, so notices already sent are not sent again.
        if config is None or config.expires_at is None:
            pipe = self.redis.pipeline(transaction=False)  # one slot
            pipe.zrem(keys.notices, keys.license_key)
            pipe.delete(keys.notice)
            pipe.execute()
        else:
            key_list, args = arm_notice_call(
                keys, epoch_ms(config.expires_at), config.grace_seconds * 1000
            )
            self.scripts.arm_notice(keys=key_list, args=args)

    def _fill_config(self, keys: LicenseKeys) -> None:
        self.cache_config(
            keys.tenant_id, keys.license_id, self.config_loader(keys.tenant_id, keys.license_id)
        )

    def _run(
        self, script: Any, keys: LicenseKeys, key_list: list[str], args: list[Any], request_id: str
    ) -> Answer:
        """The script's answer, by name (protocol/replies.py), after filling the license's
        configuration when it was not cached."""
        try:
            answer = decode(script(keys=key_list, args=args))
            if answer.code == "missing":
                self._fill_config(keys)
                answer = decode(script(keys=key_list, args=args))
        except (RedisTimeoutError, RedisConnectionError) as exc:
            # redis-py already re-sent it (safe: the reply key answers a repeat); the
            # script may still run when Redis resumes. Only the request id can tell.
            raise CallOutcomeUnknown(request_id) from exc
        return answer

    # -- seat operations -----------------------------------------------------------

    def acquire(self, request: SeatRequest) -> Lease | QueuePlace:
        """Take a seat (or extend, take back or convert this client's lease: acquire.lua's
        header). ``request.queue``: on a full license with a queue, a ``QueuePlace``
        instead of ``NoSeatsAvailable`` (only then is the answer not a ``Lease``); over
        the tenant's ``rate_limit``, ``TenantRateLimited`` and nothing changed.
        ``request.recover``: a verified lease token's lease, re-admitted (``recovered``)
        when this Redis lost it and every rule a new grant passes lets it; otherwise the
        acquire goes on as a new one."""
        return self._acquire(request, on_heartbeat=False)

    def readmit(self, request: SeatRequest) -> Lease:
        """A heartbeat's re-admission: ``request.recover``'s lease (a session this Redis
        does not know) re-created and renewed in one call, when this Redis lost it and
        every rule a new grant passes lets it (acquire.lua's header). Raises
        ``SessionExpired`` (``revoked`` for a lease an operator revoked, else ``unknown``)
        when it does not come back; the term's refusals, the rate limit and a missing
        license as an acquire would."""
        grant = request.recover
        assert grant is not None
        try:
            lease = self._acquire(request, on_heartbeat=True)
        except (
            SessionExpired,
            LicenseExpired,
            LicenseNotStarted,
            LicenseNotFound,
            TenantRateLimited,
            CallOutcomeUnknown,
        ):
            raise
        except SeatError:  # refused as a new grant would be (suspended: no lease by a token)
            raise SessionExpired("unknown") from None
        assert isinstance(lease, Lease)
        return lease

    def _acquire(self, request: SeatRequest, *, on_heartbeat: bool) -> Lease | QueuePlace:
        metadata = checked_metadata(request)
        request_id = request.request_id or new_request_id()
        user = request.user
        key_list, args = acquire_call(
            request.tenant_id,
            request.license_id,
            request.client_id,
            lease_seconds=request.lease_seconds,
            metadata_json=json.dumps(metadata, separators=(",", ":")),
            request_id=request_id,
            borrow_seconds=request.borrow_seconds,
            rate_limit=request.rate_limit,
            user=policy_name(user) if user else None,  # the metadata keeps it as sent
            queue=request.queue,
            ticket=request.ticket,
            entitlements=request.entitlements,
            version=request.version,
            seats=request.seats,
            fingerprint=request.fingerprint,
            failover_began_ms=request.failover_began_ms,
            shown_user=shown_user(metadata),
            recover=request.recover,
            on_heartbeat=on_heartbeat,
            share_user=_share_user(metadata),
            share_host=shown_host(metadata),
        )
        keys = LicenseKeys.of(request.tenant_id, request.license_id)
        answer = self._run(self.scripts.acquire, keys, key_list, args, request_id)
        if answer.code == "consult_audit" and request.recover is not None:
            # This Redis's data of the shard is younger than the token (it was lost since):
            # the audit trail says whether the service ended the session before. The call
            # wrote nothing; made again with the verdict, it is not counted again.
            args[_AUDIT_VERDICT] = self._audit_verdict(keys, request.recover, answer.data_since_ms)
            answer = self._run(self.scripts.acquire, keys, key_list, args, request_id)
        weight = request.seats or (request.recover.seats if request.recover else 1)
        call = Call(request.license_id, request.client_id, user, request.version, weight)
        return lease_of(answer, call)

    def _audit_verdict(self, keys: LicenseKeys, grant: TokenGrant, before_ms: int) -> str:
        """acquire.lua's ``audit_verdict``: how the audit trail says the token's session
        ended between its ``iat`` and ``before_ms`` (``revoked``, ``ended``), or
        ``clear``."""
        if self.history is None:
            return "clear"
        ended = self.history.ended_before(
            keys.tenant_id, keys.license_id, grant.session_id, grant.issued_at_ms, before_ms
        )
        return ended or "clear"

    def heartbeat(
        self,
        tenant_id: str,
        license_id: str,
        session_id: str,
        request_id: str | None = None,
        rate_limit: int = 0,
        idle_seconds: int | None = None,
        busy: bool = False,
    ) -> Renewal:
        """Extend a live lease. Over ``rate_limit`` only an early heartbeat is refused
        (``TenantRateLimited``): one on schedule passes (heartbeat.lua's header).
        ``idle_seconds`` and ``busy``: the product's activity, judged by the license's
        idle rule (lua/_idle.lua; None: not said, active)."""
        request_id = request_id or new_request_id()
        key_list, args = heartbeat_call(
            tenant_id,
            license_id,
            session_id,
            request_id=request_id,
            rate_limit=rate_limit,
            idle_seconds=idle_seconds,
            busy=busy,
        )
        answer = self._run(
            self.scripts.heartbeat,
            LicenseKeys.of(tenant_id, license_id),
            key_list,
            args,
            request_id,
        )
        return renewal_of(answer, Call(license_id), session_id)

    def release(
        self,
        tenant_id: str,
        license_id: str,
        session_id: str,
        *,
        revoke: bool = False,
        request_id: str | None = None,
        rate_limit: int = 0,
    ) -> Release:
        """End a lease now. ``revoke=True`` records it as an operator's ``lease.revoked``."""
        request_id = request_id or new_request_id()
        key_list, args = release_call(
            tenant_id,
            license_id,
            session_id,
            request_id=request_id,
            revoke=revoke,
            rate_limit=rate_limit,
        )
        answer = self._run(
            self.scripts.release, LicenseKeys.of(tenant_id, license_id), key_list, args, request_id
        )
        return release_of(answer, Call(license_id))

    # -- read side (status / lmstat) -----------------------------------------------

    def server_time_ms(self) -> int:
        return server_time_ms(self.redis)

    def live_leases(self, tenant_id: str, license_id: str) -> list[dict[str, Any]]:
        """The license's live leases, soonest deadline first (reads, never writes). A
        lingering lease is one: its seat is held (``lingering``: only its client can take
        it back before ``expires_at_ms``)."""
        keys = LicenseKeys.of(tenant_id, license_id)
        now_ms = self.server_time_ms()
        pipe = self.redis.pipeline(transaction=False)  # both keys share one slot
        pipe.zrange(keys.leases, 0, -1, withscores=True)
        pipe.hgetall(keys.sessions)
        pipe.hgetall(keys.users)  # (the share groups' sessions)
        scored, records, counts = pipe.execute()
        leases = []
        for session_id, deadline in scored:
            raw = records.get(session_id)
            if deadline <= now_ms or raw is None:
                continue
            rec = json.loads(raw)
            sessions, seats = _group_counts(counts, rec.get("sh"))
            leases.append(
                {
                    "session_id": session_id,
                    "client_id": rec["c"],
                    "acquired_at_ms": rec["a"],
                    "expires_at_ms": int(deadline),
                    "lease_seconds": rec["l"] // 1000,
                    "metadata": json.loads(rec["m"]),
                    "borrowed": bool(rec.get("b")),
                    "lingering": bool(rec.get("lg")),
                    "seats": int(rec.get("w", 1)),
                    # warned for being idle: reclaimed then unless used (lua/_idle.lua)
                    "idle_reclaim_at_ms": int(rec["iw"]) if rec.get("iw") else None,
                    "shared": share_name(rec["sh"]) if rec.get("sh") else None,
                    "shared_sessions": sessions,
                    # the seats the group holds (its sessions share them: counted once)
                    "shared_seats": seats,
                }
            )
        return leases

    def waiting(self, tenant_id: str, license_id: str) -> list[dict[str, Any]]:
        """The license's wait queue in order (reads, never writes): tickets whose time ran
        out are left out (the next acquire or the reaper's next run drops them).
        ``held_since_ms``: a freed seat is held for this ticket since then (from the
        release that freed it, on a license whose queue was waiting)."""
        keys = LicenseKeys.of(tenant_id, license_id)
        now_ms = self.server_time_ms()
        pipe = self.redis.pipeline(transaction=False)  # one slot
        pipe.zrange(keys.queue, 0, -1)
        pipe.hgetall(keys.tickets)
        pipe.zrange(keys.ticket_deadlines, 0, -1, withscores=True)
        order, records, ends = pipe.execute()
        ends = dict(ends)
        waiting = []
        for client_id in order:
            raw = records.get(client_id)
            if raw is None or ends.get(client_id, 0) <= now_ms:
                continue
            rec = json.loads(raw)
            # the user as sent ("s"; "u" is the policy's form of it, kept alone when the
            # two are the same) and the host
            user, host = rec.get("s") or rec.get("u") or None, rec.get("h")
            if rec.get("m"):  # a ticket from before tickets kept "s" and "h"
                metadata = json.loads(rec["m"])
                if isinstance(metadata, dict):
                    user, host = metadata.get("user") or user, metadata.get("host")
            waiting.append(
                {
                    "position": len(waiting) + 1,
                    "client_id": client_id,
                    "user": user,
                    "host": host,
                    "joined_at_ms": int(rec["j"]),
                    "expires_at_ms": int(ends[client_id]),
                    "held_since_ms": int(rec["o"]) if rec.get("o") else None,
                    "seats": int(rec.get("w", 1)),
                }
            )
        return waiting


def _share_user(metadata: dict[str, Any]) -> str | None:
    """The user a license that shares by user groups a lease by: the policy's form of the
    name (``Ann`` and ``ann`` are one user), which the lease's answer and tokens carry, so
    that a re-admission by its token finds its group again."""
    shown = shown_user(metadata)
    return (policy_name(shown) or None) if shown else None


def share_name(key: str) -> str:
    """A share group's key (lua/_acquire.lua's sharing) as people read it: the user, the
    host, or ``user@host``."""
    mode, _, rest = key.partition("|")
    if mode != "uh":
        return rest
    length, _, pair = rest.partition("|")
    user_length = int(length) if length.isdigit() else 0
    # (the script counts bytes; Python's str here is characters: cut on the bytes)
    raw = pair.encode("utf-8", "surrogatepass")
    user, host = raw[:user_length], raw[user_length:]
    return f"{user.decode('utf-8', 'replace')}@{host.decode('utf-8', 'replace')}"


def _group_counts(counts: dict[str, str], key: str | None) -> tuple[int | None, int | None]:
    """A share group's sessions and seats (the users hash's "#s:<key>": "<sessions>
    <seats>"); Nones for none."""
    value = counts.get(f"#s:{key}") if key else None
    if not value:
        return None, None
    sessions, seats = value.split()
    return int(sessions), int(seats)
