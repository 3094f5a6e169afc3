"""The alerts the service computes (issue 51, point 3; seatlease.webhooks.alerts):
``license.nearly_full`` once per episode and ``license.capacity_ok`` at its end, from the
minute rollups the audit insert keeps; ``license.denials`` from the true denials
(``usage_refusals``); ``license.term_ending`` 30, 7 and 1 days before the end and at it,
once each per end. Events go through the real audit insert into real PostgreSQL (and the
local stack's SQLite); ``run_alerts`` hands its alerts to a sink that records them (the
webhook store's ``enqueue`` in production: tested with it where that store exists). The
settings: the CLI's flags, the admin action's 400s, migration 0020. A year of minute
rollups on one license: a run reads what is new only (timed below)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import functions_framework
import pytest
from http_support import error_of
from sqlalchemy import create_engine, inspect, text
from sqlalchemy import event as sa_event

import seatlease_cli as cli
from seatlease import clock
from seatlease.events import audit
from seatlease.records import db, store
from seatlease.webhooks import alerts, crypto
from seatlease.webhooks import store as webhook_store

REPO = Path(__file__).resolve().parent.parent
T = "acme"
NOW = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
_seq = iter(range(10**9))


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def lease(etype: str, when: datetime, session: str, used: int, license_id: str = "cad") -> dict:
    return {
        "event_id": f"e-{next(_seq)}", "type": etype, "tenant_id": T,
        "license_id": license_id, "session_id": session, "client_id": f"c-{session}",
        "occurred_at": iso(when), "seats_used": used, "seats_total": 4, "count": 1,
        "metadata": {},
    }  # fmt: skip


def refused(minute: datetime, client: str, *, gave_up: bool) -> dict:
    return {
        "event_id": f"e-{next(_seq)}", "type": "lease.refused", "tenant_id": T,
        "license_id": "cad", "client_id": client,
        "occurred_at": iso(minute + timedelta(minutes=11)), "count": 1,
        "metadata": {"minute": iso(minute), "served": False, "true_denial": gave_up,
                     "waiting": False},
    }  # fmt: skip


def store_events(rows: list[dict]) -> None:
    events = [audit.LeaseEvent.model_validate(r) for r in rows]
    assert audit.store(events) == len(rows)


class Sink:
    """What run_alerts handed over, in order."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def __call__(self, events: list[dict]) -> int:
        self.events.extend(events)
        return len(events)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


def clear_alert_tables() -> None:
    # conftest's TRUNCATE predates these tables
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM license_alerts"))
        conn.execute(text("DELETE FROM license_alert_state"))


def clear_webhook_tables() -> None:
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM webhook_attempts"))
        conn.execute(text("DELETE FROM webhook_deliveries"))
        conn.execute(text("DELETE FROM webhook_endpoints"))


@pytest.fixture
def clean_alerts(database_url):
    """No alert settings nor state before the test, nor after it (conftest's TRUNCATE
    predates these tables: another suite's license.show must not see ours)."""
    clear_alert_tables()
    yield
    clear_alert_tables()


@pytest.fixture
def alert_db(database, monkeypatch):
    monkeypatch.setenv("ALERT_SETTLE_SECONDS", "60")
    monkeypatch.setenv("TRUE_DENIAL_MINUTES", "10")
    monkeypatch.setattr(clock, "now", lambda: NOW)
    clear_alert_tables()
    store.create_tenant(T)
    store.create_license(T, "cad", seats=4)
    yield database
    clear_alert_tables()


def run_minutes(sink: Sink, start: datetime, minutes: int, every: int = 1) -> None:
    """run_alerts as the scheduler calls it: every ``every`` minutes from ``start``."""
    for n in range(0, minutes + 1, every):
        alerts.run_alerts(start + n * MIN + timedelta(seconds=5), sink=sink)


# -- nearly full ------------------------------------------------------------------------


def test_nearly_full_once_per_episode_then_capacity_ok_at_its_end(alert_db):
    """75 % of 4 seats is 3; 5 minutes in a row. The level holds across minutes with no
    event (minute rows only where something happened); 4 full minutes are no episode; a
    run every minute, or every 7 minutes, finds the same two alerts exactly once."""
    store.set_license_alerts(T, "cad", alert_full_percent=75, alert_full_minutes=5)
    t0 = NOW
    store_events([
        lease("lease.acquired", t0 + timedelta(seconds=10), "a", 1),
        lease("lease.acquired", t0 + timedelta(seconds=20), "b", 2),
        lease("lease.acquired", t0 + timedelta(seconds=30), "c", 3),  # full from minute 0
        # minutes 1..11: no event, 3 in use
        lease("lease.released", t0 + 12 * MIN + timedelta(seconds=1), "c", 2),  # minute 12
        # a second, too short run: minutes 20..23 full (23 began full)
        lease("lease.acquired", t0 + 20 * MIN, "d", 3),
        lease("lease.released", t0 + 23 * MIN, "d", 2),
        # a third: 40.. full, peak 4
        lease("lease.acquired", t0 + 40 * MIN, "e", 3),
        lease("lease.acquired", t0 + 41 * MIN, "f", 4),
        lease("lease.released", t0 + 50 * MIN, "f", 3),
        lease("lease.released", t0 + 51 * MIN, "e", 2),
    ])  # fmt: skip
    sink = Sink()
    run_minutes(sink, t0, 60)
    assert sink.types() == ["license.nearly_full", "license.capacity_ok"] * 2
    full, ok, full2, ok2 = sink.events
    assert full["occurred_at"] == iso(t0 + 5 * MIN)  # the end of the 5th full minute
    assert full["metadata"] == {
        "full_percent": 75, "full_minutes": 5, "threshold_seats": 3, "seats": 4,
        "since": iso(t0), "peak_in_use": 3,
    }  # fmt: skip
    assert (full["seats_used"], full["seats_total"]) == (3, 4)
    # minute 12 had 3 in use until its release: the first whole minute below is 13
    assert ok["occurred_at"] == iso(t0 + 13 * MIN)
    assert ok["metadata"]["full_minutes_total"] == 13
    assert full2["metadata"]["since"] == iso(t0 + 40 * MIN)
    assert ok2["metadata"]["peak_in_use"] == 4 and ok2["occurred_at"] == iso(t0 + 52 * MIN)
    for event in sink.events:
        assert event["event_id"].startswith("alert-") and len(event["event_id"]) <= 64
        assert (event["tenant_id"], event["license_id"]) == (T, "cad")
    assert len({e["event_id"] for e in sink.events}) == 4

    # a run every 7 minutes, from scratch, says the same with the same ids
    clear_alert_tables()
    store.set_license_alerts(T, "cad", alert_full_percent=75, alert_full_minutes=5)
    sparse = Sink()
    run_minutes(sparse, t0 - 3 * MIN, 64, every=7)
    assert sparse.events == sink.events
    # and again: nothing new
    again = Sink()
    run_minutes(again, t0 + 60 * MIN, 10)
    assert again.events == []


def test_an_episode_open_at_the_run_is_judged_after_settling_and_survives_a_pause(alert_db):
    store.set_license_alerts(T, "cad", alert_full_percent=100, alert_full_minutes=2)
    store_events([lease("lease.acquired", NOW + timedelta(seconds=s), f"s{s}", s // 10 + 1)
                  for s in (0, 10, 20, 30)])  # fmt: skip
    sink = Sink()
    # 2 minutes full end at NOW+2m, judged once they are a settling minute old
    alerts.run_alerts(NOW + 2 * MIN + timedelta(seconds=59), sink=sink)
    assert sink.events == []
    alerts.run_alerts(NOW + 3 * MIN, sink=sink)
    assert sink.types() == ["license.nearly_full"]
    # the scheduler stops for a day; the license is full all along: no second alert
    alerts.run_alerts(NOW + timedelta(days=1), sink=sink)
    assert sink.types() == ["license.nearly_full"]
    store_events([lease("lease.released", NOW + timedelta(days=1, minutes=5), "s0", 3)])
    # minute +5 began at 4 in use (full); +6 is the first below, judged a minute later
    alerts.run_alerts(NOW + timedelta(days=1, minutes=7), sink=sink)
    assert sink.types() == ["license.nearly_full"]
    alerts.run_alerts(NOW + timedelta(days=1, minutes=8), sink=sink)
    assert sink.types() == ["license.nearly_full", "license.capacity_ok"]
    assert sink.events[1]["metadata"]["since"] == iso(NOW)


def test_a_crash_before_the_state_is_saved_hands_the_same_ids_again(alert_db):
    """The enqueue happens before the state's commit; a lost state means the same
    events again, which the webhook store keeps once (unique endpoint and event id)."""
    store.set_license_alerts(T, "cad", alert_full_percent=50, alert_full_minutes=1)
    store_events([lease("lease.acquired", NOW, "a", 2)])
    first, second = Sink(), Sink()
    alerts.run_alerts(NOW + 3 * MIN, sink=first)
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM license_alert_state"))
    alerts.run_alerts(NOW + 3 * MIN, sink=second)
    assert first.events and first.events == second.events

    def broken(events: list[dict]) -> int:
        raise RuntimeError("webhook store down")

    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM license_alert_state"))
    with pytest.raises(RuntimeError):
        alerts.run_alerts(NOW + 3 * MIN, sink=broken)
    third = Sink()
    alerts.run_alerts(NOW + 4 * MIN, sink=third)  # nothing was recorded as said
    assert third.events == first.events


def test_alerts_off_send_nothing_and_the_threshold_rounds_up(alert_db):
    assert alerts.full_threshold(4, 80) == 4 and alerts.full_threshold(10, 80) == 8
    assert alerts.full_threshold(3, 1) == 1 and alerts.full_threshold(4, 150) == 6
    store_events([lease("lease.acquired", NOW + timedelta(seconds=s), f"s{s}", s // 10 + 1)
                  for s in (0, 10, 20, 30)])  # fmt: skip
    sink = Sink()
    run_minutes(sink, NOW, 20)
    assert sink.events == []  # no settings: nothing
    store.set_license_alerts(T, "cad", alert_full_percent=101, alert_full_minutes=1)
    run_minutes(sink, NOW + 20 * MIN, 5)
    assert sink.events == []  # 5 seats needed of 4: never
    store.set_license_alerts(T, "cad", alert_full_percent=100)
    run_minutes(sink, NOW + 25 * MIN, 3)
    assert sink.types() == ["license.nearly_full"]


# -- denials ----------------------------------------------------------------------------


def test_denials_per_hour_once_the_hour_is_judged(alert_db):
    """3 true denials in an hour reach the threshold of 3; 2 in the next do not; refused
    clients that were served or still trying are no true denials."""
    store.set_license_alerts(T, "cad", alert_denials=3)
    hour = NOW
    store_events([
        refused(hour + 1 * MIN, "ann", gave_up=True),
        refused(hour + 30 * MIN, "bob", gave_up=True),
        refused(hour + 59 * MIN, "ann", gave_up=True),
        refused(hour + 40 * MIN, "cid", gave_up=False),
        refused(hour + 61 * MIN, "dan", gave_up=True),
        refused(hour + 62 * MIN, "eve", gave_up=True),
    ])  # fmt: skip
    sink = Sink()
    # the hour's last minute is judged 10 minutes after it, stored within the settling
    alerts.run_alerts(hour + 70 * MIN + timedelta(seconds=59), sink=sink)
    assert sink.events == []
    alerts.run_alerts(hour + 71 * MIN, sink=sink)
    assert sink.types() == ["license.denials"]
    (event,) = sink.events
    assert event["occurred_at"] == iso(hour + 60 * MIN)
    assert event["metadata"] == {
        "true_denials": 3, "clients": 2, "threshold": 3, "window_start": iso(hour),
        "window_end": iso(hour + 60 * MIN), "window_minutes": 60, "lower_bound": False,
    }  # fmt: skip
    run_minutes(sink, hour + 71 * MIN, 120, every=10)
    assert len(sink.events) == 1  # the next hour had 2; the first is said once


# -- the term ---------------------------------------------------------------------------


def test_term_ending_30_7_1_days_before_and_at_the_end_once_each_and_again_after_renewal(
    alert_db,
):
    end = NOW + timedelta(days=40)
    store.create_license(T, "sub", seats=1, expires_at=end, grace_seconds=86400)
    sink = Sink()
    for hours in range(0, 41 * 24, 6):  # every 6 hours for 41 days
        alerts.run_alerts(NOW + timedelta(hours=hours), sink=sink)
    days = [e["metadata"]["days_before"] for e in sink.events if e["license_id"] == "sub"]
    assert days == [30, 7, 1, 0]
    assert all(e["type"] == "license.term_ending" for e in sink.events)
    at_end = sink.events[-1]
    assert at_end["occurred_at"] == iso(end)
    assert at_end["metadata"]["grace_ends_at"] == iso(end + timedelta(days=1))
    assert at_end["metadata"]["expires_at"] == iso(end)

    # renewed: the end moves, its notices come again (new ids); the old end's stay said
    new_end = end + timedelta(days=20)
    store.update_license(T, "sub", expires_at=new_end)
    later = NOW + timedelta(days=41)
    alerts.run_alerts(later, sink=sink)
    assert sink.events[-1]["metadata"]["days_before"] == 30  # 19 days left: the 30-day one
    assert sink.events[-1]["metadata"]["expires_at"] == iso(new_end)
    assert len({e["event_id"] for e in sink.events}) == 5
    alerts.run_alerts(later + timedelta(hours=1), sink=sink)
    assert len(sink.events) == 5


def test_a_term_set_close_to_its_end_sends_only_the_latest_notice(alert_db):
    store.create_license(T, "short", seats=1, expires_at=NOW + timedelta(days=5))
    store.create_license(T, "long_over", seats=1, expires_at=NOW - timedelta(days=30))
    store.create_license(T, "far", seats=1, expires_at=NOW + timedelta(days=400))
    sink = Sink()
    alerts.run_alerts(NOW, sink=sink)
    alerts.run_alerts(NOW + timedelta(minutes=1), sink=sink)
    assert [(e["license_id"], e["metadata"]["days_before"]) for e in sink.events] == [("short", 7)]


# -- through the webhook store ---------------------------------------------------------


def test_alerts_reach_the_webhook_store_once_each_by_their_endpoints_filters(alert_db, monkeypatch):
    """The default sink is the webhook store's enqueue: an endpoint taking the alert
    types gets each alert once, run after run (and a re-run from a lost state adds
    nothing: one delivery per endpoint and event id); one filtered to lease events none."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    clear_webhook_tables()
    taking, _ = webhook_store.create_endpoint(
        T, "http://127.0.0.1:9/hook", event_types=["license.nearly_full", "license.capacity_ok"]
    )
    webhook_store.create_endpoint(T, "http://127.0.0.1:9/other", event_types=["lease.acquired"])
    store.set_license_alerts(T, "cad", alert_full_percent=50, alert_full_minutes=2)
    store_events([
        lease("lease.acquired", NOW, "a", 2),
        lease("lease.released", NOW + 10 * MIN, "a", 1),
    ])  # fmt: skip
    for minute in range(0, 15):
        alerts.run_alerts(NOW + minute * MIN)
    with db.get_engine().begin() as conn:
        conn.execute(text("DELETE FROM license_alert_state"))
    for minute in range(0, 15):
        alerts.run_alerts(NOW + minute * MIN)
    listed = webhook_store.deliveries(T)
    assert sorted(d["type"] for d in listed) == ["license.capacity_ok", "license.nearly_full"]
    assert {d["endpoint_id"] for d in listed} == {taking["id"]}
    assert all(d["event_id"].startswith("alert-") for d in listed)
    clear_webhook_tables()


def test_a_run_with_a_pool_of_one_connection_and_an_older_run_after_a_newer(
    database_url, clean_alerts, monkeypatch
):
    """The scheduler's function has one connection (DB_POOL_SIZE 1, no overflow): a run
    holds none while the webhook store's enqueue takes it. A slower run of an earlier
    minute saving after a later one leaves the later one's state."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    for name, value in (("DB_POOL_SIZE", "1"), ("DB_MAX_OVERFLOW", "0"), ("DB_POOL_TIMEOUT", "3")):
        monkeypatch.setenv(name, value)
    clear_webhook_tables()
    engine = db.make_engine(database_url)
    store.create_tenant(T, engine=engine)
    store.create_license(T, "cad", seats=1, engine=engine)
    store.set_license_alerts(T, "cad", engine=engine, alert_full_percent=100,
                             alert_full_minutes=1)  # fmt: skip
    webhook_store.create_endpoint(T, "http://127.0.0.1:9/hook", engine=engine)
    store_events([lease("lease.acquired", NOW, "a", 1)])
    started = time.perf_counter()
    assert alerts.run_alerts(NOW + 3 * MIN, engine=engine) == 1
    assert time.perf_counter() - started < 2.0  # no wait for a second connection
    assert [d["type"] for d in webhook_store.deliveries(T, engine=engine)] == [
        "license.nearly_full"
    ]
    alerts.run_alerts(NOW + 10 * MIN, engine=engine)
    alerts.run_alerts(NOW + 5 * MIN, engine=engine)  # late, and older
    with engine.begin() as conn:
        stored = conn.execute(text("SELECT full_checked_to FROM license_alert_state")).scalar()
    assert clock.utc(stored) == NOW + 9 * MIN
    engine.dispose()
    clear_webhook_tables()


def test_a_steady_run_costs_a_few_statements_whatever_the_licenses(alert_db):
    """The statements of one run do not grow with the licenses judged: 50 licenses with
    every alert set, judged every minute, cost what one costs."""
    for n in range(50):
        store.create_license(T, f"l{n}", seats=3, expires_at=NOW + timedelta(days=10))
        store.set_license_alerts(T, f"l{n}", alert_full_percent=80, alert_denials=2)
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    sink = Sink()
    alerts.run_alerts(NOW, sink=sink)  # the first run: the levels read, the 30-day notices
    assert sink.types() == ["license.term_ending"] * 50
    engine = db.get_engine()
    sa_event.listen(engine, "before_cursor_execute", count)
    try:
        for minute in range(1, 4):
            statements.clear()
            alerts.run_alerts(NOW + minute * MIN, sink=sink)
            # the candidates, the minute rows, the states' upsert
            assert len(statements) <= 3, statements
    finally:
        sa_event.remove(engine, "before_cursor_execute", count)
    assert len(sink.events) == 50


# -- the settings -----------------------------------------------------------------------


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_sets_the_alerts_on_create_and_update_and_shows_them(stack, clean_alerts, capsys):
    store.create_tenant("acme")
    code, out, err = run_cli(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "10",
        "--alert-full-percent", "80", "--alert-full-minutes", "3",
    )  # fmt: skip
    assert code == 0, err
    assert "nearly full at 80 % for 3 min" in out
    code, out, err = run_cli(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad",
        "--alert-denials", "10", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert '"alert_denials": 10' in out and '"alert_full_percent": 80' in out
    assert store.license_alerts_of("acme") == {
        ("acme", "cad"): {"alert_full_percent": 80, "alert_full_minutes": 3, "alert_denials": 10}
    }
    code, out, _ = run_cli(capsys, "license", "show", "--tenant", "acme", "--license", "cad")
    assert "nearly full at 80 % for 3 min; denials at 10 an hour" in out
    code, out, _ = run_cli(capsys, "license", "list", "--tenant", "acme", "--json")
    assert '"alert_full_minutes": 3' in out

    code, _, err = run_cli(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad",
        "--alert-full-minutes", "0",
    )  # fmt: skip
    assert code == cli.EXIT_USAGE and "alert_full_minutes" in err, err
    assert store.license_alerts_of("acme")[("acme", "cad")]["alert_full_minutes"] == 3


@pytest.fixture(scope="module")
def admin_app():
    return functions_framework.create_app(
        "admin", str(REPO / "functions" / "admin" / "main.py")
    ).test_client()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("alert_full_percent", 1001, "less than or equal to 1000"),
        ("alert_full_percent", -1, "greater than or equal to 0"),
        ("alert_full_minutes", 0, "greater than or equal to 1"),
        ("alert_full_minutes", 1441, "less than or equal to 1440"),
        ("alert_denials", -5, "greater than or equal to 0"),
        ("alert_denials", "5", "integer"),
    ],
)
def test_admin_refuses_out_of_range_alerts_naming_the_field(
    stack, clean_alerts, admin_app, field, value, problem
):
    store.create_tenant("acme")
    for action, extra in (("license.create", {"seats": 2}), ("license.update", {})):
        if action == "license.update":
            store.create_license("acme", "cad", seats=2)
        body = {"action": action, "tenant_id": "acme", "license_id": "cad", **extra}
        response = admin_app.post("/", json={**body, field: value})
        error = error_of(response, 400, "invalid_request")
        (detail,) = error["details"]
        assert detail["field"] == field and problem in detail["problem"], error
    assert store.license_alerts_of("acme") == {}
    body = {"action": "license.update", "tenant_id": "acme", "license_id": "cad"}
    response = admin_app.post("/", json={**body, "alert_full_percent": 90})
    assert response.status_code == 200, response.json
    assert response.json["license"]["alert_full_percent"] == 90
    assert response.json["license"]["alert_full_minutes"] == 5  # the default
    shown = admin_app.post("/", json={"action": "license.show", "tenant_id": "acme",
                                      "license_id": "cad"}).json  # fmt: skip
    assert shown["license"]["alert_full_percent"] == 90


def test_migration_0020_creates_the_tables_and_downgrades(migration_urls):
    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0019")
        assert "license_alerts" not in inspect(engine).get_table_names()
        store.upgrade(engine, "0020")
        names = set(inspect(engine).get_table_names())
        assert {"license_alerts", "license_alert_state"} <= names, url
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO license_alerts (tenant_id, license_id) VALUES ('a', 'b')")
            )
            row = conn.execute(
                text("SELECT full_percent, full_minutes, denials FROM license_alerts")
            ).one()
        assert tuple(row) == (0, 5, 0)
        with pytest.raises(Exception, match="ck_license_alerts_full_minutes"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE license_alerts SET full_minutes = 0"))
        store.downgrade(engine, "0019")
        assert "license_alerts" not in inspect(engine).get_table_names()
        store.upgrade(engine)
        engine.dispose()


# -- a year of minutes ------------------------------------------------------------------


def test_a_year_of_minute_rollups_costs_a_run_what_is_new_only(database_url, clean_alerts, capsys):
    """One license with a row for every minute of a year (525,600 rows, full most of the
    time) and a year of true denials, beside 200 quiet licenses with alerts set: the first
    run reads the last hour or day only, and each run after it one minute's rows per
    license. Measured and bounded here (printed with -s)."""
    store.create_tenant(T)
    store.create_license(T, "cad", seats=100)
    store.set_license_alerts(T, "cad", alert_full_percent=90, alert_full_minutes=10,
                             alert_denials=5)  # fmt: skip
    for n in range(200):
        store.create_license(T, f"quiet{n}", seats=5)
        store.set_license_alerts(T, f"quiet{n}", alert_full_percent=80, alert_denials=3)
    run_at = NOW.replace(hour=19)  # the busy day ended at 17:00
    year_start = run_at - timedelta(days=365)
    started = time.perf_counter()
    # its own engine: the runtime's socket timeout is for requests, not a bulk load
    loader = create_engine(database_url)
    with loader.begin() as conn:
        # the level follows a day: 95 seats in use from 09:00 to 17:00 UTC, else 20
        conn.execute(
            text("""
            INSERT INTO usage_minute_rollups (tenant_id, license_id, minute, max_used,
                                              last_used, last_total, acquired)
            SELECT :t, 'cad', m, lvl, lvl, 100, 1
            FROM (SELECT m, CASE WHEN extract(hour FROM m AT TIME ZONE 'UTC') BETWEEN 9 AND 16
                                 THEN 95 ELSE 20 END AS lvl
                  FROM generate_series(CAST(:lo AS timestamptz), CAST(:hi AS timestamptz),
                                       interval '1 minute') AS m) x"""),
            {"t": T, "lo": year_start, "hi": run_at - MIN},
        )
        conn.execute(
            text("""
            INSERT INTO usage_refusals (tenant_id, license_id, minute, client_id, true_denial)
            SELECT :t, 'cad', m, 'c' || mod(extract(epoch FROM m)::bigint, 7), true
            FROM generate_series(CAST(:lo AS timestamptz), CAST(:hi AS timestamptz),
                                 interval '6 minutes') AS m"""),
            {"t": T, "lo": year_start, "hi": run_at - MIN},
        )
        rows = conn.execute(text("SELECT count(*) FROM usage_minute_rollups")).scalar()
        conn.execute(text("ANALYZE usage_minute_rollups"))
        conn.execute(text("ANALYZE usage_refusals"))
    loader.dispose()
    assert rows == 365 * 24 * 60
    loaded = time.perf_counter() - started

    sink = Sink()
    started = time.perf_counter()
    alerts.run_alerts(run_at, sink=sink)
    first = time.perf_counter() - started
    # the first run judges the last 10 + 60 minutes: no episode in reach; the last 24
    # complete hours of denials: 10 each, over the threshold of 5
    assert sink.types() == ["license.denials"] * 24, sink.types()

    steady = []
    for n in range(1, 11):
        started = time.perf_counter()
        alerts.run_alerts(run_at + n * MIN, sink=sink)
        steady.append(time.perf_counter() - started)
    assert len(sink.events) == 24
    with capsys.disabled():
        print(
            f"\nalerts at scale: {rows:,} minute rows loaded in {loaded:.1f} s; 201 licenses: "
            f"first run {first * 1000:.0f} ms, then {min(steady) * 1000:.0f}-"
            f"{max(steady) * 1000:.0f} ms a run"
        )
    # bounded: per license a few index probes, whatever the history's length
    # (a few hundred ms on a shared test server; the statements' count is bounded in
    # test_a_steady_run_costs_a_few_statements_whatever_the_licenses)
    assert first < 3.0 and max(steady) < 1.5, (first, steady)
