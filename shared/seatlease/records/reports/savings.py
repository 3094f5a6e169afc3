"""What the idle rule and sharing would have saved (issue 50): three numbers of the sizing
report, per license, over the window's exact part (its last ``SAVINGS_SPAN`` at most).

Definitions (docs/design.md, "Right-sizing")
--------------------------------------------
*Idle seat-hours*: the seat time of leases while their clients said they were idle. A
``lease.idle`` event (the lease was warned by the license's idle rule) says the client
had seen no activity for ``metadata.idle_seconds``: the lease was idle from
``occurred_at - idle_seconds`` (not before it began) until its ``lease.active`` (the
warning was cancelled) or its end, whichever came first; times its seats (its weight).
Idle time before a warning is seen only through the warning: a license without an idle
rule has no idle seat-hours.

*Seats idle reclaim would have saved*: the peak seats in use minus the peak seats in use
by leases that were not idle (at each moment, the leases' seats less the idle ones'),
both over the same leases: the seats the license would have needed had every idle
lease given its seat back at once.

*Seats sharing would have saved*: the peak seats in use minus the peak seats in use had
the leases of one user (``metadata.user``) shared one seat: each user's overlapping
leases of weight 1 count once, a lease without a user (or of several seats: those never
share) counts alone, with no limit of sessions a seat. On a license that already shares
by user this is what sharing saves on top (the leases are counted one by one either way).

Both peaks come from the leases themselves (``usage_leases``: one row per lease, both
ends), a sweep over their starts and ends in the database: a lease still open counts to
the part's end. The leases and idle warnings read are those of the part and those begun
up to ``LOOKBACK`` (7 days) before it that were still held at its start; one begun
earlier is not seen. The raw events and leases are kept for the audit retention, and
the part is bounded by ``SAVINGS_SPAN`` (14 days, the minute rollups' retention), so the
cost is the part's leases, never a year's.

Cost when there is nothing to save: a license with no idle warning and no lease with a
user in the part costs two probes of partial indexes (``ix_lease_events_idle`` and
``ix_usage_leases_user``, migration 0018) and no sweep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, text

from seatlease.records.reports.model import Window, bind_times
from seatlease.records.rollups import ACTIVE, IDLE, MINUTE_RETENTION

SAVINGS_SPAN = MINUTE_RETENTION
LOOKBACK = timedelta(days=7)


@dataclass
class Savings:
    idle_seat_hours: float = 0.0
    idle_reclaim_would_save: int = 0
    sharing_would_save: int = 0
    peak_leases: int = 0  # the peak seats in use by the leases read (both differences' base)


def savings_start(start: datetime, end: datetime) -> datetime:
    """Where the savings' part of ``[start, end)`` begins."""
    return max(start, end - SAVINGS_SPAN)


def savings(
    conn: Connection, window: Window, start: datetime, end: datetime, license_ids: list[str]
) -> dict[str, Savings]:
    """Per license of ``license_ids`` (in ``window``'s tenant) with something to read in
    ``[savings_start(start, end), end)``: its savings (a license absent: nothing idle and
    no user, all 0)."""
    lo = savings_start(start, end)
    if lo >= end:
        return {}
    probe = f"""
        SELECT 1 WHERE EXISTS (
            SELECT 1 FROM lease_events
            WHERE {window.scope()} AND type IN ('{IDLE}', '{ACTIVE}')
              AND occurred_at >= :back AND occurred_at < :hi)
        OR EXISTS (
            SELECT 1 FROM usage_leases
            WHERE {window.scope()} AND user_name IS NOT NULL AND acquired_at IS NOT NULL
              AND acquired_at >= :back AND acquired_at < :hi)"""
    result: dict[str, Savings] = {}
    for license_id in license_ids:
        one = Window(window.tenant_id, license_id, window.since, window.until)
        params = one.params(lo=lo, hi=end, back=lo - LOOKBACK)
        if conn.execute(bind_times(text(probe), "back", "hi"), params).first() is None:
            continue  # nothing idle, nobody to share with: no sweep
        row = conn.execute(
            bind_times(text(_sweep_sql(conn.dialect.name, one)), "lo", "hi", "back"), params
        ).one()
        peak, shared, active = int(row.peak or 0), int(row.shared or 0), int(row.active or 0)
        result[license_id] = Savings(
            idle_seat_hours=round(float(row.idle_ms or 0) / 3_600_000, 3),
            idle_reclaim_would_save=max(0, peak - active),
            sharing_would_save=max(0, peak - shared),
            peak_leases=peak,
        )
    return result


def _sweep_sql(dialect: str, window: Window) -> str:
    """One license's peaks (all leases, shared by user, not idle) and idle seat time, in
    milliseconds since the epoch so that both dialects sweep numbers."""
    if dialect == "postgresql":

        def ms(column: str) -> str:
            return f"(extract(epoch FROM {column}) * 1000)"

        hi_of = "GREATEST", "LEAST"
        idle_s = (
            "CASE WHEN jsonb_typeof(metadata->'idle_seconds') = 'number' "
            "THEN GREATEST(0, (metadata->>'idle_seconds')::float8) ELSE 0 END"
        )
    else:

        def ms(column: str) -> str:
            # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff': whole seconds, then the milliseconds
            # (julianday's float is about 40 us off at today's dates: two equal times
            # could sweep in the wrong order)
            return (
                f"(CAST(strftime('%s', substr({column}, 1, 19)) AS INTEGER) * 1000"
                f" + CAST(substr({column}, 21, 3) AS INTEGER))"
            )

        hi_of = "max", "min"
        idle_s = (
            "CASE WHEN json_type(metadata, '$.idle_seconds') IN ('integer', 'real') "
            "THEN max(0, json_extract(metadata, '$.idle_seconds')) ELSE 0 END"
        )
    most, least = hi_of
    lo_ms, hi_ms = ms(":lo"), ms(":hi")
    return f"""
WITH l AS (
    SELECT session_id, user_name, seats,
           {most}({ms("acquired_at")}, {lo_ms}) AS s,
           {least}(coalesce({ms("ended_at")}, {hi_ms}), {hi_ms}) AS e,
           {ms("acquired_at")} AS began, coalesce({ms("ended_at")}, {hi_ms}) AS ended
    FROM usage_leases
    WHERE {window.scope()} AND acquired_at IS NOT NULL
      AND acquired_at >= :back AND acquired_at < :hi
      AND (ended_at IS NULL OR ended_at > :lo)
),
live AS (SELECT * FROM l WHERE e > s),
ie AS (
    SELECT session_id, type, occurred_at, event_id, {idle_s} AS idle_s,
           lag(type) OVER (PARTITION BY session_id ORDER BY occurred_at, event_id) AS prev
    FROM lease_events
    WHERE {window.scope()} AND type IN ('{IDLE}', '{ACTIVE}')
      AND occurred_at >= :back AND occurred_at < :hi
),
turns AS (
    -- a warning opens an episode, the next cancellation closes it (repeats are one)
    SELECT session_id, type, occurred_at, idle_s,
           lead({ms("occurred_at")}) OVER (PARTITION BY session_id
                                           ORDER BY occurred_at, event_id) AS next_ms
    FROM ie WHERE prev IS NULL OR prev <> type
),
idle AS (
    SELECT live.seats,
           {most}({ms("t.occurred_at")} - t.idle_s * 1000, live.began, {lo_ms}) AS s,
           {least}(coalesce(t.next_ms, {hi_ms}), live.ended, {hi_ms}) AS e
    FROM turns t JOIN live ON live.session_id = t.session_id
    WHERE t.type = '{IDLE}'
),
users AS (
    SELECT user_name, s, e,
           max(e) OVER (PARTITION BY user_name ORDER BY s, e
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_e
    FROM live WHERE user_name IS NOT NULL AND seats = 1
),
runs AS (
    SELECT user_name, s, e,
           sum(CASE WHEN before_e IS NULL OR s >= before_e THEN 1 ELSE 0 END)
               OVER (PARTITION BY user_name ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS run
    FROM users
),
shared AS (
    SELECT min(s) AS s, max(e) AS e, 1 AS seats FROM runs GROUP BY user_name, run
    UNION ALL
    SELECT s, e, seats FROM live WHERE user_name IS NULL OR seats <> 1
),
points AS (
    SELECT 'a' AS k, s AS t, seats AS d FROM live
    UNION ALL SELECT 'a', e, -seats FROM live
    UNION ALL SELECT 'u', s, seats FROM shared
    UNION ALL SELECT 'u', e, -seats FROM shared
    UNION ALL SELECT 'n', s, seats FROM live
    UNION ALL SELECT 'n', e, -seats FROM live
    UNION ALL SELECT 'n', s, -seats FROM idle WHERE e > s
    UNION ALL SELECT 'n', e, seats FROM idle WHERE e > s
),
levels AS (
    -- at one moment the ends (and idle starts) before the starts: touching is not overlap
    SELECT k, sum(d) OVER (PARTITION BY k ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS level
    FROM points
)
SELECT (SELECT max(level) FROM levels WHERE k = 'a') AS peak,
       (SELECT max(level) FROM levels WHERE k = 'u') AS shared,
       (SELECT max(level) FROM levels WHERE k = 'n') AS active,
       (SELECT sum((e - s) * seats) FROM idle WHERE e > s) AS idle_ms
"""
