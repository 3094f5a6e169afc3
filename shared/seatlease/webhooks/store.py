"""Webhooks in the database (SQLAlchemy Core; the tables are in
seatlease.records.tables, migration 0019): a tenant's endpoints, the deliveries of events
to them and each delivery's attempts. ``deliver`` claims and sends what is due.

Every function takes an optional ``engine`` (default: ``seatlease.records.db.get_engine``)
and raises the domain errors of ``seatlease.errors``: ``NotFound`` (no such tenant or
endpoint, or the endpoint is another tenant's), ``Conflict`` (too many endpoints),
``InvalidRequest`` with ``details`` naming the field (a refused URL, an unknown event type,
a bad license id); a database outage is ``BackendUnavailable('database')``.

A secret is shown once, when made (``create_endpoint``, ``rotate_secret``), and stored
only sealed (``crypto``), bound to its endpoint's id. No listing returns it.

Bounds, so that one tenant's endpoint cannot grow without end: ``MAX_ENDPOINTS`` per
tenant; ``MAX_PAYLOAD_BYTES`` per payload and ``MAX_PENDING`` deliveries waiting per
endpoint. A delivery over a bound is still recorded, as ``final`` with the reason in
``last_error`` and no payload, so the tenant sees what was not sent and why.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from seatlease import clock
from seatlease.errors import Conflict, InvalidRequest, NotFound
from seatlease.fields import IDENTIFIER_PATTERN
from seatlease.logs import log
from seatlease.records import json_rows
from seatlease.records.db import transaction
from seatlease.records.tables import (
    tenants,
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
)
from seatlease.webhooks import crypto, urls
from seatlease.webhooks.payload import EVENT_TYPES, payload_of

MAX_ENDPOINTS = 20  # per tenant
MAX_LICENSE_FILTERS = 100  # license ids one endpoint may name
MAX_PENDING = 100_000  # deliveries waiting per endpoint
MAX_PAYLOAD_BYTES = 64 * 1024
ROTATION_OVERLAP = timedelta(hours=24)  # the old secret keeps signing this long
MAX_LISTED = 1000  # deliveries(limit=...) at most
INSERT_CHUNK = 1000  # rows per INSERT on SQLite (its bound parameters)
ENDPOINT_PREFIX = "whe_"
PENDING, DELIVERED, FAILED, FINAL = "pending", "delivered", "failed", "final"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)

# What listings show of an endpoint: never its secrets.
_PUBLIC_COLUMNS = [
    webhook_endpoints.c[name]
    for name in (
        "id",
        "tenant_id",
        "url",
        "event_types",
        "license_ids",
        "created_at",
        "state",
        "failing_reason",
        "failing_since",
        "old_secret_until",
    )
]


# -- endpoints -----------------------------------------------------------------------


def create_endpoint(
    tenant_id: str,
    url: str,
    event_types: Iterable[str] | None = None,
    license_ids: Iterable[str] | None = None,
    engine: Engine | None = None,
) -> tuple[dict[str, Any], str]:
    """A new endpoint for the tenant and its secret (``whsec_...``: returned here only).
    ``event_types``/``license_ids`` empty or None: every event, every license."""
    types = _event_types(event_types)
    licenses = _license_ids(license_ids)
    checked_url = urls.check_url(url, local=urls.local_stack())
    endpoint_id = ENDPOINT_PREFIX + secrets.token_hex(12)
    secret = crypto.new_secret()
    sealed = crypto.encrypt_secret(secret, context=endpoint_id)
    with transaction(engine) as conn:
        _require_tenant(conn, tenant_id)
        count = conn.execute(
            select(func.count())
            .select_from(webhook_endpoints)
            .where(webhook_endpoints.c.tenant_id == tenant_id)
        ).scalar_one()
        if count >= MAX_ENDPOINTS:
            raise Conflict(
                f"tenant {tenant_id!r} has {count} webhook endpoints, the most it may have; "
                "delete one first"
            )
        conn.execute(
            insert(webhook_endpoints).values(
                id=endpoint_id,
                tenant_id=tenant_id,
                url=checked_url,
                event_types=types,
                license_ids=licenses,
                secret_enc=sealed,
                created_at=clock.now(),
            )
        )
        row = _endpoint_row(conn, tenant_id, endpoint_id)
    log("NOTICE", "webhook endpoint created", tenant_id=tenant_id, endpoint_id=endpoint_id,
        url=checked_url, event_types=types, license_ids=licenses)  # fmt: skip
    return row, secret


def list_endpoints(tenant_id: str, engine: Engine | None = None) -> list[dict[str, Any]]:
    """The tenant's endpoints (oldest first), each with ``pending``: its deliveries
    waiting. No secrets."""
    with transaction(engine) as conn:
        rows = conn.execute(
            select(*_PUBLIC_COLUMNS)
            .where(webhook_endpoints.c.tenant_id == tenant_id)
            .order_by(webhook_endpoints.c.created_at, webhook_endpoints.c.id)
        ).mappings()
        found = [_public(row) for row in rows]
        waiting = _pending_counts(conn, [row["id"] for row in found])
    for row in found:
        row["pending"] = waiting.get(row["id"], 0)
    return found


def get_endpoint(tenant_id: str, endpoint_id: str, engine: Engine | None = None) -> dict[str, Any]:
    """One of the tenant's endpoints (no secrets); NotFound otherwise."""
    with transaction(engine) as conn:
        return _endpoint_row(conn, tenant_id, endpoint_id)


def delete_endpoint(tenant_id: str, endpoint_id: str, engine: Engine | None = None) -> None:
    """The endpoint gone, with its deliveries and their attempts (a send in flight then
    records nothing)."""
    with transaction(engine) as conn:
        done = conn.execute(
            delete(webhook_endpoints).where(
                webhook_endpoints.c.id == endpoint_id, webhook_endpoints.c.tenant_id == tenant_id
            )
        )
    if done.rowcount == 0:
        raise NotFound(f"webhook endpoint {endpoint_id!r} not found for tenant {tenant_id!r}")
    log("NOTICE", "webhook endpoint deleted", tenant_id=tenant_id, endpoint_id=endpoint_id)


def rotate_secret(tenant_id: str, endpoint_id: str, engine: Engine | None = None) -> str:
    """A new secret for the endpoint (returned here only). The current one becomes the
    old one and keeps signing beside the new one for ``ROTATION_OVERLAP``; a secret older
    than that is forgotten."""
    secret = crypto.new_secret()
    sealed = crypto.encrypt_secret(secret, context=endpoint_id)
    now = clock.now()
    with transaction(engine) as conn:
        current = conn.execute(
            select(webhook_endpoints.c.secret_enc)
            .where(
                webhook_endpoints.c.id == endpoint_id, webhook_endpoints.c.tenant_id == tenant_id
            )
            .with_for_update()
        ).scalar()
        if current is None:
            raise NotFound(f"webhook endpoint {endpoint_id!r} not found for tenant {tenant_id!r}")
        conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint_id)
            .values(
                secret_enc=sealed,
                old_secret_enc=current,
                old_secret_until=now + ROTATION_OVERLAP,
            )
        )
    log("NOTICE", "webhook secret rotated", tenant_id=tenant_id, endpoint_id=endpoint_id,
        old_secret_until=clock.iso_utc(now + ROTATION_OVERLAP))  # fmt: skip
    return secret


def reseal_secrets(engine: Engine | None = None) -> dict[str, Any]:
    """Seal every endpoint's secrets again under ``WEBHOOK_KEY``'s first key (the second
    step of a key rotation: ``crypto``). Each endpoint in a transaction of its own, its
    row locked; each secret on its own: one that does not open leaves the other resealed.
    A secret already under the first key is left as is, so a second run changes nothing;
    an old secret past its overlap (it signs nothing any more) is forgotten. Counts:
    ``resealed`` secrets, ``current`` (already under the first key), ``forgotten`` and
    ``unreadable``: the ids of endpoints with a secret no key of ``WEBHOOK_KEY`` opens
    (left as it is; its deliveries wait and say so)."""
    ring = crypto.box()
    e = webhook_endpoints
    now = clock.now()
    with transaction(engine) as conn:
        ids = list(conn.execute(select(e.c.id).order_by(e.c.id)).scalars())
    counts: dict[str, Any] = {"key_id": ring.key_id, "resealed": 0, "current": 0,
                              "forgotten": 0, "unreadable": []}  # fmt: skip
    for endpoint_id in ids:
        with transaction(engine) as conn:
            row = conn.execute(
                select(e.c.secret_enc, e.c.old_secret_enc, e.c.old_secret_until)
                .where(e.c.id == endpoint_id)
                .with_for_update()
            ).first()
            if row is None:  # deleted meanwhile
                continue
            values: dict[str, Any] = {}
            old_until = row.old_secret_until
            if row.old_secret_enc and (old_until is None or clock.utc(old_until) <= now):
                values.update(old_secret_enc=None, old_secret_until=None)
                counts["forgotten"] += 1
            readable = True
            for column, stored in (("secret_enc", row.secret_enc),
                                   ("old_secret_enc", row.old_secret_enc)):  # fmt: skip
                if not stored or column in values:
                    continue
                if ring.sealed_by(stored) == ring.key_id:
                    counts["current"] += 1
                    continue
                try:
                    values[column] = ring.seal(ring.open(stored, context=endpoint_id),
                                               context=endpoint_id)  # fmt: skip
                    counts["resealed"] += 1
                except crypto.SecretUnreadable:
                    readable = False
            if not readable:
                counts["unreadable"].append(endpoint_id)
            if values:
                conn.execute(update(e).where(e.c.id == endpoint_id).values(**values))
    log("NOTICE", "webhook secrets resealed", key_id=ring.key_id, resealed=counts["resealed"],
        current=counts["current"], forgotten=counts["forgotten"],
        unreadable=len(counts["unreadable"]))  # fmt: skip
    return counts


def signing_secrets(endpoint: dict[str, Any], now: datetime) -> list[str]:
    """The endpoint's secrets that sign now (current first, then the old one while its
    overlap lasts), from a row holding ``id``, ``secret_enc``, ``old_secret_enc`` and
    ``old_secret_until``. Raises crypto.SecretUnreadable or WebhookKeyMissing."""
    found = [crypto.decrypt_secret(endpoint["secret_enc"], context=endpoint["id"])]
    until = endpoint.get("old_secret_until")
    if endpoint.get("old_secret_enc") and until is not None and clock.utc(until) > now:
        found.append(crypto.decrypt_secret(endpoint["old_secret_enc"], context=endpoint["id"]))
    return found


# -- deliveries ----------------------------------------------------------------------


def enqueue(
    events: list[dict[str, Any]],
    *,
    endpoint_id: str | None = None,
    now: datetime | None = None,
    engine: Engine | None = None,
) -> int:
    """Make the deliveries of ``events`` (the audit's JSON shape) to their tenants'
    endpoints whose filters take them (type and license; empty filters take all); returns
    how many were added. Idempotent: an event already queued for an endpoint is not
    queued again. ``endpoint_id``: that endpoint only, its filters aside (a
    ``webhook.test`` event). Deliveries over a bound are recorded ``final`` with why."""
    if not events:
        return 0
    now = now or clock.now()
    tenant_ids = sorted({str(event.get("tenant_id")) for event in events})
    with transaction(engine) as conn:
        query = select(
            webhook_endpoints.c.id,
            webhook_endpoints.c.tenant_id,
            webhook_endpoints.c.event_types,
            webhook_endpoints.c.license_ids,
        ).where(webhook_endpoints.c.tenant_id.in_(tenant_ids))
        if endpoint_id is not None:
            query = query.where(webhook_endpoints.c.id == endpoint_id)
        by_tenant: dict[str, list[Any]] = defaultdict(list)
        for endpoint in conn.execute(query):
            by_tenant[endpoint.tenant_id].append(endpoint)
        if not by_tenant:  # the common case: no endpoint for these tenants, one query
            return 0
        matched = [
            (endpoint, event)
            for event in events
            for endpoint in by_tenant.get(str(event.get("tenant_id")), ())
            if endpoint_id is not None or _takes(endpoint, event)
        ]
        waiting = _pending_counts(conn, sorted({endpoint.id for endpoint, _ in matched}))
        rows, refused, bodies = [], 0, {}
        for endpoint, event in matched:
            if id(event) not in bodies:  # one payload per event, whatever its endpoints
                bodies[id(event)] = _body(event)
            row = _delivery_row(endpoint, event, bodies[id(event)], now, waiting)
            refused += row["state"] == FINAL
            rows.append(row)
        added = _insert_new(conn, rows)
    if refused:
        log("WARNING", "webhooks: deliveries refused by a bound", refused=refused,
            endpoints=sorted({r["endpoint_id"] for r in rows if r["state"] == FINAL}))  # fmt: skip
    return added


def deliveries(
    tenant_id: str,
    endpoint_id: str | None = None,
    limit: int = 100,
    engine: Engine | None = None,
) -> list[dict[str, Any]]:
    """The tenant's (or one endpoint's) latest deliveries, newest first, one row per
    attempt (``at``, ``status``, ``latency_ms``, ``error``, ``attempt``: its number) with
    the delivery's ``event_id``, ``type``, ``license_id``, ``state``, ``attempts`` and
    ``next_attempt_at``; a delivery not tried yet (pending, or refused by a bound) is one
    row with ``at`` None and ``error`` its last error. At most ``limit`` rows."""
    limit = max(1, min(int(limit), MAX_LISTED))
    d = webhook_deliveries
    with transaction(engine) as conn:
        if endpoint_id is not None:
            _endpoint_row(conn, tenant_id, endpoint_id)  # NotFound for another tenant's
        query = select(
            d.c.id,
            d.c.endpoint_id,
            d.c.event_id,
            d.c.type,
            d.c.license_id,
            d.c.state,
            d.c.attempts,
            d.c.next_attempt_at,
            d.c.created_at,
            d.c.last_status,
            d.c.last_error,
        )
        if endpoint_id is not None:
            query = query.where(d.c.endpoint_id == endpoint_id)
        else:
            query = query.where(d.c.tenant_id == tenant_id)
        recent = conn.execute(query.order_by(d.c.created_at.desc(), d.c.id.desc()).limit(limit))
        found = [dict(row._mapping) for row in recent]
        tried: dict[int, list[dict[str, Any]]] = defaultdict(list)
        if found:
            a = webhook_attempts
            attempts = conn.execute(
                select(a.c.delivery_id, a.c.at, a.c.status, a.c.latency_ms, a.c.error)
                .where(a.c.delivery_id.in_([row["id"] for row in found]))
                .order_by(a.c.delivery_id, a.c.id)
            )
            for attempt in attempts:
                tried[attempt.delivery_id].append(dict(attempt._mapping))
    listed = [line for row in found for line in _attempt_lines(row, tried[row["id"]])]
    return listed[:limit]


def prune(before: datetime, limit: int = 10_000, engine: Engine | None = None) -> int:
    """Forget up to ``limit`` finished deliveries (delivered, failed, final) made before
    ``before``, with their attempts: the delivery log is kept for a while, not forever."""
    d = webhook_deliveries
    with transaction(engine) as conn:
        ids = select(d.c.id).where(d.c.state != PENDING, d.c.created_at < before).limit(limit)
        done = conn.execute(delete(d).where(d.c.id.in_(ids.scalar_subquery())))
    return done.rowcount or 0


# -- helpers -------------------------------------------------------------------------


def _require_tenant(conn: Connection, tenant_id: str) -> None:
    if conn.execute(select(tenants.c.tenant_id).where(tenants.c.tenant_id == tenant_id)).first():
        return
    raise NotFound(f"tenant {tenant_id!r} not found")


def _endpoint_row(conn: Connection, tenant_id: str, endpoint_id: str) -> dict[str, Any]:
    row = (
        conn.execute(
            select(*_PUBLIC_COLUMNS).where(
                webhook_endpoints.c.id == endpoint_id, webhook_endpoints.c.tenant_id == tenant_id
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"webhook endpoint {endpoint_id!r} not found for tenant {tenant_id!r}")
    return _public(row)


def _public(row: Any) -> dict[str, Any]:
    found = dict(row)
    for name in ("created_at", "failing_since", "old_secret_until"):
        if found.get(name) is not None:
            found[name] = clock.utc(found[name])
    return found


def _event_types(values: Iterable[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(values or ()))
    unknown = [value for value in chosen if value not in EVENT_TYPES]
    if unknown:
        problem = f"unknown event type {str(unknown[0])[:80]!r}; one of {', '.join(EVENT_TYPES)}"
        raise InvalidRequest(
            f"Invalid event_types: {problem}.",
            details=[{"field": "event_types", "problem": problem}],
        )
    return sorted(chosen)


def _license_ids(values: Iterable[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(values or ()))
    bad = [value for value in chosen if not isinstance(value, str) or not _IDENTIFIER.match(value)]
    if len(chosen) > MAX_LICENSE_FILTERS:
        problem = f"names more than {MAX_LICENSE_FILTERS} licenses"
    elif bad:
        problem = f"{str(bad[0])[:80]!r} is not a license id"
    else:
        return sorted(chosen)
    raise InvalidRequest(
        f"Invalid license_ids: {problem}.",
        details=[{"field": "license_ids", "problem": problem}],
    )


def _takes(endpoint: Any, event: dict[str, Any]) -> bool:
    types, licenses = endpoint.event_types or [], endpoint.license_ids or []
    if types and event.get("type") not in types:
        return False
    return not licenses or event.get("license_id") in licenses


def _pending_counts(conn: Connection, endpoint_ids: list[str]) -> dict[str, int]:
    if not endpoint_ids:
        return {}
    d = webhook_deliveries
    rows = conn.execute(
        select(d.c.endpoint_id, func.count())
        .where(d.c.endpoint_id.in_(endpoint_ids), d.c.state == PENDING)
        .group_by(d.c.endpoint_id)
    )
    return {endpoint_id: count for endpoint_id, count in rows}


def _body(event: dict[str, Any]) -> tuple[str, int]:
    """An event's payload as sent, and its size in bytes."""
    body = json.dumps(payload_of(event), separators=(",", ":"), ensure_ascii=False, default=str)
    return body, len(body.encode("utf-8"))


def _delivery_row(
    endpoint: Any,
    event: dict[str, Any],
    payload: tuple[str, int],
    now: datetime,
    waiting: dict[str, int],
) -> dict[str, Any]:
    body, size = payload
    row = {
        "endpoint_id": endpoint.id,
        "tenant_id": endpoint.tenant_id,
        "event_id": str(event["event_id"]),
        "type": str(event["type"]),
        "license_id": event.get("license_id"),
        "payload": body,
        "next_attempt_at": now,
        "created_at": now,
        "state": PENDING,
        "last_error": None,
    }
    if size > MAX_PAYLOAD_BYTES:
        problem = (
            f"not sent: its payload of {size} bytes is over the {MAX_PAYLOAD_BYTES}-byte bound"
        )
    elif waiting.get(endpoint.id, 0) >= MAX_PENDING:
        problem = f"not sent: the endpoint already has {MAX_PENDING} deliveries waiting"
    else:
        waiting[endpoint.id] = waiting.get(endpoint.id, 0) + 1
        return row
    return {**row, "payload": "", "state": FINAL, "last_error": problem}


_ROW_COLUMNS = ("endpoint_id", "tenant_id", "event_id", "type", "license_id", "payload",
                "next_attempt_at", "created_at", "state", "last_error")  # fmt: skip


def _insert_new(conn: Connection, rows: list[dict[str, Any]]) -> int:
    """Insert the rows an (endpoint, event) pair does not already have; how many.

    On PostgreSQL the rows go as one JSON array parameter (``json_rows``: a short
    statement whatever the rows; a multi-row INSERT's text was most of an enqueue's
    time). On SQLite, one parameterised statement run over the rows (SQLAlchemy's
    "insertmanyvalues", ``INSERT_CHUNK`` rows a statement)."""
    if not rows:
        return 0
    d = webhook_deliveries
    if conn.dialect.name == "postgresql":
        source = json_rows.recordset(d, _ROW_COLUMNS)
        statement: Any = (
            pg_insert(d)
            .from_select(_ROW_COLUMNS, select(*source.c))
            .on_conflict_do_nothing(index_elements=["endpoint_id", "event_id"])
            .returning(d.c.id)
        )
        return len(conn.execute(statement, {json_rows.PARAMETER: json_rows.as_json(rows)}).all())
    statement = (
        sqlite_insert(d)
        .on_conflict_do_nothing(index_elements=["endpoint_id", "event_id"])
        .returning(d.c.id)
        .execution_options(insertmanyvalues_page_size=INSERT_CHUNK)
    )
    return len(conn.execute(statement, rows).all())


def _attempt_lines(row: dict[str, Any], attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pending = row["state"] == PENDING
    delivery = {
        "delivery_id": row["id"],
        "endpoint_id": row["endpoint_id"],
        "event_id": row["event_id"],
        "type": row["type"],
        "license_id": row["license_id"],
        "state": row["state"],
        "attempts": row["attempts"],
        "next_attempt_at": clock.utc(row["next_attempt_at"]) if pending else None,
        "created_at": clock.utc(row["created_at"]),
    }
    if not attempts:  # not tried yet, or refused by a bound: its last error says why
        untried = {"at": None, "status": None, "latency_ms": None, "error": row["last_error"]}
        return [{**delivery, "attempt": 0, **untried}]
    lines = []
    for number, attempt in enumerate(attempts, start=1):
        tried = {name: attempt[name] for name in ("status", "latency_ms", "error")}
        lines.append({**delivery, "attempt": number, "at": clock.utc(attempt["at"]), **tried})
    return lines[::-1]  # newest first
