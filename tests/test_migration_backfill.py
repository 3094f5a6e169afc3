"""Migrations backfill from their own frozen code, never the live ``seatlease.records.rollups``:
a database at 0002 (or taken on to 0007) that already holds lease events upgrades to head
(0003's rollups, 0008's minute rollups, 0010's users), and ends with the same events,
rollups and reports as a database that received the same events through today's audit
insert at head; on PostgreSQL and SQLite."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.dialects.postgresql import JSONB

from seatlease.clock import utc
from seatlease.records import db, event_log, store
from seatlease.records.reports import Window, usage_report, user_usage
from seatlease.records.tables import (
    lease_events,
    usage_client_rollups,
    usage_leases,
    usage_minute_rollups,
    usage_rollups,
)

T = "acme"
NOW = datetime.now(UTC).replace(second=0, microsecond=0)

# lease_events as revision 0002 holds it (0001's table; no borrowing yet: that is 0004).
EVENTS_0002 = sa.table(
    "lease_events",
    *(sa.column(c) for c in ("event_id", "type", "tenant_id", "license_id", "session_id",
                             "client_id", "seats_used", "seats_total", "count")),
    sa.column("occurred_at", sa.DateTime(timezone=True)),
    sa.column("metadata", sa.JSON().with_variant(JSONB(), "postgresql")),
)  # fmt: skip


def _events() -> list[dict]:
    """Two licenses over two months (40 days ago and within the minute retention):
    acquires with and without a user, releases, a reclaim, an ending that arrived without
    its acquire, denials, an open lease."""
    n = iter(range(1000))

    def ev(etype, at, lic, session, used, user=None, count=1):
        return {
            "event_id": f"ev-{next(n)}",
            "type": etype,
            "tenant_id": T,
            "license_id": lic,
            "session_id": session,
            "client_id": session and f"c-{session}",
            "occurred_at": at,
            "seats_used": used,
            "seats_total": None if used is None else 5,
            "count": count,
            "metadata": {"user": user} if user else {},
        }

    old = NOW - timedelta(days=40, hours=3)
    new = NOW - timedelta(days=2, hours=5)
    return [
        ev("lease.acquired", old, "cad", "s1", 1, "ann"),
        ev("lease.acquired", old + timedelta(seconds=20), "cad", "s2", 2, "bob"),
        ev("lease.released", old + timedelta(minutes=50), "cad", "s1", 1),
        ev("lease.denied", old + timedelta(minutes=51), "cad", None, None, count=3),
        ev("lease.reclaimed", old + timedelta(hours=2, seconds=7), "cad", "s2", 0),
        ev("lease.acquired", old + timedelta(hours=1), "cam", "s3", 1, "ann"),
        ev("lease.released", old + timedelta(days=1), "cam", "s3", 0),
        ev("lease.acquired", new, "cad", "s4", 1, "ann"),
        ev("lease.acquired", new + timedelta(seconds=30), "cad", "s5", 2),
        ev("lease.released", new + timedelta(minutes=3, seconds=2), "cad", "s4", 1),
        ev("lease.denied", new + timedelta(minutes=3, seconds=5), "cad", None, None, count=2),
        ev("lease.revoked", new + timedelta(hours=1), "cad", "s5", 0),
        ev("lease.released", new + timedelta(hours=2), "cam", "gone", 0),
        ev("lease.acquired", new + timedelta(hours=3), "cam", "s6", 1, "cy"),
    ]


@pytest.fixture
def new_database(request, postgres_admin_url_or_none, tmp_path) -> Iterator[Callable]:
    made: list[str] = []
    engines: list[Engine] = []

    def make() -> Engine:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}"
        else:
            name = f"seatlease_bf_{uuid.uuid4().hex[:10]}"
            with _admin(postgres_admin_url_or_none).connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            made.append(name)
            url = postgres_admin_url_or_none.rsplit("/", 1)[0] + "/" + name
        engines.append(db.make_engine(url))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()
    if made:
        admin = _admin(postgres_admin_url_or_none)
        with admin.connect() as conn:
            for name in made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _admin(url: str) -> Engine:
    return create_engine(url, isolation_level="AUTOCOMMIT")


@pytest.fixture
def postgres_admin_url_or_none(request) -> str | None:
    if request.node.callspec.params["new_database"] == "postgres":
        return request.getfixturevalue("postgres_admin_url")
    return None


@pytest.mark.parametrize("new_database", ["postgres", "sqlite"], indirect=True)
@pytest.mark.parametrize("steps", [("0002",), ("0002", "0007")], ids=["from0002", "from0007"])
def test_upgrade_with_stored_events_matches_the_audit_insert(new_database, steps):
    events = _events()
    migrated = new_database()
    store.upgrade(migrated, steps[0])
    with migrated.begin() as conn:
        conn.execute(EVENTS_0002.insert(), events)
    for revision in (*steps[1:], "head"):
        store.upgrade(migrated, revision)

    fresh = new_database()
    store.upgrade(fresh)
    assert event_log.insert_events(events, fresh) == len(events)

    with migrated.connect() as conn:
        stored = conn.execute(select(lease_events.c.event_id)).scalars().all()
    assert sorted(stored) == sorted(e["event_id"] for e in events)
    for table in (usage_rollups, usage_client_rollups, usage_leases):
        assert _rows(migrated, table) == _rows(fresh, table), table.name
    # 0008 fills the minutes of the retention (14 days); the insert writes every event's
    # minute, and `audit prune` deletes the older ones.
    minutes = [r for r in _rows(fresh, usage_minute_rollups) if r[2] >= NOW - timedelta(days=14)]
    assert _rows(migrated, usage_minute_rollups) == minutes
    assert minutes
    user_column = list(usage_leases.c.keys()).index("user_name")
    leases = _rows(migrated, usage_leases)
    assert any(r[user_column] == "ann" for r in leases)  # users filled (0010)
    seats_column = list(usage_leases.c.keys()).index("seats")
    assert {r[seats_column] for r in leases} == {1}  # every lease before 0012 weighs 1

    recent = Window(T, since=NOW - timedelta(days=10), until=NOW - timedelta(minutes=1))
    for window, period in (
        (Window(T), "hour"),
        (Window(T), "day"),
        (Window(T, "cad"), "hour"),
        (
            Window(T, since=NOW - timedelta(days=2, hours=6), until=NOW - timedelta(days=2)),
            "minute",
        ),
    ):
        assert (
            usage_report(window, period, migrated).as_dict()
            == usage_report(window, period, fresh).as_dict()
        ), (window, period)
    for window in (Window(T), recent):
        assert user_usage(window, migrated) == user_usage(window, fresh)
        assert user_usage(window, migrated)


def _rows(engine: Engine, table: sa.Table) -> list[tuple]:
    with engine.connect() as conn:
        found = conn.execute(select(table)).all()
    return sorted(tuple(utc(v) if isinstance(v, datetime) else v for v in row) for row in found)


def test_migrations_import_no_live_application_code():
    """A migration carries its own frozen copy of what it runs
    (seatlease.records.migrations._frozen_*)."""
    versions = Path(store.__file__).parent / "migrations" / "versions"
    for path in sorted(versions.glob("0*.py")):
        source = path.read_text()
        assert "from seatlease import" not in source, path.name
        assert "import seatlease." not in source, path.name
        for line in source.splitlines():
            if line.startswith("from seatlease"):
                assert line.startswith("from seatlease.records.migrations import _frozen_"), (
                    path.name
                )
