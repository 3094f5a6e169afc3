"""Issue 50's "Done means", over HTTP on the local stack: ``LocalStack`` (its own
redis-server, the Pub/Sub emulator pushing into the audit function, the reaper on a
schedule) on the test session's PostgreSQL, every license made by the CLI through the
stack's admin function, every seat call a real HTTP request to the stack's port.

The idle timeout is compared with the idle_seconds a heartbeat *says*, so no test waits
the 60 s it names: leases of LEASE_SECONDS give a heartbeat interval of a couple of
seconds (a third of the lease), and the warning's idle_reclaim_at is one interval ahead.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from http_support import parse_time

import seatlease_cli as cli
from seatlease.api import auth, tenantlicenses, tenantlimits
from seatlease.events import audit, pubsub, reaper
from seatlease.records import db, event_log
from seatlease.seats import keys, redisconn
from seatlease.seats.engine import SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease_cli.localstack import LocalStack
from seatlease_cli.procs import free_port

pytestmark = pytest.mark.timeout(300)

LEASE_SECONDS = 6  # a heartbeat interval of 2 s
INTERVAL = LEASE_SECONDS // 3
# How often the stack's scheduler calls the reaper (`seatlease local --reaper-interval`;
# 5 s by default): short, so the 'always' reclaim is seen in a second or two.
REAPER_SECONDS = 1.0
# Timing slack for a loaded machine, in seconds (the server's clock and ours are the
# machine's; only the HTTP round trips in between are unknown).
SLACK = 0.5


@dataclass
class Local:
    """The running stack: its base URL, the demo tenant and its seat API key."""

    base: str
    tenant_id: str
    key: str

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        """POST ``body`` as JSON to the stack; the status, the JSON answer, the headers."""
        request = urllib.request.Request(
            f"{self.base}/{path}",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, json.loads(resp.read()), resp.headers
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read()), err.headers

    def acquire(self, license_id: str, client_id: str, **fields: Any):
        return self.post("acquire", {"license_id": license_id, "client_id": client_id, **fields})

    def heartbeat(self, license_id: str, session_id: str, **fields: Any):
        body = {"license_id": license_id, "session_id": session_id, **fields}
        return self.post("heartbeat", body)

    def release(self, license_id: str, session_id: str):
        return self.post("release", {"license_id": license_id, "session_id": session_id})

    def license(self, license_id: str, *flags: str) -> str:
        """``seatlease license create`` of a 1-seat license, as an operator types it in a
        second terminal: over HTTP to the stack's admin function."""
        code = cli.main(
            ["--admin-url", f"{self.base}/admin", "license", "create", "--tenant",
             self.tenant_id, "--license", license_id, "--seats", "1",
             "--lease-seconds", str(LEASE_SECONDS), *flags]
        )  # fmt: skip
        assert code == 0
        return license_id

    def status(self, license_id: str) -> dict[str, Any]:
        """The license's row of the admin function's status."""
        status, body, _ = self.post("admin", {"action": "status", "tenant_id": self.tenant_id})
        assert status == 200, body
        rows = [row for row in body["licenses"] if row["license_id"] == license_id]
        assert rows, body
        return rows[0]

    def held(self, license_id: str) -> set[str]:
        """Session ids in the license's lease index in the stack's Redis: a lease leaves
        it only when something ends it (a release or a reclaim), never by its deadline
        alone."""
        keys = LicenseKeys.of(self.tenant_id, license_id)
        return set(redisconn.get_redis().zrange(keys.leases, 0, -1))

    def deadline_ms(self, license_id: str, session_id: str) -> float | None:
        keys = LicenseKeys.of(self.tenant_id, license_id)
        return redisconn.get_redis().zscore(keys.leases, session_id)


def forget_cached() -> None:
    """This process's copies of what an earlier test's Redis and database held."""
    auth.forget_all()
    tenantlimits.forget_all()
    tenantlicenses.forget_all()
    reaper.reset()
    redisconn.reset()
    db.reset()


@pytest.fixture(scope="module")
def local(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """One local stack for the module (it takes about 10 s to start), in a folder of its
    own, its audit trail in the session's PostgreSQL database."""
    folder = tmp_path_factory.mktemp("idle-share-stack")
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.chdir(folder)
    for var in ("REDIS_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC", "CLOUD_SQL_INSTANCE",
                "SEATLEASE_ADMIN_URL", "LOG_LEVEL"):  # fmt: skip
        os.environ.pop(var, None)
    os.environ["DATABASE_URL"] = postgres_url
    forget_cached()
    stack = LocalStack(port=free_port(), reaper_interval=REAPER_SECONDS, say=lambda _line: None)
    try:
        state = stack.start()
        yield Local(state["base_url"], state["tenant_id"], state["api_key"])
    finally:
        stack.stop()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        forget_cached()


def at(text: str) -> float:
    """An RFC 3339 time of an answer, in seconds since the epoch."""
    return parse_time(text).timestamp()


def until(check: Callable[[], Any], by: float, what: str, step: float = 0.1) -> Any:
    """Poll ``check`` until it answers something true, at the latest by time ``by``."""
    while True:
        found = check()
        if found or time.time() > by:
            assert found, f"{what}: not by {by - time.time():+.1f} s"
            return found
        time.sleep(step)


def acquired(local: Local, license_id: str, client_id: str, **fields: Any) -> dict[str, Any]:
    status, lease, _ = local.acquire(license_id, client_id, **fields)
    assert status == 201, lease
    assert lease["heartbeat_interval_seconds"] == INTERVAL
    return lease


def refused(local: Local, license_id: str, client_id: str, **fields: Any) -> dict[str, Any]:
    status, body, headers = local.acquire(license_id, client_id, **fields)
    assert status == 409, body
    error = body["error"]
    assert error["code"] == "no_seats_available", error
    assert int(headers["Retry-After"]) == error["retry_after_seconds"] >= 1
    return error


def warned(local: Local, license_id: str, session_id: str, idle_seconds: int = 60) -> dict:
    """A heartbeat that says the product has been idle ``idle_seconds``: 200, warned."""
    sent = time.time()
    status, beat, _ = local.heartbeat(license_id, session_id, idle_seconds=idle_seconds)
    assert status == 200, beat
    assert "idle_reclaim_at" in beat, beat
    # One heartbeat interval ahead of the warning (never earlier).
    assert sent + INTERVAL - SLACK <= at(beat["idle_reclaim_at"]) <= time.time() + INTERVAL
    return beat


def gone(local: Local, license_id: str, session_id: str, reason: str) -> dict[str, Any]:
    status, body, _ = local.heartbeat(license_id, session_id, idle_seconds=600)
    assert status == 410, body
    error = body["error"]
    assert (error["code"], error["reason"]) == ("session_expired", reason), error
    return error


# -- idle, when needed -------------------------------------------------------------------


def test_an_idle_lease_is_warned_then_its_seat_goes_to_the_refused_client(local):
    lic = local.license("idle-needed", "--idle-timeout", "60")
    ann = acquired(local, lic, "cad-ann")["session_id"]
    status, beat, _ = local.heartbeat(lic, ann, idle_seconds=59)  # below the timeout
    assert status == 200 and "idle_reclaim_at" not in beat, beat

    beat = warned(local, lic, ann, idle_seconds=60)
    reclaim_at = at(beat["idle_reclaim_at"])
    ann_deadline = at(beat["lease_expires_at"])
    assert ann_deadline >= reclaim_at + INTERVAL  # when_needed: its deadline is not cut
    row = local.status(lic)["leases"][0]
    assert row["session_id"] == ann and row["idle_reclaim_at"] == beat["idle_reclaim_at"]

    # Refused while ann's warning runs, told to come back no later than its reclaim
    # (its lease alone would have said ~LEASE_SECONDS).
    asked = time.time()
    error = refused(local, lic, "cad-bob")
    assert error["retry_after_seconds"] <= math.ceil(reclaim_at - asked), (error, reclaim_at)

    # Still idle: the warning keeps its moment (it is not pushed back by each heartbeat).
    status, again, _ = local.heartbeat(lic, ann, idle_seconds=61)
    assert status == 200 and again["idle_reclaim_at"] == beat["idle_reclaim_at"], again
    ann_deadline = at(again["lease_expires_at"])

    # From that moment on, bob's acquire reclaims ann's seat and takes it (before ann's
    # lease would have run out by itself).
    time.sleep(max(0.0, reclaim_at - time.time() + 0.05))
    bob: dict[str, Any] = {}

    def bob_gets_it() -> bool:
        status, body, _ = local.acquire(lic, "cad-bob")
        if status == 201:
            bob.update(body, got_at=time.time())
        else:
            assert status == 409, body
        return status == 201

    until(bob_gets_it, reclaim_at + INTERVAL, "bob's acquire is 201", step=0.2)
    assert bob["got_at"] < ann_deadline
    assert bob["seats_used"] == 1
    gone(local, lic, ann, "idle")
    assert local.held(lic) == {bob["session_id"]}


def test_a_busy_client_is_never_reclaimed(local):
    lic = local.license("idle-busy", "--idle-timeout", "60")
    ann = acquired(local, lic, "cad-ann")["session_id"]
    started = time.time()
    for idle_seconds in (60, 3600, 86_400, 60, 10**6):  # five intervals, idle all along
        status, beat, _ = local.heartbeat(lic, ann, idle_seconds=idle_seconds, busy=True)
        assert status == 200 and "idle_reclaim_at" not in beat, beat
        refused(local, lic, "cad-bob")
        time.sleep(INTERVAL)
    assert time.time() - started >= 4 * INTERVAL + 1  # past any warning's reclaim
    assert local.held(lic) == {ann}
    assert local.status(lic)["leases"][0]["idle_reclaim_at"] is None
    # The license's idle rule was live all along: the same idleness, not busy, is warned.
    warned(local, lic, ann, idle_seconds=60)


def test_when_needed_and_nobody_waiting_an_idle_lease_keeps_its_seat(local):
    lic = local.license("idle-alone", "--idle-timeout", "60", "--idle-reclaim", "when_needed")
    ann = acquired(local, lic, "cad-ann")["session_id"]
    first = warned(local, lic, ann)
    reclaim_at = at(first["idle_reclaim_at"])
    # Past the reclaim moment by two intervals (the reaper ran several times meanwhile):
    # nobody asked for the seat, so ann keeps it and stays warned.
    while time.time() < reclaim_at + 2 * INTERVAL:
        time.sleep(INTERVAL / 2)
        status, beat, _ = local.heartbeat(lic, ann, idle_seconds=120)
        assert status == 200, beat
        assert beat["idle_reclaim_at"] == first["idle_reclaim_at"], beat
    assert local.held(lic) == {ann}
    # Activity takes the warning back.
    status, beat, _ = local.heartbeat(lic, ann, idle_seconds=0)
    assert status == 200 and "idle_reclaim_at" not in beat, beat


# -- idle, always ----------------------------------------------------------------------


def test_always_reclaims_at_that_moment_with_nobody_asking(local):
    lic = local.license("idle-always", "--idle-timeout", "60", "--idle-reclaim", "always")
    ann = acquired(local, lic, "cad-ann")["session_id"]
    beat = warned(local, lic, ann, idle_seconds=75)
    reclaim_at = at(beat["idle_reclaim_at"])
    assert at(beat["lease_expires_at"]) == reclaim_at  # its deadline is cut to that moment

    # No call of ours: the stack's scheduled reaper ends it, at the earliest then.
    until(lambda: ann not in local.held(lic), reclaim_at + 3 * REAPER_SECONDS + 2,
          "the reaper reclaimed ann's lease")  # fmt: skip
    assert time.time() >= reclaim_at
    gone(local, lic, ann, "idle")

    def audited() -> list[dict[str, Any]]:
        rows = event_log.list_events(local.tenant_id, lic)
        return [r for r in rows if r["session_id"] == ann and r["type"] == "lease.reclaimed"]

    (reclaimed,) = until(audited, time.time() + 60, "lease.reclaimed in the audit trail", 0.5)
    assert reclaimed["metadata"]["reason"] == "idle", reclaimed
    idle = [r for r in event_log.list_events(local.tenant_id, lic) if r["type"] == "lease.idle"]
    assert [(r["session_id"], r["metadata"]["idle_seconds"]) for r in idle] == [(ann, 75)]
    assert idle[0]["metadata"]["idle_reclaim_at"] == beat["idle_reclaim_at"]
    assert acquired(local, lic, "cad-bob")["seats_used"] == 1


# -- shared seats ------------------------------------------------------------------------


def test_two_sessions_of_one_user_share_a_seat_and_the_last_release_frees_it(local):
    lic = local.license("shared", "--share", "user")
    first = acquired(local, lic, "ann-laptop", user="ann")
    second = acquired(local, lic, "ann-desktop", user="ann")
    assert (first["shared_sessions"], first["seats_used"]) == (1, 1)
    assert (second["shared_sessions"], second["seats_used"]) == (2, 1)
    row = local.status(lic)
    assert row["seats_used"] == 1
    assert {(s["session_id"], s["shared"], s["shared_sessions"]) for s in row["leases"]} == {
        (first["session_id"], "ann", 2),
        (second["session_id"], "ann", 2),
    }
    refused(local, lic, "bob-laptop", user="bob")

    status, body, _ = local.release(lic, first["session_id"])
    assert status == 200 and body["released"] is True, body
    refused(local, lic, "bob-laptop", user="bob")  # ann's other session keeps the seat
    status, body, _ = local.release(lic, second["session_id"])
    assert status == 200 and body["released"] is True, body
    bob = acquired(local, lic, "bob-laptop", user="bob")
    assert (bob["seats_used"], bob["shared_sessions"]) == (1, 1)


# The audit function refuses every lease.acquired of a shared lease (found by the test
# below): its EventFields.metadata takes flat values only, and contract50's metadata.shared
# is an object {"by", "sessions"}. Not this file's to fix (shared/seatlease/events/audit.py);
# strict, so the marker must come off once the audit takes them.
def test_the_audit_trail_says_who_shared_with_whom(local):
    lic = local.license("shared-audit", "--share", "user")
    sessions = [acquired(local, lic, f"ann-{n}", user="ann")["session_id"] for n in (1, 2)]
    for session in sessions:
        status, body, _ = local.release(lic, session)
        assert status == 200 and body["released"] is True, body

    def audited(kind: str) -> dict[str, dict[str, Any]]:
        rows = event_log.list_events(local.tenant_id, lic)
        found = {r["session_id"]: r for r in rows if r["type"] == kind}
        return found if set(sessions) <= set(found) else {}

    # The releases reach the audit trail (the pipeline works), the acquisitions with them.
    until(lambda: audited("lease.released"), time.time() + 60, "the releases audited", 0.5)
    rows = until(lambda: audited("lease.acquired"), time.time() + 10, "the acquisitions", 0.5)
    shared = [
        (rows[s]["metadata"]["shared_by"], rows[s]["metadata"]["shared_sessions"]) for s in sessions
    ]
    assert shared == [("user", 1), ("user", 2)]
    assert [rows[s]["seats_used"] for s in sessions] == [1, 1]


def test_the_audit_takes_the_engines_shared_lease_acquired_events(engine, configs):
    """The same, without the stack: the events the engine writes to its outbox for two
    sessions of ann on one shared seat, decoded as the audit function decodes a message."""
    configs.add("t", "lic", seats=1, share="user")
    for client_id in ("ann-1", "ann-2"):
        assert engine.acquire(SeatRequest("t", "lic", client_id, user="ann")).created
    outbox = pubsub.outbox_events(engine.redis, keys.outbox_key(keys.shard_of("t", "lic")))
    (message,) = pubsub.encode_messages(outbox)
    decoded = audit.decode_events(message)
    assert decoded.rejected == []
    shared = [(e.metadata["shared_by"], e.metadata["shared_sessions"]) for e in decoded.events]
    assert shared == [("user", 1), ("user", 2)]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("idle_seconds", -1), ("idle_seconds", "abc"), ("idle_seconds", 1.5),
     ("idle_seconds", 10**12), ("busy", "yes")],
)  # fmt: skip
def test_bad_activity_is_400_naming_the_field_and_changes_nothing(local, field, value):
    lic = f"idle-bad-{field}-{str(value).replace('.', '-')}".replace("--", "-m")
    lic = local.license(lic, "--idle-timeout", "60")
    ann = acquired(local, lic, "cad-ann")["session_id"]
    before = local.deadline_ms(lic, ann)
    time.sleep(0.05)  # a heartbeat that got through would move the deadline by this much
    status, body, _ = local.heartbeat(lic, ann, **{field: value})
    assert status == 400, body
    error = body["error"]
    assert error["code"] == "invalid_request", error
    problems = {d["field"]: d["problem"] for d in error["details"]}
    assert field in problems and problems[field] != "unknown field", error
    assert local.deadline_ms(lic, ann) == before
    # The same field, well formed, is taken (and moves the deadline).
    status, beat, _ = local.heartbeat(lic, ann, **{field: 0 if field == "idle_seconds" else True})
    assert status == 200 and "idle_reclaim_at" not in beat, beat
    assert local.deadline_ms(lic, ann) > before
