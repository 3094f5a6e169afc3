"""Issue 19: the usage chart tells the truth at every window. Minute periods (minute
rollups, kept 14 days), ``auto`` periods, ``average_seats`` beside ``peak_seats``, and
nothing after now; on SQLite and PostgreSQL. The brute-force model test of the minute
rollups is tests/test_reports.py's (every period against the raw events)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import functions_framework
import pytest
from http_support import push_all_to_audit
from sqlalchemy import Engine, inspect, select

from seatlease import clock
from seatlease.errors import InvalidRequest
from seatlease.records import db, event_log, partitions, reports, store
from seatlease.records.reports import Window, bucket_period, resolve_period, usage_report
from seatlease.records.tables import usage_minute_rollups, usage_rollups
from seatlease.seats.engine import SeatRequest
from seatlease_cli import main

T = "acme"
NOW = datetime(2026, 11, 24, 12, 30, 15, tzinfo=UTC)


def event(n: int, etype: str, when: datetime, session: str | None, used: int | None,
          **extra) -> dict:  # fmt: skip
    return {
        "event_id": f"ev-{n:04d}",
        "type": etype,
        "tenant_id": T,
        "license_id": "cad",
        "session_id": session,
        "client_id": session and f"c-{session}",
        "occurred_at": when.isoformat().replace("+00:00", "Z"),
        "seats_used": used,
        "seats_total": None if used is None else 3,
        "count": 1,
        "metadata": {},
        **extra,
    }


# -- the test: a hold of 2 seats for 5 s, through the real pieces -----------------


def test_a_five_second_hold_of_two_seats(database, redis_client, pubsub, monkeypatch):
    """engine -> outbox -> reaper -> Pub/Sub emulator -> audit function -> database, then
    the reports: the minute report has one or two points (the hold may cross a minute)
    with peak 2 and 10 +- 2 seat-seconds in all; the hour's average is under 0.01 seats
    once the hour is over (before that it is the seat time over the hour's elapsed part);
    no point starts after now."""
    from seatlease.api.runtime import seat_engine
    from seatlease.events.pubsub import Publisher
    from seatlease.events.reaper import Reaper

    store.create_tenant(T)
    store.create_license(T, "cad", seats=2, lease_seconds=60)
    engine = seat_engine()
    began = clock.now()
    # A few ms apart: two Lua calls in one millisecond have no known order in the log
    # (reports.py, "Method"), so the last one's seat count would be a guess.
    ann = engine.acquire(SeatRequest(T, "cad", "ann"))
    time.sleep(0.005)
    bob = engine.acquire(SeatRequest(T, "cad", "bob"))
    time.sleep(5)
    engine.release(T, "cad", ann.session_id)
    time.sleep(0.005)
    engine.release(T, "cad", bob.session_id)
    Reaper(redis_client, Publisher()).run()
    audit = functions_framework.create_app("audit", "functions/audit/main.py").test_client()
    push_all_to_audit(audit, pubsub.pull())
    assert len(event_log.list_events(T, "cad")) == 4

    now = clock.now()
    ahead = Window(T, "cad", since=began - timedelta(minutes=5), until=now + timedelta(hours=3))
    minutes = [u for u in usage_report(Window(T, "cad"), "minute").usage]
    assert 1 <= len(minutes) <= 2
    assert max(u.peak_seats for u in minutes) == 2, minutes
    assert sum(u.seat_seconds for u in minutes) == pytest.approx(10, abs=2)
    auto = usage_report(Window(T, "cad"), "auto")  # a short history: by minute
    assert [(u.period_start, u.seat_seconds) for u in auto.usage] == [
        (u.period_start, u.seat_seconds) for u in minutes
    ]
    for period in ("minute", "hour", "day"):
        report = usage_report(ahead, period)
        assert report.usage and all(u.period_start <= clock.now() for u in report.usage)
        assert sum(u.seat_seconds for u in report.usage) == pytest.approx(10, abs=2)
        assert report.timelines[0].end <= clock.now()
    hour = reports.model.floor(began, "hour")
    at_hour = usage_report(Window(T, "cad", since=hour, until=hour + timedelta(hours=1)), "hour")
    (point,) = at_hour.usage
    elapsed = (min(clock.now(), hour + timedelta(hours=1)) - hour).total_seconds()
    assert point.average_seats == pytest.approx(point.seat_seconds / elapsed, abs=1e-3)
    monkeypatch.setattr(clock, "now", lambda: hour + timedelta(hours=1))  # the hour is over
    (over,) = usage_report(Window(T, "cad", since=hour, until=hour + timedelta(hours=1)),
                           "hour").usage  # fmt: skip
    assert over.peak_seats == 2 and over.average_seats < 0.01


# -- minute periods, average, nothing after now (crafted events, fixed now) ---------------


def held(database: str) -> list[dict]:
    """Two seats 12:10:10-12:10:20 (and one of them to 12:11:40), a third seat taken at
    12:29:50 and still held at now (12:30:15)."""
    at = lambda m, s: datetime(2026, 11, 24, 12, m, s, tzinfo=UTC)  # noqa: E731
    rows = [
        event(0, "lease.acquired", at(10, 10), "a", 1),
        event(1, "lease.acquired", at(10, 10), "b", 2),
        event(2, "lease.released", at(10, 20), "a", 1),
        event(3, "lease.released", at(11, 40), "b", 0),
        event(4, "lease.acquired", at(29, 50), "c", 1),
    ]
    assert event_log.insert_events(rows) == 5
    return rows


def test_minute_periods_average_and_nothing_after_now(database, fixed_now):
    held(database)
    since = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    window = Window(T, "cad", since=since, until=since + timedelta(hours=2))
    report = usage_report(window, "minute")
    assert report.period == "minute"
    rows = {u.period_start.strftime("%H:%M"): u for u in report.usage}
    assert min(rows) == "12:00" and max(rows) == "12:30"  # the current minute, no later
    assert len(rows) == 31
    assert (rows["12:10"].peak_seats, rows["12:10"].seat_seconds) == (2, 10 + 50)
    assert rows["12:10"].average_seats == 1.0
    assert (rows["12:11"].peak_seats, rows["12:11"].seat_seconds) == (1, 40)
    assert (rows["12:12"].peak_seats, rows["12:12"].average_seats) == (0, 0)
    # The current minute: one seat for the 15 s elapsed, not for the whole minute.
    assert (rows["12:30"].seat_seconds, rows["12:30"].average_seats) == (15, 1.0)
    assert (rows["12:29"].seat_seconds, rows["12:29"].average_seats) == (10, round(10 / 60, 4))
    # The hour so far: 125 seat-seconds over 30 min 15 s; the next hour is not reported.
    (hour,) = usage_report(window, "hour").usage
    assert (hour.peak_seats, hour.seat_seconds) == (2, 10 + 50 + 40 + 10 + 15)
    assert hour.average_seats == round(125 / 1815, 4)
    (line,) = usage_report(window, "hour").timelines
    assert line.end == NOW and [p[3] for p in line.points] == [hour.average_seats]
    # A window wholly after now has no period at all.
    later = Window(T, "cad", since=NOW + timedelta(minutes=1), until=NOW + timedelta(hours=1))
    assert usage_report(later, "minute").usage == []
    # Windows cut inside minutes read the raw events at their edges.
    cut = Window(T, "cad", since=since + timedelta(minutes=10, seconds=15),
                 until=since + timedelta(minutes=11, seconds=30))  # fmt: skip
    assert [(u.period_start.minute, u.peak_seats, u.seat_seconds, u.average_seats)
            for u in usage_report(cut, "minute").usage] == [
        (10, 2, 5 + 45, round(50 / 45, 4)),  # from 12:10:15: a for 5 s, b for 45 s
        (11, 1, 30, 1.0),
    ]  # fmt: skip


def test_auto_picks_the_finest_period_under_1500_points(database, fixed_now):
    """Beyond 1,500 changes (exact steps: tests/test_exact_steps.py), ``auto`` buckets."""
    held(database)

    def auto(since: timedelta | None, until: timedelta | None = None) -> str:
        window = Window(T, None, since and NOW - since, until and NOW - until)
        assert resolve_period(window, "auto") == "exact"  # five changes
        return bucket_period(window)

    assert auto(timedelta(hours=24)) == "minute"  # 1,440 minutes
    assert auto(timedelta(hours=26)) == "hour"  # 1,560 minutes
    assert auto(timedelta(days=60)) == "hour"  # 1,440 hours
    assert auto(timedelta(days=63)) == "day"
    assert auto(timedelta(days=20), timedelta(days=19, hours=23)) == "hour"  # minutes gone
    assert auto(None) == "minute"  # the history: since 12:10 today
    assert auto(timedelta(hours=1), -timedelta(days=400)) == "minute"  # ends at now
    assert bucket_period(Window("nobody")) == "hour"  # no events: nothing to size
    report = usage_report(Window(T, "cad", since=NOW - timedelta(hours=1)), "auto")
    assert (report.period, report.usage_period) == ("exact", "minute")


def test_minute_periods_refuse_what_the_minute_rollups_no_longer_hold(database, fixed_now):
    held(database)
    since = NOW - timedelta(days=14, minutes=1)
    old = Window(T, since=since, until=since + timedelta(hours=1))
    with pytest.raises(InvalidRequest, match="last 14 days") as refused:
        usage_report(old, "minute")
    assert refused.value.fields["limit"] == "2026-11-10T12:30:15Z"
    edge = NOW - timedelta(days=14)
    at_edge = usage_report(Window(T, since=edge, until=edge + timedelta(hours=1)), "minute")
    assert at_edge.period == "minute" and at_edge.usage == []  # allowed; nothing happened
    ancient = event(9, "lease.denied", NOW - timedelta(days=30), None, None, count=2)
    assert event_log.insert_events([ancient]) == 1
    with pytest.raises(InvalidRequest, match="since must be"):  # the history is older
        usage_report(Window(T), "minute")
    assert usage_report(Window(T), "auto").usage_period == "hour"


def test_prune_deletes_minute_rollups_after_14_days(database, fixed_now):
    held(database)
    old = [
        event(10, "lease.acquired", NOW - timedelta(days=15), "o", 1),
        event(11, "lease.released", NOW - timedelta(days=14, minutes=1), "o", 0),
    ]
    assert event_log.insert_events(old) == 2

    def minutes() -> list[datetime]:
        with db.get_engine().connect() as conn:
            found = conn.execute(select(usage_minute_rollups.c.minute)).scalars()
            return sorted(clock.utc(m) for m in found)

    assert len(minutes()) == 5 and len(hour_rows()) == 3
    pruned = event_log.prune_events(NOW - timedelta(days=400))
    assert pruned.minute_rollups_deleted == 2 and pruned.events_deleted == 0
    assert min(minutes()) == datetime(2026, 11, 24, 12, 10, tzinfo=UTC)
    assert len(hour_rows()) == 3  # the hourly rollups stay


def hour_rows() -> list:
    with db.get_engine().connect() as conn:
        return list(conn.execute(select(usage_rollups)))


def test_cli_by_minute_and_auto(database, fixed_now, capsys, monkeypatch):
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # direct mode; reports need no Redis
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    held(database)
    base = ["report", "usage", "--tenant", T, "--since", "2026-11-24T12:09Z", "--json"]
    assert main([*base, "--section", "usage"]) == 0
    body = json.loads(capsys.readouterr().out)
    # 12:09 to 12:29: without until, a report runs to the last event; five changes:
    # exact steps (in the timelines, for a chart), the usage rows per minute
    assert (body["period"], body["usage_period"]) == ("exact", "minute")
    assert len(body["usage"]) == 21
    assert body["usage"][1]["average_seats"] == 1.0
    assert main([*base, "--by", "hour"]) == 0
    assert json.loads(capsys.readouterr().out)["period"] == "hour"
    code = main(["report", "usage", "--tenant", T, "--by", "minute", "--since", "2026-10-01"])
    err = capsys.readouterr().err
    assert code == 2 and "Minute periods cover the last 14 days" in err
    code = main(["report", "usage", "--tenant", T, "--by", "minute", "--since",
                 "2026-11-24T12:09Z"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "Seats in use (peak and average) and denials per minute" in out
    assert [line.split()[:5] for line in out.splitlines() if " 12:10 " in line] == [
        ["cad", "2026-11-24", "12:10", "2", "1.0"]
    ]


# -- the chart: what it draws, read back from the figure ---------------------------------


def test_the_chart_draws_the_average_and_the_peak_up_to_now(database, fixed_now, tmp_path):
    from seatlease_cli.report import draw_chart

    held(database)
    window = Window(T, "cad", since=datetime(2026, 11, 24, 12, 9, tzinfo=UTC),
                    until=datetime(2026, 11, 24, 18, 0, tzinfo=UTC))  # fmt: skip
    report = usage_report(window, "minute")  # exact steps: tests/test_exact_steps.py
    drawn = draw_chart(report.timelines, window, tmp_path / "c.png", now=NOW)
    (cad,) = drawn
    assert cad["license_id"] == "cad" and cad["labels"] >= {
        "average seats in use",
        "peak seats in use (per period)",
        "seat limit",
    }
    assert cad["xlim"][1] == NOW  # the window runs to 18:00; the axis stops at now
    assert cad["edges"][0] == window.since and cad["edges"][-1] == NOW
    usage = [u for u in report.usage]
    assert cad["peak"] == [u.peak_seats for u in usage]
    assert cad["average"] == pytest.approx([u.average_seats for u in usage])
    assert max(cad["peak"]) == 2 and max(cad["average"]) == 1.0
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


# -- migration 0008 fills the minute rollups of the last 14 days -------------------------


def test_migration_0008_fills_the_minute_rollups_from_the_stored_events(migration_urls, tmp_path):
    """A database at 0005 with events (today's and a month-old one) upgraded to 0008: its
    minute rollups are those the audit insert writes for the last 14 days' events, on
    PostgreSQL and SQLite; a downgrade drops them."""
    from seatlease.records.tables import lease_events

    now = datetime.now(UTC).replace(second=0, microsecond=0)
    rows = [
        event(0, "lease.acquired", now - timedelta(hours=2, seconds=15), "a", 1),
        event(1, "lease.acquired", now - timedelta(hours=2, seconds=10), "b", 2),
        event(2, "lease.denied", now - timedelta(hours=1, minutes=30), None, None, count=4),
        event(3, "lease.released", now - timedelta(hours=1), "a", 1),
        event(4, "lease.acquired", now - timedelta(days=30), "old", 1),
    ]
    for row in rows:
        row["occurred_at"] = datetime.fromisoformat(row["occurred_at"])

    expected = _minute_rows_written_by_the_insert(tmp_path, rows)
    assert len(expected) == 3  # the month-old event's minute is not filled
    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0005")
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                months = [r["occurred_at"] for r in rows]
                partitions.ensure_partitions(conn, months)
            conn.execute(lease_events.insert(), rows)
        store.upgrade(engine)
        assert _minute_rows(engine) == expected, url
        store.downgrade(engine, "0005")
        assert "usage_minute_rollups" not in inspect(engine).get_table_names()
        engine.dispose()


def _minute_rows_written_by_the_insert(tmp_path: Path, rows: list[dict]) -> list[tuple]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        store.upgrade(engine)
        event_log.insert_events([r for r in rows if r["session_id"] != "old"], engine)
        return _minute_rows(engine)
    finally:
        engine.dispose()


def _minute_rows(engine: Engine) -> list[tuple]:
    with engine.connect() as conn:
        found = conn.execute(select(usage_minute_rollups)).mappings().all()
    return sorted(
        tuple(clock.utc(v) if isinstance(v, datetime) else v for v in row.values()) for row in found
    )


# -- concurrent writers of one minute ------------------------------------------------------


def test_concurrent_messages_of_one_minute_add_up(database_url):
    """Eight audit instances store eight messages of the same minute at once (each
    redelivered once, also at the same time): the minute's row counts every event once,
    whatever the order in which the transactions took its row lock."""
    import threading

    start = datetime(2026, 11, 24, 12, 7, tzinfo=UTC)
    messages = [
        [
            event(10 * m, "lease.acquired", start + timedelta(seconds=m), f"s{m}", m + 1),
            event(10 * m + 1, "lease.released", start + timedelta(seconds=50 + m), f"s{m}", 7 - m),
        ]
        for m in range(8)
    ]
    event_log.insert_events([event(999, "lease.denied", start, None, None)])  # partitions first
    barrier = threading.Barrier(16)
    errors: list[BaseException] = []

    def deliver(batch: list[dict]) -> None:
        try:
            barrier.wait(10)
            event_log.insert_events(batch)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=deliver, args=(b,)) for b in messages + messages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    (row,) = _minute_rows(db.get_engine())
    found = dict(zip([c.name for c in usage_minute_rollups.columns], row, strict=True))
    assert (found["acquired"], found["released"], found["denials"], found["net"]) == (8, 8, 1, 0)
    # seat time: lease m held from second m to second 50 + m, 50 s each
    assert found["dsec_ms"] == 8 * 50_000
    assert found["last_used"] == 0 and found["max_used"] == 8


def test_the_cli_refuses_to_chart_an_older_admin_answer():
    """An admin function from before average_seats answers points of three: the chart
    would have to invent an average, so the CLI says what to do instead."""
    from seatlease_cli import CommandError
    from seatlease_cli.report import chart_input

    data = {"tenant_id": T, "license_id": None, "since": None, "until": None}
    old = [{"license_id": "cad", "seats": 3, "start_level": 0, "start_total": None,
            "points": [["2026-11-24T12:00:00Z", 2, 3]], "denials": []}]  # fmt: skip
    with pytest.raises(CommandError, match="older release"):
        chart_input(data, old)
