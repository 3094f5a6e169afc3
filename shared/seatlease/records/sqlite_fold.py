"""The usage rollups on SQLite (the embedded default): the same rows the PostgreSQL
statement of ``rollups`` writes, computed here step by step from the events just
inserted (``rollups`` explains each column and why any arrival order gives the same
rows)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Integer, Table, column, insert, select, table, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.expression import TableClause

from seatlease.clock import utc
from seatlease.records.rollups import (
    COUNTED,
    DENIED,
    ENDINGS,
    IDLE_END_TYPE,
    NOTICE_PREFIX,
    PERIOD_LENGTHS,
    QUEUE_OUTCOME_TYPES,
    REFUSED,
    STARTS,
    TERM_END_TYPE,
    end_kind,
    idle_end,
    term_end,
    user_of,
)
from seatlease.records.tables import (
    audit_retention,
    lease_events,
    usage_client_rollups,
    usage_leases,
    usage_minute_rollups,
    usage_queue_waits,
    usage_refusals,
    usage_rollups,
)


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
    ended_by_term: int = 0
    ended_by_idle: int = 0
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
    ended_by_term: int = 0
    ended_by_idle: int = 0
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
    acq_seats: int | None = None  # the weight of that acquire
    ends: list[tuple[datetime, str, str]] = field(default_factory=list)
    end_seats: int = 1  # an ending's weight: the lease's when its acquire is not stored


def _seats(event: dict[str, Any]) -> int:
    """An event's weight: its ``seats``, 1 when it has none (written before weights)."""
    return int(event.get("seats") or 1)


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
    new = [e for e in new if not e["type"].startswith(NOTICE_PREFIX)]  # not usage
    for e in new:
        e["occurred_at"] = _at(e["occurred_at"])
    fold_refusals(conn, [e for e in new if e["type"] == REFUSED])
    fold_waits(conn, [e for e in new if e["type"] in QUEUE_OUTCOME_TYPES])
    new = [e for e in new if e["type"] != REFUSED]
    fold_periods(conn, new, usage_rollups, "hour")
    fold_periods(conn, new, usage_minute_rollups, "minute")
    sessions: dict[str, _Session] = {}
    for e in new:
        at, etype = e["occurred_at"], e["type"]
        delta = 1 if etype in STARTS else -1 if etype in ENDINGS else 0
        if delta and e.get("session_id"):
            s = sessions.setdefault(e["session_id"], _Session(e["tenant_id"], e["license_id"]))
            if delta == -1:  # how it ended, as usage_leases.end_type keeps it
                s.ends.append((at, e["event_id"], end_kind(etype, e.get("metadata"))))
                s.end_seats = max(s.end_seats, _seats(e))
                continue
            if s.acq_at is None or at < s.acq_at:
                s.acq_at, s.acq_client = at, e.get("client_id")
            if s.acq_key is None or (at, e["event_id"]) < s.acq_key:
                s.acq_key, s.acq_user = (at, e["event_id"]), user_of(e.get("metadata"))
                s.acq_seats = _seats(e)
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
        c.ended_by_term += end_type == TERM_END_TYPE
        c.ended_by_idle += end_type == IDLE_END_TYPE
        c.total_ms += ms
        c.max_ms = _bigger(c.max_ms, ms)
    for key4, c in sorted(clients.items()):
        _merge_client(conn, key4, c)


def fold_refusals(conn: Connection, new: list[dict[str, Any]]) -> None:
    """``lease.refused`` events into ``usage_refusals``, a row per license, minute and
    client (merged as the PostgreSQL statement merges them)."""
    r = usage_refusals.c
    for e in new:
        meta = e.get("metadata") or {}
        if isinstance(meta, str | bytes):
            meta = json.loads(meta)
        user = meta.get("user")
        row = {
            "user_name": user if isinstance(user, str) else None,
            "seats": _seats(e),
            "refusals": int(e.get("count") or 1),
            "served": meta.get("served") is True,
            "true_denial": meta.get("true_denial") is True,
            "waiting": meta.get("waiting") is True,
            "lower_bound": meta.get("lower_bound") is True,
        }
        key = {
            "tenant_id": e["tenant_id"],
            "license_id": e["license_id"],
            "minute": _at(meta["minute"].replace("Z", "+00:00")),
            "client_id": e.get("client_id") or "",
        }
        where = [r[name] == value for name, value in key.items()]
        old = conn.execute(select(usage_refusals).where(*where)).first()
        if old is None:
            conn.execute(insert(usage_refusals).values(**key, **row))
            continue
        row["seats"] = max(row["seats"], old.seats)
        row["refusals"] += old.refusals
        for name in ("served", "true_denial", "waiting", "lower_bound"):
            row[name] = row[name] or getattr(old, name)
        row["user_name"] = old.user_name if old.user_name is not None else row["user_name"]
        conn.execute(update(usage_refusals).where(*where).values(**row))


def fold_waits(conn: Connection, new: list[dict[str, Any]]) -> None:
    """Ended wait-queue tickets into ``usage_queue_waits`` (each event once: these are
    the events just stored)."""
    for e in new:
        meta = e.get("metadata") or {}
        if isinstance(meta, str | bytes):
            meta = json.loads(meta)
        waited = meta.get("queued_ms")
        if isinstance(waited, bool) or not isinstance(waited, int | float):
            continue
        if not 0 <= waited <= 1e15:  # only a duration fits the column
            continue
        conn.execute(
            insert(usage_queue_waits).values(
                event_id=e["event_id"],
                tenant_id=e["tenant_id"],
                license_id=e["license_id"],
                ended_at=e["occurred_at"],
                outcome=e["type"],
                waited_ms=round(waited),
            )
        )


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
        if etype in COUNTED:  # a lease.reclaimed of the term (or for idleness) apart
            meta = e.get("metadata")
            name = ("ended_by_term" if term_end(etype, meta)
                    else "ended_by_idle" if idle_end(etype, meta) else COUNTED[etype])  # fmt: skip
            setattr(h, name, getattr(h, name) + 1)
        elif etype == DENIED:
            h.denials += int(e.get("count") or 1)
        # Weighted, as in the PostgreSQL statement: a weight-4 lease moves the level by 4.
        h.net += delta * _seats(e)
        h.dsec_ms += delta * _seats(e) * _ms(start + length - at)
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
    # the user and weight of the acquire acquired_at is from (else the ending's weight)
    user = {"user_name": s.acq_user, "seats": s.acq_seats or s.end_seats}
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
            user = {"user_name": stored.user_name, "seats": stored.seats}
        conn.execute(update(usage_leases).where(lc.session_id == session_id).values(**row, **user))
    if row["acquired_at"] is None or row["ended_at"] is None:
        return None
    return row["client_id"], utc(row["acquired_at"]), utc(row["ended_at"]), row["end_type"]


def _with_idle(rollups: Table) -> TableClause:
    """``rollups`` with its ``ended_by_idle`` column (migration 0018) for the fold's reads
    and writes, whether or not the table's declaration lists it yet."""
    columns = [column(c.name, c.type) for c in rollups.c]
    if "ended_by_idle" not in rollups.c:
        columns.append(column("ended_by_idle", Integer))
    return table(rollups.name, *columns)


_IDLE_TABLES: dict[str, TableClause] = {}


def _idle_table(rollups: Table) -> TableClause:
    found = _IDLE_TABLES.get(rollups.name)
    if found is None:
        found = _IDLE_TABLES[rollups.name] = _with_idle(rollups)
    return found


def _merge_period(
    conn: Connection, declared: Table, period: str, key: tuple[str, str, datetime], h: _Hour
) -> None:
    table = _idle_table(declared)
    r = table.c
    where = (r.tenant_id == key[0], r.license_id == key[1], r[period] == key[2])
    old = conn.execute(select(table).where(*where)).first()
    values: dict[str, Any] = {
        "acquired": h.acquired, "borrowed": h.borrowed, "released": h.released,
        "reclaimed": h.reclaimed, "ended_by_term": h.ended_by_term,
        "ended_by_idle": h.ended_by_idle,
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
    for name in (*COUNTED.values(), "ended_by_term", "ended_by_idle"):
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
    client_rollups = _idle_table(usage_client_rollups)
    r = client_rollups.c
    where = (r.tenant_id == key[0], r.license_id == key[1], r.client_id == key[2], r.day == key[3])
    old = conn.execute(select(client_rollups).where(*where)).first()
    values = {"acquired": c.acquired, "ended": c.ended, "reclaimed": c.reclaimed,
              "ended_by_term": c.ended_by_term, "ended_by_idle": c.ended_by_idle,
              "total_ms": c.total_ms, "max_ms": c.max_ms}  # fmt: skip
    if old is None:
        conn.execute(
            insert(client_rollups).values(
                tenant_id=key[0], license_id=key[1], client_id=key[2], day=key[3], **values
            )
        )
        return
    for name in ("acquired", "ended", "reclaimed", "ended_by_term", "ended_by_idle", "total_ms"):
        values[name] += getattr(old, name)
    values["max_ms"] = _bigger(old.max_ms, c.max_ms)
    conn.execute(update(client_rollups).where(*where).values(**values))
