"""Usage rollups, kept with every event insert, and the monthly partitions of
``lease_events``: the write side of the usage reports (``seatlease.reports`` reads them).

Why these columns (per license and UTC hour, table ``usage_rollups``)
--------------------------------------------------------------------
Pub/Sub push does not keep messages in order and redelivers them, so every column is
either a *sum* or a *max/arg-max* over the hour's events: both commute (any arrival order
gives the same row) and only the rows the event insert actually added are aggregated (the
insert's ``ON CONFLICT DO NOTHING ... RETURNING`` in the same statement), so a redelivered
event changes nothing.

- ``acquired``, ``borrowed`` (the two ways a lease starts), ``released``, ``reclaimed``,
  ``revoked`` (the three ways it ends): event counts; ``denials``: the sum of
  ``lease.denied`` counts. ``lease.converted`` and ``lease.lingering`` change no seat
  count (docs/design.md, "Events") and are only seen through ``seats_used``.
- ``max_used``: the highest ``seats_used`` of the hour. Every lease event carries Redis's
  own count of live leases right after it (``seats_used``), so the *level* (seats in use)
  is never rebuilt from +1/-1 deltas: a delta stream drifts for ever when an ending never
  reaches the log (Redis lost its data, issue 11), Redis's count does not.
- ``last_at``/``last_id``/``last_used``/``last_total``: the hour's last event (by
  ``occurred_at``, then event id: the same Lua call numbers its events in order) with its
  ``seats_used`` and ``seats_total``: the level the next hour starts from.
- ``net``: starts minus endings, and ``dsec_ms``: the sum over the hour's events of
  delta x milliseconds to the hour's end, so seat-seconds = level at the hour's start x
  3600 s + ``dsec_ms`` / 1000.

The same columns per license and UTC minute (table ``usage_minute_rollups``, migration
0008; ``dsec_ms`` to the minute's end) give reports minute periods. A busy license has a
row for every minute, so they are kept ``MINUTE_RETENTION`` (14 days; ``seatlease audit
prune`` deletes older ones) while the hourly rows outlive the raw events.

The reports derive the rest: the level at an hour's start is ``last_used`` of the latest
earlier hour with events; the peak of an hour is the larger of that level and
``max_used``; leases *lost* in an hour (they vanished without an ending event: the next
event's ``seats_used`` is lower than the log explains) = level at the start + ``net`` -
``last_used``. Recomputing a touched hour's peak from its raw events would also be exact,
but reads the hour back on every insert; these columns need no read at all.

Per license, client and UTC day of the acquire (``usage_client_rollups``): leases acquired
and, once both ends of a lease are stored, its duration (count, total, longest,
reclaimed). The two ends of a lease usually arrive in different messages, possibly in
either order and in concurrent transactions: ``usage_leases`` has one row per lease, and
each end fills its half with ``INSERT ... ON CONFLICT (session_id) DO UPDATE ... WHERE``
that half is missing (row locks make the second of two concurrent transactions see the
first's committed row); the statement that returns the row with both ends set counts the
lease, once. The reports read ``usage_leases`` for the partial days at a window's edges.

Partitions (PostgreSQL)
-----------------------
``lease_events`` is partitioned by month on ``occurred_at`` (``lease_events_YYYY_MM``, plus
``lease_events_default`` for a time no monthly partition covers). A unique constraint on
a partitioned table must include the partition key, so an event's identity is
``(event_id, occurred_at)``: a redelivered event is the same JSON, same time, so it is
still found. Events older than the pruned horizon (``audit_retention``) are not stored
again: their partition is gone, and storing them would count them twice in the rollups.
Partitions are created ahead (this month and the next ``AHEAD_MONTHS``) by migration
0003, by ``seatlease audit prune`` and by the audit insert path (once per process and
month); never by hand.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Table, insert, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from seatlease.clock import utc
from seatlease.tables import (
    audit_retention,
    lease_events,
    usage_client_rollups,
    usage_leases,
    usage_minute_rollups,
    usage_rollups,
)

ACQUIRED = "lease.acquired"
BORROWED = "lease.borrowed"
STARTS = (ACQUIRED, BORROWED)  # a lease's first event: a seat taken (+1)
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")  # its last: -1
DENIED = "lease.denied"
COUNTED = {ACQUIRED: "acquired", BORROWED: "borrowed", "lease.released": "released",
           "lease.reclaimed": "reclaimed", "lease.revoked": "revoked"}  # fmt: skip
AHEAD_MONTHS = 3
PARTITION_LOCK = 7_220_331_001  # pg_advisory_xact_lock key: one partition creator at a time
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
MINUTE = timedelta(minutes=1)
PERIOD_LENGTHS = {"minute": MINUTE, "hour": HOUR}  # the rollups' periods
# Minute rollups are kept this long (``seatlease audit prune`` deletes older ones): a day
# of minutes is 1,440 rows per license with events, against 24 hourly rows.
MINUTE_RETENTION = timedelta(days=14)

# ``usage_leases.user_name``: the acquire's ``metadata.user`` when it is a string (a
# number, a boolean or no ``user`` at all is no user), as the per-user report counts it.
USER_SQL = "CASE WHEN jsonb_typeof(metadata->'user') = 'string' THEN metadata->>'user' END"


def user_of(metadata: Any) -> str | None:
    """``USER_SQL`` in Python: ``metadata`` as stored (a dict, JSON text or None)."""
    if isinstance(metadata, str | bytes):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    user = metadata.get("user") if isinstance(metadata, dict) else None
    return user if isinstance(user, str) else None


EVENT_COLUMNS = (
    "event_id",
    "type",
    "tenant_id",
    "license_id",
    "session_id",
    "client_id",
    "occurred_at",
    "seats_used",
    "seats_total",
    "count",
    "metadata",
)

# -- PostgreSQL: one statement per batch ------------------------------------------------

_RECORDSET = """
    SELECT event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
           seats_used, seats_total, coalesce(count, 1) AS count, metadata
    FROM jsonb_to_recordset(CAST(:events AS jsonb)) AS e(
        event_id text, type text, tenant_id text, license_id text, session_id text,
        client_id text, occurred_at timestamptz, seats_used int, seats_total int,
        count int, metadata jsonb)"""


def insert_statement(source: str = _RECORDSET) -> str:
    """The event insert with its rollups, as one statement: ``source`` is a SELECT of the
    event columns (by default the ``:events`` JSON array). Returns one row: ``inserted``,
    the rows added."""
    endings = ", ".join(f"'{t}'" for t in ENDINGS)
    starts = ", ".join(f"'{t}'" for t in STARTS)
    return f"""
WITH src AS ({source}),
ins AS (
    INSERT INTO lease_events (event_id, type, tenant_id, license_id, session_id, client_id,
                              occurred_at, seats_used, seats_total, count, metadata)
    SELECT event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
           seats_used, seats_total, count, metadata
    FROM src
    WHERE occurred_at >= coalesce((SELECT pruned_before FROM audit_retention WHERE id = 1),
                                  '-infinity')
    ON CONFLICT (event_id, occurred_at) DO NOTHING
    RETURNING event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
              seats_used, seats_total, count, {USER_SQL} AS user_name
),
ev AS (
    SELECT ins.*, date_trunc('hour', occurred_at, 'UTC') AS hour,
           date_trunc('minute', occurred_at, 'UTC') AS minute,
           CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END
               AS delta
    FROM ins
),
{_period_rollup("usage_rollups", "hour")},
{_period_rollup("usage_minute_rollups", "minute")},
sess AS (
    SELECT session_id, min(tenant_id) AS tenant_id, min(license_id) AS license_id,
           min(occurred_at) FILTER (WHERE delta = 1) AS acq_at,
           min(client_id) FILTER (WHERE delta = 1) AS acq_client,
           min(occurred_at) FILTER (WHERE delta = -1) AS end_at,
           (array_agg(type ORDER BY occurred_at, event_id) FILTER (WHERE delta = -1))[1]
               AS end_type,
           -- the user of the acquire acq_at is from
           (array_agg(user_name ORDER BY occurred_at, event_id) FILTER (WHERE delta = 1))[1]
               AS acq_user
    FROM ev WHERE session_id IS NOT NULL AND delta <> 0
    GROUP BY session_id
),
leases AS (
    INSERT INTO usage_leases AS l (session_id, tenant_id, license_id, client_id,
                                   acquired_at, ended_at, end_type, user_name)
    SELECT session_id, tenant_id, license_id, acq_client, acq_at, end_at, end_type, acq_user
    FROM sess ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET
        client_id = coalesce(l.client_id, EXCLUDED.client_id),
        -- with acquired_at, from the same acquire (NULL is a value here: no user)
        user_name = CASE WHEN l.acquired_at IS NULL THEN EXCLUDED.user_name
                         ELSE l.user_name END,
        acquired_at = coalesce(l.acquired_at, EXCLUDED.acquired_at),
        ended_at = coalesce(l.ended_at, EXCLUDED.ended_at),
        end_type = coalesce(l.end_type, EXCLUDED.end_type)
    -- only to fill the half that is missing: a row is returned with both ends set only
    -- by the statement that completed it
    WHERE l.tenant_id = EXCLUDED.tenant_id AND l.license_id = EXCLUDED.license_id
      AND ((l.acquired_at IS NULL AND EXCLUDED.acquired_at IS NOT NULL)
           OR (l.ended_at IS NULL AND EXCLUDED.ended_at IS NOT NULL))
    RETURNING l.tenant_id, l.license_id, l.client_id, l.acquired_at, l.ended_at, l.end_type
),
pairs AS (
    SELECT tenant_id, license_id, client_id, acquired_at AS acq_at, ended_at AS end_at,
           end_type
    FROM leases WHERE acquired_at IS NOT NULL AND ended_at IS NOT NULL
),
per_client AS (
    SELECT tenant_id, license_id, coalesce(client_id, '') AS client_id,
           date_trunc('day', at, 'UTC') AS day, sum(acq) AS acquired, sum(ended) AS ended,
           sum(recl) AS reclaimed, coalesce(sum(ms), 0) AS total_ms, max(ms) AS max_ms
    FROM (
        SELECT tenant_id, license_id, client_id, occurred_at AS at, 1 AS acq, 0 AS ended,
               0 AS recl, NULL::bigint AS ms
        FROM ev WHERE delta = 1
        UNION ALL
        SELECT tenant_id, license_id, client_id, acq_at, 0, 1,
               (end_type = 'lease.reclaimed')::int,
               round(extract(epoch FROM end_at - acq_at) * 1000)::bigint
        FROM pairs
    ) x
    GROUP BY 1, 2, 3, 4
),
clients AS (
    INSERT INTO usage_client_rollups AS c (tenant_id, license_id, client_id, day, acquired,
                                           ended, reclaimed, total_ms, max_ms)
    SELECT tenant_id, license_id, client_id, day, acquired, ended, reclaimed, total_ms,
           max_ms
    FROM per_client ORDER BY tenant_id, license_id, client_id, day
    ON CONFLICT (tenant_id, license_id, client_id, day) DO UPDATE SET
        acquired = c.acquired + EXCLUDED.acquired, ended = c.ended + EXCLUDED.ended,
        reclaimed = c.reclaimed + EXCLUDED.reclaimed,
        total_ms = c.total_ms + EXCLUDED.total_ms,
        max_ms = GREATEST(c.max_ms, EXCLUDED.max_ms)
    RETURNING 1
)
SELECT count(*) AS inserted FROM ins
"""


def _period_rollup(table: str, period: str) -> str:
    """The CTEs folding the new events (``ev``, with its ``period`` column: ``hour`` or
    ``minute``) into ``table``, one row per license and period (the columns of the
    module's docstring; ``dsec_ms`` to the period's end)."""
    return f"""
{period}_sums AS (
    SELECT tenant_id, license_id, {period},
           count(*) FILTER (WHERE type = '{ACQUIRED}') AS acquired,
           count(*) FILTER (WHERE type = '{BORROWED}') AS borrowed,
           count(*) FILTER (WHERE type = 'lease.released') AS released,
           count(*) FILTER (WHERE type = 'lease.reclaimed') AS reclaimed,
           count(*) FILTER (WHERE type = 'lease.revoked') AS revoked,
           coalesce(sum(count) FILTER (WHERE type = '{DENIED}'), 0) AS denials,
           sum(delta) AS net,
           sum(delta * round(extract(epoch FROM {period} + interval '1 {period}' - occurred_at)
                             * 1000))::bigint AS dsec_ms,
           max(seats_used) AS max_used
    FROM ev GROUP BY tenant_id, license_id, {period}
),
{period}_last AS (
    SELECT DISTINCT ON (tenant_id, license_id, {period})
           tenant_id, license_id, {period}, occurred_at, event_id, seats_used, seats_total
    FROM ev WHERE seats_used IS NOT NULL
    ORDER BY tenant_id, license_id, {period}, occurred_at DESC, length(event_id) DESC,
             event_id DESC
),
{period}_rolled AS (
    INSERT INTO {table} AS r (tenant_id, license_id, {period}, acquired, borrowed,
        released, reclaimed, revoked, denials, net, dsec_ms, max_used, last_at, last_id,
        last_used, last_total)
    SELECT h.tenant_id, h.license_id, h.{period}, h.acquired, h.borrowed, h.released,
           h.reclaimed, h.revoked, h.denials, h.net, h.dsec_ms, h.max_used, l.occurred_at,
           l.event_id, l.seats_used, l.seats_total
    FROM {period}_sums h LEFT JOIN {period}_last l USING (tenant_id, license_id, {period})
    ORDER BY h.tenant_id, h.license_id, h.{period}  -- one lock order for every writer
    ON CONFLICT (tenant_id, license_id, {period}) DO UPDATE SET
        acquired = r.acquired + EXCLUDED.acquired,
        borrowed = r.borrowed + EXCLUDED.borrowed,
        released = r.released + EXCLUDED.released,
        reclaimed = r.reclaimed + EXCLUDED.reclaimed,
        revoked = r.revoked + EXCLUDED.revoked,
        denials = r.denials + EXCLUDED.denials,
        net = r.net + EXCLUDED.net,
        dsec_ms = r.dsec_ms + EXCLUDED.dsec_ms,
        max_used = GREATEST(r.max_used, EXCLUDED.max_used),
        {_newer("last_at")}, {_newer("last_id")}, {_newer("last_used")},
        {_newer("last_total")}
    RETURNING 1
)"""


def minute_backfill_statement(source: str) -> str:
    """The minute rollups of events already stored (``source``: a SELECT of the event
    columns, e.g. a range of ``lease_events``), without inserting them again: what
    migration 0008 runs over the minute retention."""
    endings = ", ".join(f"'{t}'" for t in ENDINGS)
    starts = ", ".join(f"'{t}'" for t in STARTS)
    return f"""
WITH ev AS (
    SELECT src.*, date_trunc('minute', occurred_at, 'UTC') AS minute,
           CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END
               AS delta
    FROM ({source}) src
),
{_period_rollup("usage_minute_rollups", "minute")}
SELECT count(*) AS inserted FROM minute_rolled
"""


def _newer(column: str) -> str:
    """The stored hour's "last event" column, replaced when the batch's last event is
    later (by time, then event id length and text: ``<prefix>-9`` before ``<prefix>-10``)."""
    return (
        f"{column} = CASE WHEN EXCLUDED.last_at IS NOT NULL AND (r.last_at IS NULL OR "
        "(EXCLUDED.last_at, length(EXCLUDED.last_id), EXCLUDED.last_id) > "
        f"(r.last_at, length(r.last_id), r.last_id)) THEN EXCLUDED.{column} ELSE r.{column} END"
    )


_STATEMENTS: dict[str, Any] = {}


@dataclass(frozen=True)
class InsertFunction:
    """The audit insert as a server-side function (PostgreSQL).

    Why: the statement is about 7.6 kB. pg8000 scans an SQL text character by character
    in Python on every execute (``convert_paramstyle``: 1.6 ms for this one) and
    PostgreSQL parses and plans it every time. A PL/pgSQL function's statement is
    prepared once per connection with its plan cached, and the call is one short line:
    about 10 % less time per 1,000-event message (docs/benchmarks.md, "Audit insert as a
    function"). The name carries a digest
    of the body, so a changed statement is a new function: the audit path creates the
    one it needs (``ensure_insert_function``, like the partitions) and code and database
    never disagree about what the function does."""

    name: str
    create: str
    call: str


def insert_function() -> InsertFunction:
    body = insert_statement(_RECORDSET.replace(":events", "$1"))
    name = f"seatlease_insert_events_{hashlib.sha256(body.encode()).hexdigest()[:16]}"
    create = (
        f"CREATE FUNCTION {name}(text) RETURNS SETOF bigint LANGUAGE plpgsql AS "
        f"$seatlease$\nBEGIN\nRETURN QUERY {body};\nEND\n$seatlease$"
    )
    return InsertFunction(name, create, f"SELECT * FROM {name}(:events)")


def ensure_insert_function(conn: Connection) -> InsertFunction:
    """Create this code's insert function unless it exists (serialised with the partition
    creators: concurrent CREATE FUNCTIONs of one name fail). Older versions' functions
    stay: instances of the previous release may still call them during a deploy."""
    function = insert_function()
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PARTITION_LOCK})
    if conn.execute(text("SELECT to_regproc(:n)"), {"n": function.name}).scalar() is None:
        conn.exec_driver_sql(function.create)
    return function


def insert_postgres(conn: Connection, payload: str | bytes, function: bool = False) -> int:
    """Insert a JSON array of events with their rollups; returns the rows added. With
    ``function``, through the function ``ensure_insert_function`` created (the same
    statement, prepared once per connection)."""
    key = "function" if function else "json"
    stmt = _STATEMENTS.get(key)
    if stmt is None:
        stmt = _STATEMENTS[key] = text(insert_function().call if function else insert_statement())
    if isinstance(payload, bytes):
        payload = payload.decode()
    return run_insert(conn, stmt, {"events": payload})


def run_insert(conn: Connection, stmt: Any, params: dict[str, Any]) -> int:
    return int(conn.execute(stmt, params).scalar_one())


# -- partitions (PostgreSQL) ------------------------------------------------------------


def _month(value: datetime) -> datetime:
    return utc(value).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _next_month(month: datetime) -> datetime:
    return (
        month.replace(year=month.year + 1, month=1)
        if month.month == 12
        else (month.replace(month=month.month + 1))
    )


def partition_name(month: datetime) -> str:
    return f"lease_events_{month.year:04d}_{month.month:02d}"


def partitions(conn: Connection) -> dict[str, tuple[datetime, datetime] | None]:
    """The partitions of ``lease_events``: name -> (from, to), None for the default."""
    rows = conn.execute(
        text(
            """
            SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
            FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass('lease_events')"""
        )
    )
    found: dict[str, tuple[datetime, datetime] | None] = {}
    for row in rows:
        if row.bound == "DEFAULT":
            found[row.name] = None
            continue
        # FOR VALUES FROM ('2026-11-01 00:00:00+00') TO ('2026-12-01 00:00:00+00')
        lo, hi = (part.split("'")[1] for part in row.bound.split(" TO "))
        found[row.name] = (_pg_time(lo), _pg_time(hi))
    return found


def _pg_time(value: str) -> datetime:
    return utc(datetime.fromisoformat(value if value[-3] in "+-" else value + "+00:00"))


def ensure_partitions(conn: Connection, months: Sequence[datetime]) -> list[str]:
    """Create the monthly partitions of ``months`` that do not exist yet (rows of those
    months already in the default partition move into the new one). Returns the names
    created. Serialised by an advisory lock, so concurrent callers create each once."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PARTITION_LOCK})
    existing = partitions(conn)
    created = []
    for month in sorted({_month(m) for m in months}):
        name = partition_name(month)
        if name in existing:
            continue
        bounds = {"lo": month, "hi": _next_month(month)}
        strays = conn.execute(
            text(
                "SELECT 1 FROM lease_events_default WHERE occurred_at >= :lo "
                "AND occurred_at < :hi LIMIT 1"
            ),
            bounds,
        ).first()
        lo, hi = (f"'{v.isoformat()}'" for v in bounds.values())
        values = f"FOR VALUES FROM ({lo}) TO ({hi})"
        if strays is None:
            conn.execute(text(f"CREATE TABLE {name} PARTITION OF lease_events {values}"))
        else:  # rows of that month arrived before its partition: move them into it
            conn.execute(text(f"CREATE TABLE {name} (LIKE lease_events INCLUDING DEFAULTS)"))
            conn.execute(
                text(
                    f"WITH moved AS (DELETE FROM lease_events_default WHERE occurred_at >= :lo "
                    f"AND occurred_at < :hi RETURNING *) INSERT INTO {name} SELECT * FROM moved"
                ),
                bounds,
            )
            conn.execute(text(f"ALTER TABLE lease_events ATTACH PARTITION {name} {values}"))
        created.append(name)
    return created


def months_ahead(now: datetime, ahead: int = AHEAD_MONTHS) -> list[datetime]:
    month = _month(now)
    result = [month]
    for _ in range(ahead):
        month = _next_month(month)
        result.append(month)
    return result


# -- SQLite (the embedded default): the same rollups, computed here --------------------


def _at(value: Any) -> datetime:
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _period_start(value: datetime, period: str) -> datetime:
    if period == "minute":
        return value.replace(second=0, microsecond=0)
    return value.replace(minute=0, second=0, microsecond=0)


def _ms(delta: timedelta) -> int:
    return round(delta / timedelta(milliseconds=1))


def _last_key(at: datetime, event_id: str) -> tuple[datetime, int, str]:
    return (at, len(event_id), event_id)


@dataclass
class _Hour:
    acquired: int = 0
    borrowed: int = 0
    released: int = 0
    reclaimed: int = 0
    revoked: int = 0
    denials: int = 0
    net: int = 0
    dsec_ms: int = 0
    max_used: int | None = None
    last: tuple[datetime, int, str] | None = None
    last_used: int | None = None
    last_total: int | None = None


@dataclass
class _Client:
    acquired: int = 0
    ended: int = 0
    reclaimed: int = 0
    total_ms: int = 0
    max_ms: int | None = None


@dataclass
class _Session:
    tenant_id: str
    license_id: str
    acq_at: datetime | None = None
    acq_client: str | None = None
    acq_key: tuple[datetime, str] | None = None  # the acquire acq_user is from
    acq_user: str | None = None
    ends: list[tuple[datetime, str, str]] = field(default_factory=list)


def _bigger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def insert_sqlite(conn: Connection, rows: list[dict[str, Any]]) -> int:
    """The PostgreSQL statement's work, step by step: insert each event (skipping known
    ones and those older than the pruned horizon), then fold the new ones into the
    rollups. SQLite lets one writer at a time in, so the reads below see every committed
    change."""
    horizon = conn.execute(
        select(audit_retention.c.pruned_before).where(audit_retention.c.id == 1)
    ).scalar()
    horizon = utc(horizon) if horizon is not None else None
    new: list[dict[str, Any]] = []
    stmt = sqlite_insert(lease_events).on_conflict_do_nothing()
    for row in rows:
        row = {**row, "occurred_at": _at(row["occurred_at"])}
        if horizon is not None and row["occurred_at"] < horizon:
            continue
        if conn.execute(stmt, row).rowcount == 1:
            new.append(row)
    fold_sqlite(conn, new)
    return len(new)


def fold_sqlite(conn: Connection, new: list[dict[str, Any]]) -> None:
    """Fold events just stored (each once) into the rollups and the pairing buffer."""
    for e in new:
        e["occurred_at"] = _at(e["occurred_at"])
    fold_periods(conn, new, usage_rollups, "hour")
    fold_periods(conn, new, usage_minute_rollups, "minute")
    sessions: dict[str, _Session] = {}
    for e in new:
        at, etype = e["occurred_at"], e["type"]
        delta = 1 if etype in STARTS else -1 if etype in ENDINGS else 0
        if delta and e.get("session_id"):
            s = sessions.setdefault(e["session_id"], _Session(e["tenant_id"], e["license_id"]))
            if delta == -1:
                s.ends.append((at, e["event_id"], etype))
                continue
            if s.acq_at is None or at < s.acq_at:
                s.acq_at, s.acq_client = at, e.get("client_id")
            if s.acq_key is None or (at, e["event_id"]) < s.acq_key:
                s.acq_key, s.acq_user = (at, e["event_id"]), user_of(e.get("metadata"))
    clients: dict[tuple[str, str, str, datetime], _Client] = {}
    for e in new:
        if e["type"] in STARTS:
            day = e["occurred_at"].replace(hour=0, minute=0, second=0, microsecond=0)
            key4 = (e["tenant_id"], e["license_id"], e.get("client_id") or "", day)
            clients.setdefault(key4, _Client()).acquired += 1
    for session_id, s in sorted(sessions.items()):
        pair = _pair(conn, session_id, s)
        if pair is None:
            continue
        client, acq_at, end_at, end_type = pair
        day = acq_at.replace(hour=0, minute=0, second=0, microsecond=0)
        c = clients.setdefault((s.tenant_id, s.license_id, client or "", day), _Client())
        ms = _ms(end_at - acq_at)
        c.ended += 1
        c.reclaimed += end_type == "lease.reclaimed"
        c.total_ms += ms
        c.max_ms = _bigger(c.max_ms, ms)
    for key4, c in sorted(clients.items()):
        _merge_client(conn, key4, c)


def fold_periods(conn: Connection, new: list[dict[str, Any]], table: Table, period: str) -> None:
    """Fold events (``occurred_at`` as datetimes) into ``table``, one row per license and
    ``period`` (``hour`` or ``minute``): SQLite's half of ``_period_rollup``."""
    length = PERIOD_LENGTHS[period]
    rows: dict[tuple[str, str, datetime], _Hour] = {}
    for e in new:
        at, etype = e["occurred_at"], e["type"]
        start = _period_start(at, period)
        h = rows.setdefault((e["tenant_id"], e["license_id"], start), _Hour())
        delta = 1 if etype in STARTS else -1 if etype in ENDINGS else 0
        if etype in COUNTED:
            setattr(h, COUNTED[etype], getattr(h, COUNTED[etype]) + 1)
        elif etype == DENIED:
            h.denials += int(e.get("count") or 1)
        h.net += delta
        h.dsec_ms += delta * _ms(start + length - at)
        used = e.get("seats_used")
        if used is not None:
            h.max_used = _bigger(h.max_used, used)
            key = _last_key(at, e["event_id"])
            if h.last is None or key > h.last:
                h.last, h.last_used, h.last_total = key, used, e.get("seats_total")
    for key, h in sorted(rows.items()):
        _merge_period(conn, table, period, key, h)


def _pair(
    conn: Connection, session_id: str, s: _Session
) -> tuple[str | None, datetime, datetime, str] | None:
    """Fill this session's row in ``usage_leases``; the completed (client, acquired at,
    ended at, ending type) when this batch completed the lease, else None."""
    first_end = min(s.ends) if s.ends else None
    mine = {
        "acquired_at": s.acq_at,
        "client_id": s.acq_client,
        "ended_at": first_end[0] if first_end else None,
        "end_type": first_end[2] if first_end else None,
    }
    user = {"user_name": s.acq_user}
    lc = usage_leases.c
    stored = conn.execute(select(usage_leases).where(lc.session_id == session_id)).first()
    if stored is None:
        conn.execute(
            insert(usage_leases).values(
                session_id=session_id,
                tenant_id=s.tenant_id,
                license_id=s.license_id,
                **mine,
                **user,
            )
        )
        row = mine
    else:
        fills = (stored.acquired_at is None and s.acq_at is not None) or (
            stored.ended_at is None and first_end is not None
        )
        if (stored.tenant_id, stored.license_id) != (s.tenant_id, s.license_id) or not fills:
            return None
        row = {k: getattr(stored, k) if getattr(stored, k) is not None else v
               for k, v in mine.items()}  # fmt: skip
        if stored.acquired_at is not None:  # with acquired_at, from the same acquire
            user = {"user_name": stored.user_name}
        conn.execute(update(usage_leases).where(lc.session_id == session_id).values(**row, **user))
    if row["acquired_at"] is None or row["ended_at"] is None:
        return None
    return row["client_id"], utc(row["acquired_at"]), utc(row["ended_at"]), row["end_type"]


def _merge_period(
    conn: Connection, table: Table, period: str, key: tuple[str, str, datetime], h: _Hour
) -> None:
    r = table.c
    where = (r.tenant_id == key[0], r.license_id == key[1], r[period] == key[2])
    old = conn.execute(select(table).where(*where)).first()
    values: dict[str, Any] = {
        "acquired": h.acquired, "borrowed": h.borrowed, "released": h.released,
        "reclaimed": h.reclaimed,
        "revoked": h.revoked, "denials": h.denials, "net": h.net, "dsec_ms": h.dsec_ms,
        "max_used": h.max_used,
        "last_at": h.last[0] if h.last else None, "last_id": h.last[2] if h.last else None,
        "last_used": h.last_used, "last_total": h.last_total,
    }  # fmt: skip
    if old is None:
        conn.execute(
            insert(table).values(tenant_id=key[0], license_id=key[1], **{period: key[2]}, **values)
        )
        return
    for name in COUNTED.values():
        values[name] += getattr(old, name)
    for name in ("denials", "net", "dsec_ms"):
        values[name] += getattr(old, name)
    values["max_used"] = _bigger(old.max_used, h.max_used)
    if old.last_at is not None and (
        h.last is None or _last_key(utc(old.last_at), old.last_id) > h.last
    ):
        values.update(
            last_at=old.last_at,
            last_id=old.last_id,
            last_used=old.last_used,
            last_total=old.last_total,
        )
    conn.execute(update(table).where(*where).values(**values))


def _merge_client(conn: Connection, key: tuple[str, str, str, datetime], c: _Client) -> None:
    r = usage_client_rollups.c
    where = (r.tenant_id == key[0], r.license_id == key[1], r.client_id == key[2], r.day == key[3])
    old = conn.execute(select(usage_client_rollups).where(*where)).first()
    values = {"acquired": c.acquired, "ended": c.ended, "reclaimed": c.reclaimed,
              "total_ms": c.total_ms, "max_ms": c.max_ms}  # fmt: skip
    if old is None:
        conn.execute(
            insert(usage_client_rollups).values(
                tenant_id=key[0], license_id=key[1], client_id=key[2], day=key[3], **values
            )
        )
        return
    for name in ("acquired", "ended", "reclaimed", "total_ms"):
        values[name] += getattr(old, name)
    values["max_ms"] = _bigger(old.max_ms, c.max_ms)
    conn.execute(update(usage_client_rollups).where(*where).values(**values))


def as_json(rows: Sequence[dict[str, Any]]) -> str:
    """Events (validated dicts) as the JSON array the PostgreSQL statement reads."""
    return json.dumps(
        [
            {
                **{c: r.get(c) for c in EVENT_COLUMNS},
                "occurred_at": r["occurred_at"].isoformat()
                if isinstance(r["occurred_at"], datetime)
                else r["occurred_at"],
            }
            for r in rows
        ]
    )
