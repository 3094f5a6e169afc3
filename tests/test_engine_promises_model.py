"""Hypothesis stateful test of the seat rules' promises (docs/design.md, "Seat engine
rules"), on a real redis-server whose clock really moves (tests/procs.py,
``start_shifted_redis``): time jumps past leases, tickets, holds, lingers, borrows, a
term's end and grace and the config cache's TTL, while the operator changes the license
mid-flight (a term set, shortened, moved later, cleared; seats lowered and raised; the
queue switched off and on; linger and borrowing switched) and clients acquire (weights 1
to 3, borrows from one machine or another, places in line), heartbeat, release and are
revoked, and the reaper runs. More lapsed tickets than an acquire's prune step stand in
line once per run. The idle rule (when needed, always, off) and the sharing rule (by
user, host, both; a share limit) are switched mid-flight too, and heartbeats say the
product's activity (idle for a while, past the timeout, busy, nothing).

The invariants are the promises, read from the ground truth (every lease's own record and
deadline) after every step:

- never over the cap: no grant takes the seats in use past the license's limit (the
  operator may lower the seats below what is held: held leases are not revoked), nor a
  user past its per-user limit;
- nothing past a license's end: under end_leases no live deadline (a lease's, a borrow's,
  a lingering lease's) lies past the end + grace, and before its start no lease is live;
- no call ends in a script error: every answer is a result or a domain error;
- every ticket is in the queue, the ticket sets and the shard's index, or in none;
- the engine's own counts (the weights' sum, the policy's per-user counts, each share
  group's sessions and seats and their sum) agree with the leases they count, and count a
  shared seat once: never fewer seats than a group's live sessions need, never more than
  it has sessions;
- what the service ended stays ended: a lease reclaimed for being idle never lives again,
  and a borrowed or busy lease is never warned.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from share_invariants import TRUTH, check_shares, truth_keys

from seatlease.errors import SeatError
from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats import keys as keyspace
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

T, L = "t", "lic"
CLIENTS = [f"c{i}" for i in range(6)]
USER_OF = {c: f"u{i % 3}" for i, c in enumerate(CLIENTS)}
HOST_OF = {c: f"h{i % 2}" for i, c in enumerate(CLIENTS)}
MACHINES = ["a" * 64, "b" * 64]
MAX_PER_USER = 3
JUMPS = [1, 1, 15, 15, 31, 61, 400, 700, 3700, 90_000]  # past holds, tickets, leases, the cache


class PromisesModel(RuleBasedStateMachine):
    url = ""
    clock = None

    @initialize(
        seats=st.integers(1, 5),
        overage=st.sampled_from([0, 50]),
        policy=st.sampled_from(["none", "queue", "full"]),
        linger=st.sampled_from([0, 120, 120]),
        idle=st.sampled_from(["off", "when_needed", "when_needed", "always"]),
        share=st.sampled_from(["none", "user", "user", "host", "user_host"]),
        share_limit=st.sampled_from([0, 0, 2]),
    )
    def setup(
        self, seats: int, overage: int, policy: str, linger: int, idle: str, share: str,
        share_limit: int,
    ) -> None:  # fmt: skip
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        self.policy_kind = policy
        self.config = LicenseConfig(
            seats=seats,
            lease_seconds=120,
            max_lease_seconds=3600,
            overage_percent=overage,
            max_borrow_seconds=3600,
            linger_seconds=linger,
            policy=self._policy(queue=policy != "none"),
            idle_timeout_seconds=0 if idle == "off" else 60,
            idle_reclaim="always" if idle == "always" else "when_needed",
            share=share,
            share_limit=share_limit,
        )
        self.ever_always = idle == "always"  # (a lease cut then may end in any call after)
        self.idle_ended: set[str] = set()  # sessions reclaimed for being idle
        self.events_seen = "-"  # the outbox read so far (its last entry id)
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of(T, L)
        self.counts = self.redis.register_script(TRUTH)  # (share_invariants.py)
        self.reaper = Reaper(self.redis, publisher=None)
        self.sessions: list[str] = []  # every session seen, in order (drawn by index)
        self.bulk_done = False
        self.store()
        self.cached = self.config  # what Redis holds of it (store() writes it at once)

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    # -- the operator -------------------------------------------------------------------

    def _policy(self, queue: bool) -> str:
        if self.policy_kind == "none":
            return ""
        rules: dict = {"queue": queue, "queue_ticket_seconds": 60, "queue_hold_seconds": 30,
                       "queue_max": 1000}  # fmt: skip
        if self.policy_kind == "full":
            rules.update(max_per_user=MAX_PER_USER, groups={"g": ["u0"]}, reserve={"g": 1})
        return LicensePolicy(**rules).redis_form()

    def store(self, **changes) -> None:
        """An operator's change: stored and written to the cache at once (admin does)."""
        self.config = self.cached = replace(self.config, **changes)
        self.engine.cache_config(T, L, self.config)

    def calling(self) -> None:
        """Before a client's call: a cache that is gone (its TTL passed) is refilled by the
        call from what is stored, before it decides."""
        if not self.redis.exists(self.keys.cfg):
            self.cached = self.config

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.engine.server_time_ms() / 1000, UTC)

    @rule(
        ends_in=st.sampled_from([-7200, -30, 2, 45, 90, 3600, 86400]),
        grace=st.sampled_from([0, 60]),
        keep=st.booleans(),
    )
    def operator_sets_the_term(self, ends_in: int, grace: int, keep: bool) -> None:
        """Set, shortened, lengthened or ended (a term already past is a renewal's typo)."""
        self.store(
            starts_at=None,
            expires_at=self.now() + timedelta(seconds=ends_in),
            grace_seconds=grace,
            on_expiry="keep_leases" if keep else "end_leases",
        )

    @rule(later=st.sampled_from([30, 3600]))
    def operator_moves_the_start_later(self, later: int) -> None:
        start = self.now() + timedelta(seconds=later)
        expires = self.config.expires_at
        if expires is not None and expires <= start:
            expires = start + timedelta(hours=1)
        self.store(starts_at=start, expires_at=expires)

    @rule(ends_in=st.sampled_from([-60, 90]))
    def operator_sets_the_term_while_redis_is_unreachable(self, ends_in: int) -> None:
        """Stored, but the cache could not be written (``cache_refreshed: false``): Redis
        learns the term when its cached copy lapses and a call fills it again."""
        self.config = replace(
            self.config, starts_at=None, expires_at=self.now() + timedelta(seconds=ends_in),
            grace_seconds=0, on_expiry="end_leases",
        )  # fmt: skip

    @rule()
    def operator_clears_the_term(self) -> None:
        self.store(starts_at=None, expires_at=None, grace_seconds=0)

    @rule(seats=st.integers(1, 5))
    def operator_changes_the_seats(self, seats: int) -> None:
        self.store(seats=seats)

    @rule(queue=st.booleans())
    def operator_switches_the_queue(self, queue: bool) -> None:
        self.store(policy=self._policy(queue))

    @rule(
        idle=st.sampled_from(["off", "when_needed", "always"]),
        share=st.sampled_from(["none", "user", "host", "user_host"]),
        share_limit=st.sampled_from([0, 1, 2]),
    )
    def operator_switches_idle_and_sharing(self, idle: str, share: str, share_limit: int) -> None:
        self.ever_always = self.ever_always or idle == "always"
        self.store(
            idle_timeout_seconds=0 if idle == "off" else 60,
            idle_reclaim="always" if idle == "always" else "when_needed",
            share=share,
            share_limit=share_limit,
        )

    @rule(linger=st.sampled_from([0, 120]), borrow=st.sampled_from([0, 3600]))
    def operator_switches_linger_and_borrowing(self, linger: int, borrow: int) -> None:
        self.store(linger_seconds=linger, max_borrow_seconds=borrow)

    # -- time and the reaper ------------------------------------------------------------

    @rule(seconds=st.sampled_from(JUMPS))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def reaper_runs(self) -> None:
        shard = keyspace.shard_of(T, L)
        now = self.engine.server_time_ms()
        expired = self.redis.zrangebyscore(keyspace.deadlines_key(shard), "-inf", now)
        if expired:
            self.reaper.reclaim(shard, expired)
        self._idle_ends("reaper")
        lapsed = self.redis.zrangebyscore(keyspace.ticket_index_key(shard), "-inf", now)
        if lapsed:
            self.reaper.sweep_tickets(shard, lapsed)

    # -- clients ---------------------------------------------------------------------------

    def _truth(self) -> tuple[int, int, int]:
        k = self.keys
        engine_count, truth, now, stale = self.counts(keys=truth_keys(k))
        # (with expired leases not yet reclaimed the engine may count more, never fewer)
        self.stale = int(stale)
        return int(engine_count), int(truth), int(now)

    def _idle_ends(self, caller: str) -> None:
        """The idle reclaims since the last look: each one's session is ended for good;
        under when_needed (never always in this run) only an acquire that found no seat
        reclaims an idle lease."""
        stream = keyspace.outbox_key(keyspace.shard_of(T, L))
        for entry_id, fields in self.redis.xrange(stream, min=self.events_seen):
            if entry_id == self.events_seen:
                continue
            self.events_seen = entry_id
            e = json.loads(fields["e"])
            if e["type"] == "lease.reclaimed" and e["metadata"].get("reason") == "idle":
                event(f"idle reclaim by {caller}")
                self.idle_ended.add(e["session_id"])
                if not self.ever_always:
                    assert caller == "acquire", caller

    def _check_terms(self, answer) -> None:
        """An answer's term: in the grace from expires_at until its end only; its deadline
        within the end under end_leases."""
        config, terms = self.cached, answer.terms
        if config.expires_at is None or terms is None:
            return
        now, exp, fin = answer.now_ms, terms.expires_at_ms, terms.ends_at_ms
        assert terms.in_grace == (exp <= now < fin), (now, exp, fin)
        if config.on_expiry == "end_leases":
            assert answer.expires_at_ms <= fin

    def _live_seats_of(self, user: str) -> int:
        """The seats the user's live leases took: a lease's weight; a shared lease's, the
        seat it took when its group had no room (a session joining a seat takes none)."""
        k = self.keys
        records = self.redis.hgetall(k.sessions)
        seats = 0
        for r in self.engine.live_leases(T, L):
            if r["metadata"].get("user") != user:
                continue
            rec = json.loads(records[r["session_id"]])
            seats += rec.get("cu", 0) if rec.get("sh") else r["seats"]
        return seats

    ACQUIRE = {
        "client": st.sampled_from(CLIENTS),
        "seats": st.sampled_from([None, None, 1, 2, 3]),
        "borrow": st.sampled_from([False, False, False, True]),
        "queue": st.booleans(),
        "machine": st.sampled_from([None, 0, 1]),
        "long": st.sampled_from([False, False, True]),  # a lease outliving the cache
    }

    @rule(**ACQUIRE)
    def acquire(self, client, seats, borrow, queue, machine, long) -> None:
        self._acquire(client, seats, borrow, queue, machine, long)

    @rule(**ACQUIRE)
    def another_acquire(self, client, seats, borrow, queue, machine, long) -> None:
        """(Clients call more often than operators change things: a second rule.)"""
        self._acquire(client, seats, borrow, queue, machine, long)

    def _acquire(self, client, seats, borrow, queue, machine, long) -> None:
        self.calling()
        _, before, _ = self._truth()
        request = SeatRequest(
            T, L, client, seats=seats, queue=queue, user=USER_OF[client], host=HOST_OF[client],
            borrow_seconds=600 if borrow else None,
            lease_seconds=1800 if long and not borrow else None,
            fingerprint=None if machine is None else MACHINES[machine],
        )  # fmt: skip
        try:
            answer = self.engine.acquire(request)
        except SeatError as refused:  # a refusal (a domain error), never a script error
            event(f"acquire: {type(refused).__name__}")
            return
        finally:
            self._idle_ends("acquire")
        if isinstance(answer, QueuePlace):
            event("acquire: queued")
            assert answer.position >= 1
            return
        event(f"acquire: {'created' if answer.created else 'renewed'}")
        if answer.shared_sessions is not None:
            event(f"acquire: shared by {min(answer.shared_sessions, 3)}")
        self._check_terms(answer)
        assert isinstance(answer, Lease)
        if answer.session_id not in self.sessions:
            self.sessions.append(answer.session_id)
        _, after, _ = self._truth()
        assert answer.seats_used == after
        if after > before:  # a grant (a new lease, a lingering one grown): within the cap
            assert after <= self.cached.seat_limit
            if self.policy_kind == "full":
                assert self._live_seats_of(USER_OF[client]) <= MAX_PER_USER

    ACTIVITY = {
        "idle": st.sampled_from([None, None, 0, 30, 60, 600]),
        "busy": st.sampled_from([False, False, False, True]),
    }

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), **ACTIVITY)
    def heartbeat(self, data, idle, busy) -> None:
        sid = self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))]
        self._heartbeat(sid, idle, busy)

    @precondition(lambda self: self.sessions)
    @rule(**ACTIVITY)
    def heartbeat_of_the_latest(self, idle, busy) -> None:
        self._heartbeat(self.sessions[-1], idle, busy)

    def _heartbeat(self, sid: str, idle: int | None = None, busy: bool = False) -> None:
        self.calling()
        try:
            renewal = self.engine.heartbeat(T, L, sid, idle_seconds=idle, busy=busy)
            self._check_terms(renewal)
            event("heartbeat: ok")
        except SeatError as refused:
            event(f"heartbeat: {type(refused).__name__}: {getattr(refused, 'reason', '')}")
            return
        finally:
            self._idle_ends("heartbeat")
        if renewal.idle_reclaim_at_ms is not None:
            event("heartbeat: warned idle")
            # warned only when it said so: idle past the timeout, not busy, not a borrow
            assert idle is not None and idle >= 60 and not busy and not renewal.borrowed
            assert renewal.idle_reclaim_at_ms >= renewal.now_ms  # (no earlier than now)

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), revoke=st.booleans())
    def release(self, data, revoke: bool) -> None:
        sid = self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))]
        self.calling()
        released = self.engine.release(T, L, sid, revoke=revoke)
        event(f"release: {'lingering' if released.lingering else released.released}")
        self._idle_ends("release")

    def _someone_warned(self) -> bool:
        return hasattr(self, "keys") and self.redis.zcard(self.keys.idlers) > 0

    @precondition(lambda self: self._someone_warned())
    @rule(client=st.sampled_from(CLIENTS), reaper_first=st.booleans())
    def an_idle_leases_time_comes_and_someone_asks(self, client, reaper_first) -> None:
        """A warned lease's reclaim time passes (one interval: a third of its lease); the
        reaper may run (always: it ends the lease), and a client asks for a seat."""
        self.clock.advance(41)
        if reaper_first:
            self.reaper_runs()
        self._acquire(client, None, False, False, None, False)

    def _full_with_a_queue(self) -> bool:
        if self.bulk_done or not self.cached.policy or '"q":1' not in self.cached.policy:
            return False
        return self._truth()[1] >= self.cached.seat_limit

    @precondition(lambda self: self._full_with_a_queue())
    @rule()
    def a_crowd_joins_the_line_and_walks_away(self) -> None:
        """Once per run: more clients than an acquire's prune step (100) take a place in
        line on the full license, and one of the model's clients behind them; then all of
        them stop polling (their tickets lapse; the leases held live on)."""
        self.calling()
        self.bulk_done = True
        for i in range(105):
            try:
                self.engine.acquire(SeatRequest(T, L, f"crowd{i:03}", queue=True))
            except SeatError:
                pass
        try:  # one of the model's clients behind them, whose ticket lapses with theirs
            self.engine.acquire(
                SeatRequest(T, L, CLIENTS[-1], queue=True, user=USER_OF[CLIENTS[-1]])
            )
        except SeatError:
            pass
        self.clock.advance(61)

    # -- the promises ------------------------------------------------------------------------

    @invariant()
    def promises_hold(self) -> None:
        if not hasattr(self, "engine"):
            return
        engine_count, truth, now = self._truth()
        if self.stale:
            assert engine_count >= truth, (engine_count, truth)
        else:
            assert engine_count == truth, (engine_count, truth)
        k = self.keys
        deadlines = [int(d) for _, d in self.redis.zrange(k.leases, 0, -1, withscores=True)]
        live = [d for d in deadlines if d > now]
        config = self.cached  # the term Redis holds (the next fill brings a newer one)
        if config.starts_at is not None and now < int(config.starts_at.timestamp() * 1000):
            assert live == [], "a license that has not started holds a lease"
        if config.expires_at is not None and config.on_expiry == "end_leases":
            assert all(d <= config.ends_at_ms for d in live), "a deadline past the end"
            if live:
                event("invariant: live leases under a term's end")
                if any(d == config.ends_at_ms for d in live):
                    event("invariant: a live lease cut to the end")
        # every ticket in all of its places, or in none
        queue = set(self.redis.zrange(k.queue, 0, -1))
        tickets = set(self.redis.hkeys(k.tickets))
        ends = set(self.redis.zrange(k.ticket_deadlines, 0, -1))
        prefix = f"{T}/{L}|"
        index = {
            m[len(prefix) :]
            for m in self.redis.zrange(k.ticket_index, 0, -1)
            if m.startswith(prefix)
        }
        assert queue == tickets == ends == index, (queue, tickets, ends, index)
        # the policy's per-user counts are those of the leases stored (live, or expired and
        # not yet reclaimed: a count is stricter for that while, never looser)
        if self.policy_kind == "full":
            stored: dict[str, int] = {}
            for raw in self.redis.hvals(k.sessions):
                import json

                rec = json.loads(raw)
                if rec.get("cu") and rec.get("u"):
                    stored[rec["u"]] = stored.get(rec["u"], 0) + rec["cu"]
            users = self.redis.hgetall(k.users)
            # (a share group carries its user's count for a seat whose taker left)
            for field, carried in users.items():
                if field.startswith("#sc:"):
                    user = users["#su:" + field[4:]]
                    stored[user] = stored.get(user, 0) + int(carried)
                    event("invariant: a share group carries its user's count")
            counts = {f[3:]: int(v) for f, v in users.items() if f.startswith("#u:")}
            assert counts == stored, (counts, stored)
        self._shares_hold(now)

    def _shares_hold(self, now: int) -> None:
        if check_shares(self.redis, self.keys, now, self.idle_ended):
            event("invariant: share groups held")


def test_the_seat_rules_keep_their_promises(shifted_redis) -> None:
    handle, clock = shifted_redis
    PromisesModel.url = handle.url
    PromisesModel.clock = clock
    run = PromisesModel.TestCase
    run.settings = settings(
        max_examples=150,
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run().runTest()
