"""A region lost (issue 40; docs/design.md, "A region lost"), played on two private
redis-servers, a primary P and its replica R, behind the functions as the local stack
serves them (one database, one set of signing keys: the same deployment in two regions).

R replicates P, then stops (asynchronous replication loses the last writes): client b's
grant reaches P and not R. P dies; the functions start on R. Before this issue a new
client then got b's seat: three programs on a 2-seat license. Now, after `seatlease
failover begin` on R: a (known to R) heartbeats as before; b's heartbeat is `410 unknown`
until it carries its lease token, then b keeps its seat; a new client waits (`503
recovering`, `Retry-After` within one heartbeat interval of the license's longest lease);
a forged token is refused; the license never has more holders than seats. And the same
with the Python client holding a seat through the failover without `on_lost`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
import requests
from client_harness import TENANT, client_stack, serve_on
from procs import start_shifted_redis

from seatlease import admin
from seatlease.api import runtime, tokens
from seatlease.records import store
from seatlease.seats import failover, redisconn
from seatlease.seats.keys import LicenseKeys

LICENSE = "cad"
MAX_LEASE = 30  # the license's longest lease: its recovery window is 30 / 3 + 30 s


def wait_until(check: Any, seconds: float = 10, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Region:
    """The functions of one region: this process's Redis switched to ``url``."""

    serve_on = staticmethod(serve_on)


@pytest.fixture
def regions(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    primary, primary_clock = start_shifted_redis()
    replica, replica_clock = start_shifted_redis()
    monkeypatch.setenv("REDIS_URL", primary.url)
    Region.serve_on(primary.url)
    try:
        with client_stack() as stack:
            store.create_license(
                TENANT, LICENSE, seats=2, lease_seconds=9, max_lease_seconds=MAX_LEASE
            )
            runtime.refresh_license_cache(TENANT, LICENSE)
            yield {
                "stack": stack,
                "primary": primary,
                "replica": replica,
                "replica_clock": replica_clock,
                "primary_clock": primary_clock,
            }
    finally:
        primary.stop()
        replica.stop()
        redisconn.reset()
        runtime.forget_failover()


def call(stack: Any, fn: str, **body: Any) -> requests.Response:
    return requests.post(
        f"{stack.url}/{fn}",
        json={"license_id": LICENSE, **body},
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=10,
    )


def holders() -> int:
    return len(runtime.seat_engine().live_leases(TENANT, LICENSE))


def replicate_then_lose_the_last_write(regions: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """a's grant reaches the replica; replication stops; b's grant reaches P alone; P
    dies; the functions serve on R."""
    stack, primary, replica = regions["stack"], regions["primary"], regions["replica"]
    r = redisconn.connect(replica.url)
    host, port = primary.url.split("//")[1].split("/")[0].split(":")
    r.replicaof(host, int(port))
    a = call(stack, "acquire", client_id="a").json()
    a_sid = a["session_id"]
    wait_until(lambda: r.zscore(f"sl:{{{_shard()}}}:{TENANT}/{LICENSE}:leases", a_sid), 20, "R")
    r.replicaof("no", "one")  # the replica falls behind: what follows never reaches it
    b = call(stack, "acquire", client_id="b").json()
    assert holders() == 2
    primary.kill()  # the region is lost
    r.close()
    Region.serve_on(replica.url)
    return {"a": a, "b": b}


def _shard() -> int:
    from seatlease.seats.keys import shard_of

    return shard_of(TENANT, LICENSE)


def test_a_lost_grant_comes_back_by_its_token_and_no_seat_is_granted_twice(regions) -> None:
    stack = regions["stack"]
    held = replicate_then_lose_the_last_write(regions)
    # before any recovery: R does not know b (this is what granted a seat twice)
    assert holders() == 1
    _status, began = admin.execute(admin.parse({"action": "failover.begin"}))
    assert began["recovering"] is True
    window = MAX_LEASE // 3 + failover.RECOVERY_SLACK_SECONDS

    # a new client waits: no seat while b may still come back
    c = call(stack, "acquire", client_id="c")
    assert c.status_code == 503 and c.json()["error"]["code"] == "recovering", c.text
    assert 1 <= int(c.headers["Retry-After"]) <= window
    # a (known to R) heartbeats as before
    assert call(stack, "heartbeat", session_id=held["a"]["session_id"]).status_code == 200
    # b's heartbeat: R never heard of the session...
    b_sid, b_token = held["b"]["session_id"], held["b"]["lease_token"]
    unknown = call(stack, "heartbeat", session_id=b_sid)
    assert unknown.status_code == 410 and unknown.json()["error"]["reason"] == "unknown"
    # ...a forged token (a's token, another session; and a's re-signed by nobody) is refused
    forged = call(stack, "heartbeat", session_id=b_sid, lease_token=held["a"]["lease_token"])
    assert forged.status_code == 410
    header, payload, _sig = b_token.split(".")
    tampered = f"{header}.{payload}.{'A' * 86}"
    assert call(stack, "heartbeat", session_id=b_sid, lease_token=tampered).status_code == 410
    assert holders() == 1
    # ...and its own token brings the seat back: same session, same client
    back = call(stack, "heartbeat", session_id=b_sid, lease_token=b_token)
    assert back.status_code == 200, back.text
    claims = jwt.decode(back.json()["lease_token"], options={"verify_signature": False})
    assert (claims["sid"], claims["sub"]) == (b_sid, "b")
    assert holders() == 2
    _status, status = admin.execute(admin.parse({"action": "failover.status"}))
    assert status["recovered_leases"] == 1 and status["licenses_holding_grants"] == 1
    # past the window (a and b heartbeating all along): c may ask again, and the license
    # is full: never three holders
    for _step in range(window // 3 + 1):
        regions["replica_clock"].advance(3)
        assert call(stack, "heartbeat", session_id=held["a"]["session_id"]).status_code == 200
        assert call(stack, "heartbeat", session_id=b_sid).status_code == 200
        assert holders() == 2
    full = call(stack, "acquire", client_id="c")
    assert full.status_code == 409 and full.json()["error"]["code"] == "no_seats_available"
    assert holders() == 2
    # the re-admission is in the audit trail's events
    from seatlease.events.pubsub import outbox_events
    from seatlease.seats.keys import outbox_key

    kinds = [
        e["type"]
        for e in outbox_events(runtime.seat_engine().redis, outbox_key(_shard()))
        if e.get("session_id") == b_sid
    ]
    assert "lease.recovered" in kinds


def test_a_license_that_chose_availability_grants_in_the_window_and_says_so(regions) -> None:
    stack = regions["stack"]
    store.update_license(TENANT, LICENSE, on_failover="grant", seats=3)
    runtime.refresh_license_cache(TENANT, LICENSE)
    replicate_then_lose_the_last_write(regions)
    admin.execute(admin.parse({"action": "failover.begin"}))
    granted = call(stack, "acquire", client_id="c")
    assert granted.status_code == 201, granted.text
    body = granted.json()
    assert body["recovering"] is True and body["recovering_until"].endswith("Z")
    _status, ended = admin.execute(admin.parse({"action": "failover.end"}))
    assert ended == {"recovering": False, "ended": True}


@pytest.mark.parametrize("ended_by", ["revoke", "release", "linger"])
def test_a_lease_ended_here_never_comes_back_by_its_token(regions, ended_by) -> None:
    """A token outlives its lease when the lease is released or revoked before its
    deadline: the heartbeat that carries it after the 410 must not undo the operator's
    revoke (or the client's own release), with a seat free or not, failover or not."""
    stack = regions["stack"]
    if ended_by == "linger":
        store.update_license(TENANT, LICENSE, linger_seconds=1)
        runtime.refresh_license_cache(TENANT, LICENSE)
    granted = call(stack, "acquire", client_id="a").json()
    sid, token = granted["session_id"], granted["lease_token"]
    if ended_by == "revoke":
        admin.execute(admin.parse({"action": "revoke", "tenant_id": TENANT,
                                   "license_id": LICENSE, "session_id": sid}))  # fmt: skip
    else:
        assert call(stack, "release", session_id=sid).status_code == 200
    if ended_by == "linger":
        regions["primary_clock"].advance(2)  # the linger ran out: reclaimed as released
    assert holders() == 0
    for _attempt in range(2):  # failover or not, the answer is the same
        back = call(stack, "heartbeat", session_id=sid, lease_token=token)
        assert back.status_code == 410, back.text
        # (a revoked client learns it: while its tokens could be valid, the reason says so)
        reason = "revoked" if ended_by == "revoke" else "unknown"
        assert back.json()["error"]["reason"] == reason
        assert holders() == 0
        admin.execute(admin.parse({"action": "failover.begin"}))
    # a lingering lease taken back by its client is its lease again, token and all
    if ended_by == "linger":
        admin.execute(admin.parse({"action": "failover.end"}))
        again = call(stack, "acquire", client_id="a").json()
        assert again["session_id"] != sid  # (the linger had run out: a new lease)


def test_a_lingering_lease_taken_back_is_not_ended(regions) -> None:
    stack = regions["stack"]
    store.update_license(TENANT, LICENSE, linger_seconds=60)
    runtime.refresh_license_cache(TENANT, LICENSE)
    granted = call(stack, "acquire", client_id="a").json()
    sid = granted["session_id"]
    assert call(stack, "release", session_id=sid).status_code == 200
    back = call(stack, "acquire", client_id="a").json()
    assert back["session_id"] == sid  # taken back: the same lease
    from seatlease.seats.keys import LicenseKeys

    ended = LicenseKeys.of(TENANT, LICENSE).ended
    assert runtime.seat_engine().redis.zscore(ended, sid) is None


def test_the_python_client_keeps_its_seat_through_the_failover(regions) -> None:
    """A program holding a seat through the region's loss: its heartbeats fail for a
    moment, then R answers `unknown`, the client sends its token once, and the seat is
    kept: same session, no on_lost."""
    from seatlease_client import SeatClient

    stack, primary, replica = regions["stack"], regions["primary"], regions["replica"]
    r = redisconn.connect(replica.url)
    host, port = primary.url.split("//")[1].split("/")[0].split(":")
    r.replicaof(host, int(port))
    r.replicaof("no", "one")  # R falls behind before the program takes its seat
    lost: list[str] = []
    pinned = tokens.keyring().jwks()["keys"]  # the vendor's keys
    client = SeatClient(stack.url, stack.api_key, backoff=0.1, max_backoff=0.5, pinned_keys=pinned)
    with client.lease(LICENSE, client_id="pc-1", on_lost=lambda _l, why: lost.append(why)) as lease:
        session = lease.session_id
        primary.kill()
        r.close()
        Region.serve_on(replica.url)
        admin.execute(admin.parse({"action": "failover.begin"}))
        time.sleep(8)  # two heartbeat intervals of the 9 s lease
        assert lease.session_id == session and not lease.lost and lost == []
        assert holders() == 1


def test_the_failover_commands(stack, capsys) -> None:
    """`seatlease failover begin|status|end` in the operator's words, and --json."""
    import json

    import seatlease_cli as cli

    store.create_tenant("acme")
    store.create_license("acme", "short", seats=1, lease_seconds=60, max_lease_seconds=360)
    store.create_license("acme", "long", seats=1, lease_seconds=600, max_lease_seconds=3600)
    assert cli.main(["failover", "status"]) == 0
    assert "no failover recovery under way" in capsys.readouterr().out
    assert cli.main(["failover", "begin"]) == 0
    out = capsys.readouterr().out
    assert "2 license(s) still hold new seats back" in out and "route traffic here" in out
    assert cli.main(["failover", "status", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    # one heartbeat interval of the leases each license grants (its default here: none
    # granted yet), not of the longest it allows (3600 / 3 + 5 = 1205 s before)
    windows = {w["longest_lease_seconds"]: w["window_seconds"] for w in body["windows"]}
    assert windows == {60: 25, 600: 205} and body["recovered_leases"] == 0
    assert body["opened_by"] == "operator"
    assert cli.main(["failover", "end"]) == 0
    assert "ended now" in capsys.readouterr().out
    assert cli.main(["failover", "status"]) == 0
    assert "no failover recovery under way" in capsys.readouterr().out


def test_a_license_of_ten_minute_leases_waits_one_interval_of_them(regions) -> None:
    """The window fits the leases the license grants, not the longest it allows: 10-minute
    leases on a license that allows an hour wait 600 / 3 + 5 = 205 s (they waited
    3600 / 3 + 5 = 1205 s before), and the holder whose grant the replica missed keeps
    its seat by its token."""
    stack, primary, replica = regions["stack"], regions["primary"], regions["replica"]
    store.create_license(TENANT, "cad10", seats=2, lease_seconds=600, max_lease_seconds=3600)
    runtime.refresh_license_cache(TENANT, "cad10")

    def on(fn: str, **body: Any) -> requests.Response:
        return requests.post(
            f"{stack.url}/{fn}", json={"license_id": "cad10", **body},
            headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=10,
        )  # fmt: skip

    r = redisconn.connect(replica.url)
    host, port = primary.url.split("//")[1].split("/")[0].split(":")
    r.replicaof(host, int(port))
    a = on("acquire", client_id="a").json()
    leases_key = LicenseKeys.of(TENANT, "cad10").leases
    wait_until(lambda: r.zscore(leases_key, a["session_id"]), 20, "R")
    r.replicaof("no", "one")
    b = on("acquire", client_id="b").json()  # the grant the replica misses
    primary.kill()
    r.close()
    Region.serve_on(replica.url)
    admin.execute(admin.parse({"action": "failover.begin"}))
    c = on("acquire", client_id="c")
    assert c.status_code == 503 and c.json()["error"]["code"] == "recovering", c.text
    assert 195 <= int(c.headers["Retry-After"]) <= 210
    back = on("heartbeat", session_id=b["session_id"], lease_token=b["lease_token"])
    assert back.status_code == 200, back.text
    leases = runtime.seat_engine().live_leases(TENANT, "cad10")
    assert sorted(x["client_id"] for x in leases) == ["a", "b"]
    _status, status = admin.execute(admin.parse({"action": "failover.status"}))
    windows = {w["longest_lease_seconds"]: w["window_seconds"] for w in status["windows"]}
    assert windows[600] == 205


def test_failover_begin_caches_every_license_again_from_the_database(regions) -> None:
    """A suspension stored just before the loss, whose cache write went to the lost
    primary only: the replica still holds the license as it was. `failover begin`
    caches every license again from the database, so the new primary honours it."""
    stack = regions["stack"]
    replicate_then_lose_the_last_write(regions)
    store.update_license(TENANT, LICENSE, suspended=True)  # (its cache write: lost)
    _status, began = admin.execute(admin.parse({"action": "failover.begin"}))
    assert began["licenses_refreshed"] == 1
    runtime.forget_failover()
    refused = call(stack, "acquire", client_id="c")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "license_suspended"
