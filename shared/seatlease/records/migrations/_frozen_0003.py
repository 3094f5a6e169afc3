"""Migration 0003's own copy of the event insert with its rollups, frozen as
``seatlease.records.rollups`` was when 0003 was written (commit 19d1f6a), reduced to what 0003
calls and to the tables and columns that exist at revision 0003.

A migration never imports the live application code: ``seatlease.records.rollups`` has since
grown to write columns and tables that only later migrations create
(``usage_rollups.borrowed``: 0005; ``usage_minute_rollups``: 0008;
``usage_leases.user_name``: 0010), so a database at 0002 holding events failed here.
Those later migrations bring the rows written here to the current shape. Do not edit
this file to follow ``seatlease.records.rollups``.

``lease.borrowed`` (0004) cannot be in a database at 0002; it is kept as a start (+1),
as the code of the time had it, and is counted by no column (``borrowed`` comes in 0005).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, insert, select, text, update

ACQUIRED = "lease.acquired"
BORROWED = "lease.borrowed"
STARTS = (ACQUIRED, BORROWED)
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")
DENIED = "lease.denied"
COUNTED = {ACQUIRED: "acquired", "lease.released": "released",
           "lease.reclaimed": "reclaimed", "lease.revoked": "revoked"}  # fmt: skip
AHEAD_MONTHS = 3
PARTITION_LOCK = 7_220_331_001
HOUR = timedelta(hours=1)

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

# The tables as revision 0003 creates them (only the columns written here).
_TZ = sa.DateTime(timezone=True)
usage_rollups = sa.table(
    "usage_rollups",
    sa.column("tenant_id"),
    sa.column("license_id"),
    sa.column("hour", _TZ),
    *(sa.column(c) for c in ("acquired", "released", "reclaimed", "revoked", "denials", "net",
                             "dsec_ms", "max_used")),
    sa.column("last_at", _TZ),
    sa.column("last_id"),
    sa.column("last_used"),
    sa.column("last_total"),
)  # fmt: skip
usage_client_rollups = sa.table(
    "usage_client_rollups",
    sa.column("tenant_id"),
    sa.column("license_id"),
    sa.column("client_id"),
    sa.column("day", _TZ),
    *(sa.column(c) for c in ("acquired", "ended", "reclaimed", "total_ms", "max_ms")),
)
usage_leases = sa.table(
    "usage_leases",
    sa.column("session_id"),
    sa.column("tenant_id"),
    sa.column("license_id"),
    sa.column("client_id"),
    sa.column("acquired_at", _TZ),
    sa.column("ended_at", _TZ),
    sa.column("end_type"),
)


def utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# -- PostgreSQL: one statement per batch ------------------------------------------------


def insert_statement(source: str) -> str:
    """The event insert with its rollups, as one statement: ``source`` is a SELECT of the
    event columns. Returns one row: ``inserted``, the rows added."""
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
              seats_used, seats_total, count
),
ev AS (
    SELECT ins.*, date_trunc('hour', occurred_at, 'UTC') AS hour,
           CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END
               AS delta
    FROM ins
),
hourly AS (
    SELECT tenant_id, license_id, hour,
           count(*) FILTER (WHERE type = '{ACQUIRED}') AS acquired,
           count(*) FILTER (WHERE type = 'lease.released') AS released,
           count(*) FILTER (WHERE type = 'lease.reclaimed') AS reclaimed,
           count(*) FILTER (WHERE type = 'lease.revoked') AS revoked,
           coalesce(sum(count) FILTER (WHERE type = '{DENIED}'), 0) AS denials,
           sum(delta) AS net,
           sum(delta * round(extract(epoch FROM hour + interval '1 hour' - occurred_at)
                             * 1000))::bigint AS dsec_ms,
           max(seats_used) AS max_used
    FROM ev GROUP BY tenant_id, license_id, hour
),
last AS (
    SELECT DISTINCT ON (tenant_id, license_id, hour)
           tenant_id, license_id, hour, occurred_at, event_id, seats_used, seats_total
    FROM ev WHERE seats_used IS NOT NULL
    ORDER BY tenant_id, license_id, hour, occurred_at DESC, length(event_id) DESC,
             event_id DESC
),
rolled AS (
    INSERT INTO usage_rollups AS r (tenant_id, license_id, hour, acquired,
        released, reclaimed, revoked, denials, net, dsec_ms, max_used, last_at, last_id,
        last_used, last_total)
    SELECT h.tenant_id, h.license_id, h.hour, h.acquired, h.released,
           h.reclaimed, h.revoked, h.denials, h.net, h.dsec_ms, h.max_used, l.occurred_at,
           l.event_id, l.seats_used, l.seats_total
    FROM hourly h LEFT JOIN last l USING (tenant_id, license_id, hour)
    ORDER BY h.tenant_id, h.license_id, h.hour
    ON CONFLICT (tenant_id, license_id, hour) DO UPDATE SET
        acquired = r.acquired + EXCLUDED.acquired,
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
),
sess AS (
    SELECT session_id, min(tenant_id) AS tenant_id, min(license_id) AS license_id,
           min(occurred_at) FILTER (WHERE delta = 1) AS acq_at,
           min(client_id) FILTER (WHERE delta = 1) AS acq_client,
           min(occurred_at) FILTER (WHERE delta = -1) AS end_at,
           (array_agg(type ORDER BY occurred_at, event_id) FILTER (WHERE delta = -1))[1]
               AS end_type
    FROM ev WHERE session_id IS NOT NULL AND delta <> 0
    GROUP BY session_id
),
leases AS (
    INSERT INTO usage_leases AS l (session_id, tenant_id, license_id, client_id,
                                   acquired_at, ended_at, end_type)
    SELECT session_id, tenant_id, license_id, acq_client, acq_at, end_at, end_type
    FROM sess ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET
        client_id = coalesce(l.client_id, EXCLUDED.client_id),
        acquired_at = coalesce(l.acquired_at, EXCLUDED.acquired_at),
        ended_at = coalesce(l.ended_at, EXCLUDED.ended_at),
        end_type = coalesce(l.end_type, EXCLUDED.end_type)
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


def _newer(column: str) -> str:
    return (
        f"{column} = CASE WHEN EXCLUDED.last_at IS NOT NULL AND (r.last_at IS NULL OR "
        "(EXCLUDED.last_at, length(EXCLUDED.last_id), EXCLUDED.last_id) > "
        f"(r.last_at, length(r.last_id), r.last_id)) THEN EXCLUDED.{column} ELSE r.{column} END"
    )


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


def _partition_name(month: datetime) -> str:
    return f"lease_events_{month.year:04d}_{month.month:02d}"


def _partition_names(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            """
            SELECT c.relname AS name
            FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass('lease_events')"""
        )
    )
    return {row.name for row in rows}


def ensure_partitions(conn: Connection, months: Sequence[datetime]) -> None:
    """Create the monthly partitions of ``months`` (right after ``lease_events`` and its
    default partition are created, the default is still empty)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PARTITION_LOCK})
    existing = _partition_names(conn)
    for month in sorted({_month(m) for m in months}):
        name = _partition_name(month)
        if name in existing:
            continue
        lo, hi = (f"'{v.isoformat()}'" for v in (month, _next_month(month)))
        conn.execute(
            text(f"CREATE TABLE {name} PARTITION OF lease_events FOR VALUES FROM ({lo}) TO ({hi})")
        )


def months_ahead(now: datetime, ahead: int = AHEAD_MONTHS) -> list[datetime]:
    month = _month(now)
    result = [month]
    for _ in range(ahead):
        month = _next_month(month)
        result.append(month)
    return result


# -- SQLite: the same rollups, computed here ---------------------------------------------


def _at(value: Any) -> datetime:
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def _ms(delta: timedelta) -> int:
    return round(delta / timedelta(milliseconds=1))


def _last_key(at: datetime, event_id: str) -> tuple[datetime, int, str]:
    return (at, len(event_id), event_id)


@dataclass
class _Hour:
    acquired: int = 0
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
    ends: list[tuple[datetime, str, str]] = field(default_factory=list)


def _bigger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def fold_sqlite(conn: Connection, new: list[dict[str, Any]]) -> None:
    """Fold events already stored (each once) into the rollups and the pairing buffer."""
    for e in new:
        e["occurred_at"] = _at(e["occurred_at"])
    hours: dict[tuple[str, str, datetime], _Hour] = {}
    sessions: dict[str, _Session] = {}
    for e in new:
        at, etype = e["occurred_at"], e["type"]
        hour = _hour(at)
        h = hours.setdefault((e["tenant_id"], e["license_id"], hour), _Hour())
        delta = 1 if etype in STARTS else -1 if etype in ENDINGS else 0
        if etype in COUNTED:
            setattr(h, COUNTED[etype], getattr(h, COUNTED[etype]) + 1)
        elif etype == DENIED:
            h.denials += int(e.get("count") or 1)
        h.net += delta
        h.dsec_ms += delta * _ms(hour + HOUR - at)
        used = e.get("seats_used")
        if used is not None:
            h.max_used = _bigger(h.max_used, used)
            key = _last_key(at, e["event_id"])
            if h.last is None or key > h.last:
                h.last, h.last_used, h.last_total = key, used, e.get("seats_total")
        if delta and e.get("session_id"):
            s = sessions.setdefault(e["session_id"], _Session(e["tenant_id"], e["license_id"]))
            if delta == 1 and (s.acq_at is None or at < s.acq_at):
                s.acq_at, s.acq_client = at, e.get("client_id")
            elif delta == -1:
                s.ends.append((at, e["event_id"], etype))
    for key, h in sorted(hours.items()):
        _merge_hour(conn, key, h)
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


def _pair(
    conn: Connection, session_id: str, s: _Session
) -> tuple[str | None, datetime, datetime, str] | None:
    first_end = min(s.ends) if s.ends else None
    mine = {
        "acquired_at": s.acq_at,
        "client_id": s.acq_client,
        "ended_at": first_end[0] if first_end else None,
        "end_type": first_end[2] if first_end else None,
    }
    lc = usage_leases.c
    stored = conn.execute(select(usage_leases).where(lc.session_id == session_id)).first()
    if stored is None:
        conn.execute(
            insert(usage_leases).values(
                session_id=session_id, tenant_id=s.tenant_id, license_id=s.license_id, **mine
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
        conn.execute(update(usage_leases).where(lc.session_id == session_id).values(**row))
    if row["acquired_at"] is None or row["ended_at"] is None:
        return None
    return row["client_id"], utc(row["acquired_at"]), utc(row["ended_at"]), row["end_type"]


def _merge_hour(conn: Connection, key: tuple[str, str, datetime], h: _Hour) -> None:
    r = usage_rollups.c
    where = (r.tenant_id == key[0], r.license_id == key[1], r.hour == key[2])
    old = conn.execute(select(usage_rollups).where(*where)).first()
    values: dict[str, Any] = {
        "acquired": h.acquired, "released": h.released, "reclaimed": h.reclaimed,
        "revoked": h.revoked, "denials": h.denials, "net": h.net, "dsec_ms": h.dsec_ms,
        "max_used": h.max_used,
        "last_at": h.last[0] if h.last else None, "last_id": h.last[2] if h.last else None,
        "last_used": h.last_used, "last_total": h.last_total,
    }  # fmt: skip
    if old is None:
        conn.execute(
            insert(usage_rollups).values(tenant_id=key[0], license_id=key[1], hour=key[2], **values)
        )
        return
    for name in (*COUNTED.values(), "denials", "net", "dsec_ms"):
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
    conn.execute(update(usage_rollups).where(*where).values(**values))


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
