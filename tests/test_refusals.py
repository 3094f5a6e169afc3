"""Who was refused (right-sizing, issue 41), on the seat scripts and the reaper's flush:
a real redis-server whose clock the tests move (the shifted clock), so a minute, the
true-denial window and the flush's cutoff pass without waiting.

What is promised (docs/design.md, "Right-sizing"): one ``lease.refused`` event per client
and minute, however often it retried (``count``: its refusals; ``seats``: the most it
asked); *served* when the client was granted within the minute; a *true denial* when it
was not granted within the window after its last refusal and did not try again within it
(one give-up, one true denial); at most ``REFUSED_CAP`` clients kept per license and
minute, the rest a count marked ``lower_bound``; nothing flushed before its window has
passed; Redis left empty once everything is flushed."""

from __future__ import annotations

import pytest

from seatlease.errors import NoSeatsAvailable
from seatlease.events import pubsub
from seatlease.events.reaper import Reaper
from seatlease.seats import keys
from seatlease.seats.engine import QueuePlace, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy

T = "t"
MINUTE = 60
WINDOW = 10 * MINUTE  # TRUE_DENIAL_MINUTES' default


def acquire(timeline, license_id: str, client: str, **kw):
    return timeline.engine.acquire(SeatRequest(T, license_id, client, **kw))


def refuse(timeline, license_id: str, client: str, **kw) -> None:
    with pytest.raises(NoSeatsAvailable):
        acquire(timeline, license_id, client, **kw)


def flush(timeline, license_id: str) -> int:
    """The reaper's refusal step for the license's shard, as a run does it."""
    reaper = Reaper(timeline.redis, publisher=None)
    shard = keys.shard_of(T, license_id)
    due = reaper.refusal_survey()[shard]
    return reaper.flush_refusals(shard, due) if due else 0


def refused_events(timeline, license_id: str) -> list[dict]:
    stream = keys.outbox_key(keys.shard_of(T, license_id))
    found = pubsub.outbox_events(timeline.redis, stream)
    return [e for e in found if e["type"] == "lease.refused" and e["license_id"] == license_id]


def by_client(events: list[dict]) -> dict[str, dict]:
    return {e["client_id"]: e for e in events}


def to_next_minute(timeline, plus: float = 1) -> None:
    """Move the clock to ``plus`` seconds into the next minute."""
    now = timeline.now_ms() / 1000
    timeline.advance(MINUTE - now % MINUTE + plus)


def full_license(timeline, configs, license_id: str = "l", seats: int = 2) -> list:
    configs.add(T, license_id, seats=seats, lease_seconds=3600)
    to_next_minute(timeline)
    return [acquire(timeline, license_id, f"holder-{i}") for i in range(seats)]


def test_a_client_refused_four_times_is_one_event_and_a_true_denial(timeline, configs) -> None:
    full_license(timeline, configs)
    for _ in range(4):
        refuse(timeline, "l", "c1", metadata={"user": "ana"})
    refuse(timeline, "l", "c2", seats=2)
    timeline.advance(MINUTE + WINDOW - 5)  # not yet due: the window has not passed
    assert flush(timeline, "l") == 0
    assert refused_events(timeline, "l") == []
    timeline.advance(10)
    assert flush(timeline, "l") == 2
    found = by_client(refused_events(timeline, "l"))
    assert found["c1"]["count"] == 4
    assert found["c1"].get("seats", 1) == 1
    assert found["c1"]["metadata"]["user"] == "ana"
    assert found["c1"]["metadata"]["served"] is False
    assert found["c1"]["metadata"]["true_denial"] is True
    assert found["c1"]["metadata"]["waiting"] is False
    assert found["c2"]["seats"] == 2 and found["c2"]["count"] == 1
    assert found["c2"]["metadata"]["minute"].endswith(":00.000Z")
    # nothing of it is left in Redis
    lic = LicenseKeys.of(T, "l")
    assert not timeline.redis.exists(lic.refused, lic.refusing)
    assert timeline.redis.zscore(lic.refused_due, lic.license_key) is None


def test_refused_then_granted_within_the_minute_is_served(timeline, configs) -> None:
    held = full_license(timeline, configs)
    refuse(timeline, "l", "c1")
    timeline.engine.release(T, "l", held[0].session_id)
    acquire(timeline, "l", "c1")
    timeline.advance(MINUTE + WINDOW + 1)
    flush(timeline, "l")
    (event,) = refused_events(timeline, "l")
    assert event["metadata"]["served"] is True
    assert event["metadata"]["true_denial"] is False


def test_granted_after_the_minute_but_within_the_window_is_unmet_not_a_true_denial(
    timeline, configs
) -> None:
    held = full_license(timeline, configs)
    refuse(timeline, "l", "c1")
    timeline.advance(3 * MINUTE)
    timeline.engine.release(T, "l", held[0].session_id)
    acquire(timeline, "l", "c1")
    timeline.advance(WINDOW)
    flush(timeline, "l")
    (event,) = refused_events(timeline, "l")
    assert event["metadata"]["served"] is False  # unmet in its minute: it counts as demand
    assert event["metadata"]["true_denial"] is False  # but it did not give up


def test_granted_only_after_the_window_is_a_true_denial(timeline, configs) -> None:
    held = full_license(timeline, configs)
    refuse(timeline, "l", "c1")
    timeline.advance(WINDOW + 2 * MINUTE)  # due, but not flushed yet: the reaper is late
    timeline.engine.release(T, "l", held[0].session_id)
    acquire(timeline, "l", "c1")
    flush(timeline, "l")
    (event,) = refused_events(timeline, "l")
    assert event["metadata"]["true_denial"] is True


def test_a_client_that_keeps_trying_gives_up_once(timeline, configs) -> None:
    full_license(timeline, configs)
    for _ in range(5):  # refused in five minutes in a row, then gone
        refuse(timeline, "l", "c1")
        timeline.advance(MINUTE)
    timeline.advance(WINDOW + MINUTE)
    flush(timeline, "l")
    found = refused_events(timeline, "l")
    assert len(found) == 5
    assert [e["metadata"]["true_denial"] for e in found] == [False] * 4 + [True]


def test_a_queued_client_is_waiting_and_served_when_its_turn_comes(timeline, configs) -> None:
    policy = LicensePolicy(queue=True, queue_ticket_seconds=600, queue_hold_seconds=60)
    configs.add(T, "q", seats=1, lease_seconds=3600, policy=policy.redis_form())
    to_next_minute(timeline)
    held = acquire(timeline, "q", "holder")
    place = acquire(timeline, "q", "c1", queue=True)
    assert isinstance(place, QueuePlace)
    timeline.engine.release(T, "q", held.session_id)
    acquire(timeline, "q", "c1", queue=True, ticket=place.ticket)
    timeline.advance(MINUTE + WINDOW + 1)
    flush(timeline, "q")
    (event,) = refused_events(timeline, "q")
    assert event["metadata"]["waiting"] is True
    assert event["metadata"]["served"] is True


def test_past_the_cap_a_minute_is_a_lower_bound(timeline, configs) -> None:
    from seatlease.seats import scripts

    cap = int(
        next(
            line.split("=")[1].split("--")[0]
            for line in scripts.script_source("acquire").splitlines()
            if line.startswith("local REFUSED_CAP")
        )
    )
    full_license(timeline, configs)
    for i in range(cap + 5):
        refuse(timeline, "l", f"c{i}")
    refuse(timeline, "l", "c0")  # a kept client's retry still counts on its own entry
    timeline.advance(MINUTE + WINDOW + 1)
    assert flush(timeline, "l") == cap
    found = refused_events(timeline, "l")
    (over,) = [e for e in found if e["client_id"] is None]
    assert over["count"] == 5
    assert over["metadata"]["lower_bound"] is True
    assert by_client(found)["c0"]["count"] == 2
    assert len(found) == cap + 1
    lic = LicenseKeys.of(T, "l")
    assert not timeline.redis.exists(lic.refused, lic.refusing)


def test_refusals_for_other_reasons_are_not_demand(timeline, configs) -> None:
    configs.add(T, "l", seats=1, lease_seconds=3600, suspended=True)
    to_next_minute(timeline)
    with pytest.raises(Exception):  # noqa: B017 - suspended: not a want of seats
        acquire(timeline, "l", "c1")
    lic = LicenseKeys.of(T, "l")
    assert not timeline.redis.exists(lic.refused, lic.refusing)


def test_a_wait_across_a_minute_boundary_is_one_episode_judged_by_its_length(
    timeline, configs
) -> None:
    """Issue 52: refused 5 s before a minute ends and granted 7 s later (refused again
    after the boundary) is served in both minutes, as the same wait inside one minute is;
    a wait of 70 s across the boundary is unmet in its first minute, as it always was."""
    held = full_license(timeline, configs)  # 1 s into a minute
    timeline.advance(MINUTE - 1 - 5)  # 5 s before the minute ends
    refuse(timeline, "l", "short")
    refuse(timeline, "l", "long")
    timeline.advance(6)  # 1 s into the next minute: both still waiting, refused again
    refuse(timeline, "l", "short")
    refuse(timeline, "l", "long")
    timeline.advance(1)
    timeline.engine.release(T, "l", held[0].session_id)
    acquire(timeline, "l", "short")  # 7 s after its first refusal
    timeline.advance(63)
    timeline.engine.release(T, "l", held[1].session_id)
    acquire(timeline, "l", "long")  # 70 s after its first refusal
    timeline.advance(MINUTE + WINDOW + 1)
    flush(timeline, "l")
    found = refused_events(timeline, "l")
    served = {(e["client_id"], e["metadata"]["minute"]): e["metadata"]["served"] for e in found}
    first, second = sorted({minute for _, minute in served})
    assert served == {
        ("short", first): True,
        ("short", second): True,
        ("long", first): False,  # still waiting a minute after it began
        ("long", second): False,  # granted after its own minute ended
    }
    assert not any(e["metadata"]["true_denial"] for e in found)
