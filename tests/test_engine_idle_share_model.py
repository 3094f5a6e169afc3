"""Hypothesis stateful test of idle seats and shared seats (docs/design.md, "Idle seats"
and "Shared seats"), on a real redis-server whose clock really moves (tests/procs.py):
clients of a few users on a few hosts acquire (one seat or two, borrows), heartbeat saying
how idle or busy they are, release and are revoked; the operator switches the idle rule
(off, when needed, always) and the sharing rule (user, host, both; a share limit) and the
seats mid-flight; time jumps past warnings, leases and borrows; the reaper runs; every
lease token ever issued is replayed later; Redis loses all its data.

The promises, read from the ground truth (each lease's record and deadline) after every
step:

- never over the cap, counting a shared seat once: a grant never takes the seats in use
  (each share group's seats, every other lease's weight) past the license's limit, and a
  group holds at least the seats its live sessions need under the share limit it was
  filled under (at least one) and at most one a session;
- the counts agree: each group's sessions are the leases stored in it, their sum beyond
  the groups' seats is the one the seat count leaves out, the engine's count is the truth
  (more while expired leases wait for the reaper, never fewer);
- what the service ended stays ended: a lease reclaimed for being idle never lives again,
  by a heartbeat, an acquire or its token;
- a warning only for what the product said: idle at least the timeout, not busy, not a
  borrow; under "always" the warned lease's deadline is its reclaim time; under "when
  needed" (never "always" in the run) only an acquire that found no seat reclaims one;
- no call ends in a script error.
"""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from share_invariants import TRUTH, check_shares, truth_keys

from seatlease.errors import SeatError, SessionExpired
from seatlease.events.reaper import Reaper
from seatlease.licenses import LicenseConfig
from seatlease.seats import keys as keyspace
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.values import TokenGrant

T, L = "t", "lic"
CLIENTS = [f"c{i}" for i in range(7)]
USERS = ["ann", "bob", "cy"]
HOSTS = ["h0", "h1"]
JUMPS = [1, 15, 41, 41, 121, 700, 4000]  # past a warning (an interval), a lease, a borrow
TIMEOUT = 60


class IdleShareModel(RuleBasedStateMachine):
    url = ""
    clock = None

    @initialize(
        seats=st.integers(1, 3),
        idle=st.sampled_from(["off", "when_needed", "when_needed", "always"]),
        share=st.sampled_from(["none", "user", "user", "host", "user_host"]),
        share_limit=st.sampled_from([0, 0, 1, 2]),
    )
    def setup(self, seats: int, idle: str, share: str, share_limit: int) -> None:
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        self.config = LicenseConfig(
            seats=seats, lease_seconds=120, max_lease_seconds=3600, max_borrow_seconds=3600
        )
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of(T, L)
        self.truth_script = self.redis.register_script(TRUTH)
        self.reaper = Reaper(self.redis, publisher=None)
        self.sessions: list[str] = []
        self.tokens: list[TokenGrant] = []  # every lease ever granted, as its token says
        self.idle_ended: set[str] = set()
        self.ever_always = False
        self.lost = False
        self.events_seen = "-"
        self.store(idle, share, share_limit)

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    def store(self, idle: str, share: str, share_limit: int, **changes) -> None:
        self.ever_always = self.ever_always or idle == "always"
        self.config = replace(
            self.config,
            idle_timeout_seconds=0 if idle == "off" else TIMEOUT,
            idle_reclaim="always" if idle == "always" else "when_needed",
            share=share,
            share_limit=share_limit,
            **changes,
        )
        self.engine.cache_config(T, L, self.config)

    # -- the operator, time, the reaper, a loss --------------------------------------------

    @rule(
        idle=st.sampled_from(["off", "when_needed", "always"]),
        share=st.sampled_from(["none", "user", "host", "user_host"]),
        share_limit=st.sampled_from([0, 1, 2]),
        seats=st.integers(1, 3),
    )
    def operator_changes_the_rules(self, idle, share, share_limit, seats) -> None:
        self.store(idle, share, share_limit, seats=seats)

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

    @precondition(lambda self: len(self.sessions) >= 4 and not self.lost)
    @rule()
    def redis_loses_everything(self) -> None:
        """Once a run, total data loss: the next call fills the configuration again; no
        recovery window opens (no failover under way, no history): a token brings back
        only a borrow."""
        self.lost = True
        self.redis.flushall()
        self.events_seen = "-"
        event("data lost")

    # -- clients -----------------------------------------------------------------------------

    def _truth(self) -> tuple[int, int, int, int]:
        k = self.keys
        used, truth, now, stale = self.truth_script(keys=truth_keys(k))
        return int(used), int(truth), int(now), int(stale)

    def _idle_ends(self, caller: str) -> int:
        stream = keyspace.outbox_key(keyspace.shard_of(T, L))
        found = 0
        for entry_id, fields in self.redis.xrange(stream, min=self.events_seen):
            if entry_id == self.events_seen:
                continue
            self.events_seen = entry_id
            e = json.loads(fields["e"])
            if e["type"] == "lease.reclaimed" and e["metadata"].get("reason") == "idle":
                event(f"idle reclaim by {caller}")
                self.idle_ended.add(e["session_id"])
                found += 1
                if not self.ever_always:
                    assert caller == "acquire", caller
        return found

    @rule(
        client=st.sampled_from(CLIENTS),
        user=st.sampled_from(["ann", "ann", "bob", "cy", None]),  # (ann: often shared)
        host=st.sampled_from(["h0", "h0", "h1", None]),
        seats=st.sampled_from([None, None, None, 2]),
        borrow=st.sampled_from([False, False, False, True]),
    )
    def acquire(self, client, user, host, seats, borrow) -> None:
        _, before, _, _ = self._truth()
        request = SeatRequest(
            T, L, client, user=user, host=host, seats=seats,
            borrow_seconds=600 if borrow else None,
        )  # fmt: skip
        try:
            lease = self.engine.acquire(request)
        except SeatError as refused:
            event(f"acquire: {type(refused).__name__}")
            reclaimed = self._idle_ends("acquire")
            return
        reclaimed = self._idle_ends("acquire")
        assert isinstance(lease, Lease)
        if reclaimed and not self.ever_always:
            # only a call that found no seat for it reclaims an idle lease
            assert before + lease.seats > self.config.seat_limit, (before, lease.seats)
        event(f"acquire: {'created' if lease.created else 'renewed'}")
        if lease.shared_sessions is not None:
            event(f"acquire: shared by {min(lease.shared_sessions, 3)}")
        if lease.session_id not in self.sessions:
            self.sessions.append(lease.session_id)
        self.tokens.append(
            TokenGrant(
                lease.session_id, client, lease.expires_at_ms, seats=lease.seats,
                borrowed=lease.borrowed, machine=lease.machine, issued_at_ms=lease.now_ms,
                user=lease.user,
            )
        )  # fmt: skip
        _, after, _, _ = self._truth()
        if after > before:
            assert after <= self.config.seat_limit, (after, self.config.seat_limit)

    @precondition(lambda self: self.sessions)
    @rule(
        data=st.data(),
        idle=st.sampled_from([None, None, 0, 59, TIMEOUT, 600]),
        busy=st.sampled_from([False, False, False, True]),
    )
    def heartbeat(self, data, idle, busy) -> None:
        sid = self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))]
        try:
            renewal = self.engine.heartbeat(T, L, sid, idle_seconds=idle, busy=busy)
        except SessionExpired as gone:
            event(f"heartbeat: {gone.reason}")
            self._idle_ends("heartbeat")
            if gone.reason == "idle":
                assert sid in self.idle_ended
            return
        except SeatError as refused:
            event(f"heartbeat: {type(refused).__name__}")
            self._idle_ends("heartbeat")
            return
        self._idle_ends("heartbeat")
        assert sid not in self.idle_ended
        if renewal.idle_reclaim_at_ms is None:
            return
        event("heartbeat: warned")
        assert idle is not None and idle >= TIMEOUT and not busy and not renewal.borrowed
        # (a reclaim time may have passed: when needed, it waits for someone to need it)
        if self.config.idle_reclaim == "always":
            assert renewal.expires_at_ms <= renewal.idle_reclaim_at_ms

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), revoke=st.booleans())
    def release(self, data, revoke: bool) -> None:
        sid = self.sessions[data.draw(st.integers(0, len(self.sessions) - 1))]
        self.engine.release(T, L, sid, revoke=revoke)
        self._idle_ends("release")

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def a_token_ever_issued_comes_back(self, data) -> None:
        """Any lease token ever issued, replayed by a heartbeat's re-admission: an idle
        reclaim's lease never comes back."""
        grant = self.tokens[data.draw(st.integers(0, len(self.tokens) - 1))]
        request = SeatRequest(
            T, L, grant.client_id, recover=grant, seats=grant.seats,
            lease_seconds=None if grant.borrowed else 120, user=grant.user,
        )  # fmt: skip
        try:
            lease = self.engine.readmit(request)
        except SeatError as refused:
            event(f"readmit: {type(refused).__name__}")
            self._idle_ends("readmit")
            return
        self._idle_ends("readmit")
        event("readmit: back")
        assert lease.session_id not in self.idle_ended

    @precondition(lambda self: self.redis.zcard(self.keys.idlers) > 0)
    @rule(client=st.sampled_from(CLIENTS), user=st.sampled_from(USERS), reaper=st.booleans())
    def a_warned_leases_time_comes_and_someone_asks(self, client, user, reaper) -> None:
        self.clock.advance(41)
        if reaper:
            self.reaper_runs()
        self.acquire(client, user, None, None, False)

    # -- the promises ------------------------------------------------------------------------

    @invariant()
    def promises_hold(self) -> None:
        if not hasattr(self, "engine"):
            return
        used, truth, now, stale = self._truth()
        assert used >= truth if stale else used == truth, (used, truth, stale)
        k = self.keys
        for n, _seats in check_shares(self.redis, k, now, self.idle_ended).values():
            if n > 1:
                event("invariant: a shared seat")
        warned = set(self.redis.zrange(k.idlers, 0, -1))
        assert warned <= set(self.redis.hkeys(k.sessions)), "a warning outlived its lease"


def test_idle_and_shared_seats_keep_their_promises(shifted_redis) -> None:
    handle, clock = shifted_redis
    IdleShareModel.url = handle.url
    IdleShareModel.clock = clock
    run = IdleShareModel.TestCase
    run.settings = settings(
        max_examples=200,
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run().runTest()
