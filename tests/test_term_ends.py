"""Ends by the license's term are not crashes (issue 42, item 3): a ``lease.reclaimed``
whose ``metadata.reason`` is ``license_expired`` or ``license_not_started`` counts as
``ended_by_term`` in the rollups (hourly, minute, per client), the usage report's
endings and lease durations (from the rollups and from the raw events and leases at a
window's edges alike), ``reclaimed_percent``, the per-user report, the admin action and
the CLI; a crash still counts as ``reclaimed``. Events go through the audit insert, on
PostgreSQL and on SQLite (``database``); migration 0015 adds the columns without
rewriting a table. The brute-force model tests with random term ends are
tests/test_reports.py's and tests/test_report_users.py's."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import text

from seatlease import admin
from seatlease.errors import LicenseExpired
from seatlease.events import audit
from seatlease.records import db, event_log, partitions, store
from seatlease.records.reports import (
    Window,
    lease_durations,
    outcomes,
    usage_report,
    user_usage,
)
from seatlease.records.reports.steps import estimate_changes
from seatlease.seats.engine import SeatRequest
from seatlease.seats.keys import LicenseKeys, outbox_key
from seatlease_cli import main

T = "acme"
NOT_STARTED = "license_not_started"
NOW = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)


def at(hhmm: str, seconds: int = 0) -> datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return NOW.replace(hour=hours, minute=minutes, second=seconds)


def event(n: int, etype: str, when: datetime, session: str, used: int,
          user: str | None = None, reason: str | None = None) -> dict:  # fmt: skip
    metadata = {"host": "pc-1"}
    if user:
        metadata["user"] = user
    if reason:
        metadata["reason"] = reason
    return {
        "event_id": f"t-{n:03d}",
        "type": etype,
        "tenant_id": T,
        "license_id": "cad",
        "session_id": session,
        "client_id": f"c-{session}",
        "occurred_at": when.isoformat().replace("+00:00", "Z"),
        "seats_used": used,
        "seats_total": 5,
        "count": 1,
        "metadata": metadata,
    }


def history() -> list[dict]:
    """License cad, 2026-11-24: five leases from 09:10 on; s2 crashes (reclaimed, no
    reason), s4 is released, s5 revoked, s1 ends with the license's end (license_expired)
    and s3 because its start moved later (license_not_started)."""
    return [
        event(0, "lease.acquired", at("09:10"), "s1", 1, user="ann"),
        event(1, "lease.acquired", at("09:12"), "s2", 2, user="bob"),
        event(2, "lease.acquired", at("09:14"), "s3", 3, user="ann"),
        event(3, "lease.acquired", at("09:20"), "s4", 4, user="bob"),
        event(4, "lease.acquired", at("09:22"), "s5", 5),
        event(5, "lease.reclaimed", at("09:30"), "s2", 4, user="bob"),
        event(6, "lease.released", at("09:40"), "s4", 3, user="bob"),
        event(7, "lease.revoked", at("09:45"), "s5", 2),
        event(8, "lease.reclaimed", at("09:50"), "s1", 1, user="ann", reason="license_expired"),
        event(9, "lease.reclaimed", at("09:51"), "s3", 0, user="ann", reason=NOT_STARTED),
    ]


def store_events(rows: list[dict]) -> int:
    """Through the audit function's path: decoded and validated, then inserted."""
    decoded = audit.decode_events(json.dumps(rows).encode())
    assert decoded.rejected == []
    return audit.store(decoded.events)


def endings(window: Window, period: str = "day") -> tuple:
    if period == "day":
        (found,) = outcomes(window)
    else:
        (found,) = usage_report(window, period).outcomes
    return (found.acquired, found.released, found.reclaimed, found.ended_by_term,
            found.revoked, found.reclaimed_percent)  # fmt: skip


def rollup_sums(table: str) -> tuple[int, int]:
    with db.get_engine().connect() as conn:
        row = conn.execute(text(f"SELECT SUM(reclaimed), SUM(ended_by_term) FROM {table}")).one()
    return int(row[0]), int(row[1])


def test_an_end_by_the_term_is_counted_apart_not_as_a_crash(database, fixed_now):
    """One crash, two ends by the term: the rollups keep 1 reclaimed and 2 ended by the
    term (hourly, minute and per client), the report says so, and reclaimed_percent is
    the crash among the 3 leases their clients or an operator ended (33.3, not 60)."""
    assert store_events(history()) == 10
    for table in ("usage_rollups", "usage_minute_rollups", "usage_client_rollups"):
        assert rollup_sums(table) == (1, 2), table
    whole = Window(T, "cad")
    assert endings(whole) == (5, 1, 1, 2, 1, 33.3)
    durations = {d.client_id: (d.leases, d.reclaimed, d.ended_by_term, d.open)
                 for d in lease_durations(whole)}  # fmt: skip
    assert durations == {
        "c-s1": (1, 0, 1, 0),
        "c-s2": (1, 1, 0, 0),
        "c-s3": (1, 0, 1, 0),
        "c-s4": (1, 0, 0, 0),
        "c-s5": (1, 0, 0, 0),
    }
    # A redelivery (in another order) changes nothing.
    assert store_events(list(reversed(history()))) == 0
    assert rollup_sums("usage_rollups") == (1, 2)
    assert endings(whole) == (5, 1, 1, 2, 1, 33.3)
    # Every start and end is still a change of seats in use (exact steps' estimate).
    with db.get_engine().connect() as conn:
        assert estimate_changes(conn, whole, NOW) == 10


def test_the_only_lease_ended_by_its_term_is_no_crash(database, fixed_now):
    """The issue's case: one lease, ended by the license's end. Not 100 % reclaimed: no
    crash, and no percent (no lease ended by its client or an operator)."""
    rows = history()
    assert store_events([rows[0], rows[8]]) == 2
    (found,) = outcomes(Window(T))
    assert (found.reclaimed, found.ended_by_term, found.reclaimed_percent) == (0, 1, None)
    assert usage_report(Window(T), "hour").as_dict()["outcomes"][0]["reclaimed_percent"] is None


def test_the_raw_events_at_a_windows_edges_count_as_the_rollups_do(database, fixed_now):
    """Windows cut inside hours and minutes read those parts from the raw events (and the
    partial days of durations from usage_leases): the same counts as whole hours and
    minutes from the rollups."""
    assert store_events(history()) == 10
    rollups_hourly = endings(Window(T, "cad", since=at("09:00"), until=at("10:00")))
    assert rollups_hourly == (5, 1, 1, 2, 1, 33.3)
    # one raw edge inside the 09:00 hour, then raw edges at both ends of whole minutes
    assert endings(Window(T, "cad", since=at("09:05"), until=at("09:55"))) == rollups_hourly
    assert endings(Window(T, "cad", since=at("09:05"))) == rollups_hourly
    cut = Window(T, "cad", since=at("09:05", 30), until=at("09:55", 30))
    assert endings(cut, "minute") == rollups_hourly
    assert endings(Window(T, "cad", since=at("09:05")), "minute") == rollups_hourly
    # The endings only (the acquires are before since): from 09:25 by hour (raw) and by
    # minute (whole minutes from the minute rollups) alike.
    late = Window(T, "cad", since=at("09:25"), until=at("10:00"))
    assert endings(late, "hour") == endings(late, "minute") == (0, 1, 1, 2, 1, 33.3)
    # Durations of the leases acquired from 09:05 (a partial day: usage_leases).
    partial = {d.client_id: (d.reclaimed, d.ended_by_term)
               for d in lease_durations(Window(T, "cad", since=at("09:05")))}  # fmt: skip
    whole = {d.client_id: (d.reclaimed, d.ended_by_term) for d in lease_durations(Window(T))}
    assert partial == whole
    assert sum(r for r, _t in whole.values()) == 1 and sum(t for _r, t in whole.values()) == 2


def test_the_per_user_report_counts_ends_by_the_term(database, fixed_now):
    assert store_events(history()) == 10
    users = {u.user: (u.leases, u.open_leases, u.ended_by_term) for u in user_usage(Window(T))}
    assert users == {"ann": (2, 0, 2), "bob": (2, 0, 0), None: (1, 0, 0)}
    # A lease counts in the window it was acquired in; its ending is read from since on.
    later = {u.user: u.ended_by_term for u in user_usage(Window(T, since=at("09:14")))}
    assert later == {"ann": 1, "bob": 0, None: 0}


@pytest.fixture
def cli(database, fixed_now, monkeypatch):
    """The CLI in-process on this test's database (a set REDIS_URL: no local stack)."""
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    store.create_tenant(T)
    store.create_license(T, "cad", 5)
    assert store_events(history()) == 10


def test_the_admin_action_and_the_cli_show_ended_by_term(cli, capsys):
    status, body = admin.execute(admin.parse({"action": "report.usage", "tenant_id": T}))
    assert status == 200
    (counts,) = body["outcomes"]
    assert (counts["reclaimed"], counts["ended_by_term"], counts["reclaimed_percent"]) == (
        1,
        2,
        33.3,
    )
    by_client = {d["client_id"]: (d["reclaimed"], d["ended_by_term"]) for d in body["durations"]}
    assert by_client["c-s1"] == (0, 1) and by_client["c-s2"] == (1, 0)

    assert main(["report", "usage", "--tenant", T, "--by", "hour"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    header = next(r for r in rows if r[:2] == ["LICENSE_ID", "ACQUIRED"])
    assert header == ["LICENSE_ID", "ACQUIRED", "BORROWED", "RELEASED", "RECLAIMED",
                      "ENDED_BY_TERM", "REVOKED", "RECLAIMED_PERCENT", "DENIALS",
                      "LOST"]  # fmt: skip
    assert ["cad", "5", "0", "1", "1", "2", "1", "33.3", "0", "0"] in rows
    assert ["cad", "c-s1", "1", "40m00s", "40m00s", "40m00s", "0", "1", "0"] in rows
    assert ["cad", "c-s2", "1", "18m00s", "18m00s", "18m00s", "1", "0", "0"] in rows

    assert main(["report", "usage", "--tenant", T, "--format", "csv"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    durations_csv, outcomes_csv = blocks[1].splitlines(), blocks[2].splitlines()
    assert durations_csv[0].split(",")[-3:] == ["reclaimed", "ended_by_term", "open"]
    assert outcomes_csv[0].split(",")[4:7] == ["reclaimed", "ended_by_term", "revoked"]
    assert outcomes_csv[1].split(",")[4:8] == ["1", "2", "1", "33.3"]

    assert main(["report", "usage", "--tenant", T, "--json"]) == 0
    (counts,) = json.loads(capsys.readouterr().out)["outcomes"]
    assert (counts["ended_by_term"], counts["reclaimed_percent"]) == (2, 33.3)


def test_the_per_user_table_shows_ended_by_term(cli, capsys):
    status, body = admin.execute(admin.parse({"action": "report.users", "tenant_id": T}))
    assert status == 200
    assert {row["user"]: row["ended_by_term"] for row in body["users"]} == {
        "ann": 2,
        "bob": 0,
        None: 0,
    }
    assert main(["report", "usage", "--tenant", T, "--by", "user"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[1][:5] == ["LICENSE_ID", "USER", "LEASES", "OPEN_LEASES", "ENDED_BY_TERM"]
    assert {tuple(r[:5]) for r in rows[2:]} == {
        ("cad", "-", "1", "0", "0"),
        ("cad", "ann", "2", "0", "2"),
        ("cad", "bob", "2", "0", "0"),
    }


def test_the_seat_scripts_term_end_and_a_crash_through_the_audit_insert(database, engine, configs):
    """The real seat scripts: a lease on a license whose term ends (its heartbeat after
    the end ends it: lease.reclaimed, reason license_expired) and a crashed client's
    lease on another license (reclaimed by the next acquire's prune, no reason), their
    outbox events stored through the audit insert: one ended by the term, one crash."""
    redis_now = datetime.fromtimestamp(engine.server_time_ms() / 1000, UTC)
    expires = redis_now + timedelta(seconds=1)
    configs.add(T, "term", seats=2, lease_seconds=60, expires_at=expires)
    configs.add(T, "crash", seats=2, lease_seconds=1)
    held = engine.acquire(SeatRequest(T, "term", "ws-1", user="ann"))
    engine.acquire(SeatRequest(T, "crash", "ws-2", user="bob"))
    while engine.server_time_ms() / 1000 <= expires.timestamp() + 0.5:
        time.sleep(0.1)
    with pytest.raises(LicenseExpired):
        engine.heartbeat(T, "term", held.session_id)
    engine.acquire(SeatRequest(T, "crash", "ws-3", user="bob"))  # prunes ws-2's lease
    found = []
    for license_id in ("term", "crash"):
        stream = outbox_key(LicenseKeys.of(T, license_id).shard)
        for _, fields in engine.redis.xrange(stream):
            one = json.loads(fields["e"])
            if (one["tenant_id"], one["license_id"]) == (T, license_id) and one not in found:
                found.append(one)
    assert sorted(e["type"] for e in found) == ["lease.acquired"] * 3 + ["lease.reclaimed"] * 2
    assert store_events(found) == 5
    counts = {o.license_id: o for o in outcomes(Window(T))}
    assert (counts["term"].reclaimed, counts["term"].ended_by_term) == (0, 1)
    assert counts["term"].reclaimed_percent is None
    assert (counts["crash"].reclaimed, counts["crash"].ended_by_term) == (1, 0)
    assert counts["crash"].reclaimed_percent == 100.0
    users = {(u.license_id, u.user): u.ended_by_term for u in user_usage(Window(T))}
    assert users == {("crash", "bob"): 0, ("term", "ann"): 1}


ROLLUPS = ("usage_rollups", "usage_minute_rollups", "usage_client_rollups")


def test_migration_0015_adds_the_columns_without_rewriting_and_keeps_old_rows(migration_urls):
    """A database at 0014 holding rollups and leases (an expiry stored then counted as
    reclaimed) upgrades to 0015: no rollup table is rewritten on PostgreSQL (same
    relfilenode), the rows written before keep their counts (ended_by_term 0), and new
    events count apart; a downgrade folds ended_by_term back into reclaimed and the
    leases' end back to lease.reclaimed. On PostgreSQL and SQLite."""
    rows = history()
    for url in migration_urls:
        engine = db.make_engine(url)
        postgres = engine.dialect.name == "postgresql"
        store.upgrade(engine, "0014")
        hour = at("08:00")
        with engine.begin() as conn:
            if postgres:
                partitions.ensure_partitions(conn, [hour])
            for table, column in (("usage_rollups", "hour"), ("usage_minute_rollups", "minute")):
                conn.execute(
                    sa.text(
                        f"INSERT INTO {table} (tenant_id, license_id, {column}, acquired, "
                        "reclaimed) VALUES (:t, 'cad', :at, 1, 1)"
                    ).bindparams(sa.bindparam("at", type_=sa.DateTime(timezone=True))),
                    {"t": T, "at": hour},
                )
            conn.execute(
                sa.text(
                    "INSERT INTO usage_client_rollups (tenant_id, license_id, client_id, day, "
                    "acquired, ended, reclaimed, total_ms) VALUES (:t, 'cad', 'c-old', :day, "
                    "1, 1, 1, 60000)"
                ).bindparams(sa.bindparam("day", type_=sa.DateTime(timezone=True))),
                {"t": T, "day": hour.replace(hour=0)},
            )
        before = _files(engine, ROLLUPS) if postgres else None
        store.upgrade(engine)
        if postgres:
            assert _files(engine, ROLLUPS) == before, "a rollup table was rewritten"
        with engine.connect() as conn:
            for table in ROLLUPS:
                old = conn.execute(sa.text(f"SELECT reclaimed, ended_by_term FROM {table}"))
                assert old.all() == [(1, 0)], (url, table)
        assert event_log.insert_events(rows, engine) == 10
        (counts,) = outcomes(Window(T), engine)
        # the expiry stored before 0015 stays a reclaim (08:00), the new ones count apart
        assert (counts.reclaimed, counts.ended_by_term) == (2, 2), url
        store.downgrade(engine, "0014")
        with engine.connect() as conn:
            for table in ROLLUPS:
                columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
                assert "ended_by_term" not in columns, table
                total = conn.execute(sa.text(f"SELECT SUM(reclaimed) FROM {table}")).scalar()
                assert total == 4, (url, table)  # 1 before 0015, 1 crash, 2 by the term
            ends = conn.execute(sa.text("SELECT DISTINCT end_type FROM usage_leases"))
            assert {e for (e,) in ends} == {"lease.reclaimed", "lease.released",
                                            "lease.revoked"}  # fmt: skip
        engine.dispose()


def _files(engine, tables: tuple[str, ...]) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            name: conn.execute(
                text("SELECT relfilenode FROM pg_class WHERE relname = :n"), {"n": name}
            ).scalar_one()
            for name in tables
        }
