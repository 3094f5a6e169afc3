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
(lua/_lib.lua, ``remember``).
redis-py re-sends a script whose reply timed out (Redis stalled, or a TLS certificate
rotation dropped the connection); the repeat, and a client's own retry with the same
request id, are answered from the first run. When Redis does not answer at all the call
raises ``CallOutcomeUnknown`` naming the request id to repeat.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from seatlease.clock import server_time_ms
from seatlease.errors import (
    CallOutcomeUnknown,
    InvalidRequest,
    LeaseTooLong,
    LicenseExpired,
    LicenseNotFound,
    LicenseNotStarted,
    LicenseSuspended,
    MachineMismatch,
    NoSeatsAvailable,
    NotEntitled,
    QueueFull,
    Recovering,
    SeatError,
    SeatsMismatch,
    SessionExpired,
    TenantRateLimited,
    UserDenied,
    UserLimitReached,
    VersionNotEntitled,
)
from seatlease.fields import policy_name
from seatlease.licenses import LicenseConfig, epoch_ms
from seatlease.seats.failover import SeatHistory, mark_shard
from seatlease.seats.ids import new_request_id, shown_user, with_identity
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.protocol.calls import (
    acquire_call,
    arm_notice_call,
    cache_config_call,
    cut_held_call,
    heartbeat_call,
    release_call,
)
from seatlease.seats.scripts import SeatScripts
from seatlease.seats.terms import Terms, cache_fields
from seatlease.seats.values import (  # the engine's request and answers
    Lease,
    QueuePlace,
    Release,
    Renewal,
    SeatRequest,
    TokenGrant,
)

CONFIG_TTL_SECONDS = 600  # admin changes refresh the cache at once; the TTL bounds drift
CUT_CHUNK = 1000  # held leases a script cuts to a new term (lua/cache_config.lua's)
NEGATIVE_TTL_SECONDS = 30  # "no such license" is cached briefly against 404 storms


ConfigLoader = Callable[[str, str], LicenseConfig | None]


def _flag(reply: list, index: int) -> bool:
    """A script reply's 0/1 flag; absent in a reply stored before the flag existed (a
    repeat answered from the reply key across a deploy)."""
    return len(reply) > index and int(reply[index]) == 1


def _weight(reply: list, base: int) -> int:
    """A lease reply's weight: its last element when the lease counts as more than one
    seat (lua/_lib.lua, ``weighted_tail``: after the ``base`` elements and the terms' five,
    when there are terms), else 1. (The machine's tail is off already: ``_machine``.)"""
    return int(reply[-1]) if (len(reply) - base) % 5 == 1 else 1


def _machine(reply: list) -> tuple[list, str | None]:
    """The reply without its machine tail (lua/_lib.lua, ``machine_tail``: a borrowed
    lease's ``m:<fingerprint>``), and that fingerprint (None without one)."""
    last = reply[-1] if reply else None
    if isinstance(last, str) and last.startswith("m:"):
        return reply[:-1], last[2:]
    return reply, None


def _user(reply: list) -> tuple[list, str | None]:
    """The reply without its user tail (lua/_lib.lua, ``user_tail``: ``u:<user>``, the user
    the license's policy judged the lease as), and that user (None without one)."""
    last = reply[-1] if reply else None
    if isinstance(last, str) and last.startswith("u:"):
        return reply[:-1], last[2:]
    return reply, None


def _recovering(reply: list) -> tuple[list, int | None]:
    """The reply without its recovery tail (acquire.lua: a grant made in a failover's
    window, ``r:<the window's end, ms>``), and that end (None without one)."""
    last = reply[-1] if reply else None
    if isinstance(last, str) and last.startswith("r:"):
        return reply[:-1], int(last[2:])
    return reply, None


def too_many_seats(seats: int) -> InvalidRequest:
    """The 400 for a lease counting more seats than its license has."""
    problem = f"may be at most {seats} (the license's seats)"
    return InvalidRequest(
        f"Invalid request: seats: {problem}.",
        details=[{"field": "seats", "problem": problem}],
    )


def borrow_too_long(max_borrow_seconds: int) -> InvalidRequest:
    """The 400 for a borrow beyond the license's maximum, naming the field and the max."""
    if max_borrow_seconds <= 0:
        problem = "borrowing is off for this license (max_borrow_seconds is 0)"
    else:
        problem = f"may be at most {max_borrow_seconds} (max_borrow_seconds) for this license"
    return InvalidRequest(
        f"Invalid request: borrow_seconds: {problem}.",
        max_borrow_seconds=max_borrow_seconds,
        details=[{"field": "borrow_seconds", "problem": problem}],
    )


# Keys the service writes into a lease's event metadata (lua/_lib.lua's with_reason, a
# failover's grant, a re-admission): a client's own would pass for them (a crash counted
# as ended by the license's term in the reports).
RESERVED_METADATA = frozenset({"reason", "recovering", "recovered"})


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
    ) -> list:
        try:
            reply = script(keys=key_list, args=args)
            if reply[0] == "missing":
                self._fill_config(keys)
                reply = script(keys=key_list, args=args)
        except (RedisTimeoutError, RedisConnectionError) as exc:
            # redis-py already re-sent it (safe: the reply key answers a repeat); the
            # script may still run when Redis resumes. Only the request id can tell.
            raise CallOutcomeUnknown(request_id) from exc
        if reply[0] in ("not_found", "missing"):
            raise LicenseNotFound(f"license {keys.license_id!r} not found")
        if reply[0] == "rate_limited":
            raise TenantRateLimited(max(1, math.ceil(int(reply[1]) / 1000)))
        return reply

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
        tenant_id, license_id, client_id = request.tenant_id, request.license_id, request.client_id
        lease_seconds, borrow_seconds = request.lease_seconds, request.borrow_seconds
        user, host = request.user, request.host
        if borrow_seconds and lease_seconds:
            raise InvalidRequest(
                "Invalid request: borrow_seconds: not with lease_seconds (a borrow has its "
                "own length).",
                details=[{"field": "borrow_seconds", "problem": "not with lease_seconds"}],
            )
        request_id = request.request_id or new_request_id()
        reserved = RESERVED_METADATA.intersection(request.metadata or ())
        if reserved:
            name = sorted(reserved)[0]
            raise InvalidRequest(
                f"Invalid request: metadata.{name}: reserved (the service writes it in a "
                "lease's events: why it ended, how it came back).",
                details=[{"field": f"metadata.{name}", "problem": "reserved for the service"}],
            )
        metadata = with_identity(request.metadata, user, host)
        key_list, args = acquire_call(
            tenant_id,
            license_id,
            client_id,
            lease_seconds=lease_seconds,
            metadata_json=json.dumps(metadata, separators=(",", ":")),
            request_id=request_id,
            borrow_seconds=borrow_seconds,
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
        )
        keys = LicenseKeys.of(tenant_id, license_id)
        reply = self._run(self.scripts.acquire, keys, key_list, args, request_id)
        if reply[0] == "consult_audit" and request.recover is not None:
            # This Redis's data of the shard is younger than the token (it was lost since):
            # the audit trail says whether the service ended the session before. The call
            # wrote nothing; made again with the verdict, it is not counted again.
            args[-2] = self._audit_verdict(keys, request.recover, int(reply[1]))
            reply = self._run(self.scripts.acquire, keys, key_list, args, request_id)
        return self._lease_of(request, reply)

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

    def _lease_of(self, request: SeatRequest, reply: list) -> Lease | QueuePlace:
        """acquire.lua's reply as the answer, or its refusal as a domain error."""
        license_id, client_id, user = request.license_id, request.client_id, request.user
        reply, recovering_until = _recovering(reply)
        reply, judged_user = _user(reply)
        reply, machine = _machine(reply)
        status = reply[0]
        if status == "not_readmitted":
            raise SessionExpired("revoked" if reply[1] == "revoked" else "unknown")
        if status == "recovering":
            raise Recovering(max(1, math.ceil(int(reply[1]) / 1000)))
        if status == "suspended":
            raise LicenseSuspended(f"license {license_id!r} is suspended")
        if status == "not_started":
            raise LicenseNotStarted(int(reply[1]))
        if status == "license_expired":
            raise LicenseExpired(int(reply[1]), int(reply[2]))
        if status == "not_entitled":
            raise NotEntitled(reply[1].split())
        if status == "version_not_entitled":
            raise VersionNotEntitled(request.version or "", reply[1])
        if status == "lease_too_long":
            raise LeaseTooLong(int(reply[1]))
        if status == "borrow_too_long":
            raise borrow_too_long(int(reply[1]))
        if status == "too_many_seats":
            raise too_many_seats(int(reply[1]))
        if status == "seats_mismatch":
            raise SeatsMismatch(client_id, int(reply[1]), int(reply[2]))
        if status == "machine_mismatch":
            raise MachineMismatch(client_id)
        weight = request.seats or (request.recover.seats if request.recover else 1)
        if status == "denied":
            used, seats, _limit, retry_ms = (int(x) for x in reply[1:5])
            held, reserved = (int(x) for x in reply[5:7]) if len(reply) > 6 else (0, 0)
            raise NoSeatsAvailable(
                used, seats, max(1, math.ceil(retry_ms / 1000)), held, reserved, weight
            )
        if status == "queue_full":
            raise QueueFull(int(reply[1]), int(reply[3]), int(reply[4]))
        if status == "queued":
            return QueuePlace(
                license_id=license_id,
                client_id=client_id,
                position=int(reply[1]),
                ticket=reply[2],
                retry_after_seconds=max(1, math.ceil(int(reply[3]) / 1000)),
                seats_used=int(reply[4]),
                seats_total=int(reply[5]),
                seats=weight,
            )
        if status == "user_required":
            raise InvalidRequest(
                "Invalid request: user: required on this license (its policy judges users).",
                details=[{"field": "user", "problem": "required by the license's policy"}],
            )
        if status == "user_denied":
            raise UserDenied(user or "")
        if status == "user_limit":
            retry_s = max(1, math.ceil(int(reply[3]) / 1000)) if len(reply) > 3 else 1
            raise UserLimitReached(user or "", int(reply[1]), int(reply[2]), retry_s, weight)
        session_id, deadline, lease_ms, used, seats, limit = reply[1:7]
        return Lease(
            session_id=session_id,
            license_id=license_id,
            client_id=client_id,
            created=status == "acquired",
            recovered=status == "recovered",
            user=judged_user,
            expires_at_ms=int(deadline),
            lease_seconds=int(lease_ms) // 1000,
            seats_used=int(used),
            seats_total=int(seats),
            seat_limit=int(limit),
            borrowed=_flag(reply, 8),
            now_ms=int(reply[7]),
            terms=Terms.from_reply(reply, 9),
            seats=_weight(reply, 9),
            machine=machine,
            recovering_until_ms=recovering_until,
        )

    def heartbeat(
        self,
        tenant_id: str,
        license_id: str,
        session_id: str,
        request_id: str | None = None,
        rate_limit: int = 0,
    ) -> Renewal:
        """Extend a live lease. Over ``rate_limit`` only an early heartbeat is refused
        (``TenantRateLimited``): one on schedule passes (heartbeat.lua's header)."""
        request_id = request_id or new_request_id()
        key_list, args = heartbeat_call(
            tenant_id, license_id, session_id, request_id=request_id, rate_limit=rate_limit
        )
        reply = self._run(
            self.scripts.heartbeat,
            LicenseKeys.of(tenant_id, license_id),
            key_list,
            args,
            request_id,
        )
        reply, judged_user = _user(reply)
        reply, machine = _machine(reply)
        if reply[0] == "license_expired":
            raise LicenseExpired(int(reply[1]), int(reply[2]))
        if reply[0] == "not_started":
            raise LicenseNotStarted(int(reply[1]))
        if reply[0] != "ok":
            raise SessionExpired(reply[0])  # 'expired', 'unknown' or 'revoked'
        return Renewal(
            session_id,
            int(reply[1]),
            int(reply[2]) // 1000,
            _flag(reply, 4),
            now_ms=int(reply[3]),
            client_id=reply[5] if len(reply) > 5 else None,
            terms=Terms.from_reply(reply, 6),
            seats=_weight(reply, 6),
            machine=machine,
            user=judged_user,
        )

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
        reply = self._run(
            self.scripts.release, LicenseKeys.of(tenant_id, license_id), key_list, args, request_id
        )
        return Release(
            reply[0] == "released",
            int(reply[1]),
            int(reply[2]),
            _flag(reply, 3),
            now_ms=int(reply[4]) if len(reply) > 4 else 0,
        )

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
                    "borrowed": bool(rec.get("b")),
                    "lingering": bool(rec.get("lg")),
                    "seats": int(rec.get("w", 1)),
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
