"""Usage rollups, kept with every event insert, and the monthly partitions of
``lease_events``: the write side of the usage reports (``seatlease.records.reports`` reads them).

Why these columns (per license and UTC hour, table ``usage_rollups``)
--------------------------------------------------------------------
Pub/Sub push does not keep messages in order and redelivers them, so every column is
either a *sum* or a *max/arg-max* over the hour's events: both commute (any arrival order
gives the same row) and only the rows the event insert actually added are aggregated (the
insert's ``ON CONFLICT DO NOTHING ... RETURNING`` in the same statement), so a redelivered
event changes nothing.

- ``acquired``, ``borrowed`` (the two ways a lease starts), ``released``, ``reclaimed``,
  ``revoked`` (the three ways it ends): event counts; ``denials``: the sum of
  ``lease.denied`` counts. ``ended_by_term`` (migration 0015): the ``lease.reclaimed``
  events whose ``metadata.reason`` is ``license_expired`` or ``license_not_started``
  (``TERM_REASONS``: the license's end, or a start moved later, ended the lease, not a
  crash); ``ended_by_idle`` (migration 0018): those whose ``metadata.reason`` is
  ``idle`` (the license's idle rule took the seat of a client that said it was idle:
  no crash either); ``reclaimed`` counts the other ``lease.reclaimed`` events only. Rows
  written before 0015 (0018) keep those in ``reclaimed``. ``lease.idle`` and
  ``lease.active`` (an idle warning given, and cancelled) change no seat and no counter.
  ``lease.converted`` and ``lease.lingering`` change no seat count (docs/design.md,
  "Events") and are only seen through ``seats_used``.
- ``max_used``: the highest ``seats_used`` of the hour. Every lease event carries Redis's
  own count of seats in use (live leases by their weights) right after it
  (``seats_used``), so the *level* (seats in use) is never rebuilt from +1/-1 deltas: a
  delta stream drifts for ever when an ending never reaches the log (Redis lost its
  data), Redis's count does not.
- ``last_at``/``last_id``/``last_used``/``last_total``: the hour's last event (by
  ``occurred_at``, then event id: the same Lua call numbers its events in order) with its
  ``seats_used`` and ``seats_total``: the level the next hour starts from.
- ``net``: seats taken minus seats given back, and ``dsec_ms``: the sum over the hour's
  events of delta x milliseconds to the hour's end, so seat-seconds = level at the hour's
  start x 3600 s + ``dsec_ms`` / 1000. Both are *weighted*: a lease's delta is its
  ``seats`` (its weight, migration 0012; 1 for every event without it), so a start of a
  weight-4 lease is +4 and a weight-4 lease held an hour is 4 seat-hours, as the level
  (``seats_used``, which Redis counts in weights too) says. The event counts above stay
  counts of leases. Rows written before weights existed hold the same numbers either way
  (every lease then weighed 1).

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
reclaimed, ended by the term: ``usage_leases.end_type`` is ``TERM_END_TYPE`` for a lease
whose first ending was a term's ``lease.reclaimed``, since migration 0015; ended for
idleness: ``IDLE_END_TYPE``, since migration 0018). The two
ends of a lease usually arrive in different messages, possibly in either order and in
concurrent transactions: ``usage_leases`` has one row per lease, and
each end fills its half with ``INSERT ... ON CONFLICT (session_id) DO UPDATE ... WHERE``
that half is missing (row locks make the second of two concurrent transactions see the
first's committed row); the statement that returns the row with both ends set counts the
lease, once. The reports read ``usage_leases`` for the partial days at a window's edges.

Per license, UTC minute and client refused a seat (``usage_refusals``, migration 0014):
each ``lease.refused`` event is one row (the reaper judged it: served in the minute, a
true denial, waiting in the queue; the seats it asked, its refusals). An event is stored
once (``ins``), so a redelivery adds nothing; two events of one row (never made by the
reaper, which judges a client-minute once) would merge: sums and ORs, which commute.

Per ended wait-queue ticket (``usage_queue_waits``, migration 0014): its ``queue.granted``
or ``queue.left`` event's ``queued_ms``, keyed by the event id (a redelivery adds
nothing), so the sizing report's waits outlive the raw events.

The monthly partitions of ``lease_events`` are ``partitions``' job; SQLite's step-by-step
version of the same rollups is ``sqlite_fold``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from seatlease.records.partitions import PARTITION_LOCK

ACQUIRED = "lease.acquired"
BORROWED = "lease.borrowed"
STARTS = (ACQUIRED, BORROWED)  # a lease's first event: a seat taken (+1)
ENDINGS = ("lease.released", "lease.reclaimed", "lease.revoked")  # its last: -1
DENIED = "lease.denied"
# Who was refused in a minute (lua/flush_refusals.lua): a row of ``usage_refusals`` each,
# no seat and no period rollup.
REFUSED = "lease.refused"
# A wait-queue ticket's end, with how long it waited (``queued_ms``): a row of
# ``usage_queue_waits`` each.
QUEUE_OUTCOME_TYPES = ("queue.granted", "queue.left")
# license.expiring and license.expired (the reaper's term notices) are stored with the
# lease events but are no usage: the rollups leave them out.
NOTICE_PREFIX = "license."
COUNTED = {ACQUIRED: "acquired", BORROWED: "borrowed", "lease.released": "released",
           "lease.reclaimed": "reclaimed", "lease.revoked": "revoked"}  # fmt: skip
RECLAIMED = "lease.reclaimed"
# A lease.reclaimed with one of these metadata.reason values was ended by the license's
# term (its end under end_leases, or a start moved later: lua/_lib.lua's CUT_REASON), not
# by a crash: counted as ``ended_by_term``, never as ``reclaimed`` (migration 0015).
TERM_REASONS = ("license_expired", "license_not_started")
# ``usage_leases.end_type`` of a lease whose first ending was such an event (the event's
# type stays lease.reclaimed in lease_events; only the lease's row says why).
TERM_END_TYPE = "lease.reclaimed:term"
_TERM_REASONS_SQL = ", ".join(f"'{r}'" for r in TERM_REASONS)
# Whether a lease_events row (PostgreSQL: jsonb ``metadata``) is an end by the term.
TERM_END_SQL = (
    f"coalesce(type = '{RECLAIMED}' AND metadata->>'reason' IN ({_TERM_REASONS_SQL}), false)"
)
# A lease.reclaimed with this metadata.reason was taken by the license's idle rule (issue
# 50: its client said it was idle and was warned first): counted as ``ended_by_idle``,
# never as ``reclaimed`` (migration 0018), and its lease's ``usage_leases.end_type`` is
# ``IDLE_END_TYPE``.
IDLE_REASON = "idle"
IDLE_END_TYPE = "lease.reclaimed:idle"
IDLE_END_SQL = f"coalesce(type = '{RECLAIMED}' AND metadata->>'reason' = '{IDLE_REASON}', false)"
# An idle warning given (metadata.idle_seconds, idle_reclaim_at) and one cancelled: no
# seat changes hands; the sizing report reads them for the idle seat time.
IDLE = "lease.idle"
ACTIVE = "lease.active"
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


def _meta(metadata: Any) -> dict[str, Any]:
    """``metadata`` as stored (a dict, JSON text or None) as a dict ({} for anything else)."""
    if isinstance(metadata, str | bytes):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return {}
    return metadata if isinstance(metadata, dict) else {}


def user_of(metadata: Any) -> str | None:
    """``USER_SQL`` in Python: ``metadata`` as stored (a dict, JSON text or None)."""
    user = _meta(metadata).get("user")
    return user if isinstance(user, str) else None


def term_end(etype: str, metadata: Any) -> bool:
    """``TERM_END_SQL`` in Python: a ``lease.reclaimed`` whose ``metadata.reason`` (a
    string) is one of ``TERM_REASONS``."""
    return etype == RECLAIMED and _meta(metadata).get("reason") in TERM_REASONS


def idle_end(etype: str, metadata: Any) -> bool:
    """``IDLE_END_SQL`` in Python: a ``lease.reclaimed`` whose ``metadata.reason`` is
    ``idle``."""
    return etype == RECLAIMED and _meta(metadata).get("reason") == IDLE_REASON


def end_kind(etype: str, metadata: Any) -> str:
    """How a lease's ending event ended it, as ``usage_leases.end_type`` keeps it."""
    if term_end(etype, metadata):
        return TERM_END_TYPE
    return IDLE_END_TYPE if idle_end(etype, metadata) else etype


def idle_end_sql(dialect: str) -> str:
    """``IDLE_END_SQL`` for a read of ``lease_events`` on ``dialect``: 1/true for an end
    for idleness, else 0/false, never NULL."""
    if dialect == "postgresql":
        return IDLE_END_SQL
    return (
        f"coalesce(type = '{RECLAIMED}' AND json_type(metadata, '$.reason') = 'text' "
        f"AND json_extract(metadata, '$.reason') = '{IDLE_REASON}', 0)"
    )


def term_end_sql(dialect: str) -> str:
    """``TERM_END_SQL`` for a read of ``lease_events`` on ``dialect`` (SQLite keeps the
    metadata as JSON text): true (1) for an end by the term, else false (0), never NULL."""
    if dialect == "postgresql":
        return TERM_END_SQL
    reason = "json_extract(metadata, '$.reason')"
    return (
        f"coalesce(type = '{RECLAIMED}' AND json_type(metadata, '$.reason') = 'text' "
        f"AND {reason} IN ({_TERM_REASONS_SQL}), 0)"
    )


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
    "seats",
)

# -- PostgreSQL: one statement per batch ------------------------------------------------

_RECORDSET = """
    SELECT event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
           seats_used, seats_total, coalesce(count, 1) AS count, metadata,
           coalesce(seats, 1) AS seats  -- an event from before weights: one seat
    FROM jsonb_to_recordset(CAST(:events AS jsonb)) AS e(
        event_id text, type text, tenant_id text, license_id text, session_id text,
        client_id text, occurred_at timestamptz, seats_used int, seats_total int,
        count int, metadata jsonb, seats int)"""


def insert_statement(source: str = _RECORDSET) -> str:
    """The event insert with its rollups, as one statement: ``source`` is a SELECT of the
    event columns (by default the ``:events`` JSON array). Returns one row: ``inserted``,
    the rows added."""
    endings = ", ".join(f"'{t}'" for t in ENDINGS)
    starts = ", ".join(f"'{t}'" for t in STARTS)
    outcomes = ", ".join(f"'{t}'" for t in QUEUE_OUTCOME_TYPES)
    return f"""
WITH src AS ({source}),
ins AS (
    INSERT INTO lease_events (event_id, type, tenant_id, license_id, session_id, client_id,
                              occurred_at, seats_used, seats_total, count, metadata, seats)
    SELECT event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
           seats_used, seats_total, count, metadata, seats
    FROM src
    WHERE occurred_at >= coalesce((SELECT pruned_before FROM audit_retention WHERE id = 1),
                                  '-infinity')
    ON CONFLICT (event_id, occurred_at) DO NOTHING
    RETURNING event_id, type, tenant_id, license_id, session_id, client_id, occurred_at,
              seats_used, seats_total, count, {USER_SQL} AS user_name, seats,
              CASE WHEN type IN ('{REFUSED}', {outcomes}) THEN metadata END AS detail,
              {TERM_END_SQL} AS term_end, {IDLE_END_SQL} AS idle_end
),
ev AS (
    SELECT ins.*, date_trunc('hour', occurred_at, 'UTC') AS hour,
           date_trunc('minute', occurred_at, 'UTC') AS minute,
           CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END
               AS delta,
           -- how the lease ended, as usage_leases.end_type keeps it
           CASE WHEN term_end THEN '{TERM_END_TYPE}' WHEN idle_end THEN '{IDLE_END_TYPE}'
                ELSE type END AS end_kind
    FROM ins
    -- a license's term notices and the refused clients: no seat, no row here
    WHERE type NOT LIKE '{NOTICE_PREFIX}%' AND type <> '{REFUSED}'
),
{_period_rollup("usage_rollups", "hour")},
{_period_rollup("usage_minute_rollups", "minute")},
sess AS (
    SELECT session_id, min(tenant_id) AS tenant_id, min(license_id) AS license_id,
           min(occurred_at) FILTER (WHERE delta = 1) AS acq_at,
           min(client_id) FILTER (WHERE delta = 1) AS acq_client,
           min(occurred_at) FILTER (WHERE delta = -1) AS end_at,
           (array_agg(end_kind ORDER BY occurred_at, event_id) FILTER (WHERE delta = -1))[1]
               AS end_type,
           -- the user of the acquire acq_at is from
           (array_agg(user_name ORDER BY occurred_at, event_id) FILTER (WHERE delta = 1))[1]
               AS acq_user,
           -- the lease's weight: that acquire's, else its ending's (a lease keeps its
           -- weight for life: every event of it carries the same one)
           coalesce((array_agg(seats ORDER BY occurred_at, event_id)
                     FILTER (WHERE delta = 1))[1], max(seats)) AS lease_seats
    FROM ev WHERE session_id IS NOT NULL AND delta <> 0
    GROUP BY session_id
),
leases AS (
    INSERT INTO usage_leases AS l (session_id, tenant_id, license_id, client_id,
                                   acquired_at, ended_at, end_type, user_name, seats)
    SELECT session_id, tenant_id, license_id, acq_client, acq_at, end_at, end_type, acq_user,
           lease_seats
    FROM sess ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET
        client_id = coalesce(l.client_id, EXCLUDED.client_id),
        -- with acquired_at, from the same acquire (NULL is a value here: no user)
        user_name = CASE WHEN l.acquired_at IS NULL THEN EXCLUDED.user_name
                         ELSE l.user_name END,
        seats = CASE WHEN l.acquired_at IS NULL THEN EXCLUDED.seats ELSE l.seats END,
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
           sum(recl) AS reclaimed, sum(term) AS ended_by_term, sum(idle) AS ended_by_idle,
           coalesce(sum(ms), 0) AS total_ms, max(ms) AS max_ms
    FROM (
        SELECT tenant_id, license_id, client_id, occurred_at AS at, 1 AS acq, 0 AS ended,
               0 AS recl, 0 AS term, 0 AS idle, NULL::bigint AS ms
        FROM ev WHERE delta = 1
        UNION ALL
        SELECT tenant_id, license_id, client_id, acq_at, 0, 1,
               (end_type = '{RECLAIMED}')::int, (end_type = '{TERM_END_TYPE}')::int,
               (end_type = '{IDLE_END_TYPE}')::int,
               round(extract(epoch FROM end_at - acq_at) * 1000)::bigint
        FROM pairs
    ) x
    GROUP BY 1, 2, 3, 4
),
clients AS (
    INSERT INTO usage_client_rollups AS c (tenant_id, license_id, client_id, day, acquired,
                                           ended, reclaimed, ended_by_term, ended_by_idle,
                                           total_ms, max_ms)
    SELECT tenant_id, license_id, client_id, day, acquired, ended, reclaimed, ended_by_term,
           ended_by_idle, total_ms, max_ms
    FROM per_client ORDER BY tenant_id, license_id, client_id, day
    ON CONFLICT (tenant_id, license_id, client_id, day) DO UPDATE SET
        acquired = c.acquired + EXCLUDED.acquired, ended = c.ended + EXCLUDED.ended,
        reclaimed = c.reclaimed + EXCLUDED.reclaimed,
        ended_by_term = c.ended_by_term + EXCLUDED.ended_by_term,
        ended_by_idle = c.ended_by_idle + EXCLUDED.ended_by_idle,
        total_ms = c.total_ms + EXCLUDED.total_ms,
        max_ms = GREATEST(c.max_ms, EXCLUDED.max_ms)
    RETURNING 1
),
refused AS (
    INSERT INTO usage_refusals AS r (tenant_id, license_id, minute, client_id, user_name,
                                     seats, refusals, served, true_denial, waiting,
                                     lower_bound)
    SELECT tenant_id, license_id, CAST(detail->>'minute' AS timestamptz),
           coalesce(client_id, ''),
           min(CASE WHEN jsonb_typeof(detail->'user') = 'string' THEN detail->>'user' END),
           max(seats), sum(count),
           coalesce(bool_or(detail->>'served' = 'true'), false),
           coalesce(bool_or(detail->>'true_denial' = 'true'), false),
           coalesce(bool_or(detail->>'waiting' = 'true'), false),
           coalesce(bool_or(detail->>'lower_bound' = 'true'), false)
    FROM ins WHERE type = '{REFUSED}'
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, license_id, minute, client_id) DO UPDATE SET
        seats = GREATEST(r.seats, EXCLUDED.seats), refusals = r.refusals + EXCLUDED.refusals,
        served = r.served OR EXCLUDED.served,
        true_denial = r.true_denial OR EXCLUDED.true_denial,
        waiting = r.waiting OR EXCLUDED.waiting,
        lower_bound = r.lower_bound OR EXCLUDED.lower_bound
    RETURNING 1
),
waits AS (
    INSERT INTO usage_queue_waits (event_id, tenant_id, license_id, ended_at, outcome,
                                   waited_ms)
    SELECT event_id, tenant_id, license_id, occurred_at, type,
           round((detail->>'queued_ms')::float8)::bigint
    FROM ins
    WHERE type IN ({outcomes}) AND jsonb_typeof(detail->'queued_ms') = 'number'
      -- (any number is valid JSON; only a duration fits the column)
      AND (detail->>'queued_ms')::float8 BETWEEN 0 AND 1e15
    ORDER BY event_id
    ON CONFLICT (event_id) DO NOTHING
    RETURNING 1
)
SELECT count(*) AS inserted FROM ins
"""


def _period_rollup(table: str, period: str) -> str:
    """The CTEs folding the new events (``ev``, with its ``period`` column: ``hour`` or
    ``minute``, ``term_end``: ``TERM_END_SQL``, ``idle_end``: ``IDLE_END_SQL``) into
    ``table``, one row per license and period (the columns of the module's docstring;
    ``dsec_ms`` to the period's end)."""
    return f"""
{period}_sums AS (
    SELECT tenant_id, license_id, {period},
           count(*) FILTER (WHERE type = '{ACQUIRED}') AS acquired,
           count(*) FILTER (WHERE type = '{BORROWED}') AS borrowed,
           count(*) FILTER (WHERE type = 'lease.released') AS released,
           count(*) FILTER (WHERE type = '{RECLAIMED}' AND NOT term_end AND NOT idle_end)
               AS reclaimed,
           count(*) FILTER (WHERE term_end) AS ended_by_term,
           count(*) FILTER (WHERE idle_end) AS ended_by_idle,
           count(*) FILTER (WHERE type = 'lease.revoked') AS revoked,
           coalesce(sum(count) FILTER (WHERE type = '{DENIED}'), 0) AS denials,
           sum(delta * seats) AS net,  -- weighted: seats, not leases
           sum(delta * seats
               * round(extract(epoch FROM {period} + interval '1 {period}' - occurred_at)
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
        released, reclaimed, ended_by_term, ended_by_idle, revoked, denials, net, dsec_ms,
        max_used, last_at, last_id, last_used, last_total)
    SELECT h.tenant_id, h.license_id, h.{period}, h.acquired, h.borrowed, h.released,
           h.reclaimed, h.ended_by_term, h.ended_by_idle, h.revoked, h.denials, h.net,
           h.dsec_ms, h.max_used, l.occurred_at, l.event_id, l.seats_used, l.seats_total
    FROM {period}_sums h LEFT JOIN {period}_last l USING (tenant_id, license_id, {period})
    ORDER BY h.tenant_id, h.license_id, h.{period}  -- one lock order for every writer
    ON CONFLICT (tenant_id, license_id, {period}) DO UPDATE SET
        acquired = r.acquired + EXCLUDED.acquired,
        borrowed = r.borrowed + EXCLUDED.borrowed,
        released = r.released + EXCLUDED.released,
        reclaimed = r.reclaimed + EXCLUDED.reclaimed,
        ended_by_term = r.ended_by_term + EXCLUDED.ended_by_term,
        ended_by_idle = r.ended_by_idle + EXCLUDED.ended_by_idle,
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
    columns with ``seats`` and ``metadata``, e.g. a range of ``lease_events``), without
    inserting them again: what migration 0008 ran over the minute retention (from its
    frozen copy, which has no ``ended_by_term`` nor ``ended_by_idle``)."""
    endings = ", ".join(f"'{t}'" for t in ENDINGS)
    starts = ", ".join(f"'{t}'" for t in STARTS)
    return f"""
WITH ev AS (
    SELECT src.*, date_trunc('minute', occurred_at, 'UTC') AS minute,
           CASE WHEN type IN ({starts}) THEN 1 WHEN type IN ({endings}) THEN -1 ELSE 0 END
               AS delta,
           {TERM_END_SQL} AS term_end, {IDLE_END_SQL} AS idle_end
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

    Why: the statement is several kilobytes long. pg8000 scans an SQL text character by
    character in Python on every execute (``convert_paramstyle``) and PostgreSQL parses
    and plans it every time. A PL/pgSQL function's statement is prepared once per
    connection with its plan cached, and the call is one short line (measured in
    bench/NOTEBOOK.md, "Audit insert as a function"). The name carries a digest of the
    body, so a changed statement is a new function: the audit path creates the one it
    needs (``ensure_insert_function``, like the partitions) and code and database never
    disagree about what the function does."""

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
