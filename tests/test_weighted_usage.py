"""Weighted seats in the records (issue 30, item 5): the audit function stores each
event's ``seats`` (absent or null: 1), migration 0012 adds the column without rewriting
the stored events, and the usage reports weight seat-seconds by it (a weight-4 lease
held an hour is 4 seat-hours) while counts of leases stay counts; on PostgreSQL and on
the SQLite fold of the local stack. The brute-force model test with random weights is
tests/test_reports.py's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import functions_framework
import pytest
import sqlalchemy as sa
from http_support import push_all_to_audit, push_to_audit
from sqlalchemy import select, text

from seatlease.events.audit import INT_MAX, decode_events
from seatlease.records import db, event_log, partitions, store
from seatlease.records.reports import Window, usage_report, user_usage
from seatlease.records.tables import lease_events, usage_leases

T = "acme"
NOW = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)


def at(hhmm: str) -> datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return NOW.replace(hour=hours, minute=minutes)


def event(n: int, etype: str, when: datetime, session: str | None, used: int | None,
          seats: int | None = None, user: str | None = None) -> dict:  # fmt: skip
    found = {
        "event_id": f"w-{n:03d}",
        "type": etype,
        "tenant_id": T,
        "license_id": "render",
        "session_id": session,
        "client_id": session and f"node-{session}",
        "occurred_at": when.isoformat().replace("+00:00", "Z"),
        "seats_used": used,
        "seats_total": None if used is None else 8,
        "count": 1,
        "metadata": {"user": user} if user else {},
    }
    if seats is not None:  # else absent: an event written before weighted seats
        found["seats"] = seats
    return found


def two_leases() -> list[dict]:
    """A weight-4 lease 10:00-11:00 (ann) and a plain lease 10:30-11:30 (bob), whose
    events carry no ``seats`` (written before weights: they count 1). ``seats_used`` is
    Redis's weighted count: 4, 5, 1, 0."""
    return [
        event(0, "lease.acquired", at("10:00"), "big", 4, seats=4, user="ann"),
        event(1, "lease.acquired", at("10:30"), "one", 5, user="bob"),
        event(2, "lease.released", at("11:00"), "big", 1, seats=4),
        event(3, "lease.released", at("11:30"), "one", 0),
    ]


def test_the_audit_function_stores_each_events_seats(database, fixed_now):
    """Through the audit function (its Pub/Sub push): ``seats`` stored as sent, 1 when
    absent or null; the endings arrive first (another message), the lease's weight in
    ``usage_leases`` is still its acquire's."""
    rows = two_leases()
    rows.append(event(4, "lease.denied", at("11:40"), None, None, seats=None))
    rows[-1]["seats"] = None  # null: as license.* and lease.denied events may have it
    audit = functions_framework.create_app("audit", "functions/audit/main.py").test_client()
    endings, starts = [rows[2], rows[3], rows[4]], [rows[0], rows[1]]
    for i, batch in enumerate((endings, starts)):
        assert push_to_audit(audit, json.dumps(batch).encode(), str(i)).status_code == 200
    stored = {e["event_id"]: e["seats"] for e in event_log.list_events(T, "render")}
    assert stored == {"w-000": 4, "w-001": 1, "w-002": 4, "w-003": 1, "w-004": 1}
    with db.get_engine().connect() as conn:
        leases = dict(conn.execute(select(usage_leases.c.session_id, usage_leases.c.seats)).all())
    assert leases == {"big": 4, "one": 1}


def test_a_weighted_lease_through_the_real_pieces(database, redis_client, pubsub):
    """engine -> outbox -> reaper -> Pub/Sub emulator -> audit function -> database: a
    lease of 3 seats and a plain one held about 2 s each; every lease event stores its
    weight, ``seats_used`` peaks at 4, and the seat-seconds are about 3 x 2 + 1 x 2."""
    import time

    from seatlease.api.runtime import seat_engine
    from seatlease.events.pubsub import Publisher
    from seatlease.events.reaper import Reaper
    from seatlease.seats.engine import SeatRequest

    store.create_tenant(T)
    store.create_license(T, "render", seats=4, lease_seconds=60)
    engine = seat_engine()
    node = engine.acquire(SeatRequest(T, "render", "node-1", seats=3))
    time.sleep(0.005)  # two Lua calls in one millisecond have no known order in the log
    desk = engine.acquire(SeatRequest(T, "render", "desk-1"))
    time.sleep(2)
    engine.release(T, "render", node.session_id)
    time.sleep(0.005)
    engine.release(T, "render", desk.session_id)
    Reaper(redis_client, Publisher()).run()
    audit = functions_framework.create_app("audit", "functions/audit/main.py").test_client()
    push_all_to_audit(audit, pubsub.pull())
    stored = [(e["type"], e["client_id"], e["seats"], e["seats_used"])
              for e in event_log.list_events(T, "render")]  # fmt: skip
    assert stored == [
        ("lease.acquired", "node-1", 3, 3),
        ("lease.acquired", "desk-1", 1, 4),
        ("lease.released", "node-1", 3, 1),
        ("lease.released", "desk-1", 1, 0),
    ]
    usage = usage_report(Window(T, "render"), "minute").usage
    assert max(u.peak_seats for u in usage) == 4
    assert sum(u.seat_seconds for u in usage) == pytest.approx(3 * 2 + 2, abs=0.5)
    (user,) = user_usage(Window(T))
    assert (user.leases, user.seat_seconds) == (2, pytest.approx(8, abs=0.5))


@pytest.mark.parametrize(
    "seats, problem",
    [
        (0, "greater than or equal to 1"),
        (-4, "greater than or equal to 1"),
        (INT_MAX + 1, "less than or equal to"),
        (True, "valid integer"),
        (4.0, "valid integer"),
        ("4", "valid integer"),
    ],
)
def test_a_bad_weight_is_a_bad_event_and_the_others_are_kept(seats, problem):
    good = event(0, "lease.acquired", at("10:00"), "a", 2, seats=2)
    bad = {**event(1, "lease.acquired", at("10:01"), "b", 3), "seats": seats}
    decoded = decode_events(json.dumps([good, bad]).encode())
    assert [e.event_id for e in decoded.events] == ["w-000"]
    assert decoded.events[0].seats == 2
    (rejected,) = decoded.rejected
    assert "'w-001'" in rejected and "seats" in rejected and problem in rejected


def test_a_weight_4_and_a_weight_1_lease_give_exact_seat_seconds(database, fixed_now):
    """10:00-11:00 weight 4, 10:30-11:30 weight 1: the 10:00 hour holds 4 x 3600 +
    1 x 1800 seat-seconds, the 11:00 hour 1 x 1800, the day 18,000 (5 seat-hours); a
    window cut inside the hours (raw events at its edges) and minutes the same; peaks
    from ``seats_used``; two leases acquired, two released; each lease's duration (not
    seat time) per client; the per-user report 4 seat-hours for ann, 1 for bob."""
    assert event_log.insert_events(two_leases()) == 4
    whole = Window(T, "render")
    by_hour = usage_report(whole, "hour")
    hours = [(u.period_start, u.peak_seats, u.seat_seconds) for u in by_hour.usage]
    # (the 11:00 hour's peak is the 5 seats carried into it, until 11:00's release)
    assert hours == [(at("10:00"), 5, 4 * 3600 + 1800.0), (at("11:00"), 5, 1800.0)]
    assert by_hour.usage[0].average_seats == 4.5
    (day,) = usage_report(whole, "day").usage
    assert (day.peak_seats, day.seat_seconds) == (5, 5 * 3600.0)
    minutes = usage_report(whole, "minute").usage
    assert sum(u.seat_seconds for u in minutes) == 5 * 3600.0
    assert {u.seat_seconds for u in minutes if u.period_start < at("10:30")} == {4 * 60.0}
    assert {u.seat_seconds for u in minutes if at("10:30") <= u.period_start < at("11:00")} == {
        5 * 60.0
    }
    # Edges from the raw events: 10:15-10:45 is 4 x 30 min + 1 x 15 min.
    edge = Window(T, "render", since=at("10:15"), until=at("10:45"))
    (cut,) = usage_report(edge, "hour").usage
    assert cut.seat_seconds == 4 * 1800 + 900.0
    (counts,) = by_hour.outcomes
    assert (counts.acquired, counts.released, counts.lost) == (2, 2, 0)
    durations = {d.client_id: (d.leases, d.total_seconds) for d in by_hour.durations}
    assert durations == {"node-big": (1, 3600.0), "node-one": (1, 3600.0)}
    users = {u.user: (u.leases, u.seat_seconds, u.longest_seconds) for u in user_usage(whole)}
    assert users == {"ann": (1, 4 * 3600.0, 3600.0), "bob": (1, 3600.0, 3600.0)}
    # Exact steps are Redis's weighted count itself.
    exact = usage_report(whole, "exact").timelines[0].steps
    assert [seats for _at, seats in exact] == [4, 5, 1, 0]


def test_old_events_without_seats_count_one_seat_each(database, fixed_now):
    """A history written before weights (no ``seats`` anywhere) reports as it always did."""
    rows = [
        event(0, "lease.acquired", at("09:00"), "a", 1),
        event(1, "lease.acquired", at("09:30"), "b", 2),
        event(2, "lease.released", at("10:00"), "a", 1),
        event(3, "lease.released", at("10:30"), "b", 0),
    ]
    assert event_log.insert_events(rows) == 4
    usage = usage_report(Window(T, "render"), "hour").usage
    assert [u.seat_seconds for u in usage] == [3600 + 1800.0, 1800.0]
    assert {u.user: u.seat_seconds for u in user_usage(Window(T))} == {None: 2 * 3600.0}


def test_a_vanished_weighted_lease_is_lost_by_its_seats(database, fixed_now):
    """Redis lost a weight-4 lease (no ending); the next event's count shows 4 seats
    gone: lost counts seats, since Redis's count, its only witness, does."""
    rows = [
        event(0, "lease.acquired", at("10:00"), "big", 4, seats=4),
        event(1, "lease.acquired", at("11:10"), "one", 1),  # Redis's count without "big"
    ]
    assert event_log.insert_events(rows) == 2
    usage = usage_report(Window(T, "render"), "hour").usage
    assert (
        [(u.peak_seats, u.lost, u.seat_seconds) for u in usage]
        == [
            (4, 0, 4 * 3600.0),
            # closed as lost at the hour's end (as a plain lease is), the new one from 11:10
            (4, 4, 4 * 3600 + 3000.0),
            (1, 0, 3600.0),  # the level is Redis's count from there on
            (1, 0, 3600.0),
            (1, 0, 3600.0),
        ][: len(usage)]
    )
    assert len(usage) == 2


# -- migration 0012 ---------------------------------------------------------------------

# lease_events as revision 0011 holds it: no seats.
EVENTS_0011 = sa.table(
    "lease_events",
    *(sa.column(c) for c in ("event_id", "type", "tenant_id", "license_id", "session_id",
                             "client_id", "seats_used", "seats_total", "count")),
    sa.column("occurred_at", sa.DateTime(timezone=True)),
    sa.column("metadata", sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")),
)  # fmt: skip


def test_migration_0012_adds_seats_without_rewriting_the_events(migration_urls):
    """A database at 0011 holding events upgrades to 0012: every stored event and lease
    weighs 1, and on PostgreSQL no partition of lease_events (nor usage_leases) was
    rewritten (same relfilenode: PostgreSQL 11+ adds a column with a constant default in
    the catalogue alone); the reports read the upgraded rows; a downgrade drops the
    columns. On PostgreSQL and SQLite."""
    rows = [
        {**event(0, "lease.acquired", at("10:00"), "a", 1), "metadata": {}},
        {**event(1, "lease.released", at("10:30"), "a", 0), "metadata": {}},
    ]
    for row in rows:
        row["occurred_at"] = datetime.fromisoformat(row["occurred_at"])
    for url in migration_urls:
        engine = db.make_engine(url)
        postgres = engine.dialect.name == "postgresql"
        store.upgrade(engine, "0011")
        with engine.begin() as conn:
            if postgres:
                partitions.ensure_partitions(conn, [r["occurred_at"] for r in rows])
            conn.execute(EVENTS_0011.insert(), rows)
            conn.execute(
                text(
                    "INSERT INTO usage_leases (session_id, tenant_id, license_id, acquired_at,"
                    " ended_at, end_type) VALUES ('a', :t, 'render', :a, :e, 'lease.released')"
                ),
                {"t": T, "a": rows[0]["occurred_at"], "e": rows[1]["occurred_at"]},
            )
        tables = [partitions.partition_name(at("10:00")), "usage_leases"]
        before = _files(engine, tables) if postgres else None
        store.upgrade(engine)
        if postgres:
            assert _files(engine, tables) == before, "a table was rewritten"
        with engine.connect() as conn:
            assert conn.execute(select(lease_events.c.seats)).scalars().all() == [1, 1]
            assert conn.execute(select(usage_leases.c.seats)).scalars().all() == [1]
        event_log.insert_events([event(2, "lease.acquired", at("11:00"), "b", 3, seats=3)], engine)
        # The raw events stored before 0012 (no rollups: inserted by hand) are read at a
        # window's edges: 10:15-10:30 one seat, the release's -1 by its default weight.
        edge = Window(T, "render", since=at("10:15"), until=at("10:45"))
        assert [u.seat_seconds for u in usage_report(edge, "hour", engine).usage] == [900.0]
        later = Window(T, "render", since=at("11:00"), until=at("12:00"))
        assert [u.seat_seconds for u in usage_report(later, "hour", engine).usage] == [
            3 * 3600.0
        ], url
        store.downgrade(engine, "0011")
        columns = {c["name"] for c in sa.inspect(engine).get_columns("lease_events")}
        assert "seats" not in columns and "event_id" in columns
        engine.dispose()


def _files(engine, tables: list[str]) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            name: conn.execute(
                text("SELECT relfilenode FROM pg_class WHERE relname = :n"), {"n": name}
            ).scalar_one()
            for name in tables
        }
