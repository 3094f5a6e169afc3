"""Hypothesis stateful test: the engine on a real redis-server against a plain Python model
of a license's term, grace, entitlements and version range. Time moves in the model: a
rule moves the license's term past the Redis clock's now (before its start, within it,
in its grace, ended; or renewed), which is what waiting would do to the scripts' checks
against Redis TIME, and writes it as an operator's change does (``cache_config``). Both
``on_expiry`` settings; acquires ask for entitlements and versions in and out of the
license's. Weights too: two clients' leases count as 2 and 3 seats. The seats in use
never pass the limit, and every answer is the model's."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from seatlease.errors import (
    InvalidRequest,
    LicenseExpired,
    LicenseNotStarted,
    NoSeatsAvailable,
    NotEntitled,
    SessionExpired,
    VersionNotEntitled,
)
from seatlease.licenses import LicenseConfig, version_key
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys

CLIENTS = st.sampled_from([f"c{i}" for i in range(6)])
NAMES = ("pro", "gpu", "cloud")
VERSIONS = st.sampled_from([None, "2026.4", "2026.10", "2025.12.1", "2026.4.0.1", "3"])
PHASES = ("before", "active", "grace", "ended")
HOUR = timedelta(hours=1)
WEIGHT_OF = {"c4": 2, "c5": 3}  # the seats a client's lease counts as (else 1)


class TermModel(RuleBasedStateMachine):
    url: str = ""

    @initialize(
        seats=st.integers(0, 3),
        keep=st.booleans(),
        entitled=st.sets(st.sampled_from(NAMES)),
        max_version=st.sampled_from([None, "2026.4", "2026"]),
    )
    def setup(self, seats: int, keep: bool, entitled: set[str], max_version: str | None):
        self.redis = redisconn.connect(self.url)
        self.redis.flushall()
        self.config = LicenseConfig(
            seats=seats,
            lease_seconds=300,
            on_expiry="keep_leases" if keep else "end_leases",
            entitlements=tuple(sorted(entitled)),
            max_version=max_version,
        )
        self.engine = SeatEngine(self.redis, lambda _t, _l: self.config)
        self.phase = "active"
        self.live: dict[str, str] = {}  # session -> client
        self._set_phase("active")

    @property
    def used(self) -> int:
        return sum(WEIGHT_OF.get(client, 1) for client in self.live.values())

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.close()

    def _set_phase(self, phase: str) -> None:
        """Move the term so that the Redis clock's now lies in ``phase``."""
        now = datetime.fromtimestamp(self.engine.server_time_ms() / 1000, UTC)
        term = {
            "before": (now + HOUR, now + 3 * HOUR),
            "active": (None, now + HOUR),
            "grace": (None, now - timedelta(minutes=1)),
            "ended": (None, now - 2 * HOUR),
        }[phase]
        self.config = replace(
            self.config, starts_at=term[0], expires_at=term[1], grace_seconds=3600
        )
        self.engine.cache_config("t", "lic", self.config)
        self.phase = phase
        # The term is kept by the deadlines, cut in the step that stored it: a license
        # that has not started holds nothing, one that ended under end_leases neither.
        if phase == "before" or (phase == "ended" and self.config.on_expiry == "end_leases"):
            self.live.clear()

    @rule(forward=st.integers(1, 3))
    def time_passes(self, forward: int) -> None:
        index = min(PHASES.index(self.phase) + forward, len(PHASES) - 1)
        self._set_phase(PHASES[index])

    @rule(phase=st.sampled_from(["before", "active"]))
    def operator_changes_the_term(self, phase: str) -> None:
        self._set_phase(phase)  # a renewal (or a later start)

    @rule(client=CLIENTS, wants=st.sets(st.sampled_from(NAMES)), version=VERSIONS)
    def acquire(self, client: str, wants: set[str], version: str | None) -> None:
        weight = WEIGHT_OF.get(client, 1)
        request = SeatRequest(
            "t", "lic", client, entitlements=tuple(sorted(wants)), version=version, seats=weight
        )
        held = next((s for s, c in self.live.items() if c == client), None)
        try:
            lease = self.engine.acquire(request)
        except InvalidRequest:  # more seats than the license has, whatever its term
            assert weight > max(1, self.config.seats)
            return
        except LicenseNotStarted:
            assert self.phase == "before"
            return
        except LicenseExpired:
            assert self.phase == "ended"
            return
        except NotEntitled as exc:
            assert self.phase in ("active", "grace")
            assert set(exc.missing) == wants - set(self.config.entitlements) != set()
            return
        except VersionNotEntitled:
            assert self.phase in ("active", "grace") and not wants - set(self.config.entitlements)
            assert version and self.config.max_version
            assert version_key(version) > version_key(self.config.max_version)
            return
        except NoSeatsAvailable:
            assert held is None and self.used + weight > self.config.seat_limit
            assert self.phase in ("active", "grace")
            return
        assert self.phase in ("active", "grace")
        assert not wants - set(self.config.entitlements)
        if version and self.config.max_version:
            assert version_key(version) <= version_key(self.config.max_version)
        assert weight <= max(1, self.config.seats) and lease.seats == weight
        assert lease.created == (held is None)
        if held:
            assert lease.session_id == held
        self.live[lease.session_id] = client
        assert lease.terms is not None and lease.terms.in_grace == (self.phase == "grace")
        if not self.config.on_expiry == "keep_leases":
            assert lease.expires_at_ms <= lease.terms.ends_at_ms

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        if not self.live:
            return
        sid = data.draw(st.sampled_from(sorted(self.live)))
        ends = self.phase == "ended" and self.config.on_expiry == "end_leases"
        try:
            renewal = self.engine.heartbeat("t", "lic", sid)
        except LicenseExpired:
            assert ends
            del self.live[sid]
            return
        except SessionExpired:
            raise AssertionError("a live lease was lost") from None
        assert not ends and renewal.terms is not None

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        if not self.live:
            return
        sid = data.draw(st.sampled_from(sorted(self.live)))
        assert self.engine.release("t", "lic", sid).released
        del self.live[sid]

    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        if not hasattr(self, "engine"):
            return
        rows = {r["session_id"]: r["seats"] for r in self.engine.live_leases("t", "lic")}
        assert set(rows) == set(self.live)
        assert sum(rows.values()) == self.used <= max(self.config.seat_limit, 0)
        keys = LicenseKeys.of("t", "lic")  # the weights' sum counts the leases stored
        stored = [json.loads(r).get("w", 1) for r in self.redis.hvals(keys.sessions)]
        assert int(self.redis.get(keys.wsum) or 0) == sum(w - 1 for w in stored)


def test_engine_matches_the_term_model(redis_server):
    TermModel.url = redis_server.url
    run = TermModel.TestCase
    run.settings = settings(
        max_examples=40,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run().runTest()
