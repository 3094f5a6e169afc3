"""The per-user report (``seatlease report usage --by user``, action ``report.users``):
events made by the real seat engine (user on acquire, the wait queue), stored through
the audit insert on real PostgreSQL, then read per license and user."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from http_support import Tenant, new_license
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import DateTime, Engine, bindparam, text

from seatlease import admin
from seatlease.api import runtime
from seatlease.clock import utc
from seatlease.events import audit, pubsub
from seatlease.records import db, event_log, store
from seatlease.records.reports import UserUsage, Window, user_usage
from seatlease.seats import keys
from seatlease.seats.engine import SeatRequest
from seatlease_cli import main


def store_outbox(tenant: str, license_id: str) -> int:
    eng = runtime.seat_engine()
    stream = keys.outbox_key(keys.shard_of(tenant, license_id))
    events = [
        e
        for e in pubsub.outbox_events(eng.redis, stream)  # the shard's: other tests' too
        if (e["tenant_id"], e["license_id"]) == (tenant, license_id)
    ]
    decoded = audit.decode_events(json.dumps(events).encode())  # the audit function's path
    assert decoded.rejected == []
    return audit.store(decoded.events)


def test_leases_and_time_queued_per_user(acme: Tenant, capsys) -> None:
    lic = new_license(acme, "cad", seats=1, policy={"queue": True})
    eng = runtime.seat_engine()
    ann = eng.acquire(SeatRequest("acme", lic, "a1", user="ann", host="pc-1"))
    place = eng.acquire(SeatRequest("acme", lic, "b1", user="bob", queue=True))
    assert place.position == 1
    eng.release("acme", lic, ann.session_id)
    bob = eng.acquire(SeatRequest("acme", lic, "b1", user="bob", queue=True, ticket=place.ticket))
    assert bob.created
    eng.release("acme", lic, bob.session_id)
    eng.acquire(SeatRequest("acme", lic, "c1"))  # no user given: counted under none
    # 3 acquired, 2 released, queue.joined and queue.granted
    assert store_outbox("acme", lic) == 7

    status, body = admin.execute(admin.parse({"action": "report.users", "tenant_id": "acme"}))
    assert status == 200
    rows = {row["user"]: row for row in body["users"]}
    assert set(rows) == {"ann", "bob", None}
    assert (rows["ann"]["leases"], rows["ann"]["open_leases"]) == (1, 0), body
    assert rows["ann"]["seat_seconds"] >= 0 and rows["ann"]["queue_served"] == 0
    assert (rows["bob"]["leases"], rows["bob"]["queue_served"], rows["bob"]["queue_left"]) == (
        1,
        1,
        0,
    )
    assert rows["bob"]["queued_seconds_max"] is not None
    assert rows[None]["open_leases"] == 1

    code = main(["report", "usage", "--tenant", "acme", "--by", "user"])
    out = capsys.readouterr().out
    assert code == 0 and "Leases and time queued per user" in out
    assert "ann" in out and "bob" in out and "QUEUE_SERVED" in out
    code = main(["report", "usage", "--tenant", "acme", "--by", "user", "--format", "csv"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].startswith("license_id,user,leases") and len(lines) == 4


def test_by_user_refuses_a_chart_and_an_unknown_license(acme: Tenant, capsys) -> None:
    code = main(["report", "usage", "--tenant", "acme", "--by", "user", "--chart", "x.png"])
    assert code == 2 and "not with --by user" in capsys.readouterr().err
    code = main(["report", "usage", "--tenant", "acme", "--license", "nope", "--by", "user"])
    assert code == 3


def test_an_ending_in_the_same_millisecond_as_its_start_is_paired(acme: Tenant) -> None:
    """Two Lua calls in one millisecond have no known order: the release's event id may
    sort before the acquire's. The lease is still closed, with a zero duration."""
    new_license(acme, "cad", seats=1)
    base = {"tenant_id": "acme", "license_id": "cad", "session_id": "s1", "client_id": "c1",
            "occurred_at": "2026-11-20T09:00:00.000Z", "seats_total": 1, "count": 1,
            "metadata": {"user": "ann"}}  # fmt: skip
    audit.store(
        audit.decode_events(
            json.dumps(
                [
                    {**base, "event_id": "b-1", "type": "lease.acquired", "seats_used": 1},
                    {**base, "event_id": "a-1", "type": "lease.released", "seats_used": 0},
                ]
            ).encode()
        ).events
    )
    [row] = admin.execute(admin.parse({"action": "report.users", "tenant_id": "acme"}))[1]["users"]
    assert (row["user"], row["leases"], row["open_leases"], row["seat_seconds"]) == (
        "ann",
        1,
        0,
        0.0,
    )


# -- the SQL report against the implementation it replaced, on random histories ---------

T = "acme"
BASE = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
STARTS = ("lease.acquired", "lease.borrowed")
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")
QUEUE = ("queue.granted", "queue.left")
TERM_REASONS = ("license_expired", "license_not_started")


def old_user_usage(window: Window, engine: Engine | None) -> list[UserUsage]:
    """The per-user report as it was before it was summed by the database (commit
    ea13239, without its 500,000-event cap): every event of the window read into Python,
    each lease's two ends paired there by session id. The oracle."""
    kinds = STARTS + ENDINGS + QUEUE
    names = ", ".join(f"'{kind}'" for kind in kinds)
    since = "AND occurred_at >= :since" if window.since is not None else ""
    sql = f"""
        SELECT license_id, session_id, type, occurred_at, metadata FROM lease_events
        WHERE {window.scope()} AND type IN ({names}) {since}
        ORDER BY occurred_at, event_id"""
    stmt = (
        text(sql).bindparams(bindparam("since", type_=DateTime(timezone=True)))
        if window.since is not None
        else text(sql)
    )
    with (engine or db.get_engine()).connect() as conn:
        rows = list(conn.execute(stmt, window.params(since=window.since)))
    found: dict[tuple[str, str | None], UserUsage] = {}
    started: dict[str, tuple[UserUsage, datetime]] = {}
    ended: dict[str, tuple[datetime, bool]] = {}  # the first ending: when, by the term

    def of(license_id: str, metadata: dict[str, Any]) -> UserUsage:
        user = metadata.get("user")
        user = user if isinstance(user, str) else None
        key = (license_id, user)
        if key not in found:
            found[key] = UserUsage(license_id, user)
        return found[key]

    for license_id, session_id, kind, occurred_at, raw in rows:
        metadata = json.loads(raw) if isinstance(raw, str) else raw
        metadata = metadata if isinstance(metadata, dict) else {}
        at = utc(
            datetime.fromisoformat(occurred_at) if isinstance(occurred_at, str) else occurred_at
        )
        inside = window.until is None or at < window.until
        if kind in STARTS and inside:
            row = of(license_id, metadata)
            row.leases += 1
            started[session_id] = (row, at)
        elif kind in ENDINGS and session_id:
            # (added since: a lease.reclaimed of the license's term, issue 42)
            by_term = kind == "lease.reclaimed" and metadata.get("reason") in TERM_REASONS
            # (and one of the license's idle rule, issue 50)
            by_idle = kind == "lease.reclaimed" and metadata.get("reason") == "idle"
            ended.setdefault(session_id, (at, by_term, by_idle))
        elif kind in QUEUE and inside:
            row = of(license_id, metadata)
            waited = float(metadata.get("queued_ms") or 0) / 1000
            if kind == "queue.granted":
                row.queue_served += 1
            else:
                row.queue_left += 1
            row.queued_seconds_total += waited
            row.queued_seconds_max = max(row.queued_seconds_max or 0.0, waited)
    for session_id, (row, began) in started.items():
        if session_id not in ended:
            row.open_leases += 1
            continue
        end, by_term, by_idle = ended[session_id]
        row.ended_by_term += by_term
        row.ended_by_idle += by_idle
        seconds = max(0.0, (end - began).total_seconds())
        row.seat_seconds += seconds
        row.longest_seconds = max(row.longest_seconds or 0.0, seconds)
    return sorted(found.values(), key=lambda r: (r.license_id, r.user or ""))


ABSENT = object()
# A user as a client may send it: a string (the empty one too), or not a string at all.
USERS = st.sampled_from([ABSENT, None, "ann", "bob", "", 7, True, 1.5])
# queued_ms as the seat engine writes it (an integer), and the other numbers JSON has.
QUEUED_MS = st.sampled_from([ABSENT, None, 0, 1, 2_500, 61_000, 1.5, True, False])


def _time(draw) -> int:
    """Microseconds after BASE: few distinct milliseconds (events share them), sometimes
    a sub-millisecond part."""
    ms = draw(st.sampled_from([0, 1, 999, 1_000, 60_000, 3_599_999, 3_600_000, 7_200_000]))
    ms += draw(st.sampled_from([0, 0, 0, 5, 250_000]))
    return ms * 1000 + draw(st.sampled_from([0, 0, 0, 1, 999]))


def _metadata(user: Any, **extra: Any) -> dict[str, Any]:
    found = {} if user is ABSENT else {"user": user}
    return {**found, **{k: v for k, v in extra.items() if v is not ABSENT}}


@st.composite
def user_histories(draw) -> list[dict]:
    """Events as the seat engine emits them: each session one start (acquired or
    borrowed, the user on it) and at most one ending, whose time may equal its start's or
    even be slightly earlier (two Lua calls in one millisecond; a clock step), some held
    past any window; queue outcomes with their queued_ms; events no report counts.
    Event ids in random order, so that an ending may sort before its start.

    Not drawn, because the engine never writes them (each acquire makes a new session id,
    a lease ends once, queued_ms is an integer): two starts or two endings in one session,
    a start without a session id, one session id in two licenses, a queued_ms in a string.
    There the two reports differ: the old one counted every start and paired the last,
    took an ending of another license of the tenant, and read "12" as 12 ms; the SQL one
    counts a session's lease once (its first acquire and the first ending that arrived),
    a start without a session id not at all, and a string as 0 ms."""
    events: list[dict] = []

    def add(etype: str, license_id: str, us: int, session: str | None, meta: dict) -> None:
        events.append({
            "type": etype, "tenant_id": T, "license_id": license_id, "session_id": session,
            "client_id": session and f"c-{session}",
            "occurred_at": (BASE + timedelta(microseconds=us)).isoformat(),
            "seats_used": None, "seats_total": None, "count": 1, "metadata": meta,
        })  # fmt: skip

    for n in range(draw(st.integers(0, 10))):
        lic, session = draw(st.sampled_from(["cad", "cam"])), f"s{n}"
        began = _time(draw)
        add(draw(st.sampled_from(STARTS)), lic, began, session, _metadata(draw(USERS), host="h"))
        held = draw(
            st.none() | st.sampled_from([0, -1, -1_000, 1, 999_999]) | st.integers(0, 10**10)
        )
        if held is not None:
            # The engine copies the acquire's metadata into the ending; another user here
            # checks that the report takes the acquire's.
            meta = _metadata(draw(st.sampled_from([ABSENT, "mallory"])))
            ending = draw(st.sampled_from(ENDINGS))
            if ending == "lease.reclaimed":  # by the license's term, idleness, or a crash
                reason = draw(st.sampled_from([ABSENT, *TERM_REASONS, "idle", "failover", 7]))
                meta = _metadata(meta.get("user", ABSENT), reason=reason)
            add(ending, lic, max(0, began + held), session, meta)
        if draw(st.booleans()):
            add("lease.renewed", lic, began + 1000, session, {})
    for _ in range(draw(st.integers(0, 5))):
        meta = _metadata(draw(USERS), queued_ms=draw(QUEUED_MS))
        add(draw(st.sampled_from(QUEUE)), draw(st.sampled_from(["cad", "cam"])), _time(draw),
            draw(st.none() | st.just("s0")), meta)  # fmt: skip
    if draw(st.booleans()):
        add("lease.denied", "cad", _time(draw), None, {})
    ids = draw(st.permutations(range(len(events))))
    for event, n in zip(events, ids, strict=True):
        event["event_id"] = f"ev-{n:03d}"
    return events


@st.composite
def user_windows(draw, events: list[dict]) -> Window:
    """Open ends, the time of one of the events (a start, an ending: the boundaries), a
    time of the events' grid, or any time."""
    times = [datetime.fromisoformat(e["occurred_at"]) for e in events]

    def moment() -> datetime | None:
        kind = draw(st.sampled_from(["open", "an event's", "the grid's", "any"]))
        if kind == "open":
            return None
        if kind == "an event's" and times:
            return draw(st.sampled_from(times))
        us = _time(draw) if kind == "the grid's" else draw(st.integers(-(10**9), 10**10))
        return BASE + timedelta(microseconds=us)

    since, until = moment(), moment()
    if since is not None and until is not None and until <= since:
        since, until = until, since
        if since == until:
            until = since + timedelta(milliseconds=1)
    return Window(T, draw(st.sampled_from([None, "cad"])), since, until)


def _deliveries(draw, events: list[dict]) -> list[list[dict]]:
    """Any order, some twice, in batches of any size (Pub/Sub push)."""
    again = draw(st.lists(st.sampled_from(events), max_size=3)) if events else []
    order = draw(st.permutations(events + again))
    sizes = draw(st.lists(st.integers(1, 5), min_size=len(order), max_size=len(order)))
    batches, i = [], 0
    for size in sizes:
        if i >= len(order):
            break
        batches.append(order[i : i + size])
        i += size
    return batches


def _table(rows: list[UserUsage]) -> dict[tuple[str, str | None], tuple]:
    return {
        (r.license_id, r.user): (
            r.leases, r.open_leases, r.ended_by_term, r.ended_by_idle,
            pytest.approx(r.seat_seconds, abs=1e-6),
            None if r.longest_seconds is None else pytest.approx(r.longest_seconds, abs=1e-6),
            r.queue_served, r.queue_left, pytest.approx(r.queued_seconds_total, abs=1e-9),
            None if r.queued_seconds_max is None else pytest.approx(r.queued_seconds_max),
        )
        for r in rows
    }  # fmt: skip


def check_against_the_old_report(data, engine: Engine | None) -> None:
    events = data.draw(user_histories())
    for batch in _deliveries(data.draw, events):
        event_log.insert_events(batch, engine)
    windows = [data.draw(user_windows(events)) for _ in range(3)]
    for window in (Window(T), *windows):
        new = user_usage(window, engine)
        assert _table(new) == _table(old_user_usage(window, engine)), window
        assert [(r.license_id, r.user or "") for r in new] == sorted(
            (r.license_id, r.user or "") for r in new
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_sql_report_equals_the_old_one_on_sqlite(tmp_path_factory, data) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path_factory.mktemp('u') / 'u.db'}")
    store.upgrade(engine)
    try:
        check_against_the_old_report(data, engine)
    finally:
        engine.dispose()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_the_sql_report_equals_the_old_one_on_postgres(database_url, data) -> None:
    with db.get_engine().begin() as conn:
        conn.execute(text("TRUNCATE lease_events, usage_rollups, usage_minute_rollups, "
                          "usage_client_rollups, usage_leases"))  # fmt: skip
    check_against_the_old_report(data, None)


def test_migration_0010_gives_the_stored_leases_their_users(migration_urls) -> None:
    """A database at 0009 with leases stored (the audit insert did not keep users then),
    upgraded: each lease has its acquire's user (a string, else none), the per-user report
    reads them, and the queue's outcomes have their index; a downgrade takes both away."""
    from sqlalchemy import inspect

    from seatlease.records import partitions
    from seatlease.records.tables import lease_events

    def ev(n: int, etype: str, minute: int, session: str | None, meta: dict) -> dict:
        return {"event_id": f"ev-{n}", "type": etype, "tenant_id": T, "license_id": "cad",
                "session_id": session, "client_id": "c1", "seats_used": None,
                "seats_total": None, "count": 1, "metadata": meta,
                "occurred_at": BASE + timedelta(minutes=minute)}  # fmt: skip

    events = [
        ev(1, "lease.acquired", 0, "s1", {"user": "ann"}),
        ev(2, "lease.released", 10, "s1", {"user": "ann"}),
        ev(3, "lease.borrowed", 1, "s2", {"user": 7}),
        ev(4, "lease.acquired", 2, "s3", {}),
        ev(5, "lease.released", 3, "s4", {"user": "bob"}),  # its acquire is not stored
        ev(6, "queue.granted", 4, None, {"user": "bob", "queued_ms": 1500}),
    ]
    leases = [  # what the audit insert of 0009 stored for them
        ("s1", BASE, BASE + timedelta(minutes=10)),
        ("s2", BASE + timedelta(minutes=1), None),
        ("s3", BASE + timedelta(minutes=2), None),
        ("s4", None, BASE + timedelta(minutes=3)),
    ]
    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0009")
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                partitions.ensure_partitions(conn, [BASE])
            conn.execute(lease_events.insert(), events)
            for session, acquired, ended in leases:
                conn.execute(
                    _times(text(
                        "INSERT INTO usage_leases (session_id, tenant_id, license_id, "
                        "client_id, acquired_at, ended_at) "
                        "VALUES (:s, :t, 'cad', 'c1', :acquired, :ended)"
                    ), "acquired", "ended"),
                    {"s": session, "t": T, "acquired": acquired, "ended": ended},
                )  # fmt: skip
        store.upgrade(engine)
        with engine.connect() as conn:
            found = conn.execute(text("SELECT session_id, user_name FROM usage_leases"))
            users = {r.session_id: r.user_name for r in found}
        assert users == {"s1": "ann", "s2": None, "s3": None, "s4": None}, url
        assert "ix_lease_events_queue" in {
            i["name"] for i in inspect(engine).get_indexes("lease_events")
        }
        rows = {(r.user, r.leases, r.open_leases, r.seat_seconds, r.queue_served)
                for r in user_usage(Window(T), engine)}  # fmt: skip
        assert rows == {("ann", 1, 0, 600.0, 0), (None, 2, 2, 0.0, 0), ("bob", 0, 0, 0.0, 1)}
        store.downgrade(engine, "0009")
        assert "user_name" not in {c["name"] for c in inspect(engine).get_columns("usage_leases")}
        assert "ix_lease_events_queue" not in {
            i["name"] for i in inspect(engine).get_indexes("lease_events")
        }
        engine.dispose()


def _times(stmt: Any, *names: str) -> Any:
    return stmt.bindparams(*(bindparam(n, type_=DateTime(timezone=True)) for n in names))
