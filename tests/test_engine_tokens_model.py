"""Hypothesis stateful test of the promise that what the service closed stays closed
(issue 47; docs/design.md, "A region lost"): every lease token ever issued is kept and
replayed at random times (by a heartbeat's retry and by an acquire), with and without a
failover onto a replica that missed the last writes, a total loss of Redis's data (a
restart without persistence), a recovery window the operator opened or not; while the
operator revokes, suspends, denies users, changes the seats, sets, shortens and moves the
term, and clients shorten their own leases, convert them to borrows, release, linger and
wait in line; and time jumps past every lease, token and TTL.

Two real redis-servers whose clocks move together (tests/procs.py), a primary and its
replica; the seat engine with an in-memory ``SeatHistory`` standing for the database (the
shards that served seats; the audit trail, filled from the outboxes by ``publish``, as the
reaper, Pub/Sub and the audit function do).

The invariants, after every step:

- **what the service ended stays ended**: a session with a *final* end (released,
  revoked, reclaimed: seen in the outbox of the Redis serving now, or published to the
  audit trail before a loss) is never live again. Not final, as docs/design.md states:
  an end the replica never saw (the replication lag), an end not yet published when the
  data was lost (the pipeline's lag), and the reclaim of a lease whose renewal the replica
  missed (it expired only because that write was lost: its token brings it back);
- **never over the cap**, but for the two documented cases: a lost borrow re-admitted, and
  a re-admission on a license that chose availability (``on_failover`` ``grant``);
- **a suspended license gains no lease**, and a denied user no seat;
- **an answer that is not a grant changes no live lease** (a refusal, a 410);
- **no script error**: every answer is a result or a domain error;
- **bounded in bytes**: the notes of ended sessions are session ids of sessions the
  service ended, only while a token of theirs may be valid; a refusal's note keeps at most
  128 bytes of its user whatever the caller sent (4 KB of metadata); after a jump past
  every TTL with the reaper down, no note, refusal, lease-length mark or reply is left.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from procs import start_shifted_redis

from seatlease.errors import SeatError, SessionExpired
from seatlease.events.pubsub import outbox_events
from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats import failover, redisconn
from seatlease.seats import keys as keyspace
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.scripts import helpers_source
from seatlease.seats.values import Renewal, TokenGrant

T, L = "t", "lic"
CLIENTS = [f"c{i}" for i in range(5)]
USER_OF = {c: f"u{i % 3}" for i, c in enumerate(CLIENTS)}
MACHINE = "a" * 64
ENDS = ("lease.released", "lease.reclaimed", "lease.revoked")
JUMPS = [1, 1, 3, 3, 9, 9, 31, 61, 130, 700]  # (past every TTL: its own rule)
LONG_USER = "ü" * 2000  # 4,000 bytes of a caller's metadata.user
_COUNTS = (
    helpers_source()
    + """
local now = now_ms()
local k = {leases = KEYS[1], sessions = KEYS[2], units = KEYS[3], wsum = KEYS[4]}
local live = {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
    'WITHSCORES')) do live[#live + 1] = sid end
local truth, out = 0, {}
for i = 1, #live, 2 do
  local raw = redis.call('HGET', k.sessions, live[i])
  local rec = raw and cjson.decode(raw) or {}
  truth = truth + (rec.w or 1)
  out[#out + 1] = live[i] .. '=' .. live[i + 1] .. ':' .. (rec.w or 1) .. ':' .. (rec.u or '')
end
return {in_use(k, now), truth, now, table.concat(out, ' ')}
"""
)


class MemoryHistory:
    """The database's part (seatlease.records.seat_memory): the shards that served seats,
    and the first end of each session as the audit trail stores it."""

    def __init__(self) -> None:
        self.shards: set[int] = set()
        self.ends: dict[str, tuple[int, str]] = {}  # sid -> (occurred ms, type)
        self.lingered: dict[str, list[int]] = {}  # sid -> when its client released it

    def shard_listed(self, shard: int) -> bool:
        return shard in self.shards

    def list_shard(self, shard: int) -> None:
        self.shards.add(shard)

    def ended_before(
        self, _t: str, _l: str, session_id: str, since_ms: int, before_ms: int
    ) -> str | None:
        end = self.ends.get(session_id)
        if end is not None and end[0] < before_ms:
            return "revoked" if end[1] == "lease.revoked" else "ended"
        if any(since_ms <= at < before_ms for at in self.lingered.get(session_id, [])):
            return "ended"
        return None

    def store(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            if not e.get("session_id"):
                continue
            at = int(datetime.fromisoformat(e["occurred_at"]).timestamp() * 1000)
            if e["type"] == "lease.lingering":
                self.lingered.setdefault(e["session_id"], []).append(at)
            elif e["type"] in ENDS and e["session_id"] not in self.ends:
                self.ends[e["session_id"]] = (at, e["type"])


def _wait_synced(primary: Any, replica: Any) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = replica.info("replication")
        if info.get("master_link_status") == "up" and primary.wait(1, 2000) >= 1:
            return
        time.sleep(0.02)
    raise AssertionError("the replica did not catch up")


class TokensModel(RuleBasedStateMachine):
    servers: tuple = ()

    @initialize(
        seats=st.integers(1, 3),
        policy=st.sampled_from(["none", "queue", "users"]),
        linger=st.sampled_from([0, 120]),
        on_failover=st.sampled_from(["hold", "hold", "grant"]),
    )
    def setup(self, seats: int, policy: str, linger: int, on_failover: str) -> None:
        (a, clock_a), (b, clock_b) = self.servers
        self.clocks = (clock_a, clock_b)
        self.primary = redisconn.connect(a.url)
        self.replica = redisconn.connect(b.url)
        for client in (self.primary, self.replica):  # (an earlier run may have swapped them)
            client.replicaof("no", "one")
            # a full sync at once (Redis waits 5 s for more replicas to share it)
            client.config_set("repl-diskless-sync-delay", 0)
        for client in (self.primary, self.replica):
            client.flushall()
            client.function_flush()
        self.policy_kind = policy
        self.denied: tuple[str, ...] = ()
        self.config = LicenseConfig(
            seats=seats, lease_seconds=60, max_lease_seconds=1800, max_borrow_seconds=3600,
            linger_seconds=linger, on_failover=on_failover, policy=self._policy(),
        )  # fmt: skip
        self.history = MemoryHistory()
        self.keys = LicenseKeys.of(T, L)
        self._serve(self.primary)
        self._start_replication()
        self.tokens: list[TokenGrant] = []
        self.lost_tokens: list[TokenGrant] = []  # issued in a tail the failover lost
        self.tail_tokens: list[TokenGrant] = []  # issued while the replica stalls
        self.seen: set[str] = set()  # event ids read from an outbox
        self.all_ends: set[str] = set()  # every session an end event was read of
        self.final: dict[str, int] = {}  # sid -> when its final end happened
        self.tail: list[tuple[str, int, str]] = []  # ends the replica has not seen
        self.unpublished: list[tuple[str, int, str]] = []  # ends not yet in the audit trail
        self.stalled = False
        self.operator_changes = 0  # (bounded per run: clients call more often)
        self.losses = 0
        self.holders_at_loss: list[TokenGrant] = []  # the last token of each, at the loss
        self.store()

    def teardown(self) -> None:
        for name in ("primary", "replica"):
            if hasattr(self, name):
                getattr(self, name).close()

    def _serve(self, client: Any) -> None:
        self.redis = client
        self.engine = SeatEngine(client, lambda _t, _l: self.config, history=self.history)
        self.counts = client.register_script(_COUNTS)
        self.reaper = Reaper(client, publisher=None)

    def _start_replication(self) -> None:
        port = int(self.redis.connection_pool.connection_kwargs["port"])
        self.replica.replicaof("127.0.0.1", port)
        _wait_synced(self.redis, self.replica)

    def _policy(self) -> str:
        if self.policy_kind == "none":
            return ""
        rules: dict[str, Any] = {
            "queue": self.policy_kind == "queue",
            "queue_ticket_seconds": 60,
            "queue_hold_seconds": 30,
            "deny_users": list(self.denied),
        }
        if self.policy_kind == "users":
            rules["max_per_user"] = 2
        return LicensePolicy(**rules).redis_form()

    def store(self, **changes: Any) -> None:
        """An operator's change: stored (the database) and written to the cache of the
        Redis serving now (a replica that stalls misses it)."""
        if changes:
            self.operator_changes += 1
        self.config = self.cached = replace(self.config, **changes)
        self.engine.cache_config(T, L, self.config)
        self._read_outbox()

    def calling(self) -> None:
        """Before a client's call: a cache that is gone (its TTL, a loss) is refilled by the
        call from what is stored, before it decides."""
        if not self.redis.exists(self.keys.cfg):
            self.cached = self.config

    def now_ms(self) -> int:
        return self.engine.server_time_ms()

    # -- what Redis holds, and what happened --------------------------------------------

    def _truth(self) -> tuple[int, int, int, dict[str, str]]:
        k = self.keys
        engine_count, truth, now, live = self.counts(keys=[k.leases, k.sessions, k.units, k.wsum])
        leases = dict(item.split("=", 1) for item in live.split()) if live else {}
        return int(engine_count), int(truth), int(now), leases

    def _read_outbox(self) -> None:
        """The serving Redis's new events: ends are final, unless the replica stalls (then
        they wait in the tail: replicated later, or lost with the primary)."""
        for e in outbox_events(self.redis, self.keys.outbox):
            if e["event_id"] in self.seen:
                continue
            self.seen.add(e["event_id"])
            if e["type"] not in ENDS or not e.get("session_id"):
                continue
            at = int(datetime.fromisoformat(e["occurred_at"]).timestamp() * 1000)
            end = (e["session_id"], at, e["type"])
            self.all_ends.add(e["session_id"])
            self.unpublished.append(end)
            if self.stalled:
                self.tail.append(end)
            else:
                self._finalise(end)

    def _finalise(self, end: tuple[str, int, str]) -> None:
        sid, at, kind = end
        if kind == "lease.reclaimed" and any(
            t.session_id == sid and t.expires_at_ms > at for t in self.lost_tokens
        ):
            event("a lease whose renewal the failover lost expired on the replica")
            return  # it expired only because the replica lost a write: lost, not ended
        self.final.setdefault(sid, at)

    def _issued(self, answer: Lease | Renewal, client_id: str) -> None:
        """The token of a grant or renewal, as the function signs it (exp and iat in whole
        seconds), kept to be replayed later."""
        grant = TokenGrant(
            session_id=answer.session_id,
            client_id=client_id,
            expires_at_ms=answer.expires_at_ms // 1000 * 1000,
            seats=answer.seats,
            borrowed=answer.borrowed,
            machine=answer.machine,
            issued_at_ms=answer.now_ms // 1000 * 1000,
            user=answer.user,
        )
        self.tokens.append(grant)
        if self.stalled:
            self.tail_tokens.append(grant)

    def _granted(self, before: int, after: int, answer: Lease, user: str | None) -> None:
        """A grant within the promises: within the cap (but for the documented cases), on
        a license not suspended, to a user not denied."""
        if after <= before:
            return
        config = self.cached  # (what the Redis serving now holds of the license)
        assert not config.suspended, "a suspended license gained a lease"
        if user is not None and config.policy:
            facts = json.loads(config.policy)["users"]
            assert facts.get(user.lower()) != "!", f"denied {user} got a seat"
        exempt = answer.recovered and (answer.borrowed or config.on_failover == "grant")
        if after > config.seat_limit:
            assert exempt, (after, config.seat_limit, answer)
            event("over the cap: a documented case")

    # -- the operator ----------------------------------------------------------------------

    @precondition(lambda self: self.operator_changes < 4 and not self.config.suspended)
    @rule()
    def operator_suspends(self) -> None:
        self.store(suspended=True)

    @precondition(lambda self: self.config.suspended)
    @rule()
    def operator_resumes(self) -> None:
        self.store(suspended=False)

    @precondition(lambda self: self.operator_changes < 4)
    @rule(seats=st.integers(1, 3))
    def operator_changes_the_seats(self, seats: int) -> None:
        self.store(seats=seats)

    @precondition(lambda self: self.policy_kind != "none")
    @rule(user=st.sampled_from(["u0", "u1", None]))
    def operator_denies_a_user(self, user: str | None) -> None:
        self.denied = (user,) if user else ()
        self.store(policy=self._policy())

    @precondition(lambda self: self.operator_changes < 4)
    @rule(ends_in=st.sampled_from([-30, 5, 90, 3600]), grace=st.sampled_from([0, 30]))
    def operator_sets_the_term(self, ends_in: int, grace: int) -> None:
        now = datetime.fromtimestamp(self.now_ms() / 1000, UTC)
        self.store(starts_at=None, expires_at=now + timedelta(seconds=ends_in),
                   grace_seconds=grace, on_expiry="end_leases")  # fmt: skip

    @precondition(lambda self: self.operator_changes < 4)
    @rule()
    def operator_moves_the_start_later(self) -> None:
        now = datetime.fromtimestamp(self.now_ms() / 1000, UTC)
        self.store(starts_at=now + timedelta(seconds=5), expires_at=None, grace_seconds=0)

    @precondition(lambda self: self.operator_changes < 4)
    @rule()
    def operator_clears_the_term(self) -> None:
        self.store(starts_at=None, expires_at=None, grace_seconds=0)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def operator_revokes(self, data: Any) -> None:
        grant = data.draw(st.sampled_from(self.tokens))
        self.engine.release(T, L, grant.session_id, revoke=True)
        self._read_outbox()

    @rule(began=st.booleans())
    def operator_begins_or_ends_a_failover_recovery(self, began: bool) -> None:
        if began:
            failover.begin(self.redis)
        else:
            failover.end(self.redis)

    # -- time, the reaper, the pipeline ----------------------------------------------------

    def _advance(self, seconds: int) -> None:
        for clock in self.clocks:
            clock.advance(seconds)

    @rule(seconds=st.sampled_from(JUMPS))
    def time_passes(self, seconds: int) -> None:
        self._advance(seconds)

    @rule()
    def reaper_reclaims(self) -> None:
        shard = self.keys.shard
        expired = self.redis.zrangebyscore(keyspace.deadlines_key(shard), "-inf", self.now_ms())
        if expired:
            self.reaper.reclaim(shard, expired)
        lapsed = self.redis.zrangebyscore(keyspace.ticket_index_key(shard), "-inf", self.now_ms())
        if lapsed:
            self.reaper.sweep_tickets(shard, lapsed)
        self._read_outbox()

    @rule()
    def events_reach_the_audit_trail(self) -> None:
        """The reaper publishes, the audit function stores (here: every event read so far
        that the serving Redis holds)."""
        self.history.store(outbox_events(self.redis, self.keys.outbox))
        self.unpublished = [e for e in self.unpublished if e[0] not in self.history.ends]

    @rule()
    def time_jumps_past_every_ttl_with_the_reaper_down(self) -> None:
        self._advance(2 * 86400)
        k = self.keys
        left = [key for key in (k.ended, k.lmax, k.refused, k.refusing, k.refused_due, *k.replies)
                if self.redis.exists(key)]  # fmt: skip
        assert left == [], left

    # -- losses ------------------------------------------------------------------------------

    @precondition(lambda self: not self.stalled)
    @rule()
    def replication_stalls(self) -> None:
        _wait_synced(self.redis, self.replica)
        self.replica.replicaof("no", "one")
        self.stalled = True
        self.cached_at_stall = self.cached

    @precondition(lambda self: self.stalled)
    @rule()
    def replication_catches_up(self) -> None:
        self._start_replication()
        self.stalled = False
        for end in self.tail:
            self._finalise(end)
        self.tail, self.tail_tokens = [], []

    def _holders(self) -> list[TokenGrant]:
        """The latest token of each lease live now (what its holder would send back)."""
        _, _, _, live = self._truth()
        latest: dict[str, TokenGrant] = {}
        for grant in self.tokens:
            if grant.session_id in live:
                latest[grant.session_id] = grant
        return list(latest.values())

    @precondition(lambda self: self.stalled and self.losses < 2)
    @rule(operator_begins=st.sampled_from([True, True, False]))
    def the_primary_is_lost(self, operator_begins: bool) -> None:
        """The replica, behind by the tail, serves now; the old primary comes back empty as
        its replica. The tail's ends never happened here; its tokens are lost grants."""
        self.holders_at_loss = self._holders()
        self.lost_tokens += self.tail_tokens
        gone = set(self.tail)
        self.tail, self.tail_tokens = [], []
        old = self.redis
        self.primary, self.replica = self.replica, old
        self._serve(self.primary)
        self.replica.flushall()
        self.replica.function_flush()
        self._start_replication()
        self.stalled = False
        # the tail's events are gone with the primary: not in the outbox read from now on
        self.unpublished = [e for e in self.unpublished if e not in gone]
        # the replica holds the license as cached when it stalled; `failover begin` (the
        # admin action) refreshes every license's cache from the database
        self.cached = self.cached_at_stall
        if operator_begins:
            failover.begin(self.redis)
            self.engine.cache_config(T, L, self.config)
            self.cached = self.config
        self.losses += 1
        event(f"failover (operator's window: {operator_begins})")

    @precondition(lambda self: not self.stalled and self.losses < 2 and self.tokens)
    @rule()
    def redis_loses_all_its_data(self) -> None:
        """A restart without persistence: every key gone, the replica with it. Ends not yet
        in the audit trail are lost (the pipeline's lag); the service finds the shard's
        mark gone at its next configuration fill and opens its own window."""
        self.holders_at_loss = self._holders()
        for sid, at, _kind in self.unpublished:
            if self.final.get(sid) == at:
                del self.final[sid]
        self.unpublished = []
        self.replica.replicaof("no", "one")
        for client in (self.redis, self.replica):
            client.flushall()
            client.function_flush()
        self._start_replication()
        self.losses += 1
        event("total loss")

    # -- clients ---------------------------------------------------------------------------

    def _call(self, make: Any) -> Any:
        """Run a call; a refusal changes no live lease. Returns (answer or error, before,
        after)."""
        self.calling()
        _, before, _, live_before = self._truth()
        try:
            answer = make()
        except SeatError as refused:
            _, after, _, live_after = self._truth()
            assert live_after == live_before, (type(refused).__name__, live_before, live_after)
            self._read_outbox()
            return refused, before, after
        _, after, _, _ = self._truth()
        self._read_outbox()
        return answer, before, after

    ACQUIRE = {
        "client": st.sampled_from(CLIENTS),
        "borrow": st.sampled_from([False, False, True]),
        "lease": st.sampled_from([None, None, 8, 1800]),
        "seats": st.sampled_from([None, None, 2]),
        "queue": st.booleans(),
        "long_user": st.sampled_from([False, False, True]),
    }

    @rule(**ACQUIRE)
    def acquire(self, client, borrow, lease, seats, queue, long_user) -> None:
        self._acquire(client, borrow, lease, seats, queue, long_user)

    @rule(**ACQUIRE)
    def another_acquire(self, client, borrow, lease, seats, queue, long_user) -> None:
        """(Clients call more often than operators change things: a second rule.)"""
        self._acquire(client, borrow, lease, seats, queue, long_user)

    def _acquire(self, client, borrow, lease, seats, queue, long_user) -> None:
        user = USER_OF[client]
        request = SeatRequest(
            T, L, client, user=user, seats=seats, queue=queue, fingerprint=MACHINE,
            borrow_seconds=600 if borrow else None, lease_seconds=None if borrow else lease,
            metadata={"note": LONG_USER} if long_user else None,
            failover_began_ms=failover.began_ms(self.redis),
        )  # fmt: skip
        answer, before, after = self._call(lambda: self.engine.acquire(request))
        if isinstance(answer, Lease):
            self._granted(before, after, answer, user)
            self._issued(answer, client)
            event(f"acquire: {'created' if answer.created else 'renewed'}")
        else:
            assert isinstance(answer, (SeatError, QueuePlace))
            event(f"acquire: {type(answer).__name__}")

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def heartbeat(self, data: Any) -> None:
        grant = data.draw(st.sampled_from(self.tokens))
        answer, _, _ = self._call(lambda: self.engine.heartbeat(T, L, grant.session_id))
        if isinstance(answer, Renewal):
            self._issued(answer, answer.client_id or grant.client_id)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), revoke=st.booleans())
    def release(self, data: Any, revoke: bool) -> None:
        grant = data.draw(st.sampled_from(self.tokens))
        self._call(lambda: self.engine.release(T, L, grant.session_id, revoke=revoke))

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), by_acquire=st.booleans())
    def a_token_ever_issued_is_replayed(self, data: Any, by_acquire: bool) -> None:
        """Any token, any time: the heartbeat's retry after a 410 `unknown` (as the clients
        send it), or an acquire carrying it (as a hostile client may)."""
        self._replay(data.draw(st.sampled_from(self.tokens)), by_acquire)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), by_acquire=st.booleans())
    def a_recent_token_is_replayed(self, data: Any, by_acquire: bool) -> None:
        """(The last few tokens issued: most likely still valid.)"""
        self._replay(data.draw(st.sampled_from(self.tokens[-4:])), by_acquire)

    @precondition(lambda self: self.holders_at_loss)
    @rule(data=st.data(), by_acquire=st.sampled_from([False, False, True]))
    def a_holder_at_the_loss_comes_back(self, data: Any, by_acquire: bool) -> None:
        """A holder at the last loss sends its last token back (as its client does after a
        410 `unknown`): re-admitted when the service lost its lease, never when it ended
        it, within the window and the rules."""
        self._replay(data.draw(st.sampled_from(self.holders_at_loss)), by_acquire)

    @precondition(lambda self: self.holders_at_loss)
    @rule(data=st.data())
    def another_holder_at_the_loss_comes_back(self, data: Any) -> None:
        """(Holders come back more often than anything else happens after a loss.)"""
        self._replay(data.draw(st.sampled_from(self.holders_at_loss)), False)

    def _replay(self, grant: TokenGrant, by_acquire: bool) -> None:
        began = failover.began_ms(self.redis)
        if by_acquire:
            request = SeatRequest(T, L, grant.client_id, user=grant.user, recover=grant,
                                  fingerprint=MACHINE, failover_began_ms=began)  # fmt: skip
            answer, before, after = self._call(lambda: self.engine.acquire(request))
        else:
            answer, before, after = self._call(
                lambda: self.engine.heartbeat(T, L, grant.session_id)
            )
            if isinstance(answer, SessionExpired) and answer.reason == "unknown":
                request = SeatRequest(
                    T, L, grant.client_id, user=grant.user, seats=grant.seats, recover=grant,
                    fingerprint=grant.machine, failover_began_ms=began,
                    lease_seconds=None if grant.borrowed else grant.lease_seconds,
                )  # fmt: skip
                answer, before, after = self._call(lambda: self.engine.readmit(request))
        if isinstance(answer, Lease):
            self._granted(before, after, answer, grant.user)
            self._issued(answer, grant.client_id)
            if answer.recovered:
                assert answer.session_id == grant.session_id
                event(f"replay: re-admitted ({'borrow' if grant.borrowed else 'lease'})")
            else:
                event("replay: " + ("created" if answer.created else "renewed"))
        elif isinstance(answer, Renewal):
            self._issued(answer, grant.client_id)
            event("replay: live")
        else:
            event(f"replay: {type(answer).__name__} {getattr(answer, 'reason', '')}")

    # -- the promises ------------------------------------------------------------------------

    @invariant()
    def what_the_service_ended_stays_ended(self) -> None:
        if not hasattr(self, "engine"):
            return
        engine_count, truth, _now, live = self._truth()
        assert engine_count == truth, (engine_count, truth)
        back = [sid for sid in live if sid in self.final]
        assert back == [], f"ended sessions live again: {back}"

    @invariant()
    def stored_notes_are_bounded(self) -> None:
        if not hasattr(self, "engine"):
            return
        now = self.now_ms()
        notes = self.redis.zrange(self.keys.ended, 0, -1, withscores=True)
        ends = self.all_ends | set(self.history.ends)
        for sid, until in notes:
            if until <= now:
                continue
            assert len(sid) == 24, sid
            tokens = [t.expires_at_ms for t in self.tokens if t.session_id == sid]
            # a note for a lease the service ended (or that lingers: its client released
            # it), kept no longer than its latest token
            assert tokens and until <= max(tokens) + 1000, (sid, until, tokens)
            assert sid in ends or self._lingering(sid), sid
        for field, raw in self.redis.hgetall(self.keys.refused).items():
            if field[0] in "#+":
                continue
            note = json.loads(raw)
            assert len(note.get("u", "").encode()) <= 128, len(note.get("u", "").encode())
            assert len(raw.encode()) <= 64 * 60 + 200

    def _lingering(self, sid: str) -> bool:
        raw = self.redis.hget(self.keys.sessions, sid)
        return bool(raw and json.loads(raw).get("lg"))


def test_what_the_service_closed_stays_closed() -> None:
    servers = (start_shifted_redis(), start_shifted_redis())
    try:
        TokensModel.servers = servers
        run = TokensModel.TestCase
        run.settings = settings(
            max_examples=120,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        run().runTest()
    finally:
        for handle, _clock in servers:
            handle.stop()
