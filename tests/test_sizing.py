"""The sizing report's definitions on the rollups alone (issue 41; docs/design.md,
"Right-sizing"): events stored through the audit function's insert on PostgreSQL and on
the local stack's SQLite, the report read back. The seat scripts' and the reaper's half
(who is served, when a refusal is a true denial) is tests/test_refusals.py; the whole
pipeline's story is tests/test_sizing_story.py."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seatlease import admin, clock
from seatlease.errors import InvalidRequest
from seatlease.events import audit
from seatlease.records import store
from seatlease.records.reports import Window
from seatlease.records.reports.sizing import Piece, fewest_seats, sizing_report

T = "acme"
NOW = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)
_seq = iter(range(10**9))


def at(minutes_before_now: float) -> datetime:
    return NOW - timedelta(minutes=minutes_before_now)


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def lease(etype: str, when: datetime, session: str, used: int, seats: int = 1,
          license_id: str = "cad") -> dict:  # fmt: skip
    found = {
        "event_id": f"e-{next(_seq)}", "type": etype, "tenant_id": T,
        "license_id": license_id, "session_id": session, "client_id": f"c-{session}",
        "occurred_at": iso(when), "seats_used": used, "seats_total": 2, "count": 1,
        "metadata": {},
    }  # fmt: skip
    if seats > 1:
        found["seats"] = seats
    return found


def refused(minute: datetime, client: str, *, served: bool = False, gave_up: bool = False,
            seats: int = 1, count: int = 1, license_id: str = "cad") -> dict:  # fmt: skip
    found = {
        "event_id": f"e-{next(_seq)}", "type": "lease.refused", "tenant_id": T,
        "license_id": license_id, "client_id": client,
        "occurred_at": iso(minute + timedelta(minutes=11)), "count": count,
        "metadata": {"minute": iso(minute), "served": served, "true_denial": gave_up,
                     "waiting": False},
    }  # fmt: skip
    if seats > 1:
        found["seats"] = seats
    return found


def store_events(rows: list[dict]) -> None:
    events = [audit.LeaseEvent.model_validate(r) for r in rows]
    assert audit.store(events) == len(rows)


@pytest.fixture
def license_db(database, monkeypatch):
    monkeypatch.setattr(clock, "now", lambda: NOW)
    store.create_tenant(T)
    store.create_license(T, "cad", seats=2)
    return database


def sizing(**window) -> dict:
    report = sizing_report(Window(T, window.pop("license_id", "cad"), **window))
    (line,) = [line.as_dict() for line in report.licenses]
    return line


def two_held_for_ten_minutes() -> list[dict]:
    start = at(30).replace(second=0)
    return [
        lease("lease.acquired", start, "a", 1),
        lease("lease.acquired", start + timedelta(seconds=1), "b", 2),
        lease("lease.released", start + timedelta(minutes=10), "a", 1),
        lease("lease.released", start + timedelta(minutes=10, seconds=1), "b", 0),
    ]


def test_clients_refused_and_not_served_are_demand(license_db) -> None:
    rows = two_held_for_ten_minutes()
    minute = at(25).replace(second=0)
    rows += [refused(minute, f"x{i}", count=4, gave_up=True) for i in range(3)]
    store_events(rows)
    line = sizing(since=at(60))
    assert line["peak_in_use"] == 2
    assert line["refused_clients"] == 3 and line["turned_away_clients"] == 3
    assert line["unmet_minutes"] == 1 and line["true_denials"] == 3
    assert line["recommended_seats"] == {"p95": 5, "p99": 5, "p100": 5}  # not 2 + 12
    assert line["verdict"] == "undersized"
    assert line["sentence"].startswith("3 clients were turned away in 1 minute; 5 seats")
    assert line["busy_minutes"] == 11  # ten minutes held (and a second), one refused


def test_a_client_refused_then_granted_within_the_minute_is_not_unmet(license_db) -> None:
    rows = two_held_for_ten_minutes()
    rows.append(refused(at(25).replace(second=0), "x", served=True))
    store_events(rows)
    line = sizing(since=at(60))
    assert line["refused_clients"] == 1 and line["turned_away_clients"] == 0
    assert line["unmet_minutes"] == 0
    assert line["recommended_seats"]["p100"] == 2
    assert line["verdict"] == "right"
    assert line["sentence"].startswith("No client was turned away")


def test_true_denials_are_the_flagged_give_ups(license_db) -> None:
    rows = two_held_for_ten_minutes()
    first = at(28).replace(second=0)
    # one client kept trying for three minutes then gave up: one true denial; another was
    # granted after its minute (unmet, not a true denial)
    rows += [refused(first + timedelta(minutes=i), "keen", gave_up=i == 2) for i in range(3)]
    rows.append(refused(first, "patient"))
    store_events(rows)
    line = sizing(since=at(60))
    assert line["true_denials"] == 1
    assert line["refused_clients"] == 2
    assert line["unmet_minutes"] == 3


def test_weights_count_their_seats(license_db) -> None:
    store.update_license(T, "cad", seats=8)
    start = at(30).replace(second=0)
    rows = [
        lease("lease.acquired", start, "big", 4, seats=4),
        lease("lease.released", start + timedelta(minutes=5), "big", 0, seats=4),
        refused(start + timedelta(minutes=2), "render", seats=6),
    ]
    store_events(rows)
    line = sizing(since=at(60))
    assert line["peak_in_use"] == 4
    assert line["recommended_seats"]["p100"] == 10  # 4 in use + 6 asked
    assert line["verdict"] == "undersized"


def test_a_license_used_one_seat_of_ten_is_oversized_at_one(license_db) -> None:
    store.create_license(T, "big", seats=10)
    start = at(30).replace(second=0)
    store_events([
        lease("lease.acquired", start, "one", 1, license_id="big"),
        lease("lease.released", start + timedelta(minutes=7), "one", 0, license_id="big"),
    ])  # fmt: skip
    line = sizing(since=at(60), license_id="big")
    assert line["recommended_seats"] == {"p95": 1, "p99": 1, "p100": 1}
    assert line["verdict"] == "oversized" and line["seats"] == 10


def test_a_license_never_used_says_so(license_db) -> None:
    line = sizing(since=at(60))
    assert line["busy_minutes"] == 0 and line["recommended_seats"]["p100"] == 0
    assert line["verdict"] == "oversized"
    assert line["sentence"].startswith("Not used in this window")


def test_percentiles_on_a_known_demand_series(license_db) -> None:
    """100 busy minutes: 90 at 1 seat, 5 at 2, 4 at 3 and 1 at 4 (refusals on top of one
    held seat): p95 = 2, p99 = 3, p100 = 4."""
    start = (NOW - timedelta(minutes=200)).replace(second=0)
    store.update_license(T, "cad", seats=4)
    rows = [lease("lease.acquired", start, "a", 1),
            lease("lease.released", start + timedelta(minutes=99, seconds=30), "a", 0)]  # fmt: skip
    extra = [1] * 5 + [2] * 4 + [3]
    for i, more in enumerate(extra):
        minute = start + timedelta(minutes=10 + i)
        rows += [refused(minute, f"m{i}-{j}") for j in range(more)]
    store_events(rows)
    line = sizing(since=start)
    assert line["busy_minutes"] == 100
    assert line["recommended_seats"] == {"p95": 2, "p99": 3, "p100": 4}


def test_older_minutes_are_estimated_from_the_hours(license_db) -> None:
    """Before the minute rollups' retention, an hour stands for its seat time at its peak:
    a seat held 30 minutes of an hour whose peak was 3 for a moment counts 10 minutes at 3
    (seat time 90 seat-minutes / 3), never fewer busy minutes at the peak than it had."""
    start = (NOW - timedelta(days=30)).replace(minute=0, second=0)
    rows = [
        lease("lease.acquired", start, "a", 1),
        lease("lease.acquired", start + timedelta(minutes=10), "b", 2),
        lease("lease.acquired", start + timedelta(minutes=10, seconds=30), "c", 3),
        lease("lease.released", start + timedelta(minutes=11), "c", 2),
        lease("lease.released", start + timedelta(minutes=20), "b", 1),
        lease("lease.released", start + timedelta(minutes=30), "a", 0),
    ]
    store_events(rows)
    line = sizing(since=start - timedelta(hours=1), until=start + timedelta(hours=2))
    assert line["estimated"] is True
    assert line["peak_in_use"] == 3 and line["recommended_seats"]["p100"] == 3
    # seat time: a 30 min + b 10 min + c 0.5 min = 40.5 seat-minutes: 14 minutes at 3
    assert line["busy_minutes"] == 14


def test_queue_waits(license_db) -> None:
    waits = [5_000, 10_000, 20_000, 60_000]
    rows = [
        {"event_id": f"q-{i}", "type": "queue.granted" if i < 3 else "queue.left",
         "tenant_id": T, "license_id": "cad", "client_id": f"w{i}",
         "occurred_at": iso(at(20 - i)), "count": 1, "metadata": {"queued_ms": ms}}
        for i, ms in enumerate(waits)
    ]  # fmt: skip
    store_events(rows)
    line = sizing(since=at(60))
    assert line["queue_wait_seconds"] == {"tickets": 4, "p50": 10.0, "p95": 60.0, "max": 60.0}


def test_bad_windows_are_400_naming_the_field(license_db) -> None:
    with pytest.raises(InvalidRequest) as caught:
        admin.execute(admin.parse({"action": "report.sizing", "tenant_id": T,
                                   "since": "2019-01-01T00:00:00Z"}))  # fmt: skip
    assert caught.value.fields["details"][0]["field"] == "since"
    status, body = admin.execute(admin.parse({"action": "report.sizing", "tenant_id": T}))
    assert status == 200 and body["licenses"][0]["license_id"] == "cad"


def test_an_unknown_license_is_404(license_db) -> None:
    from seatlease.errors import NotFound

    with pytest.raises(NotFound):
        admin.execute(admin.parse({"action": "report.sizing", "tenant_id": T,
                                   "license_id": "nope"}))  # fmt: skip


def test_a_refusal_event_without_its_minute_is_refused_alone() -> None:
    good = refused(NOW, "x")
    bad = {**refused(NOW, "y"), "metadata": {"minute": "yesterday"}}
    decoded = audit.decode_events(audit.json.dumps([good, bad]).encode())
    assert [e.client_id for e in decoded.events] == ["x"]
    assert len(decoded.rejected) == 1 and "minute" in decoded.rejected[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 30)), min_size=1, max_size=40),
       st.sampled_from([0.5, 0.95, 0.99, 1.0]))  # fmt: skip
def test_fewest_seats_is_the_smallest_that_meets_the_share(series, share) -> None:
    """Against brute force over every seat count: the answer meets the demand in at least
    ``share`` of the busy minutes, and one seat fewer does not."""
    pieces = [Piece(NOW, NOW, demand, float(minutes)) for demand, minutes in series]
    total = sum(minutes for _, minutes in series)

    def met(seats: int) -> float:
        return sum(minutes for demand, minutes in series if demand <= seats)

    answer = fewest_seats(pieces, share)
    assert met(answer) >= share * total - 1e-9
    assert answer == 0 or met(answer - 1) < share * total - 1e-9
    random.shuffle(pieces)
    assert fewest_seats(pieces, share) == answer
