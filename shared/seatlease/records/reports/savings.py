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
rule has no idle seat-hours, and a warning given after the part's end (a lease idle
before it, warned later) is not read.

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
SWEEP_WORK_MEM = "64MB"  # per sort of the report's transaction (PostgreSQL)


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
        SELECT EXISTS (
                   SELECT 1 FROM lease_events
                   WHERE {window.scope()} AND type IN ('{IDLE}', '{ACTIVE}')
                     AND occurred_at >= :back AND occurred_at < :hi) AS idle,
               EXISTS (
                   SELECT 1 FROM usage_leases
                   WHERE {window.scope()} AND user_name IS NOT NULL AND acquired_at IS NOT NULL
                     AND acquired_at >= :back AND acquired_at < :hi) AS users"""
    if conn.dialect.name == "postgresql":
        # The sweeps sort a point per lease start and end: in memory, not on disk;
        # compiling the statement (JIT) would cost more than it saves; and a nested loop
        # is never the join here (it is the plan of tables not yet analysed, quadratic:
        # the idle episodes joined to their leases ran for minutes). The report's
        # transaction ends with this call.
        conn.execute(text(f"SET LOCAL work_mem = '{SWEEP_WORK_MEM}'"))
        conn.execute(text("SET LOCAL jit = off"))
        conn.execute(text("SET LOCAL enable_nestloop = off"))
    result: dict[str, Savings] = {}
    for license_id in license_ids:
        one = Window(window.tenant_id, license_id, window.since, window.until)
        params = one.params(lo=lo, hi=end, back=lo - LOOKBACK)
        found = conn.execute(bind_times(text(probe), "back", "hi"), params).one()
        idle, users = bool(found.idle), bool(found.users)
        if not (idle or users):
            continue  # nothing idle, nobody to share with: no sweep
        # One statement per question: each stays well inside the reports' statement
        # timeout on a busy license (the lease points are swept twice when both apply).
        found = Savings()
        for part in (["idle"] if idle else []) + (["users"] if users else []):
            sql = _sweep_sql(conn.dialect.name, one, idle=part == "idle", users=part == "users")
            row = conn.execute(bind_times(text(sql), "lo", "hi", "back"), params).one()
            found.peak_leases = peak = int(row.peak or 0)
            if part == "idle":
                found.idle_seat_hours = round(float(row.idle_ms or 0) / 3_600_000, 3)
                found.idle_reclaim_would_save = max(0, peak - int(row.active or 0))
            else:
                found.sharing_would_save = max(0, peak - int(row.shared or 0))
        result[license_id] = found
    return result


def _sweep_sql(dialect: str, window: Window, *, idle: bool, users: bool) -> str:
    """One license's peaks (all leases; not idle when ``idle``; shared by user when
    ``users``) and idle seat time, in whole milliseconds since the epoch so that both
    dialects sweep integers. One sort of every point (a lease's start and end, an idle
    episode's, a share run's) by time, and the running sums over it; the parts of what
    the license has none of are left out (an empty episode or run list costs its read)."""
    if dialect == "postgresql":

        def ms(column: str) -> str:
            # date_part is a double (extract a numeric, several times slower): exact to
            # the millisecond at today's dates
            return f"CAST(date_part('epoch', {column}) * 1000 AS bigint)"

        most, least, whole = "GREATEST", "LEAST", "bigint"
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

        most, least, whole = "max", "min", "INTEGER"
        idle_s = (
            "CASE WHEN json_type(metadata, '$.idle_seconds') IN ('integer', 'real') "
            "THEN max(0, json_extract(metadata, '$.idle_seconds')) ELSE 0 END"
        )
    lo_ms, hi_ms = ms(":lo"), ms(":hi")
    ctes = [
        f"""live AS (
    SELECT * FROM (
        SELECT session_id, user_name, seats,
               {most}({ms("acquired_at")}, {lo_ms}) AS s,
               {least}(coalesce({ms("ended_at")}, {hi_ms}), {hi_ms}) AS e,
               {ms("acquired_at")} AS began, coalesce({ms("ended_at")}, {hi_ms}) AS ended
        FROM usage_leases
        WHERE {window.scope()} AND acquired_at IS NOT NULL
          AND acquired_at >= :back AND acquired_at < :hi
          AND (ended_at IS NULL OR ended_at > :lo)
    ) l WHERE e > s
)"""
    ]
    # (time, all leases, leases not idle, leases shared by user): each point moves one
    # or two of the levels, in one direction
    not_idle = "seats" if idle else "0"
    points = [
        f"SELECT s AS t, seats AS a, {not_idle} AS n, 0 AS u FROM live",
        f"SELECT e, -seats, -{not_idle}, 0 FROM live",
    ]
    if idle:
        ctes.append(f"""turns AS (
    -- a warning opens an episode (a repeat of it opens none), the next cancellation
    -- after it closes it: one pass over the session's warnings and cancellations
    SELECT session_id, type, occurred_at, {idle_s} AS idle_s,
           lag(type) OVER w AS prev,
           min(CASE WHEN type = '{ACTIVE}' THEN {ms("occurred_at")} END) OVER (w
               ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS closed_ms
    FROM lease_events
    WHERE {window.scope()} AND type IN ('{IDLE}', '{ACTIVE}')
      AND occurred_at >= :back AND occurred_at < :hi
    WINDOW w AS (PARTITION BY session_id ORDER BY occurred_at, event_id)
)""")
        ctes.append(f"""idle AS (
    SELECT * FROM (
        SELECT live.seats,
               {most}({ms("t.occurred_at")} - CAST(round(t.idle_s * 1000) AS {whole}),
                      live.began, {lo_ms}) AS s,
               {least}(coalesce(t.closed_ms, {hi_ms}), live.ended, {hi_ms}) AS e
        FROM turns t JOIN live ON live.session_id = t.session_id
        WHERE t.type = '{IDLE}' AND (t.prev IS NULL OR t.prev <> '{IDLE}')
    ) i WHERE e > s
)""")
        points += ["SELECT s, 0, -seats, 0 FROM idle", "SELECT e, 0, seats, 0 FROM idle"]
    if users:
        ctes.append("""users AS (
    SELECT user_name, s, e,
           max(e) OVER (PARTITION BY user_name ORDER BY s, e
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_e
    FROM live WHERE user_name IS NOT NULL AND seats = 1
)""")
        ctes.append("""runs AS (
    SELECT user_name, s, e,
           sum(CASE WHEN before_e IS NULL OR s >= before_e THEN 1 ELSE 0 END)
               OVER (PARTITION BY user_name ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS run
    FROM users
)""")
        ctes.append("""shared AS (
    SELECT min(s) AS s, max(e) AS e, 1 AS seats FROM runs GROUP BY user_name, run
    UNION ALL
    SELECT s, e, seats FROM live WHERE user_name IS NULL OR seats <> 1
)""")
        points += ["SELECT s, 0, 0, seats FROM shared", "SELECT e, 0, 0, -seats FROM shared"]
    ctes.append("points AS (\n    " + "\n    UNION ALL ".join(points) + "\n)")
    idle_ms = "(SELECT sum((e - s) * seats) FROM idle)" if idle else "0"
    # at one moment the ends (and idle starts) before the starts: touching is not overlap
    joined = ",\n".join(ctes)
    return f"""
WITH {joined}
SELECT max(a) AS peak, max(n) AS active, max(u) AS shared, {idle_ms} AS idle_ms
FROM (
    SELECT sum(a) OVER w AS a, sum(n) OVER w AS n, sum(u) OVER w AS u
    FROM points WINDOW w AS (ORDER BY t, a + n + u ROWS UNBOUNDED PRECEDING)
) levels
"""
