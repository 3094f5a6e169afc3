"""The lease event log (the audit trail) and its usage rollups: idempotent inserts (one
statement per message on PostgreSQL), pruning by whole months, and reading a tenant's
trail back. The SQL of the insert and the SQLite fold live in ``rollups``; the monthly
partitions in ``partitions``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, insert, select, text, update
from sqlalchemy.exc import DBAPIError

from seatlease import clock
from seatlease.clock import utc
from seatlease.licenses import MAX_BORROW_SECONDS
from seatlease.logs import log
from seatlease.records import partitions, rollups, sqlite_fold
from seatlease.records.db import get_engine, sqlstate, transaction
from seatlease.records.tables import (
    audit_retention,
    lease_events,
    usage_leases,
    usage_minute_rollups,
)

EVENT_COLUMNS = rollups.EVENT_COLUMNS
# How long a lease's end is kept in ``usage_leases`` whatever the pruning horizon: at
# least as long as a token issued for it may be valid (a borrow's, the longest), and a day
# more.
TOKEN_MEMORY_SECONDS = MAX_BORROW_SECONDS + 24 * 3600
DEADLOCK_RETRIES = 3
_partitions_ready: dict[str, datetime] = {}  # engine URL -> month whose partitions exist
_insert_function_ready: dict[str, bool] = {}  # engine URL -> the insert function exists


def insert_events(events: Sequence[dict[str, Any]], engine: Engine | None = None) -> int:
    """Insert validated events with their usage rollups (``seatlease.records.rollups``) in one
    transaction; an event already stored is skipped and changes no rollup (idempotent
    under redelivery), and so is an event older than the pruned horizon. Returns the
    number of new rows. PostgreSQL gets one ``INSERT ... SELECT FROM jsonb_to_recordset
    ... ON CONFLICT DO NOTHING RETURNING`` statement whose CTEs also upsert the rollups
    (one round trip per message, whatever its size: its cost is in bench/NOTEBOOK.md);
    SQLite the same work step by step."""
    if not events:
        return 0
    # ``seats`` absent or null: an event from before weighted seats, one seat.
    rows = [
        {**{c: e.get(c) for c in EVENT_COLUMNS}, "count": e.get("count") or 1,
         "seats": e.get("seats") or 1}
        for e in events
    ]  # fmt: skip
    engine = engine or get_engine()
    if engine.dialect.name == "postgresql":
        return _insert_events_postgres(engine, rollups.as_json(rows))
    with transaction(engine) as conn:
        return sqlite_fold.insert_sqlite(conn, rows)


def insert_events_json(payload: bytes, engine: Engine | None = None) -> int:
    """``insert_events`` for a JSON array of validated events (the audit function's
    path: pydantic-core writes the JSON, nothing is decoded again on PostgreSQL)."""
    engine = engine or get_engine()
    if engine.dialect.name == "postgresql":
        return _insert_events_postgres(engine, payload)
    return insert_events(json.loads(payload), engine)


def _insert_events_postgres(engine: Engine, payload: str | bytes) -> int:
    _ensure_partitions(engine)
    for attempt in range(DEADLOCK_RETRIES):
        function = _ensure_insert_function(engine)
        try:
            with transaction(engine) as conn:
                return rollups.insert_postgres(conn, payload, function=function)
        except DBAPIError as exc:
            # Two messages upserting the same rollup rows: the rows are taken in one
            # order, but a deadlock stays possible between the CTEs; retrying is safe
            # (the whole statement rolled back) and cheaper than a Pub/Sub redelivery.
            # The insert function gone (a restored backup, a dropped schema): made again.
            state = sqlstate(exc)
            if state == "42883" and function:
                _insert_function_ready.pop(str(engine.url), None)
            elif state != "40P01":
                raise
            if attempt == DEADLOCK_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _ensure_partitions(engine: Engine, now: datetime | None = None) -> None:
    """This month's and the next months' partitions, checked once per process and month."""
    month = (now or clock.now()).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    key = str(engine.url)
    if _partitions_ready.get(key) == month:
        return
    with transaction(engine) as conn:
        partitions.ensure_partitions(conn, partitions.months_ahead(month))
    _partitions_ready[key] = month


def _ensure_insert_function(engine: Engine) -> bool:
    """Whether the audit insert can go through its server-side function (created here
    once per process). A database role that may not create functions keeps the plain
    statement: the same rows, only slower; said once in a WARNING line."""
    key = str(engine.url)
    ready = _insert_function_ready.get(key)
    if ready is None:
        try:
            with transaction(engine) as conn:
                rollups.ensure_insert_function(conn)
            ready = True
        except DBAPIError as exc:
            if sqlstate(exc) != "42501":  # insufficient_privilege
                raise
            log("WARNING", "audit: cannot create the insert function; using the plain "
                "statement", error=str(exc.orig)[:300])  # fmt: skip
            ready = False
        _insert_function_ready[key] = ready
    return ready


@dataclass(frozen=True, slots=True)
class Pruned:
    horizon: datetime  # events before this are gone and are not stored again
    events_deleted: int
    partitions_dropped: list[str]
    leases_deleted: int
    minute_rollups_deleted: int = 0  # older than rollups.MINUTE_RETENTION


def prune_events(before: datetime, engine: Engine | None = None) -> Pruned:
    """Delete the raw events of every whole month before ``before`` (PostgreSQL drops
    those months' partitions); the hourly and client rollups stay. Records the horizon so
    that a late or replayed event older than it is not stored (and counted) again. Also
    deletes the minute rollups older than ``rollups.MINUTE_RETENTION`` (reports refuse
    minute periods that old)."""
    engine = engine or get_engine()
    horizon = before.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    dropped: list[str] = []
    deleted = 0
    with transaction(engine) as conn:
        postgres = conn.dialect.name == "postgresql"
        if postgres:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": partitions.PARTITION_LOCK})
        current = conn.execute(
            select(audit_retention.c.pruned_before).where(audit_retention.c.id == 1)
        ).scalar()
        if current is not None and utc(current) > horizon:
            horizon = utc(current)
        if current is None:
            conn.execute(
                insert(audit_retention).values(id=1, pruned_before=horizon, pruned_at=clock.now())
            )
        else:
            conn.execute(
                update(audit_retention)
                .where(audit_retention.c.id == 1)
                .values(pruned_before=horizon, pruned_at=clock.now())
            )
        if postgres:
            for name, bounds in sorted(partitions.partitions(conn).items()):
                if bounds is not None and bounds[1] <= horizon:
                    deleted += conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one()
                    conn.execute(text(f"DROP TABLE {name}"))
                    dropped.append(name)
            deleted += conn.execute(
                text("DELETE FROM lease_events_default WHERE occurred_at < :h"), {"h": horizon}
            ).rowcount
        else:
            deleted += conn.execute(
                delete(lease_events).where(lease_events.c.occurred_at < horizon)
            ).rowcount
        leases = usage_leases.c
        # (a lease that ended while a token of it may still be valid stays: it is how the
        # service knows it ended it, should Redis lose its data: records/seat_memory.py)
        recent_end = clock.now() - timedelta(seconds=TOKEN_MEMORY_SECONDS)
        gone = conn.execute(
            delete(usage_leases).where(
                (
                    (leases.acquired_at < horizon)
                    | (leases.acquired_at.is_(None) & (leases.ended_at < horizon))
                )
                & (leases.ended_at.is_(None) | (leases.ended_at < recent_end))
            )
        ).rowcount
        minutes = usage_minute_rollups.c
        cutoff = clock.now().replace(second=0, microsecond=0) - rollups.MINUTE_RETENTION
        minutes_gone = conn.execute(
            delete(usage_minute_rollups).where(minutes.minute < cutoff)
        ).rowcount
        if postgres:
            partitions.ensure_partitions(conn, partitions.months_ahead(clock.now()))
    return Pruned(horizon, int(deleted), dropped, int(gone), int(minutes_gone))


def list_events(
    tenant_id: str, license_id: str | None = None, engine: Engine | None = None
) -> list[dict[str, Any]]:
    """The audit trail in the order things happened. Rows arrive in any order (Pub/Sub
    push does not keep two messages in order), so the row id only breaks ties."""
    query = select(lease_events).where(lease_events.c.tenant_id == tenant_id)
    if license_id is not None:
        query = query.where(lease_events.c.license_id == license_id)
    with transaction(engine) as conn:
        return [
            dict(r)
            for r in conn.execute(
                query.order_by(lease_events.c.occurred_at, lease_events.c.id)
            ).mappings()
        ]
