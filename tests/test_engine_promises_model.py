"""Hypothesis stateful test of the seat rules' promises (docs/design.md, "Seat engine
rules"), on a real redis-server whose clock really moves (tests/procs.py,
``start_shifted_redis``): time jumps past leases, tickets, holds, lingers, borrows, a
term's end and grace and the config cache's TTL, while the operator changes the license
mid-flight (a term set, shortened, moved later, cleared; seats lowered and raised; the
queue switched off and on; linger and borrowing switched) and clients acquire (weights 1
to 3, borrows from one machine or another, places in line), heartbeat, release and are
revoked, and the reaper runs. More lapsed tickets than an acquire's prune step stand in
line once per run.

The invariants are the promises, read from the ground truth (every lease's own record and
deadline) after every step:

- never over the cap: no grant takes the seats in use past the license's limit (the
  operator may lower the seats below what is held: held leases are not revoked), nor a
  user past its per-user limit;
- nothing past a license's end: under end_leases no live deadline (a lease's, a borrow's,
  a lingering lease's) lies past the end + grace, and before its start no lease is live;
- no call ends in a script error: every answer is a result or a domain error;
- every ticket is in the queue, the ticket sets and the shard's index, or in none;
- the engine's own counts (the weights' sum, the policy's per-user counts) agree with the
  leases they count.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from seatlease.errors import SeatError
from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats import keys as keyspace
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.scripts import helpers_source

T, L = "t", "lic"
CLIENTS = [f"c{i}" for i in range(6)]
USER_OF = {c: f"u{i % 3}" for i, c in enumerate(CLIENTS)}
MACHINES = ["a" * 64, "b" * 64]
MAX_PER_USER = 3
JUMPS = [1, 1, 15, 15, 31, 61, 400, 700, 3700, 90_000]  # past holds, tickets, leases, the cache

# The engine's own count of the seats in use (lua/_lib.lua's in_use), read beside the
# ground truth (every live lease's record) in one script: they must agree.
_LIB = helpers_source()
COUNTS = (
    _LIB
    + """
local now = now_ms()
local k = {leases = KEYS[1], sessions = KEYS[2], units = KEYS[3], wsum = KEYS[4]}
local truth = 0
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf')) do
  local raw = redis.call('HGET', k.sessions, sid)
  truth = truth + ((raw and cjson.decode(raw).w) or 1)
end
return {in_use(k, now), truth, now}
"""
)


class PromisesModel(RuleBasedStateMachine):
    url = ""
    clock = None

    @initialize(
        seats=st.integers(1, 5),
        overage=st.sampled_from([0, 50]),
        policy=st.sampled_from(["none", "queue", "full"]),
        linger=st.sampled_from([0, 120, 120]),
    )
    def setup(self, seats: int, overage: int, policy: str, linger: int) -> None:
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
        )
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of(T, L)
        self.counts = self.redis.register_script(COUNTS)
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
        lapsed = self.redis.zrangebyscore(keyspace.ticket_index_key(shard), "-inf", now)
        if lapsed:
            self.reaper.sweep_tickets(shard, lapsed)

    # -- clients ---------------------------------------------------------------------------

    def _truth(self) -> tuple[int, int, int]:
        k = self.keys
        engine_count, truth, now = self.counts(keys=[k.leases, k.sessions, k.units, k.wsum])
        return int(engine_count), int(truth), int(now)

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
        return sum(
            r["seats"] for r in self.engine.live_leases(T, L) if r["metadata"].get("user") == user
        )

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
            T, L, client, seats=seats, queue=queue, user=USER_OF[client],
            borrow_seconds=600 if borrow else None,
            lease_seconds=1800 if long and not borrow else None,
            fingerprint=None if machine is None else MACHINES[machine],
        )  # fmt: skip
        try:
            answer = self.engine.acquire(request)
        except SeatError as refused:  # a refusal (a domain error), never a script error
            event(f"acquire: {type(refused).__name__}")
            return
        if isinstance(answer, QueuePlace):
            event("acquire: queued")
            assert answer.position >= 1
            return
        event(f"acquire: {'created' if answer.created else 'renewed'}")
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

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def heartbeat(self, data) -> None:
        self._heartbeat(self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))])

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def heartbeat_of_the_latest(self, data) -> None:
        self._heartbeat(self.sessions[-1])

    def _heartbeat(self, sid: str) -> None:
        self.calling()
        try:
            self._check_terms(self.engine.heartbeat(T, L, sid))
            event("heartbeat: ok")
        except SeatError as refused:
            event(f"heartbeat: {type(refused).__name__}: {getattr(refused, 'reason', '')}")

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), revoke=st.booleans())
    def release(self, data, revoke: bool) -> None:
        sid = self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))]
        self.calling()
        released = self.engine.release(T, L, sid, revoke=revoke)
        event(f"release: {'lingering' if released.lingering else released.released}")

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
            counts = {
                f[3:]: int(v) for f, v in self.redis.hgetall(k.users).items() if f.startswith("#u:")
            }
            assert counts == stored, (counts, stored)


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
