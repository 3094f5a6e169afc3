"""Hypothesis stateful test: the engine on a real redis-server against a plain Python
model of the seat rules, including leases that expire (time travel: a lease's deadline
is moved into the past with the server's clock, which is what waiting would do) and one
real short lease that expires by waiting."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from shared import redisconn
from shared.engine import LicenseConfig, SeatEngine
from shared.errors import NoSeatsAvailable, SessionExpired
from shared.keys import LicenseKeys

CLIENTS = st.sampled_from([f"c{i}" for i in range(6)])


class SeatModel(RuleBasedStateMachine):
    """Model: live leases (sid -> client), expired-but-not-yet-reclaimed ones, gone ones."""

    url: str = ""

    @initialize(seats=st.integers(0, 4), overage=st.sampled_from([0, 50, 100]))
    def setup(self, seats: int, overage: int) -> None:
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        self.config = LicenseConfig(seats=seats, lease_seconds=300, overage_percent=overage)
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of("t", "lic")
        self.live: dict[str, str] = {}
        self.expired: dict[str, str] = {}
        self.gone: set[str] = set()
        self.events = {"lease.acquired": 0, "lease.released": 0, "lease.reclaimed": 0}
        self.waited = False
        self.order: list[str] = []

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    @property
    def sessions(self) -> list[str]:
        """Every session ever seen, in creation order (session ids are random: drawing
        by index keeps hypothesis' data generation deterministic)."""
        return self.order

    def _pick(self, data: st.DataObject, among: list[str]) -> str:
        return among[data.draw(st.integers(0, len(among) - 1))]

    def _reclaim_expired(self) -> None:
        """What every acquire does first: expired leases of the license are reclaimed."""
        for sid in self.expired:
            self.gone.add(sid)
            self.events["lease.reclaimed"] += 1
        self.expired.clear()

    @rule(client=CLIENTS)
    def acquire(self, client: str) -> None:
        self._reclaim_expired()
        held = [sid for sid, c in self.live.items() if c == client]
        limit = self.config.seat_limit
        try:
            lease = self.engine.acquire("t", "lic", client)
        except NoSeatsAvailable as denied:
            assert not held and len(self.live) >= limit
            assert denied.seats_used == len(self.live)
            return
        assert lease.seats_used == len(self.live) + (0 if held else 1) <= limit
        if held:
            assert not lease.created and lease.session_id == held[0]
        else:
            assert lease.created and lease.session_id not in self.sessions
            self.live[lease.session_id] = client
            self.order.append(lease.session_id)
            self.events["lease.acquired"] += 1

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        sid = self._pick(data, self.sessions)
        try:
            self.engine.heartbeat("t", "lic", sid)
        except SessionExpired as gone:
            if sid in self.expired:
                assert gone.reason == "expired"
                del self.expired[sid]
                self.gone.add(sid)
                self.events["lease.reclaimed"] += 1
            else:
                assert sid in self.gone and gone.reason == "unknown"
            return
        assert sid in self.live

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        sid = self._pick(data, self.sessions)
        result = self.engine.release("t", "lic", sid)
        assert result.released == (sid in self.live)
        if sid in self.live:
            del self.live[sid]
            self.events["lease.released"] += 1
        elif sid in self.expired:
            del self.expired[sid]
            self.events["lease.reclaimed"] += 1
        self.gone.add(sid)
        assert result.seats_used == len(self.live)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def time_passes_for(self, data: st.DataObject) -> None:
        """This lease's holder crashed long ago: its deadline is in the past."""
        sid = self._pick(data, [s for s in self.order if s in self.live])
        past = self.engine.server_time_ms() - 1
        self.redis.zadd(self.keys.leases, {sid: past}, xx=True)
        self.redis.zadd(self.keys.deadlines, {f"t/lic|{sid}": past}, xx=True)
        self.expired[sid] = self.live.pop(sid)

    @precondition(lambda self: not self.waited and self.config.seat_limit > len(self.live))
    @rule(client=st.sampled_from(["short-a", "short-b"]))
    def a_real_short_lease_expires(self, client: str) -> None:
        """Once per run: a 1-second lease really expires by waiting."""
        self.waited = True
        self._reclaim_expired()
        lease = self.engine.acquire("t", "lic", client, lease_seconds=1)
        self.events["lease.acquired"] += 1
        self.order.append(lease.session_id)
        time.sleep(1.05)
        self.expired[lease.session_id] = client

    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        if not hasattr(self, "engine"):
            return
        live = {row["session_id"] for row in self.engine.live_leases("t", "lic")}
        assert live == set(self.live)
        assert len(live) <= self.config.seat_limit
        stream = self.keys.outbox
        types = [f["type"] for _i, f in self.redis.xrange(stream)]
        for kind, count in self.events.items():
            assert types.count(kind) == count, kind


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
