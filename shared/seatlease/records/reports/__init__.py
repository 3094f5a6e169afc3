"""Usage reports: peak and average seats, seat-seconds, denials, lease durations, how
leases ended and leases lost, per license. They read the rollups the event insert keeps
(``seatlease.records.rollups``: per license and UTC minute or hour, per license, client and UTC
day) and touch finer data only at the window's edges: raw ``lease_events`` for the part
of a minute or hour the window cuts, ``usage_leases`` (one row per lease) for the part of
a day, so a report's cost follows the window's length, not the size of the history: a
year of hourly rollups is 8,760 rows per license, a day of minute rollups 1,440.

Method
------
*The level* (seats in use) is Redis's own count: every lease event carries
``seats_used``, the seats the live leases count as right after it (each lease counts its
``seats``, its weight: 1 unless the client asked for more). The level at a moment is ``seats_used``
of the last event before it (0 before a license's first event). A bucket's *peak* is the
larger of the level carried into it and the highest ``seats_used`` of its events.
*Seat-seconds* integrate the level over the bucket (from the rollups' deltas: level at
each hour's start x its length, plus each event's +seats/-seats until the hour's end),
so they are weighted: a weight-4 lease held one hour is 4 seat-hours (14,400
seat-seconds); an event stored without ``seats`` (before weights) counts 1. Counts of
leases (acquired, released, ...) stay counts of leases.

*Lost leases*: when Redis loses its data, the leases it held never get an
ending event. The log then expects more leases than Redis counts: at the next event of
that license, ``seats_used`` is lower than the level before it plus the acquires minus
the endings since. That difference is counted as *lost* (``lease.lost``) in the
bucket where an event showed it, in seats (Redis's count is the only witness, and it
counts weights: a vanished weight-4 lease is 4 lost), and the level follows Redis's
count from there on: a lost lease is never counted as held beyond the next event of its
license. Until that next event the log cannot tell a lost lease from one still
heartbeating (heartbeats are not events); ``seatlease status`` shows Redis's live
count. Same-millisecond events of different Lua calls have no known order; the one with
the larger event id counts as last (within one call, event ids are numbered in order).

*Exact steps* (``period`` ``exact``): the level itself, one point at each change: the
level at the window's start (or 0 at a license's first event, without ``since``), then
``seats_used`` of each event that carries it, in the order above, from the raw events of
the window up to its end or now, whichever is first (the last level holds to there: a
lease still held is drawn up to now). Denials are then at their ``lease.denied`` event's
own time. ``auto`` picks it when the window's hours hold at most ``AUTO_POINTS`` leases
started and ended (the hourly rollups' counts: no raw event is read to decide) and its
raw events are all kept (not pruned), and falls back to periods if the steps still pass
the bounds; the usage rows are per the period auto would otherwise pick
(``usage_period``).

Buckets are UTC minutes, hours or days (``auto`` without exact steps: the finest that
gives at most ``AUTO_POINTS`` buckets; minutes only within ``MINUTE_RETENTION``, the
minute rollups' life), from ``since`` (or a license's first event) to ``until``
(exclusive) or, without ``until``, to the tenant's last event in the window, and never
past now: a bucket that starts after now is not reported, the current one counts up to
now. When ``since`` falls inside a bucket, the first bucket covers the part from
``since`` on. A bucket's *average* is its seat-seconds over that covered, elapsed part
(``since`` or its start to ``until``, its end or now, whichever is first). A license
appears when it has events in the window or holds seats at its start. ``seats_total`` is
the seat count the last event recorded, carried forward.

*Denials* are ``lease.denied`` events, each the count of one reaper run (the seat
scripts only increment a counter), so they land in the bucket of that run.

*Lease durations* per license and client: leases acquired in the window; a lease whose
ending is stored counts with its whole duration (ending - acquisition: how long the seat
was out of the pool), even if it ended after ``until``; the others are *open*. These are
times, not seat time: a weight-4 lease held an hour adds one hour here (its 4 seat-hours
are in the usage rows and the per-user report). Of the leases ended, ``reclaimed`` counts
those reclaimed after a crash and ``ended_by_term`` those the license's term ended, as
in the endings below (from ``usage_leases.end_type``: ``lease.reclaimed`` or
``lease.reclaimed:term``).

*Endings* per license: acquired and borrowed (the two ways a lease starts), released,
reclaimed (a crashed or vanished client), ended by the term, revoked (an operator),
denied requests and lost leases in the window. Lease durations count borrowed leases
like acquired ones. *Ended by the term* (``ended_by_term``) is a ``lease.reclaimed``
whose ``metadata.reason`` is ``license_expired`` (the license's end, under
``end_leases``) or ``license_not_started`` (its start moved later while the lease was
held): no client crashed, so it is never counted in ``reclaimed``, whether read from the
rollups or from the raw events at a window's edges (migration 0015; the rollups of
events stored before it count those in ``reclaimed``). ``reclaimed_percent`` is
``reclaimed / (released + reclaimed + revoked)`` x 100 (one decimal; none when that is
0): the crashes among the leases that their clients or an operator ended.

*Per user* (``user_usage``): per license and user (the acquire's ``metadata.user``),
leases acquired in the window with the durations of those whose first ending is stored
(and how many of those the license's term ended),
summed by the database from ``usage_leases`` (its ``user_name``; seat-seconds are each
duration x the lease's ``seats``), and the wait queue's
outcomes in the window from ``lease_events`` (a partial index holds them alone).

Bounds: a report covers at most ``MAX_PERIODS`` buckets (or exact steps) per license and
``MAX_ROWS`` license-buckets (or exact steps in all; a 400 naming the limit otherwise),
and times between ``MIN_TIME`` and ``MAX_TIME``. Raw events and leases older than the
retention (``seatlease audit prune``) are gone: a window edge inside such an hour (or
day, for durations) reads only whole hours (days) from the rollups."""

from seatlease.records.reports.durations import lease_durations
from seatlease.records.reports.model import (
    AUTO,
    AUTO_POINTS,
    EXACT,
    MAX_PERIODS,
    MAX_ROWS,
    PERIODS,
    STATEMENT_TIMEOUT_MS,
    ClientDurations,
    LicenseOutcomes,
    PeriodUsage,
    Timeline,
    UsageReport,
    Window,
)
from seatlease.records.reports.usage import (
    bucket_period,
    minute_horizon,
    outcomes,
    peak_usage,
    resolve_period,
    timelines,
    usage_report,
)
from seatlease.records.reports.users import UserUsage, user_usage

__all__ = [
    "AUTO",
    "AUTO_POINTS",
    "EXACT",
    "MAX_PERIODS",
    "MAX_ROWS",
    "PERIODS",
    "STATEMENT_TIMEOUT_MS",
    "ClientDurations",
    "LicenseOutcomes",
    "PeriodUsage",
    "Timeline",
    "UsageReport",
    "UserUsage",
    "Window",
    "bucket_period",
    "lease_durations",
    "minute_horizon",
    "outcomes",
    "peak_usage",
    "resolve_period",
    "timelines",
    "usage_report",
    "user_usage",
]
