"""Issue 34, items 7 and 8: exact steps for short windows, and a chart a person reads at
a glance. ``"period": "exact"`` is the step function of seats in use (one point at each
change, from the raw events, up to the window's end or now), ``auto`` picks it for at
most 1,500 changes, it is bounded like every report; the CLI's chart draws it as steps,
ends at now, puts refused requests at their time, says what it draws in plain words, and
its legend covers nothing. On SQLite and PostgreSQL (the ``database`` fixture)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from test_usage_periods import NOW, T, event, held

from seatlease import admin
from seatlease.errors import InvalidRequest
from seatlease.records import event_log, reports, store
from seatlease.records.reports import MAX_PERIODS, Window, resolve_period, usage_report
from seatlease_cli import main
from seatlease_cli.report import (
    DENIED_LABEL,
    LIMIT_LABEL,
    STEPS_LABEL,
    chart_input,
    draw_chart,
    read_chart_series,
)


def at(m: int, s: int = 0, ms: int = 0) -> datetime:
    return datetime(2026, 11, 24, 12, m, s, ms * 1000, tzinfo=UTC)


def test_exact_steps_are_one_point_per_change_up_to_now(database, fixed_now):
    """held(): a and b at 12:10:10, a released 12:10:20, b 12:11:40, c taken 12:29:50 and
    still held at now (12:30:15): its seat is drawn up to now, not to its acquire."""
    held(database)
    report = usage_report(Window(T, "cad", since=at(10), until=at(59)), "exact")
    assert (report.period, report.usage_period) == ("exact", "minute")
    (line,) = report.timelines
    assert line.steps == [(at(10), 0), (at(10, 10), 2), (at(10, 20), 1), (at(11, 40), 0),
                          (at(29, 50), 1)]  # fmt: skip
    assert line.end == NOW and line.end_level == 1  # until is 12:59: now comes first
    # A window starting while seats are held starts at that level.
    (inside,) = usage_report(Window(T, "cad", since=at(10, 15)), "exact").timelines
    assert inside.steps == [(at(10, 15), 2), (at(10, 20), 1), (at(11, 40), 0), (at(29, 50), 1)]
    # Without since: from the license's first event.
    (whole,) = usage_report(Window(T, "cad"), "exact").timelines
    assert whole.steps[0] == (at(10, 10), 2)


def test_same_instant_events_leave_one_step_and_denials_keep_their_time(database, fixed_now):
    rows = [
        event(0, "lease.acquired", at(5, 1), "a", 1),
        event(1, "lease.released", at(5, 1), "a", 0),  # same millisecond: back to 0
        event(2, "lease.acquired", at(5, 2, 500), "b", 1),
        event(3, "lease.denied", at(5, 7, 250), None, None, count=2),
        event(4, "lease.denied", at(6, 40), None, None, count=1),
    ]
    assert event_log.insert_events(rows) == 5
    report = usage_report(Window(T, "cad", since=at(5)), "exact")
    (line,) = report.timelines
    assert line.steps == [(at(5), 0), (at(5, 2, 500), 1)]
    assert line.denials == [(at(5, 7, 250), 2), (at(6, 40), 1)]  # not the minutes' starts


def test_the_admin_action_answers_steps_as_at_and_seats(database, fixed_now):
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    held(database)
    _status, body = admin.execute(admin.parse({
        "action": "report.usage", "tenant_id": T, "since": "2026-11-24T12:10:00Z",
        "period": "exact", "timelines": True,
    }))  # fmt: skip
    assert (body["period"], body["usage_period"]) == ("exact", "minute")
    (line,) = body["timelines"]
    assert line["steps"] == [
        {"at": "2026-11-24T12:10:00Z", "seats": 0},
        {"at": "2026-11-24T12:10:10Z", "seats": 2},
        {"at": "2026-11-24T12:10:20Z", "seats": 1},
        {"at": "2026-11-24T12:11:40Z", "seats": 0},
        {"at": "2026-11-24T12:29:50Z", "seats": 1},
    ]
    assert line["end"] == "2026-11-24T12:30:15Z" and line["end_level"] == 1
    _status, hourly = admin.execute(admin.parse({
        "action": "report.usage", "tenant_id": T, "period": "hour", "timelines": True,
    }))  # fmt: skip
    assert "steps" not in hourly["timelines"][0]  # only exact periods carry them


def many(count: int, start: datetime, license_id: str = "cad") -> list[dict]:
    """``count`` changes of seats in use, one a second: take, give back, take, ..."""
    rows = []
    for n in range(count):
        row = event(n, "lease.acquired" if n % 2 == 0 else "lease.released",
                    start + timedelta(seconds=n), f"s{n // 2}", 1 - n % 2)  # fmt: skip
        row["event_id"] = f"ev-{license_id}-{n:06d}"
        row["license_id"] = license_id
        rows.append(row)
    return rows


def test_auto_is_exact_up_to_1500_changes(database, fixed_now):
    start = NOW - timedelta(hours=2)
    assert event_log.insert_events(many(1500, start)) == 1500
    window = Window(T, "cad", since=start - timedelta(minutes=1))
    assert resolve_period(window, "auto") == "exact"
    (line,) = usage_report(window, "auto").timelines
    assert len(line.steps) == 1 + 1500  # the start, then every change
    extra = event(9999, "lease.acquired", start + timedelta(seconds=1600), "late", 1)
    assert event_log.insert_events([extra]) == 1
    assert resolve_period(window, "auto") == "minute"  # 1,501 changes: periods again
    assert usage_report(window, "exact").timelines[0].steps[-1] == (extra_at(extra), 1)


def extra_at(row: dict) -> datetime:
    return datetime.fromisoformat(row["occurred_at"].replace("Z", "+00:00"))


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_exact_steps_are_bounded_per_license(database, fixed_now):
    """At the bound: MAX_PERIODS changes of one license are answered, one more is a 400
    naming the limit (the rows are never all read: LIMIT MAX_ROWS + 1)."""
    start = NOW - timedelta(hours=4)
    rows = many(MAX_PERIODS, start)
    assert event_log.insert_events(rows) == MAX_PERIODS
    window = Window(T, "cad", since=start)
    (line,) = usage_report(window, "exact").timelines
    assert len(line.steps) == MAX_PERIODS  # the first change is at the window's start
    one_more = event(99999, "lease.acquired", start + timedelta(seconds=MAX_PERIODS), "z", 1)
    one_more["event_id"] = "ev-one-more"
    assert event_log.insert_events([one_more]) == 1
    with pytest.raises(InvalidRequest, match="at most 10,000") as refused:
        usage_report(window, "exact")
    assert refused.value.fields["limit"] == MAX_PERIODS


def test_exact_steps_refuse_a_window_older_than_the_raw_events(database, fixed_now):
    held(database)
    event_log.prune_events(NOW - timedelta(days=1))  # raw events before 2026-11-01 are gone
    old = Window(T, "cad", since=datetime(2026, 10, 1, tzinfo=UTC))
    with pytest.raises(InvalidRequest, match="raw events") as refused:
        usage_report(old, "exact")
    assert refused.value.fields["limit"] == "2026-11-01T00:00:00Z"
    assert resolve_period(old, "auto") != "exact"  # auto buckets instead


def test_the_admin_action_answering_exact_carries_the_steps(database, fixed_now):
    """`"period": "exact"` without `timelines` answered per-minute rows and no step."""
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    held(database)
    for period in ("exact", "auto"):
        _status, body = admin.execute(admin.parse({
            "action": "report.usage", "tenant_id": T, "since": "2026-11-24T12:09:00Z",
            "period": period,
        }))  # fmt: skip
        assert body["period"] == "exact"
        (line,) = body["timelines"]
        assert [step["seats"] for step in line["steps"]] == [0, 2, 1, 0, 1]


def test_cli_by_exact_and_auto(database, fixed_now, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # direct mode; reports need no Redis
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    held(database)
    base = ["report", "usage", "--tenant", T, "--since", "2026-11-24T12:09Z"]
    for by in ("exact", "auto"):
        assert main([*base, "--by", by, "--json"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["period"] == "exact"
        # exact means steps: the answer that says it carries them (issue 42)
        (line,) = answer["timelines"]
        assert [step["seats"] for step in line["steps"]] == [0, 2, 1, 0, 1]
    chart = tmp_path / "exact.png"
    assert main([*base, "--by", "exact", "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "Seats in use (peak and average) and denials per minute" in out
    (drawn,) = read_chart_series(chart)
    assert drawn["steps"] == [0, 2, 1, 0, 1]
    assert drawn["edges"][1:] == ["2026-11-24T12:10:10Z", "2026-11-24T12:10:20Z",
                                  "2026-11-24T12:11:40Z", "2026-11-24T12:29:50Z",
                                  "2026-11-24T12:30:15Z"]  # fmt: skip


# -- item 8: the chart --------------------------------------------------------------------


def test_the_chart_ends_at_now_with_refusals_at_their_time_and_a_clear_legend(
    database, fixed_now, tmp_path
):
    """Steps to now (c still holds its seat at 12:30:15, its acquire was 12:29:50),
    refused requests at 12:11:05 and 12:20:30, not at 12:11:00 and 12:20:00, the legend in
    plain words covering neither a panel nor a title, for two licenses."""
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    store.create_license(T, "cam", 1)
    held(database)
    cam = event(20, "lease.acquired", at(12), "m", 1)
    cam["license_id"] = "cam"
    rows = [
        event(21, "lease.denied", at(11, 5), None, None, count=2),
        event(22, "lease.denied", at(20, 30), None, None, count=1),
        cam,
    ]
    assert event_log.insert_events(rows) == 3
    _status, body = admin.execute(admin.parse({
        "action": "report.usage", "tenant_id": T, "since": "2026-11-24T12:09:00Z",
        "timelines": True,
    }))  # fmt: skip
    assert body["period"] == "exact"
    lines, window, seats = chart_input(body, body["timelines"])
    drawn = draw_chart(lines, window, tmp_path / "c.png", seats, now=NOW, period="exact")
    cad, cam_drawn = drawn
    assert cad["xlim"][1] == NOW and cad["edges"][-1] == NOW  # not 12:29:50
    assert cam_drawn["edges"][-1] == NOW and cam_drawn["steps"][-1] == 1
    assert cad["denials"] == [at(11, 5), at(20, 30)]
    assert cad["labels"] == {STEPS_LABEL, LIMIT_LABEL, DENIED_LABEL}
    assert not any("reaper" in label for label in cad["labels"])
    assert "3 requests refused" in cad["title"]
    assert cad["overlaps"] == []


def test_a_period_chart_ends_at_now_and_puts_refusals_mid_period(database, fixed_now, tmp_path):
    """By hour: the last event is at 12:29:50, the axis and the seat held run to now."""
    held(database)
    rows = [event(21, "lease.denied", at(11, 5), None, None, count=2)]
    assert event_log.insert_events(rows) == 1
    window = Window(T, "cad", since=at(9))
    report = usage_report(window, "minute")
    (drawn,) = draw_chart(report.timelines, window, tmp_path / "m.png", now=NOW,
                          period="minute")  # fmt: skip
    assert drawn["xlim"][1] == NOW and drawn["edges"][-1] == NOW
    assert drawn["peak"][-1] == 1  # c's seat, held on to now
    assert drawn["denials"] == [at(11, 30)]  # the middle of its minute
    assert drawn["overlaps"] == []
    assert reports.EXACT == "exact"
