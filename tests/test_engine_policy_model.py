"""Hypothesis stateful test of the license policy and the wait queue: the engine on a real
redis-server against a plain Python model of the rules in docs/design.md ("License
policy and the wait queue"): per-user limits, seats reserved for two groups (a user in
both), deny lists, a queue served in order among those who may take a seat. Leases and tickets run
out by time travel (their deadlines moved into the past, as waiting would do), so lapsed
tickets sit ahead of live ones until a walk drops them; the license is refreshed, and its
queue switched off with clients waiting (each leaves with queue.left) and on again. After
every step the live leases are checked against the cap, the per-user limit and the
reservations, the queue's order against the model's, and the policy's counts against the
live leases (the users hash holds only users and groups with live leases).

Weighted seats too: clients c3 and c6 ask for leases of 2 and 3 seats. Every count is of
seats: the cap, the per-user limit, a group's reservation (a member's weighted lease is
charged what the group has free, the rest unreserved), and a waiting client needing more
seats than are free gathers them, nobody behind it taking them (docs/design.md,
"Weighted seats")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from seatlease.errors import InvalidRequest, NoSeatsAvailable, UserDenied, UserLimitReached
from seatlease.events import pubsub
from seatlease.licenses import LicenseConfig
from seatlease.seats import keys as keyspace
from seatlease.seats import redisconn
from seatlease.seats.engine import Lease, QueuePlace, SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

CLIENTS = [f"c{i}" for i in range(7)]
USER_OF = {c: f"u{i % 5}" for i, c in enumerate(CLIENTS)}  # c5 is u0's second client
WEIGHT_OF = {c: {"c3": 2, "c6": 3}.get(c, 1) for c in CLIENTS}  # the seats each asks for
GROUPS = {"eng": ["u0", "u1"], "ops": ["u1", "u2"]}  # u1 in both; u3, u4 in none


@dataclass
class Ticket:
    client: str
    user: str

    @property
    def weight(self) -> int:
        return WEIGHT_OF[self.client]


@dataclass
class Sim:
    """The seats one decision works on (the model's twin of seat_state)."""

    limit: int
    used: int
    per_user: dict[str, int]
    free: dict[str, int]  # per group: what is left of its reservation
    mpu: int
    member: dict[str, list[str]] = field(default_factory=dict)

    def unreserved_free(self) -> int:
        return self.limit - self.used - sum(self.free.values())

    def may_take(self, user: str, w: int) -> tuple[bool, str | None, int, str]:
        """(may it, the group charged, the seats charged to it, why not)."""
        if self.mpu and self.per_user.get(user, 0) + w > self.mpu:
            return False, None, 0, "user_limit"
        if self.used + w > self.limit:
            return False, None, 0, "seats"
        for group in self.member.get(user, []):
            free = self.free.get(group, 0)
            if free > 0 and w - min(w, free) <= self.unreserved_free():
                return True, group, min(w, free), ""
        if self.unreserved_free() >= w:
            return True, None, 0, ""
        return False, None, 0, "seats"

    def take(self, user: str, w: int, group: str | None, charged: int) -> None:
        self.used += w
        self.per_user[user] = self.per_user.get(user, 0) + w
        if group:
            self.free[group] -= charged


class PolicyModel(RuleBasedStateMachine):
    url: str = ""

    @initialize(
        seats=st.integers(1, 6),
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
        self.config = LicenseConfig(seats=seats, lease_seconds=300, policy=self.policy.redis_form())
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.keys = LicenseKeys.of("t", "lic")
        self.limit = seats
        self.reserve = {g: n for g, n in self.policy.reserve.items() if n > 0}
        self.member: dict[str, list[str]] = {}
        for group in sorted(self.reserve):
            for user in GROUPS[group]:
                self.member.setdefault(user, []).append(group)
        # client -> sid, user, group, seats, seats charged to the group
        self.leases: dict[str, tuple[str, str, str | None, int, int]] = {}
        # leases whose deadline passed, still counted until an acquire reclaims them
        self.stale: list[tuple[str, str, str | None, int, int]] = []
        self.queue: list[Ticket] = []
        self.tickets: dict[str, str] = {}

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    def _sim(self) -> Sim:
        per_user: dict[str, int] = {}
        used_by_group = dict.fromkeys(self.reserve, 0)
        for _sid, user, group, w, charged in self.leases.values():
            per_user[user] = per_user.get(user, 0) + w
            if group:
                used_by_group[group] += charged
        free = {g: max(0, n - used_by_group[g]) for g, n in self.reserve.items()}
        used = sum(lease[3] for lease in self.leases.values())
        return Sim(self.limit, used, per_user, free, self.policy.max_per_user,
                   self.member)  # fmt: skip

    def _expect(self, client: str, queue: bool) -> tuple[str, object]:
        """What the rules say an acquire by ``client`` gets: ('renewed'), ('limit'),
        ('granted', (group, charged)), ('queued', position) or ('denied')."""
        user, w = USER_OF[client], WEIGHT_OF[client]
        if w > max(1, self.limit):
            return "too_many_seats", None
        if user in self.policy.deny_users:
            return "user_denied", None
        if client in self.leases:
            return "renewed", None
        sim = self._sim()
        if sim.mpu and sim.per_user.get(user, 0) + w > sim.mpu:
            return "limit", None
        if sim.used < sim.limit:
            for ticket in self.queue:
                if sim.used >= sim.limit:
                    break
                ok, group, charged, why = sim.may_take(ticket.user, ticket.weight)
                if ok:
                    sim.take(ticket.user, ticket.weight, group, charged)
                    if ticket.client == client:
                        return "granted", (group, charged)
                elif why == "seats" and ticket.weight > 1:
                    # a head needing more seats than are free gathers them
                    sim.used += max(0, sim.unreserved_free())
                    if ticket.client == client:
                        break
        ok, group, charged, _why = sim.may_take(user, w)
        if ok:
            return "granted", (group, charged)
        reachable = self.limit - sum(self.reserve.values())
        reachable += sum(self.reserve[g] for g in self.member.get(user, []))
        if w > 1 and w > reachable:  # more than it could ever be given: no place in line
            return "denied", None
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
        if expected not in ("user_denied", "too_many_seats"):  # (refused before any reclaim)
            self.stale = []
        weight = WEIGHT_OF[client]
        try:
            got = self.engine.acquire(
                SeatRequest(
                    "t",
                    "lic",
                    client,
                    user=user,
                    queue=queue,
                    ticket=self.tickets.get(client),
                    seats=weight,
                )
            )
        except UserLimitReached:
            assert expected == "limit"
            return
        except UserDenied:
            assert expected == "user_denied"
            return
        except InvalidRequest:
            assert expected == "too_many_seats"
            return
        except NoSeatsAvailable:
            assert expected == "denied", (expected, detail)
            return
        if isinstance(got, QueuePlace):
            assert (expected, detail) == ("queued", got.position)
            assert got.seats == weight
            self.tickets[client] = got.ticket
            return
        assert isinstance(got, Lease)
        if expected == "renewed":
            assert not got.created and got.session_id == self.leases[client][0]
            return
        assert expected == "granted" and got.created, (expected, detail)
        assert got.seats == weight
        group, charged = detail  # type: ignore[misc]
        self.leases[client] = (got.session_id, user, group, weight, charged)
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
            lease = self.leases.pop(client)
            self.stale.append(lease)
            self.redis.zadd(self.keys.leases, {lease[0]: 1})

    @rule(client=st.sampled_from(CLIENTS))
    def ticket_runs_out(self, client: str) -> None:
        """Time travel: the ticket was not renewed in time (the next acquire drops it)."""
        if any(t.client == client for t in self.queue):
            self.queue = [t for t in self.queue if t.client != client]
            self.tickets.pop(client, None)
            self.redis.zadd(self.keys.ticket_deadlines, {client: 1})

    @rule()
    def refresh(self) -> None:
        """The license's cached configuration is written again (an admin change)."""
        self.engine.cache_config("t", "lic", self.config)

    @rule()
    def queue_switched_off_and_on(self) -> None:
        """Every waiting client's wait ends with queue.left (reason queue_off), lapsed
        tickets not yet dropped included; the queue starts empty when it is back."""
        stream = keyspace.outbox_key(self.keys.shard)
        before = len(pubsub.outbox_events(self.redis, stream))
        off = self.policy.model_copy(update={"queue": False})
        self.engine.cache_config("t", "lic", replace(self.config, policy=off.redis_form()))
        self.engine.cache_config("t", "lic", self.config)
        left = [e for e in pubsub.outbox_events(self.redis, stream)[before:]
                if e["type"] == "queue.left"]  # fmt: skip
        assert {e["metadata"]["reason"] for e in left} <= {"queue_off"}
        assert {t.client for t in self.queue} <= {e["client_id"] for e in left}
        self.queue = []
        self.tickets = {}

    @invariant()
    def live_leases_keep_the_rules(self) -> None:
        if not hasattr(self, "engine"):
            return
        live = self.engine.live_leases("t", "lic")
        assert {lease["session_id"] for lease in live} == {v[0] for v in self.leases.values()}
        assert sum(lease["seats"] for lease in live) <= self.limit
        per_user: dict[str, int] = {}
        for lease in live:
            user = lease["metadata"]["user"]
            per_user[user] = per_user.get(user, 0) + lease["seats"]
        if self.policy.max_per_user:
            assert max(per_user.values(), default=0) <= self.policy.max_per_user
        outsiders = sum(n for u, n in per_user.items() if u not in self.member)
        assert outsiders <= self.limit - sum(self.reserve.values())

    @invariant()
    def policy_counts_are_the_live_leases(self) -> None:
        if not hasattr(self, "engine"):
            return
        expected: dict[str, str] = {}
        for _sid, user, group, w, charged in [*self.leases.values(), *self.stale]:
            if self.policy.max_per_user:
                expected[f"#u:{user}"] = str(int(expected.get(f"#u:{user}", "0")) + w)
            if group:
                expected[f"#g:{group}"] = str(int(expected.get(f"#g:{group}", "0")) + charged)
        fields = self.redis.hgetall(self.keys.users)
        fields.pop("qseq", None)
        assert fields == expected

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
