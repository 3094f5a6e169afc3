"""Terms, grace, entitlements and versions in the seat scripts (docs/design.md, "Terms,
grace, entitlements and versions"): checked inside acquire.lua and heartbeat.lua against
the Redis clock, on a private redis-server and on the Redis Cluster. Times are set a few
seconds from the Redis clock's now and the tests wait for them: nothing is mocked."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from seatlease.errors import (
    LicenseExpired,
    LicenseNotStarted,
    NotEntitled,
    SessionExpired,
    VersionNotEntitled,
)
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys, outbox_key

T = "acme"


def at(engine: SeatEngine, seconds: float) -> datetime:
    """The Redis clock's now plus ``seconds``, as a license setting."""
    return datetime.fromtimestamp(engine.server_time_ms() / 1000, UTC) + timedelta(seconds=seconds)


def until(engine: SeatEngine, moment: datetime) -> None:
    """Sleep until the Redis clock has passed ``moment``."""
    while (left := moment.timestamp() - engine.server_time_ms() / 1000) >= 0:
        time.sleep(left + 0.05)


def events(engine: SeatEngine, license_id: str) -> list[dict]:
    keys = LicenseKeys.of(T, license_id)
    found = []
    for _, fields in engine.redis.xrange(outbox_key(keys.shard)):
        event = json.loads(fields["e"])
        if event["license_id"] == license_id:
            found.append(event)
    return found


def test_a_license_without_terms_answers_as_it_always_did(seat_engine, configs):
    configs.add(T, "plain", seats=2)
    lease = seat_engine.acquire(SeatRequest(T, "plain", "c1"))
    assert lease.terms is None
    assert seat_engine.heartbeat(T, "plain", lease.session_id).terms is None
    # the reply itself has the nine elements it always had (the packed fast path)
    keys = LicenseKeys.of(T, "plain")
    stored = seat_engine.redis.hvals(keys.replies[0]) + seat_engine.redis.hvals(keys.replies[1])
    assert any(text.startswith("A~" + lease.session_id) for text in stored), stored
    assert seat_engine.redis.hget(keys.cfg, "terms") is None


def test_before_the_start_nothing_is_granted_then_it_is(seat_engine, configs):
    starts = at(seat_engine, 1.5)
    configs.add(T, "later", seats=1, starts_at=starts)
    with pytest.raises(LicenseNotStarted) as refused:
        seat_engine.acquire(SeatRequest(T, "later", "c1"))
    assert refused.value.starts_at_ms == int(starts.timestamp() * 1000)
    assert seat_engine.live_leases(T, "later") == []
    until(seat_engine, starts)
    lease = seat_engine.acquire(SeatRequest(T, "later", "c1"))
    assert lease.created and lease.terms is not None and lease.terms.expires_at_ms == 0


def test_grace_then_expiry_with_end_leases(seat_engine, configs):
    expires = at(seat_engine, 1.0)
    configs.add(T, "term", seats=2, lease_seconds=60, expires_at=expires, grace_seconds=2)
    end_ms = int(expires.timestamp() * 1000) + 2000
    lease = seat_engine.acquire(SeatRequest(T, "term", "c1"))
    # no deadline after expires_at + grace: cut to it, and the answer says so
    assert lease.expires_at_ms == end_ms and lease.terms.cut
    assert lease.terms.ends_at_ms == end_ms and not lease.terms.in_grace
    until(seat_engine, expires)
    in_grace = seat_engine.acquire(SeatRequest(T, "term", "c2"))
    assert in_grace.created and in_grace.terms.in_grace and in_grace.expires_at_ms == end_ms
    beat = seat_engine.heartbeat(T, "term", lease.session_id)
    assert beat.terms.in_grace and beat.expires_at_ms == end_ms
    until(seat_engine, expires + timedelta(seconds=2))
    with pytest.raises(LicenseExpired) as refused:
        seat_engine.acquire(SeatRequest(T, "term", "c3"))
    assert refused.value.ended_at_ms == end_ms
    with pytest.raises(LicenseExpired):
        seat_engine.heartbeat(T, "term", lease.session_id)
    # the heartbeat freed the seat, and the audit trail says why
    ended = [e for e in events(seat_engine, "term") if e["session_id"] == lease.session_id]
    assert [e["type"] for e in ended] == ["lease.acquired", "lease.reclaimed"]
    assert ended[-1]["metadata"]["reason"] == "license_expired"
    assert [x["session_id"] for x in seat_engine.live_leases(T, "term")] == []


def test_keep_leases_lets_held_leases_live_on_and_grants_nothing_new(seat_engine, configs):
    expires = at(seat_engine, 1.0)
    configs.add(T, "keep", seats=3, lease_seconds=4, expires_at=expires, on_expiry="keep_leases")
    lease = seat_engine.acquire(SeatRequest(T, "keep", "c1"))
    assert not lease.terms.cut  # keep_leases: the deadline is the lease's own
    until(seat_engine, expires + timedelta(seconds=0.5))
    for _ in range(2):
        beat = seat_engine.heartbeat(T, "keep", lease.session_id)
        assert beat.expires_at_ms > beat.now_ms + 3000
        time.sleep(0.3)
    with pytest.raises(LicenseExpired):
        seat_engine.acquire(SeatRequest(T, "keep", "c2"))
    assert len(seat_engine.live_leases(T, "keep")) == 1


def test_a_change_of_the_term_applies_at_once(seat_engine, configs):
    cfg = configs.add(T, "chg", seats=2, lease_seconds=60)
    lease = seat_engine.acquire(SeatRequest(T, "chg", "c1"))
    assert lease.terms is None
    # the operator ends the license now: the next heartbeat ends the lease
    ended = replace(cfg, expires_at=at(seat_engine, -1))
    configs.configs[(T, "chg")] = ended
    seat_engine.cache_config(T, "chg", ended)
    with pytest.raises(LicenseExpired):
        seat_engine.heartbeat(T, "chg", lease.session_id)
    with pytest.raises(SessionExpired):
        seat_engine.heartbeat(T, "chg", lease.session_id)
    # renewed: seats again at once, the deadline up to the new end
    renewed = replace(cfg, expires_at=at(seat_engine, 30))
    configs.configs[(T, "chg")] = renewed
    seat_engine.cache_config(T, "chg", renewed)
    again = seat_engine.acquire(SeatRequest(T, "chg", "c1"))
    assert again.created and again.terms.cut
    assert again.expires_at_ms == int(renewed.expires_at.timestamp() * 1000)


def test_a_borrow_is_cut_to_the_license_end(seat_engine, configs):
    expires = at(seat_engine, 120)
    configs.add(T, "brw", seats=1, max_borrow_seconds=86400, expires_at=expires)
    lease = seat_engine.acquire(SeatRequest(T, "brw", "c1", borrow_seconds=86400))
    assert lease.borrowed and lease.terms.cut
    assert lease.expires_at_ms == int(expires.timestamp() * 1000)


def test_a_lease_under_terms_refills_the_config_on_heartbeat(seat_engine, configs):
    configs.add(T, "refill", seats=1, lease_seconds=60, expires_at=at(seat_engine, 3600))
    lease = seat_engine.acquire(SeatRequest(T, "refill", "c1"))
    seat_engine.redis.delete(LicenseKeys.of(T, "refill").cfg)  # the cache expired
    beat = seat_engine.heartbeat(T, "refill", lease.session_id)
    assert beat.terms is not None and beat.terms.ends_at_ms == lease.terms.ends_at_ms


def test_entitlements_and_versions(seat_engine, configs):
    configs.add(
        T,
        "pro",
        seats=5,
        entitlements=("pro", "render.gpu"),
        max_version="2026.4",
    )
    lease = seat_engine.acquire(
        SeatRequest(T, "pro", "c1", entitlements=("pro",), version="2026.4.0")
    )
    assert lease.terms.entitlements == ("pro", "render.gpu")
    assert lease.terms.max_version == "2026.4"
    assert lease.terms.claims() == {"ent": ["pro", "render.gpu"], "maxv": "2026.4"}
    with pytest.raises(NotEntitled) as missing:
        seat_engine.acquire(SeatRequest(T, "pro", "c2", entitlements=("pro", "cloud", "x-1")))
    assert missing.value.missing == ["cloud", "x-1"]
    for version in ("2026.10", "2027", "2026.4.1"):  # part by part: 10 > 4
        with pytest.raises(VersionNotEntitled) as above:
            seat_engine.acquire(SeatRequest(T, "pro", "c3", version=version))
        assert above.value.max_version == "2026.4"
    for version in ("2026.3.99", "2025.12", "2026.4"):
        assert seat_engine.acquire(SeatRequest(T, "pro", f"v{version}", version=version))
    assert len(seat_engine.live_leases(T, "pro")) == 4
    # a license without entitlements lacks every one; any version is fine on it
    configs.add(T, "bare", seats=1)
    with pytest.raises(NotEntitled):
        seat_engine.acquire(SeatRequest(T, "bare", "c1", entitlements=("pro",)))
    bare = seat_engine.acquire(SeatRequest(T, "bare", "c1", version="9999.1"))
    assert bare.terms is None


def test_a_cache_entry_written_before_the_terms_text_reads_the_same(seat_engine, configs):
    """The cfg hash has the terms in one text (``terms``: T|starts|exp|...) that acquire
    and heartbeat read with the rest of the configuration, and each on its own field; an
    entry cached by the release before has ``terms`` '1' and the fields alone: read as
    before, with the same answers."""
    ends = at(seat_engine, 3600)
    configs.add(T, "old", seats=5, expires_at=ends, entitlements=("pro", "render.gpu"),
                max_version="2026.4")  # fmt: skip
    new = seat_engine.acquire(SeatRequest(T, "old", "c1", entitlements=("pro",)))
    cfg = LicenseKeys.of(T, "old").cfg
    assert seat_engine.redis.hget(cfg, "terms").startswith("T|")
    seat_engine.redis.hset(cfg, "terms", "1")  # as the release before wrote it
    old = seat_engine.acquire(SeatRequest(T, "old", "c2", entitlements=("pro",)))
    assert old.terms == new.terms and old.terms.ends_at_ms == int(ends.timestamp() * 1000)
    assert seat_engine.heartbeat(T, "old", old.session_id).terms == new.terms
    with pytest.raises(NotEntitled):
        seat_engine.acquire(SeatRequest(T, "old", "c3", entitlements=("cloud",)))
    with pytest.raises(VersionNotEntitled):
        seat_engine.acquire(SeatRequest(T, "old", "c3", version="2026.5"))


def test_a_repeat_is_answered_with_the_terms_of_the_first_run(seat_engine, configs):
    configs.add(T, "rep", seats=1, expires_at=at(seat_engine, 60), entitlements=("a",))
    first = seat_engine.acquire(SeatRequest(T, "rep", "c1", request_id="req-1"))
    again = seat_engine.acquire(SeatRequest(T, "rep", "c1", request_id="req-1"))
    assert again == first and again.terms.entitlements == ("a",)


@pytest.mark.parametrize("keep", [False, True])
def test_fifty_threads_never_exceed_the_cap_of_a_license_with_terms(seat_engine, configs, keep):
    configs.add(
        T,
        "busy",
        seats=7,
        lease_seconds=60,
        expires_at=at(seat_engine, 3600),
        grace_seconds=60,
        on_expiry="keep_leases" if keep else "end_leases",
        entitlements=("pro",),
    )
    granted, errors = [], []
    barrier = threading.Barrier(50)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            granted.append(
                seat_engine.acquire(SeatRequest(T, "busy", f"c{i}", entitlements=("pro",)))
            )
        except Exception as exc:  # NoSeatsAvailable expected for 43 of them
            errors.append(type(exc).__name__)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 7 and errors == ["NoSeatsAvailable"] * 43
    assert len(seat_engine.live_leases(T, "busy")) == 7
