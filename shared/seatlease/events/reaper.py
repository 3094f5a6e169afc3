"""The reaper: reclaims expired leases and drains the outboxes to Pub/Sub.

One run (Cloud Scheduler calls it every minute):
1. one pipeline reads, for every shard, the expired members of its deadline index
   (``ZRANGEBYSCORE -inf now``: O(log N + expired), flat in the number of live leases),
   the size of its denial counters and the length of its outbox;
2. the shards that have work are handled by a bounded thread pool: expired leases are
   reclaimed in batches by ``reclaim.lua`` (which checks each deadline again, so a lease
   heartbeated since step 1 stays, and one reclaimed by a concurrent run is skipped),
   denial counters become ``lease.denied`` events, and lapsed wait-queue tickets, read
   from each shard's ticket deadline index the same way (``ZRANGEBYSCORE -inf now``, at
   most ``TICKET_SWEEP_LIMIT`` a shard a run), leave their queues with ``queue.left``
   (``sweep_tickets.lua``, which checks each ticket's time again);
3. the outboxes are drained together: the run takes a per-shard lock on every shard with
   a backlog (two overlapping runs never publish the same entries at once), gathers up
   to ``ROUND_EVENTS`` entries across shards with pipelined XRANGEs, publishes them as
   messages of up to 1,000 events, waits for every confirmation at once, and only then
   deletes them (pipelined XDEL). Gathering across shards makes full messages even when
   each shard holds a few hundred events (a crash wave spread over 256 shards), which is
   what the emulator and the audit insert are fastest at. In a crash wave
   (``WAVE_CANDIDATES`` expired leases or more) a thread already drains while step 2
   runs, a message's worth at a time, so the audit trail fills during the wave rather
   than after it (``bench/reclaim_throughput.py --end-to-end`` times a 1,000,000-lease
   wave; docs/benchmarks.md);
4. a time budget stops starting new work so the run returns before the function times
   out; what is left waits for the next run.

The refusals acquire.lua noted per license, client and minute (lua/_refusals.lua) become
``lease.refused`` events once each minute's true-denial window (``TRUE_DENIAL_MINUTES``,
10 by default) has passed: each shard's refused-due index is read like the deadline
index (``ZRANGEBYSCORE -inf cutoff``), and ``flush_refusals.lua`` judges at most
``REFUSAL_BATCH`` client-minutes a call (served in the minute, a true denial or not).

Before the outboxes are drained, the licenses whose term notice is due (each shard's
notice index, ``ZRANGEBYSCORE -inf now``: O(log N + K), never a scan of the licenses) get
their ``license.expiring`` / ``license.expired`` event from ``notices.lua``, which also
records it as sent: exactly once per threshold, across runs and restarts.

Once a publish fails (Pub/Sub unreachable) the drain stops for this run: every failed
publish waits for its timeout. Reclaims still happen (they only need Redis); their events
wait in the outbox.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.exceptions import LockError, OutOfMemoryError

from seatlease.clock import server_time_ms
from seatlease.events.pubsub import EVENTS_PER_MESSAGE, Publisher, PublishFailed, entry_json
from seatlease.seats.keys import (
    SHARDS,
    deadlines_key,
    denials_key,
    notices_key,
    outbox_key,
    reaper_lock_key,
    refused_due_key,
    ticket_index_key,
)
from seatlease.seats.protocol.calls import (
    flush_denials_call,
    flush_refusals_call,
    notices_call,
    reclaim_call,
    sweep_tickets_call,
)
from seatlease.seats.scripts import SeatScripts

RECLAIM_BATCH = 100  # candidates per reclaim.lua call (11 keys each)
SWEEP_LIMIT = 1000  # expired members read per shard per sweep
TICKET_SWEEP_LIMIT = 1000  # lapsed tickets dropped per shard per run (3 keys each)
DRAIN_BATCH = 1000  # outbox entries read per shard per round
ROUND_EVENTS = 20_000  # entries published per round across shards (~7 MB in memory)
# Expired leases found by a run's first sweep from which it publishes while reclaiming.
WAVE_CANDIDATES = 2 * SWEEP_LIMIT
NOTICE_BATCH = 100  # due licenses per notices.lua call
REFUSAL_LICENSES = 50  # due licenses per flush_refusals.lua call (2 keys each)
REFUSAL_BATCH = 2000  # client-minutes judged per flush_refusals.lua call (an event each)
DEFAULT_TRUE_DENIAL_MINUTES = 10
# license.expiring this many days before a license's expires_at (LICENSE_NOTICE_DAYS)
DEFAULT_NOTICE_DAYS = (30, 7, 1)


def notice_days() -> tuple[float, ...]:
    """The days before expires_at at which license.expiring is sent, largest first:
    ``LICENSE_NOTICE_DAYS`` (comma separated, e.g. ``30,7,1``; empty: none)."""
    raw = os.environ.get("LICENSE_NOTICE_DAYS")
    if raw is None:
        return DEFAULT_NOTICE_DAYS
    days = {float(d) for d in raw.split(",") if d.strip()}
    if any(d <= 0 or d > 3660 for d in days):
        raise ValueError("LICENSE_NOTICE_DAYS: days between 0 and 3660, comma separated")
    return tuple(sorted(days, reverse=True))


def true_denial_ms() -> int:
    """How long a refused client has to be granted before its refusal is a *true denial*
    (it gave up): ``TRUE_DENIAL_MINUTES``, 1 to 60 (a client's notes outlive the window:
    lua/_refusals.lua keeps 64 minutes of them)."""
    raw = os.environ.get("TRUE_DENIAL_MINUTES", "").strip()
    minutes = float(raw) if raw else DEFAULT_TRUE_DENIAL_MINUTES
    if not 1 <= minutes <= 60:
        raise ValueError("TRUE_DENIAL_MINUTES: minutes between 1 and 60")
    return int(minutes * 60_000)


@dataclass
class RunReport:
    reclaimed: int = 0
    tickets_dropped: int = 0
    published: int = 0
    denials: int = 0
    refusals: int = 0  # client-minutes judged into lease.refused events
    notices: int = 0
    outbox_backlog: int = 0
    shards_swept: int = 0
    duration_ms: float = 0.0
    budget_exhausted: bool = False
    publish_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Reaper:
    def __init__(
        self,
        redis: Any,
        publisher: Publisher,
        *,
        concurrency: int | None = None,
        budget_seconds: float | None = None,
        shards: int = SHARDS,
    ) -> None:
        self.redis = redis
        self.publisher = publisher
        self.scripts = SeatScripts(redis)
        self.concurrency = concurrency or int(os.environ.get("REAPER_CONCURRENCY", "16"))
        self.budget = budget_seconds or float(os.environ.get("REAPER_BUDGET_SECONDS", "45"))
        self.shards = shards
        self._lock = threading.Lock()

    # -- one run -----------------------------------------------------------------------

    def run(self) -> RunReport:
        started = time.monotonic()
        deadline = started + self.budget
        report = RunReport()
        candidates, denials, backlog = self.survey()
        lapsed = self.ticket_survey()
        refused = self.refusal_survey()
        report.shards_swept = self.shards
        busy = [
            s
            for s in range(self.shards)
            if candidates[s] or denials[s] or backlog[s] or lapsed[s] or refused[s]
        ]
        # A crash wave: publish what is reclaimed while the rest is being reclaimed, so the
        # audit trail starts filling at once rather than after the last reclaim.
        reclaiming = threading.Event()
        early, failed = None, []
        if sum(map(len, candidates)) >= WAVE_CANDIDATES:
            early = threading.Thread(
                target=self._drain_while, args=(reclaiming, deadline, report, failed)
            )
            reclaiming.set()
            early.start()
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                for _ in pool.map(
                    lambda s: self._work_shard(
                        s, candidates[s], denials[s], deadline, report, lapsed[s], refused[s]
                    ),
                    busy,
                ):
                    pass
        finally:
            reclaiming.clear()
            if early is not None:
                early.join()
        if failed:  # Redis failed under the drain: the run fails as it would have after it
            raise failed[0]
        if time.monotonic() < deadline:
            self._add(report, notices=self.send_notices())
        backlog = self._pipeline_each(lambda p, s: p.xlen(outbox_key(s)))
        if time.monotonic() < deadline and not report.publish_errors:
            try:
                published = self.drain([s for s in range(self.shards) if backlog[s]], deadline)
                self._add(report, published=published)
            except PublishFailed as exc:
                report.publish_errors.append(str(exc))
            backlog = self._pipeline_each(lambda p, s: p.xlen(outbox_key(s)))
        report.outbox_backlog = sum(backlog)
        report.budget_exhausted = time.monotonic() > deadline
        report.duration_ms = round((time.monotonic() - started) * 1000, 1)
        return report

    def _drain_while(
        self,
        reclaiming: threading.Event,
        deadline: float,
        report: RunReport,
        failed: list[BaseException],
    ) -> None:
        """Drain the outboxes, a message's worth at a time, while ``reclaiming`` is set
        (the run's final drain publishes the rest). Stops at the first failed publish; any
        other failure (Redis) is handed to the run in ``failed``."""
        try:
            while reclaiming.is_set() and time.monotonic() < deadline:
                lengths = self._pipeline_each(lambda p, s: p.xlen(outbox_key(s)))
                if sum(lengths) < EVENTS_PER_MESSAGE:
                    time.sleep(0.05)
                    continue
                published = self.drain([s for s in range(self.shards) if lengths[s]], deadline)
                self._add(report, published=published)
        except PublishFailed as exc:
            with self._lock:
                report.publish_errors.append(str(exc))
        except Exception as exc:  # raised again by run(), in its own thread
            failed.append(exc)

    def _pipeline_each(self, add: Any) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for shard in range(self.shards):
            add(pipe, shard)
        return pipe.execute()

    def survey(self) -> tuple[list[list[str]], list[int], list[int]]:
        """Expired candidates, denial counters and outbox lengths of every shard, in
        one pipelined round trip (split per node on a cluster)."""
        now = server_time_ms(self.redis)

        def add(pipe: Any, shard: int) -> None:
            pipe.zrangebyscore(deadlines_key(shard), "-inf", now, start=0, num=SWEEP_LIMIT)
            pipe.hlen(denials_key(shard))
            pipe.xlen(outbox_key(shard))

        flat = self._pipeline_each(add)
        return flat[0::3], flat[1::3], flat[2::3]

    def ticket_survey(self) -> list[list[str]]:
        """Every shard's lapsed wait-queue tickets (at most TICKET_SWEEP_LIMIT each), in
        one pipelined round trip: O(log N + K) a shard, as for leases."""
        now = server_time_ms(self.redis)
        return self._pipeline_each(
            lambda pipe, shard: pipe.zrangebyscore(
                ticket_index_key(shard), "-inf", now, start=0, num=TICKET_SWEEP_LIMIT
            )
        )

    def refusal_survey(self) -> list[list[str]]:
        """Every shard's licenses with a refused minute due (at most REFUSAL_LICENSES
        each), in one pipelined round trip."""
        cutoff = server_time_ms(self.redis) - 60_000 - true_denial_ms()
        return self._pipeline_each(
            lambda pipe, shard: pipe.zrangebyscore(
                refused_due_key(shard), "-inf", cutoff, start=0, num=REFUSAL_LICENSES
            )
        )

    def _add(self, report: RunReport, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(report, name, getattr(report, name) + value)

    def _work_shard(
        self,
        shard: int,
        candidates: list[str],
        denials: int,
        deadline: float,
        report: RunReport,
        lapsed: list[str] | None = None,
        refused: list[str] | None = None,
    ) -> None:
        while candidates and time.monotonic() < deadline:
            self._add(report, reclaimed=self.reclaim(shard, candidates))
            if len(candidates) < SWEEP_LIMIT:
                break
            candidates = self.redis.zrangebyscore(
                deadlines_key(shard), "-inf", server_time_ms(self.redis), start=0, num=SWEEP_LIMIT
            )
        if denials and time.monotonic() < deadline:
            self._add(report, denials=self.flush_denials(shard))
        if lapsed and time.monotonic() < deadline:
            self._add(report, tickets_dropped=self.sweep_tickets(shard, lapsed))
        if refused and time.monotonic() < deadline:
            self._add(report, refusals=self.flush_refusals(shard, refused, deadline))

    # -- the three jobs, each usable on its own ----------------------------------------

    def reclaim(self, shard: int, members: list[str]) -> int:
        """Reclaim these deadline-index members if (still) expired; returns how many."""
        reclaimed = 0
        for i in range(0, len(members), RECLAIM_BATCH):
            keys, args = reclaim_call(shard, members[i : i + RECLAIM_BATCH], secrets.token_hex(8))
            reclaimed += int(self.scripts.reclaim(keys=keys, args=args))
        return reclaimed

    def sweep_tickets(self, shard: int, members: list[str]) -> int:
        """Drop these ticket-index members' tickets if (still) lapsed; returns how many."""
        dropped = 0
        for i in range(0, len(members), RECLAIM_BATCH):
            keys, args = sweep_tickets_call(
                shard, members[i : i + RECLAIM_BATCH], secrets.token_hex(8)
            )
            dropped += int(self.scripts.sweep_tickets(keys=keys, args=args))
        return dropped

    def send_notices(self) -> int:
        """The term notices due in every shard (one pipelined read of the notice
        indexes, then notices.lua per shard with due licenses); returns how many were
        emitted."""
        now = server_time_ms(self.redis)
        due = self._pipeline_each(
            lambda p, s: p.zrangebyscore(notices_key(s), "-inf", now, start=0, num=NOTICE_BATCH)
        )
        thresholds = ",".join(str(int(d * 86_400_000)) for d in notice_days())
        sent = 0
        for shard, members in enumerate(due):
            if not members:
                continue
            keys, args = notices_call(shard, members, thresholds, secrets.token_hex(8))
            sent += int(self.scripts.notices(keys=keys, args=args))
        return sent

    def flush_denials(self, shard: int) -> int:
        keys, args = flush_denials_call(shard, secrets.token_hex(8))
        return int(self.scripts.flush_denials(keys=keys, args=args))

    def flush_refusals(self, shard: int, licenses: list[str], deadline: float | None = None) -> int:
        """Judge these licenses' due refused minutes into lease.refused events (again while
        a call says more are due, until ``deadline``); returns the client-minutes judged."""
        window = true_denial_ms()
        judged = 0
        for _ in range(1000):  # every call makes progress; the bound is a safety net
            keys, args = flush_refusals_call(
                shard, licenses, window, REFUSAL_BATCH, secrets.token_hex(8)
            )
            count, more = self.scripts.flush_refusals(keys=keys, args=args)
            judged += int(count)
            if not int(more) or (deadline is not None and time.monotonic() >= deadline):
                break
        return judged

    def drain(self, shards: list[int], deadline: float) -> int:
        """Publish these shards' outboxes and delete what Pub/Sub confirmed; returns the
        events published. Raises PublishFailed (the unconfirmed entries stay). A shard
        whose lock another run holds is left to that run."""
        locks = self._lock_shards(shards)
        published = 0
        try:
            pending = [s for s in shards if locks.get(s) is not False]
            while pending and time.monotonic() < deadline:
                entries, pending = self._gather(pending)
                if not entries:
                    break
                self.publisher.publish([text for batch in entries.values() for _, text in batch])
                pipe = self.redis.pipeline(transaction=False)
                for shard, batch in entries.items():
                    pipe.xdel(outbox_key(shard), *[entry_id for entry_id, _ in batch])
                pipe.execute()
                published += sum(len(batch) for batch in entries.values())
        finally:
            for lock in locks.values():
                try:
                    if lock:
                        lock.release()
                except LockError:  # expired meanwhile: nothing to release
                    pass
        return published

    def _lock_shards(self, shards: list[int]) -> dict[int, Any]:
        """The per-shard drain locks: a lock object when taken, False when another run
        holds it, None when Redis is full (noeviction: the lock is a write, and draining
        is what frees memory, so drain unlocked; an overlapping run may then publish some
        entries twice, which the audit insert ignores by event_id)."""
        locks: dict[int, Any] = {}
        for shard in shards:
            lock = self.redis.lock(reaper_lock_key(shard), timeout=self.budget + 60, blocking=False)
            try:
                locks[shard] = lock if lock.acquire() else False
            except OutOfMemoryError:
                locks[shard] = None
        return locks

    def _gather(self, shards: list[int]) -> tuple[dict[int, list[tuple[str, str]]], list[int]]:
        """Up to ROUND_EVENTS outbox entries ``(entry id, event JSON)`` read across these
        shards (pipelined, DRAIN_BATCH per shard), and the shards that may hold more."""
        entries: dict[int, list[tuple[str, str]]] = {}
        more: list[int] = []
        gathered = 0
        group = max(1, ROUND_EVENTS // DRAIN_BATCH)
        for start in range(0, len(shards), group):
            if gathered >= ROUND_EVENTS:
                more.extend(shards[start:])
                break
            chunk = shards[start : start + group]
            pipe = self.redis.pipeline(transaction=False)
            for shard in chunk:
                pipe.xrange(outbox_key(shard), "-", "+", count=DRAIN_BATCH)
            for shard, read in zip(chunk, pipe.execute(), strict=True):
                if read:
                    entries[shard] = [(entry_id, entry_json(fields)) for entry_id, fields in read]
                    gathered += len(read)
                    if len(read) == DRAIN_BATCH:
                        more.append(shard)
        return entries, more


_publisher: Publisher | None = None


def reset() -> None:
    """Forget the process-wide publisher (a changed PUBSUB_EMULATOR_HOST or project is
    read again by the next run), as ``redisconn.reset`` does for Redis."""
    global _publisher
    _publisher = None


def use_publisher(publisher: Publisher) -> None:
    """Publish through ``publisher`` from now on (``seatlease local --no-pubsub`` hands
    the events to its audit function directly: ``seatlease_cli.localstack.AuditPush``)."""
    global _publisher
    _publisher = publisher


def default_reaper() -> Reaper:
    """A reaper on the process-wide Redis client and Pub/Sub publisher."""
    global _publisher
    from seatlease.seats.redisconn import get_redis

    if _publisher is None:
        _publisher = Publisher()
    return Reaper(get_redis(), _publisher)
