"""What the service closed stays closed (issue 47; docs/design.md, "A region lost"): a
lease token re-admits only a lease the service *lost*, never one it *ended*, and a
re-admission passes every rule a new grant passes, in the same call.

Each story runs over HTTP against the functions as the local stack serves them (one
database, one set of signing keys), on a private redis-server whose clock the test moves,
as an operator, a hostile client and a new user met them before: a revoke undone by the
client's next heartbeat, a shortened lease coming back after its reclaim, a suspended
license and the deny list passed by a token, a refusal that left a lease, borrows the
term had cut coming back over the cap, a malformed token header answered with a 500.

A lease is *lost* here in the two ways the service can lose one: the data of Redis gone
(``lose_the_data``: the outbox published to the audit trail first, then FLUSHALL, as a
restart without persistence does: the service finds the shard's mark gone and opens a
recovery window itself), or a failover's replica that missed the grant
(tests/test_failover.py)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from client_harness import TENANT, client_stack, serve_on
from procs import ShiftedClock, start_shifted_redis

from seatlease import admin
from seatlease.api import auth, runtime, tenantlicenses, tenantlimits
from seatlease.events.pubsub import outbox_events
from seatlease.events.reaper import Reaper
from seatlease.records import event_log, store
from seatlease.seats import failover, redisconn
from seatlease.seats import keys as keyspace


@dataclass
class Served:
    stack: Any
    redis: Any
    clock: ShiftedClock

    def call(self, fn: str, license_id: str, **body: Any) -> requests.Response:
        return requests.post(
            f"{self.stack.url}/{fn}",
            json={"license_id": license_id, **body},
            headers={"Authorization": f"Bearer {self.stack.api_key}"},
            timeout=10,
        )

    def license(self, license_id: str, **settings: Any) -> str:
        settings.setdefault("seats", 2)
        settings.setdefault("lease_seconds", 600)
        settings.setdefault("max_lease_seconds", 3600)
        store.create_license(TENANT, license_id, **settings)
        runtime.refresh_license_cache(TENANT, license_id)
        return license_id

    def update(self, license_id: str, cleared: tuple[str, ...] = (), **changes: Any) -> None:
        store.update_license(TENANT, license_id, cleared=cleared, **changes)
        runtime.refresh_license_cache(TENANT, license_id)

    def holders(self, license_id: str) -> list[str]:
        return [x["session_id"] for x in runtime.seat_engine().live_leases(TENANT, license_id)]

    def revoke(self, license_id: str, session_id: str) -> None:
        admin.execute(
            admin.parse(
                {"action": "revoke", "tenant_id": TENANT, "license_id": license_id,
                 "session_id": session_id}
            )
        )  # fmt: skip

    def reap(self, license_id: str) -> int:
        """The reaper's reclaim of what has expired in the license's shard."""
        shard = keyspace.shard_of(TENANT, license_id)
        engine = runtime.seat_engine()
        expired = engine.redis.zrangebyscore(
            keyspace.deadlines_key(shard), "-inf", engine.server_time_ms()
        )
        return Reaper(engine.redis, publisher=None).reclaim(shard, expired) if expired else 0

    def publish(self) -> None:
        """The outboxes delivered to the audit trail (what the reaper, Pub/Sub and the audit
        function do), all of it."""
        client = runtime.seat_engine().redis
        for shard in range(keyspace.SHARDS):
            events = outbox_events(client, keyspace.outbox_key(shard))
            if events:
                event_log.insert_events(events)

    def lose_the_data(self) -> None:
        """Redis loses everything (a restart without persistence), once the events so far
        have reached the audit trail."""
        self.publish()
        runtime.seat_engine().redis.flushall()
        runtime.forget_failover()

    def failover_begin(self) -> None:
        admin.execute(admin.parse({"action": "failover.begin"}))
        runtime.forget_failover()  # (the functions' instances see it within 2 s: now)

    def failover_status(self) -> dict[str, Any]:
        return admin.execute(admin.parse({"action": "failover.status"}))[1]


@pytest.fixture
def served(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    handle, clock = start_shifted_redis()
    monkeypatch.setenv("REDIS_URL", handle.url)
    serve_on(handle.url)
    try:
        with client_stack() as stack:
            yield Served(stack, handle, clock)
    finally:
        handle.stop()
        redisconn.reset()
        runtime.forget_failover()


def reason_of(answer: requests.Response) -> str:
    assert answer.status_code == 410, answer.text
    return answer.json()["error"]["reason"]


# -- a revoke is final -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["held", "lingering", "converted", "data_lost"])
def test_a_revoked_lease_never_comes_back_by_its_token(served: Served, how: str) -> None:
    """`seatlease revoke` of a lease whose token says 600 s: its client's next heartbeat
    with the token is `410 revoked`, in a recovery window too, and after Redis lost its
    data (the audit trail remembers the revoke); its acquire with the token is a new
    lease, never the revoked one."""
    lic = served.license("cad", linger_seconds=60 if how == "lingering" else 0,
                         max_borrow_seconds=3600)  # fmt: skip
    granted = served.call("acquire", lic, client_id="a").json()
    sid, token = granted["session_id"], granted["lease_token"]
    if how == "lingering":  # released by its client, lingering: then revoked
        assert served.call("release", lic, session_id=sid).json()["released"] is True
    if how == "converted":  # converted to a shorter borrow, returned: then "revoked" below
        borrow = served.call("acquire", lic, client_id="a", borrow_seconds=60).json()
        assert borrow["session_id"] == sid and borrow["borrowed"] is True
    served.revoke(lic, sid)
    assert served.holders(lic) == []
    if how == "data_lost":
        served.lose_the_data()
    # (after a loss of the data the plain heartbeat knows nothing: its token's retry asks
    # the audit trail, which remembers the revoke)
    plain = "unknown" if how == "data_lost" else "revoked"
    assert reason_of(served.call("heartbeat", lic, session_id=sid)) == plain
    back = served.call("heartbeat", lic, session_id=sid, lease_token=token)
    assert reason_of(back) == "revoked"
    served.failover_begin()  # a recovery window: still not back
    back = served.call("heartbeat", lic, session_id=sid, lease_token=token)
    assert reason_of(back) == "revoked"
    assert served.holders(lic) == []
    again = served.call("acquire", lic, client_id="a", lease_token=token)
    assert again.status_code in (201, 503), again.text  # a new lease, or the window's wait
    if again.status_code == 201:
        assert again.json()["session_id"] != sid
    assert sid not in served.holders(lic)


def test_a_revoke_is_remembered_as_long_as_its_tokens_last(served: Served) -> None:
    """Past the last token's exp the note goes (bounded in time and bytes): the heartbeat
    then says `unknown`, and the token, expired, brings nothing back."""
    lic = served.license("cad", lease_seconds=60)
    granted = served.call("acquire", lic, client_id="a").json()
    served.revoke(lic, granted["session_id"])
    ended = keyspace.LicenseKeys.of(TENANT, lic).ended
    client = runtime.seat_engine().redis
    assert client.zcard(ended) == 1 and 0 < client.pttl(ended) <= 60_000 + 3600_000
    served.clock.advance(61)
    answer = served.call("heartbeat", lic, session_id=granted["session_id"],
                         lease_token=granted["lease_token"])  # fmt: skip
    assert reason_of(answer) == "unknown" and served.holders(lic) == []
    served.clock.advance(3600)
    assert client.exists(ended) == 0  # expired by itself: no reaper ran


# -- a token never outlives what the service ended --------------------------------------


@pytest.mark.parametrize("how", ["shortened", "converted_and_returned", "converted_and_lapsed"])
def test_a_lease_the_service_shortened_does_not_come_back_by_an_older_token(
    served: Served, how: str
) -> None:
    """A token says 600 s; a later acquire moved the deadline down (a shorter lease, or a
    conversion to a 60 s borrow), and the lease ended: reclaimed at its new deadline, or
    the borrow returned. The older token brings nothing back, window or not."""
    lic = served.license("cad", max_borrow_seconds=3600)
    first = served.call("acquire", lic, client_id="a").json()  # its token: 600 s
    if how == "shortened":
        short = served.call("acquire", lic, client_id="a", lease_seconds=8).json()
        assert short["session_id"] == first["session_id"] and short["lease_seconds"] == 8
    else:
        lent = served.call("acquire", lic, client_id="a", borrow_seconds=60).json()
        assert lent["session_id"] == first["session_id"] and lent["borrowed"] is True
    if how == "converted_and_returned":
        assert served.call("release", lic, session_id=first["session_id"]).json()["released"]
    served.clock.advance(61)  # past the borrow's (and the short lease's) end
    assert served.reap(lic) == (0 if how == "converted_and_returned" else 1)
    assert served.holders(lic) == []
    for window in (False, True):
        if window:
            served.failover_begin()
        answer = served.call("heartbeat", lic, session_id=first["session_id"],
                             lease_token=first["lease_token"])  # fmt: skip
        assert reason_of(answer) == "unknown"
        assert served.holders(lic) == []


def test_borrows_the_term_cut_do_not_come_back_over_the_cap_after_the_renewal(
    served: Served,
) -> None:
    from datetime import UTC, datetime, timedelta

    lic = served.license("cad", max_borrow_seconds=3600)
    borrows = [served.call("acquire", lic, client_id=f"b{i}", borrow_seconds=1800).json()
               for i in (1, 2)]  # fmt: skip
    assert all(b["borrowed"] for b in borrows)
    now = datetime.fromtimestamp(runtime.seat_engine().server_time_ms() / 1000, UTC)
    served.update(lic, expires_at=now + timedelta(seconds=5), grace_seconds=0)  # cut to it
    served.clock.advance(6)
    assert served.reap(lic) == 2
    served.update(lic, cleared=("expires_at",))  # renewed
    for c in ("c1", "c2"):
        assert served.call("acquire", lic, client_id=c).status_code == 201
    for window in (False, True):
        if window:
            served.failover_begin()
        for b in borrows:
            answer = served.call("heartbeat", lic, session_id=b["session_id"],
                                 lease_token=b["lease_token"])  # fmt: skip
            assert reason_of(answer) == "unknown"
        assert len(served.holders(lic)) == 2  # never 4 leases on 2 seats


# -- a re-admission passes every rule a new grant passes ---------------------------------


def test_a_lost_lease_comes_back_in_the_window_the_service_opened_itself(served: Served) -> None:
    """The control case: Redis lost its data; the service finds the shard's mark gone,
    opens a recovery window (shown by `failover status`), a new client waits, and the
    holder's token brings its lease back: same session, one seat."""
    lic = served.license("cad", seats=1)
    held = served.call("acquire", lic, client_id="a").json()
    served.lose_the_data()
    wait = served.call("acquire", lic, client_id="b")
    assert wait.status_code == 503 and wait.json()["error"]["code"] == "recovering"
    assert 1 <= int(wait.headers["Retry-After"]) <= 600 // 3 + 5
    status = served.failover_status()
    assert status["recovering"] is True and status["opened_by"] == "data_lost"
    assert [s["shard"] for s in status["lost_shards"]] == [keyspace.shard_of(TENANT, lic)]
    assert reason_of(served.call("heartbeat", lic, session_id=held["session_id"])) == "unknown"
    back = served.call("heartbeat", lic, session_id=held["session_id"],
                       lease_token=held["lease_token"])  # fmt: skip
    assert back.status_code == 200, back.text
    assert served.holders(lic) == [held["session_id"]]
    assert served.failover_status()["recovered_leases"] == 1


def test_a_suspended_license_gains_no_seat_by_a_token(served: Served) -> None:
    lic = served.license("cad")
    held = served.call("acquire", lic, client_id="a").json()
    served.lose_the_data()
    served.update(lic, suspended=True)
    for _ in range(2):
        answer = served.call("heartbeat", lic, session_id=held["session_id"],
                             lease_token=held["lease_token"])  # fmt: skip
        assert reason_of(answer) == "unknown"
        acquired = served.call("acquire", lic, client_id="a", lease_token=held["lease_token"])
        assert acquired.status_code == 403, acquired.text
        assert served.holders(lic) == []
    served.update(lic, suspended=False)  # resumed within the window: it was lost, it comes back
    back = served.call("heartbeat", lic, session_id=held["session_id"],
                       lease_token=held["lease_token"])  # fmt: skip
    assert back.status_code == 200 and served.holders(lic) == [held["session_id"]]


def test_a_denied_user_gains_no_seat_by_a_token_and_a_refused_acquire_leaves_no_lease(
    served: Served,
) -> None:
    lic = served.license("cad", policy={"deny_users": ["mallory"]})
    held = served.call("acquire", lic, client_id="a", user="Ann").json()
    claims = json.loads(base64.urlsafe_b64decode(held["lease_token"].split(".")[1] + "=="))
    assert claims["usr"] == "ann"  # the user the policy judges, in the token
    served.lose_the_data()
    served.update(lic, policy={"deny_users": ["ann"]})
    answer = served.call("heartbeat", lic, session_id=held["session_id"],
                         lease_token=held["lease_token"])  # fmt: skip
    assert reason_of(answer) == "unknown"
    refused = served.call("acquire", lic, client_id="a", user="ann",
                          lease_token=held["lease_token"])  # fmt: skip
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "user_denied"
    assert served.holders(lic) == []  # (it once left a live 10-minute lease)


def test_an_acquire_over_the_rate_limit_leaves_no_lease(served: Served) -> None:
    """The rate limit first: an acquire carrying a token, refused `429`, re-admitted
    nothing (it once did, before the refusal, and cost two scripts)."""
    lic = served.license("cad")
    held = served.call("acquire", lic, client_id="a").json()
    served.lose_the_data()
    store.update_tenant(TENANT, rate_limit_per_second=1)
    tenantlimits.forget_all()
    served.call("release", lic, session_id="no-such-session")  # the second's budget
    refused = [served.call("acquire", lic, client_id="a", lease_token=held["lease_token"])
               for _ in range(3)]  # fmt: skip
    assert [a.status_code for a in refused] == [429] * 3, [a.text for a in refused]
    assert served.holders(lic) == []


def test_grant_mode_runs_over_the_cap_for_a_returning_holder(served: Served) -> None:
    lic = served.license("cad", seats=1, on_failover="grant")
    held = served.call("acquire", lic, client_id="a").json()
    served.lose_the_data()
    other = served.call("acquire", lic, client_id="b")
    assert other.status_code == 201 and other.json()["recovering"] is True
    back = served.call("heartbeat", lic, session_id=held["session_id"],
                       lease_token=held["lease_token"])  # fmt: skip
    assert back.status_code == 200, back.text
    assert len(served.holders(lic)) == 2  # the documented exception: over by the returning


def test_outside_a_window_a_lost_lease_stays_lost_but_a_lost_borrow_comes_back(
    served: Served,
) -> None:
    lic = served.license("cad", max_borrow_seconds=86400)
    lease = served.call("acquire", lic, client_id="a", lease_seconds=3600).json()
    lent = served.call("acquire", lic, client_id="b", borrow_seconds=86400).json()
    served.lose_the_data()
    served.call("acquire", lic, client_id="probe")  # finds the loss: the window opens now
    served.clock.advance(600 // 3 + 6)  # over (the license's leases: 600 s, the default)
    answer = served.call("heartbeat", lic, session_id=lease["session_id"],
                         lease_token=lease["lease_token"])  # fmt: skip
    assert reason_of(answer) == "unknown"
    back = served.call("heartbeat", lic, session_id=lent["session_id"],
                       lease_token=lent["lease_token"])  # fmt: skip
    assert back.status_code == 200 and back.json()["borrowed"] is True
    assert lent["session_id"] in served.holders(lic)
    assert lease["session_id"] not in served.holders(lic)


def test_a_lease_released_before_the_loss_is_known_by_the_audit_trail(served: Served) -> None:
    lic = served.license("cad")
    held = served.call("acquire", lic, client_id="a").json()
    assert served.call("release", lic, session_id=held["session_id"]).status_code == 200
    served.lose_the_data()
    answer = served.call("heartbeat", lic, session_id=held["session_id"],
                         lease_token=held["lease_token"])  # fmt: skip
    assert reason_of(answer) == "unknown" and served.holders(lic) == []


# -- malformed tokens are no tokens -----------------------------------------------------


def _with_header(token: str, header: dict[str, Any]) -> str:
    text = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return ".".join([text, *token.split(".")[1:]])


@pytest.mark.parametrize("kid", [{"a": 1}, [1, 2], 7, None, True])
def test_a_token_with_a_malformed_kid_is_no_token(served: Served, kid: Any) -> None:
    lic = served.license("cad")
    held = served.call("acquire", lic, client_id="a").json()
    forged = _with_header(held["lease_token"],
                          {"alg": "EdDSA", "typ": "seatlease-lease+jwt", "kid": kid})  # fmt: skip
    served.lose_the_data()
    answer = served.call("heartbeat", lic, session_id=held["session_id"], lease_token=forged)
    assert reason_of(answer) == "unknown"
    acquired = served.call("acquire", lic, client_id="a", lease_token=forged)
    assert acquired.status_code in (201, 503), acquired.text  # never a 500
    assert held["session_id"] not in served.holders(lic)


# -- the local stack, restarted ------------------------------------------------------------


def test_a_revoke_stays_final_across_a_restart_of_the_local_stack(
    tmp_path, monkeypatch, restore_environment
) -> None:
    """`seatlease local` keeps its Redis in .seatlease/redis: stopped and started again, a
    revoked lease's token still brings nothing back (`410 revoked`), and a lease held
    across the restart is still held."""
    from procs import free_port

    from seatlease.records import db
    from seatlease_cli.localstack import LocalStack

    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)

    def start() -> tuple[LocalStack, dict[str, Any]]:
        redisconn.reset()
        db.reset()
        runtime.forget_failover()
        auth.forget_all()
        tenantlicenses.forget_all()
        tenantlimits.forget_all()
        stack = LocalStack(port=free_port(), reaper_interval=0.5, pubsub=False, say=lambda _: None)
        return stack, stack.start()

    def post(state: dict[str, Any], fn: str, body: dict[str, Any]) -> requests.Response:
        return requests.post(f"{state['base_url']}/{fn}", json=body, timeout=10,
                             headers={"Authorization": f"Bearer {state['api_key']}"})  # fmt: skip

    stack, state = start()
    lic = state["license_id"]
    try:
        revoked = post(state, "acquire", {"license_id": lic, "client_id": "laptop-1"}).json()
        kept = post(state, "acquire", {"license_id": lic, "client_id": "laptop-2"}).json()
        revoke = {"action": "revoke", "tenant_id": state["tenant_id"], "license_id": lic,
                  "session_id": revoked["session_id"]}  # fmt: skip
        admin.execute(admin.parse(revoke))
        os.environ.pop("REDIS_URL", None)  # (the stack set it for its own processes)
    finally:
        stack.stop()
    assert (tmp_path / ".seatlease" / "redis").is_dir()
    stack, state = start()
    try:
        for body in ({}, {"lease_token": revoked["lease_token"]}):
            body = {"license_id": lic, "session_id": revoked["session_id"], **body}
            answer = post(state, "heartbeat", body)
            assert reason_of(answer) == "revoked"
        still = post(state, "heartbeat", {"license_id": lic, "session_id": kept["session_id"]})
        assert still.status_code == 200, still.text
        holders = [x["session_id"] for x in
                   runtime.seat_engine().live_leases(state["tenant_id"], lic)]  # fmt: skip
        assert holders == [kept["session_id"]]
    finally:
        stack.stop()
        redisconn.reset()
        db.reset()


# -- the engine alone ---------------------------------------------------------------------


def test_a_re_admission_prunes_before_it_counts(timeline, configs) -> None:
    """More than the prune step's 100 expired, unreclaimed weighted leases (the reaper
    down) on a license whose seats were lowered meanwhile: a holder the Redis lost comes
    back in the operator's window, counted against the leases live, not the expired ones
    (readmit.lua counted without pruning, and refused it as full)."""
    from seatlease.seats.engine import SeatRequest
    from seatlease.seats.values import TokenGrant

    engine = timeline.engine
    config = configs.add("t", "lic", seats=400, lease_seconds=600, max_lease_seconds=3600)
    for n in range(150):
        engine.acquire(SeatRequest("t", "lic", f"crowd{n}", lease_seconds=5, seats=2))
    timeline.advance(6)  # all expired; no reaper ran
    configs.add("t", "lic", seats=2, lease_seconds=600, max_lease_seconds=3600)
    engine.cache_config("t", "lic", configs("t", "lic"))
    assert config.seats == 400
    now = timeline.now_ms()
    lost = TokenGrant("A" * 24, "holder", now // 1000 * 1000 + 300_000, seats=2,
                      issued_at_ms=now // 1000 * 1000 - 300_000)  # fmt: skip
    failover.begin(engine.redis)
    lease = engine.readmit(
        SeatRequest("t", "lic", "holder", lease_seconds=600, seats=2, recover=lost,
                    failover_began_ms=failover.began_ms(engine.redis))
    )  # fmt: skip
    assert lease.recovered and lease.session_id == "A" * 24 and lease.seats_used == 2


# -- what a hostile review found (each failed before its fix) ----------------------------------


@pytest.mark.parametrize("then", ["released", "reclaimed"])
def test_a_lease_re_admitted_shorter_than_its_token_stays_ended(served: Served, then: str) -> None:
    """Re-admitted by an acquire asking a 10 s lease (its token says 600 s), then ended: the
    note lasts as long as the token, not the 10 s."""
    lic = served.license("cad", seats=1)
    held = served.call("acquire", lic, client_id="a").json()
    sid, token = held["session_id"], held["lease_token"]
    served.lose_the_data()
    back = served.call("acquire", lic, client_id="a", lease_token=token, lease_seconds=10)
    assert back.status_code == 200 and back.json()["session_id"] == sid, back.text
    if then == "released":
        assert served.call("release", lic, session_id=sid).json()["released"] is True
    served.clock.advance(11)  # still in the window (205 s)
    if then == "reclaimed":
        assert served.reap(lic) == 1
    again = served.call("heartbeat", lic, session_id=sid, lease_token=token)
    assert reason_of(again) == "unknown" and served.holders(lic) == []


def test_a_re_admitted_borrow_cut_by_the_term_does_not_come_back_after_the_renewal(
    served: Served,
) -> None:
    from datetime import UTC, datetime, timedelta

    lic = served.license("cad", seats=1, max_borrow_seconds=3600)
    lent = served.call("acquire", lic, client_id="b1", borrow_seconds=1800).json()
    served.lose_the_data()
    served.call("acquire", lic, client_id="probe")  # the service finds the loss
    now = datetime.fromtimestamp(runtime.seat_engine().server_time_ms() / 1000, UTC)
    served.update(lic, expires_at=now + timedelta(seconds=5), grace_seconds=0)
    back = served.call("heartbeat", lic, session_id=lent["session_id"],
                       lease_token=lent["lease_token"])  # fmt: skip
    assert back.status_code == 200, back.text  # lost: back, cut to the term's end
    served.clock.advance(6)
    assert served.reap(lic) == 1  # ended by the term's cut
    served.update(lic, cleared=("expires_at",))  # renewed
    served.clock.advance(300)  # past the window
    assert served.call("acquire", lic, client_id="c1").status_code == 201  # the one seat
    again = served.call("heartbeat", lic, session_id=lent["session_id"],
                        lease_token=lent["lease_token"])  # fmt: skip
    assert reason_of(again) == "unknown" and len(served.holders(lic)) == 1


def test_one_short_grant_after_a_loss_does_not_shorten_the_window(served: Served) -> None:
    lic = served.license("cad", seats=2)  # 600 s leases: the window is 205 s
    a = served.call("acquire", lic, client_id="a").json()
    b = served.call("acquire", lic, client_id="b").json()
    served.lose_the_data()
    back = served.call("acquire", lic, client_id="a", lease_token=a["lease_token"],
                       lease_seconds=60)  # fmt: skip
    assert back.status_code == 200, back.text
    served.clock.advance(30)  # b's heartbeat is due by +200 s
    assert served.call("acquire", lic, client_id="intruder").status_code == 503
    late = served.call("heartbeat", lic, session_id=b["session_id"], lease_token=b["lease_token"])
    assert late.status_code == 200, late.text


def test_a_note_of_the_release_before_outlives_the_first_expiry_set(served: Served) -> None:
    """During an upgrade: the release before noted a returned 3-day borrow (its end +
    1000, no expiry on the key); this release's first note gives the key an expiry,
    which must reach past that note's end too."""
    lic = served.license("cad", seats=1, max_borrow_seconds=3 * 86400)
    lent = served.call("acquire", lic, client_id="laptop", borrow_seconds=3 * 86400).json()
    sid = lent["session_id"]
    client = runtime.seat_engine().redis
    k = keyspace.LicenseKeys.of(TENANT, lic)
    deadline = int(client.zscore(k.leases, sid))
    served.revoke(lic, sid)
    client.delete(k.ended)
    client.zadd(k.ended, {sid: deadline + 1000})  # as release.lua of the release before did
    other = served.call("acquire", lic, client_id="desk", lease_seconds=60).json()
    assert served.call("release", lic, session_id=other["session_id"]).json()["released"]
    assert client.pttl(k.ended) > 3 * 86400 * 1000 - 60_000  # past the old note's end
    served.clock.advance(2 * 3600)
    assert client.zscore(k.ended, sid) is not None
    assert served.call("acquire", lic, client_id="desk").status_code == 201
    back = served.call("heartbeat", lic, session_id=sid, lease_token=lent["lease_token"])
    assert reason_of(back) == "unknown" and len(served.holders(lic)) == 1


def test_a_lease_released_to_linger_does_not_come_back_after_a_loss(served: Served) -> None:
    lic = served.license("cad", seats=1, linger_seconds=300)
    held = served.call("acquire", lic, client_id="a").json()
    assert served.call("release", lic, session_id=held["session_id"]).json()["released"]
    served.lose_the_data()  # lease.lingering reached the audit trail first
    back = served.call("heartbeat", lic, session_id=held["session_id"],
                       lease_token=held["lease_token"])  # fmt: skip
    assert reason_of(back) == "unknown" and served.holders(lic) == []


def test_an_acquire_re_admission_is_judged_as_the_tokens_user(served: Served) -> None:
    lic = served.license("cad", policy={"deny_users": ["mallory"]})
    held = served.call("acquire", lic, client_id="a", user="ann").json()
    served.lose_the_data()
    served.update(lic, policy={"deny_users": ["ann"]})
    as_bob = served.call("acquire", lic, client_id="a", user="bob",
                         lease_token=held["lease_token"])  # fmt: skip
    assert as_bob.status_code != 200 or as_bob.json()["session_id"] != held["session_id"]
    assert held["session_id"] not in served.holders(lic)


def test_odd_tokens_and_bodies_after_a_loss_are_never_a_500(served: Served) -> None:
    lic = served.license("cad", seats=3, max_borrow_seconds=3600, linger_seconds=30,
                         policy={"max_per_user": 2, "queue": True})  # fmt: skip
    w = served.call("acquire", lic, client_id="a", seats=2, user="ann").json()
    bo = served.call("acquire", lic, client_id="b", borrow_seconds=600, fingerprint="f" * 64,
                     user="bob").json()  # fmt: skip
    served.lose_the_data()
    served.update(lic, seats=1)
    cases = [
        ("acquire", {"client_id": "a", "lease_token": w["lease_token"]}),
        ("acquire", {"client_id": "a", "lease_token": w["lease_token"], "seats": 2}),
        ("acquire", {"client_id": "a", "lease_token": w["lease_token"], "borrow_seconds": 60}),
        ("acquire", {"client_id": "a", "lease_token": w["lease_token"], "queue": True,
                     "user": "ann"}),
        ("acquire", {"client_id": "b", "lease_token": bo["lease_token"]}),
        ("acquire", {"client_id": "b", "lease_token": bo["lease_token"], "fingerprint": "e" * 64}),
        ("acquire", {"client_id": "b", "lease_token": bo["lease_token"],
                     "lease_seconds": 999999}),
        ("heartbeat", {"session_id": w["session_id"], "lease_token": w["lease_token"],
                       "request_id": "x" * 128}),
        ("heartbeat", {"session_id": bo["session_id"], "lease_token": bo["lease_token"]}),
        ("heartbeat", {"session_id": bo["session_id"], "lease_token": w["lease_token"]}),
        ("heartbeat", {"session_id": w["session_id"], "lease_token": "a.b.c"}),
    ]  # fmt: skip
    for fn, body in cases:
        answer = served.call(fn, lic, **body)
        assert answer.status_code < 500 or answer.status_code == 503, (fn, body, answer.text)
        assert "error" in answer.json() or answer.status_code < 300


def test_seat_calls_before_migration_0016_answer_and_mark_nothing(served: Served) -> None:
    """Functions deployed before the migrations ran: no 500 on a configuration fill."""
    from sqlalchemy import text

    from seatlease.records import db

    lic = served.license("cad", seats=1)
    with db.get_engine().begin() as conn:
        conn.execute(text("ALTER TABLE seat_shards RENAME TO seat_shards_x"))
    try:
        runtime.seat_engine().redis.flushall()
        answer = served.call("acquire", lic, client_id="a")
        assert answer.status_code == 201, answer.text
        mark = keyspace.shard_mark_key(keyspace.shard_of(TENANT, lic))
        assert runtime.seat_engine().redis.get(mark) is None  # asked again at the next fill
    finally:
        with db.get_engine().begin() as conn:
            conn.execute(text("ALTER TABLE seat_shards_x RENAME TO seat_shards"))


@pytest.mark.parametrize("pause_at", ["listed", "marked"])
def test_two_instances_marking_a_new_shard_never_take_it_for_a_lost_one(
    database_url: str, redis_client: Any, pause_at: str
) -> None:
    """Two instances fill the first configurations of a new shard at once, one of them
    paused (a GC, a scheduling delay) between its steps: the shard is marked new."""
    import threading

    from seatlease.records import seat_memory

    class Slow:
        def __init__(self) -> None:
            self.paused, self.first, self.lock = threading.Event(), True, threading.Lock()

        def _pause(self, step: str) -> None:
            with self.lock:
                me, self.first = self.first and step == pause_at, self.first and step != pause_at
            if me:
                self.paused.set()
                threading.Event().wait(0.5)

        def shard_listed(self, shard: int) -> bool:
            listed = seat_memory.shard_listed(shard)
            self._pause("listed")
            return listed

        def list_shard(self, shard: int) -> None:
            self._pause("marked")
            seat_memory.list_shard(shard)

    history = Slow()
    first = threading.Thread(target=failover.mark_shard, args=(redis_client, 7, history))
    first.start()
    history.paused.wait(5)
    failover.mark_shard(redis_client, 7, history)  # the second instance, meanwhile
    first.join()
    assert redis_client.get(failover.mark_key(7)).startswith("N")
    assert failover.lost_shards(redis_client) == {}
