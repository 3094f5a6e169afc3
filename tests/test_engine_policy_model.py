"""Hypothesis stateful test of the license policy and the wait queue: the engine on a real
redis-server against a plain Python model of the rules in docs/design.md ("License
policy and the wait queue"): per-user limits, seats reserved for two groups (a user in
both), deny lists, a queue served in order among those who may take a seat. Leases and tickets run
out by time travel (their deadlines moved into the past, as waiting would do). After
every step the live leases are checked against the cap, the per-user limit and the
reservations, and the queue's order against the model's."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from seatlease.errors import NoSeatsAvailable, UserDenied, UserLimitReached
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, LicenseConfig, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

CLIENTS = [f"c{i}" for i in range(7)]
USER_OF = {c: f"u{i % 5}" for i, c in enumerate(CLIENTS)}  # c5 is u0's second client
GROUPS = {"eng": ["u0", "u1"], "ops": ["u1", "u2"]}  # u1 in both; u3, u4 in none


@dataclass
class Ticket:
    client: str
    user: str


@dataclass
class Sim:
    """The seats one decision works on (the model's twin of seat_state)."""

    limit: int
    used: int
    per_user: dict[str, int]
    free: dict[str, int]  # per group: what is left of its reservation
    mpu: int
    member: dict[str, list[str]] = field(default_factory=dict)

    def may_take(self, user: str) -> tuple[bool, str | None]:
        if self.mpu and self.per_user.get(user, 0) >= self.mpu:
            return False, None
        if self.used >= self.limit:
            return False, None
        for group in self.member.get(user, []):
            if self.free.get(group, 0) > 0:
                return True, group
        if self.limit - self.used - sum(self.free.values()) > 0:
            return True, None
        return False, None

    def take(self, user: str, group: str | None) -> None:
        self.used += 1
        self.per_user[user] = self.per_user.get(user, 0) + 1
        if group:
            self.free[group] -= 1


class PolicyModel(RuleBasedStateMachine):
    url: str = ""

    @initialize(
        seats=st.integers(1, 4),
        mpu=st.sampled_from([0, 1, 2]),
        eng=st.integers(0, 2),
        ops=st.integers(0, 1),
        deny=st.sampled_from([[], ["u4"], ["u1"]]),
    )
    def setup(self, seats: int, mpu: int, eng: int, ops: int, deny: list[str]) -> None:
        eng = min(eng, seats)
        ops = min(ops, seats - eng)
        self.policy = LicensePolicy(
            max_per_user=mpu,
            groups=GROUPS,
            reserve={"eng": eng, "ops": ops},
            deny_users=deny,
            queue=True,
        )
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        config = LicenseConfig(seats=seats, lease_seconds=300, policy=self.policy.redis_form())
        self.engine = SeatEngine(self.redis, lambda _t, _l: config)
        self.keys = LicenseKeys.of("t", "lic")
        self.limit = seats
        self.reserve = {g: n for g, n in self.policy.reserve.items() if n > 0}
        self.member: dict[str, list[str]] = {}
        for group in sorted(self.reserve):
            for user in GROUPS[group]:
                self.member.setdefault(user, []).append(group)
        self.leases: dict[str, tuple[str, str, str | None]] = {}  # client -> sid, user, group
        self.queue: list[Ticket] = []
        self.tickets: dict[str, str] = {}

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    def _sim(self) -> Sim:
        per_user: dict[str, int] = {}
        used_by_group = dict.fromkeys(self.reserve, 0)
        for _sid, user, group in self.leases.values():
            per_user[user] = per_user.get(user, 0) + 1
            if group:
                used_by_group[group] += 1
        free = {g: max(0, n - used_by_group[g]) for g, n in self.reserve.items()}
        return Sim(self.limit, len(self.leases), per_user, free, self.policy.max_per_user,
                   self.member)  # fmt: skip

    def _expect(self, client: str, queue: bool) -> tuple[str, object]:
        """What the rules say an acquire by ``client`` gets: ('renewed'), ('limit'),
        ('granted', group), ('queued', position) or ('denied')."""
        user = USER_OF[client]
        if user in self.policy.deny_users:
            return "user_denied", None
        if client in self.leases:
            return "renewed", None
        sim = self._sim()
        if sim.mpu and sim.per_user.get(user, 0) >= sim.mpu:
            return "limit", None
        if sim.used < sim.limit:
            for ticket in self.queue:
                if sim.used >= sim.limit:
                    break
                ok, group = sim.may_take(ticket.user)
                if ok:
                    sim.take(ticket.user, group)
                    if ticket.client == client:
                        return "granted", group
        ok, group = sim.may_take(user)
        if ok:
            return "granted", group
        if queue:
            if all(t.client != client for t in self.queue):
                self.queue.append(Ticket(client, user))
            position = next(i for i, t in enumerate(self.queue) if t.client == client) + 1
            return "queued", position
        return "denied", None

    @rule(client=st.sampled_from(CLIENTS), queue=st.booleans())
    def acquire(self, client: str, queue: bool) -> None:
        expected, detail = self._expect(client, queue)
        user = USER_OF[client]
        try:
            got = self.engine.acquire(
                SeatRequest(
                    "t", "lic", client, user=user, queue=queue, ticket=self.tickets.get(client)
                )
            )
        except UserLimitReached:
            assert expected == "limit"
            return
        except UserDenied:
            assert expected == "user_denied"
            return
        except NoSeatsAvailable:
            assert expected == "denied", (expected, detail)
            return
        if isinstance(got, QueuePlace):
            assert (expected, detail) == ("queued", got.position)
            self.tickets[client] = got.ticket
            return
        assert isinstance(got, Lease)
        if expected == "renewed":
            assert not got.created and got.session_id == self.leases[client][0]
            return
        assert expected == "granted" and got.created, (expected, detail)
        self.leases[client] = (got.session_id, user, detail)  # type: ignore[assignment]
        self.queue = [t for t in self.queue if t.client != client]
        self.tickets.pop(client, None)

    @rule(client=st.sampled_from(CLIENTS))
    def release(self, client: str) -> None:
        if client in self.leases:
            sid = self.leases.pop(client)[0]
            assert self.engine.release("t", "lic", sid).released

    @rule(client=st.sampled_from(CLIENTS))
    def lease_runs_out(self, client: str) -> None:
        """Time travel: the lease's deadline passes (the next acquire reclaims it)."""
        if client in self.leases:
            sid = self.leases.pop(client)[0]
            self.redis.zadd(self.keys.leases, {sid: 1})

    @rule(client=st.sampled_from(CLIENTS))
    def ticket_runs_out(self, client: str) -> None:
        """Time travel: the ticket was not renewed in time (the next acquire drops it)."""
        if any(t.client == client for t in self.queue):
            self.queue = [t for t in self.queue if t.client != client]
            self.tickets.pop(client, None)
            self.redis.zadd(self.keys.ticket_deadlines, {client: 1})

    @invariant()
    def live_leases_keep_the_rules(self) -> None:
        if not hasattr(self, "engine"):
            return
        live = self.engine.live_leases("t", "lic")
        assert {lease["session_id"] for lease in live} == {v[0] for v in self.leases.values()}
        assert len(live) <= self.limit
        per_user: dict[str, int] = {}
        for lease in live:
            user = lease["metadata"]["user"]
            per_user[user] = per_user.get(user, 0) + 1
        if self.policy.max_per_user:
            assert max(per_user.values(), default=0) <= self.policy.max_per_user
        outsiders = sum(n for u, n in per_user.items() if u not in self.member)
        assert outsiders <= self.limit - sum(self.reserve.values())

    @invariant()
    def queue_order_is_the_models(self) -> None:
        if not hasattr(self, "engine"):
            return
        waiting = [t["client_id"] for t in self.engine.waiting("t", "lic")]
        assert waiting == [t.client for t in self.queue]


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_policy_model(request: pytest.FixtureRequest, kind: str) -> None:
    server = request.getfixturevalue("redis_server" if kind == "single" else "redis_cluster")
    PolicyModel.url = server.url
    run = PolicyModel.TestCase
    run.settings = settings(
        max_examples=60 if kind == "single" else 25,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run().runTest()
