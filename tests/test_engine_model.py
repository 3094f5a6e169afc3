"""Hypothesis stateful test: the engine on a real redis-server against a plain Python
model of the seat rules, including leases that expire (time travel: a lease's deadline
is moved into the past with the server's clock, which is what waiting would do) and one
real short lease that expires by waiting. Borrowing and linger are in the model: borrowed
leases (and a lease turned into one), releases that leave the seat lingering for its
client, that client taking it back, and revokes; a lingering seat counts against the
limit like any other. Weighted seats too: a lease may count as 1 to 3 seats, the cap
counts weights, a renewal keeps the weight and another weight for a held lease is
refused (a lingering one is taken back with it, decided as a new lease with its own
seats free), and every lease event carries its lease's weight at the time."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from seatlease.errors import InvalidRequest, NoSeatsAvailable, SeatsMismatch, SessionExpired
from seatlease.events.pubsub import outbox_events
from seatlease.licenses import LicenseConfig
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys

CLIENTS = st.sampled_from([f"c{i}" for i in range(6)])
BORROW_SECONDS = 600
EVENT_TYPES = (
    "lease.acquired",
    "lease.borrowed",
    "lease.converted",
    "lease.renewed",
    "lease.lingering",
    "lease.released",
    "lease.reclaimed",
    "lease.revoked",
)


class SeatModel(RuleBasedStateMachine):
    """Model: live leases (sid -> client; the borrowed and the lingering ones among them
    too), expired-but-not-yet-reclaimed ones, gone ones."""

    url: str = ""

    @initialize(
        seats=st.integers(0, 4),
        overage=st.sampled_from([0, 50, 100]),
        max_borrow=st.sampled_from([0, 3600]),
        linger=st.sampled_from([0, 300]),
    )
    def setup(self, seats: int, overage: int, max_borrow: int, linger: int) -> None:
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        self.config = LicenseConfig(
            seats=seats,
            lease_seconds=300,
            overage_percent=overage,
            max_borrow_seconds=max_borrow,
            linger_seconds=linger,
        )
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of("t", "lic")
        self.live: dict[str, str] = {}
        self.borrowed: set[str] = set()
        self.lingering: set[str] = set()  # of live or expired: ends as lease.released
        self.expired: dict[str, str] = {}
        self.gone: set[str] = set()
        self.revoked: set[str] = set()  # (a revoked session's heartbeat says so)
        self.events = dict.fromkeys(EVENT_TYPES, 0)
        self.waited = False
        self.order: list[str] = []
        self.weight: dict[str, int] = {}  # every session's weight (the seats it counts)
        self.weights_seen: dict[str, set[int]] = {}  # its weights over its life

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    @property
    def sessions(self) -> list[str]:
        """Every session ever seen, in creation order (session ids are random: drawing
        by index keeps hypothesis' data generation deterministic)."""
        return self.order

    @property
    def used(self) -> int:
        """Seats in use: the live leases' weights."""
        return sum(self.weight[sid] for sid in self.live)

    def _pick(self, data: st.DataObject, among: list[str]) -> str:
        return among[data.draw(st.integers(0, len(among) - 1))]

    def _end(self, sid: str, kind: str) -> None:
        """The lease is gone: ``kind`` ended it, or (None) its deadline had passed."""
        self.live.pop(sid, None)
        self.expired.pop(sid, None)
        self.borrowed.discard(sid)
        self.gone.add(sid)
        if kind == "lease.revoked":
            self.revoked.add(sid)
        self.events[kind] += 1
        self.lingering.discard(sid)

    def _expire(self, sid: str) -> None:
        """An expired lease's end: released when it was lingering, else reclaimed."""
        self._end(sid, "lease.released" if sid in self.lingering else "lease.reclaimed")

    def _reclaim_expired(self) -> None:
        """What every acquire does first: expired leases of the license are reclaimed."""
        for sid in list(self.expired):
            self._expire(sid)

    @rule(client=CLIENTS, borrow=st.booleans(), seats=st.sampled_from([None, None, 1, 2, 3]))
    def acquire(self, client: str, borrow: bool, seats: int | None) -> None:
        request = SeatRequest(
            "t", "lic", client, borrow_seconds=BORROW_SECONDS if borrow else None, seats=seats
        )
        too_many = (seats or 1) > max(1, self.config.seats)  # 1 of 0 seats: a plain 409
        if (borrow and self.config.max_borrow_seconds == 0) or too_many:
            with pytest.raises(InvalidRequest):  # refused before anything changes
                self.engine.acquire(request)
            return
        self._reclaim_expired()
        held = [sid for sid, c in self.live.items() if c == client]
        # A lingering lease may be taken back with another weight (decided as a new lease,
        # its own seats free for it); a live one keeps its weight.
        reweigh = bool(held) and seats is not None and seats != self.weight[held[0]]
        if reweigh and held[0] not in self.lingering:
            with pytest.raises(SeatsMismatch) as mismatch:  # a lease keeps its weight
                self.engine.acquire(request)
            assert mismatch.value.held_seats == self.weight[held[0]]
            assert mismatch.value.seats == seats
            return
        limit = self.config.seat_limit
        weight = seats if reweigh else self.weight[held[0]] if held else seats or 1
        own = self.weight[held[0]] if reweigh else 0
        try:
            lease = self.engine.acquire(request)
        except NoSeatsAvailable as denied:
            assert (not held or reweigh) and self.used - own + weight > limit
            assert denied.seats_used == self.used  # (the lingering lease lingers on)
            return
        assert lease.seats == weight
        assert lease.seats_used == self.used - own + (0 if held and not reweigh else weight)
        assert lease.seats_used <= limit
        if held:
            sid = held[0]
            assert not lease.created and lease.session_id == sid
            if reweigh:
                self.weight[sid] = weight
                self.weights_seen[sid].add(weight)
            if sid in self.borrowed:
                pass  # returned unchanged
            elif borrow:
                self.borrowed.add(sid)
                self.events["lease.converted"] += 1
            elif sid in self.lingering:
                self.events["lease.renewed"] += 1
            self.lingering.discard(sid)
        else:
            assert lease.created and lease.session_id not in self.sessions
            self.live[lease.session_id] = client
            self.weight[lease.session_id] = weight
            self.weights_seen[lease.session_id] = {weight}
            self.order.append(lease.session_id)
            self.events["lease.borrowed" if borrow else "lease.acquired"] += 1
            if borrow:
                self.borrowed.add(lease.session_id)
        assert lease.borrowed == (lease.session_id in self.borrowed)

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        sid = self._pick(data, self.sessions)
        try:
            renewal = self.engine.heartbeat("t", "lic", sid)
        except SessionExpired as gone:
            if sid in self.expired:
                lingered = sid in self.lingering
                assert gone.reason == ("unknown" if lingered else "expired")
                self._expire(sid)
            else:
                assert sid in self.gone or sid in self.lingering
                assert gone.reason == ("revoked" if sid in self.revoked else "unknown")
            return
        assert sid in self.live and sid not in self.lingering
        assert renewal.borrowed == (sid in self.borrowed)
        assert renewal.seats == self.weight[sid]

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        sid = self._pick(data, self.sessions)
        result = self.engine.release("t", "lic", sid)
        live = sid in self.live and sid not in self.lingering
        assert result.released == live
        lingers = live and self.config.linger_seconds > 0 and sid not in self.borrowed
        assert result.lingering == lingers
        if lingers:
            self.lingering.add(sid)
            self.events["lease.lingering"] += 1
        elif live:
            self._end(sid, "lease.released")
        elif sid in self.expired:
            self._expire(sid)
        assert result.seats_used == self.used

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def revoke(self, data: st.DataObject) -> None:
        """An operator ends a lease now, a lingering one included."""
        sid = self._pick(data, self.sessions)
        result = self.engine.release("t", "lic", sid, revoke=True)
        assert result.released == (sid in self.live) and not result.lingering
        if sid in self.live:
            self._end(sid, "lease.revoked")
        elif sid in self.expired:
            self._expire(sid)
        assert result.seats_used == self.used

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def time_passes_for(self, data: st.DataObject) -> None:
        """This lease's holder crashed long ago (or its borrow or linger ran out): its
        deadline is in the past."""
        sid = self._pick(data, [s for s in self.order if s in self.live])
        past = self.engine.server_time_ms() - 1
        self.redis.zadd(self.keys.leases, {sid: past}, xx=True)
        self.redis.zadd(self.keys.deadlines, {f"t/lic|{sid}": past}, xx=True)
        self.expired[sid] = self.live.pop(sid)

    @precondition(lambda self: not self.waited and self.config.seat_limit > self.used)
    @rule(client=st.sampled_from(["short-a", "short-b"]))
    def a_real_short_lease_expires(self, client: str) -> None:
        """Once per run: a 1-second lease really expires by waiting."""
        self.waited = True
        self._reclaim_expired()
        lease = self.engine.acquire(SeatRequest("t", "lic", client, lease_seconds=1))
        self.events["lease.acquired"] += 1
        self.order.append(lease.session_id)
        self.weight[lease.session_id] = 1
        self.weights_seen[lease.session_id] = {1}
        time.sleep(1.05)
        self.expired[lease.session_id] = client

    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        if not hasattr(self, "engine"):
            return
        rows = {row["session_id"]: row for row in self.engine.live_leases("t", "lic")}
        assert set(rows) == set(self.live)
        assert {s: r["seats"] for s, r in rows.items()} == {s: self.weight[s] for s in self.live}
        assert self.used <= self.config.seat_limit  # lingering and borrowed seats count
        # no weighted lease's weight outlives it (nor goes before it)
        held = [*self.live, *self.expired]
        assert int(self.redis.get(self.keys.wsum) or 0) == sum(self.weight[s] - 1 for s in held)
        assert {s for s, r in rows.items() if r["borrowed"]} == self.borrowed & set(self.live)
        assert {s for s, r in rows.items() if r["lingering"]} == self.lingering & set(self.live)
        stream = self.keys.outbox
        events = outbox_events(self.redis, stream)
        types = [event["type"] for event in events]
        for kind, count in self.events.items():
            assert types.count(kind) == count, kind
        for event in events:  # each of a weighted lease carries its weight (absent: 1)
            # (a lingering lease taken back with another weight: its events before say the
            # weight it had then)
            seen = self.weights_seen[event["session_id"]]
            assert (event.get("seats") or 1) in seen, event
            if event["type"] in ("lease.acquired", "lease.borrowed") and len(seen) == 1:
                assert event.get("seats") == (min(seen) if min(seen) > 1 else None), event


def test_engine_matches_model(redis_server):
    SeatModel.url = redis_server.url
    run = SeatModel.TestCase
    run.settings = settings(
        max_examples=40,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run().runTest()
