"""The reaper: reclaims expired leases and drains the outboxes to Pub/Sub.

One run (Cloud Scheduler calls it every minute):
1. one pipeline reads, for every shard, the expired members of its deadline index
   (``ZRANGEBYSCORE -inf now``: O(log N + expired), flat in the number of live leases),
   the size of its denial counters and the length of its outbox;
2. the shards that have work are handled by a bounded thread pool: expired leases are
   reclaimed in batches by ``reclaim.lua`` (which checks each deadline again, so a lease
   heartbeated since step 1 stays, and one reclaimed by a concurrent run is skipped),
   denial counters become ``lease.denied`` events, and the outbox is published and only
   then trimmed (under a per-shard lock, so two overlapping runs never publish the same
   entries twice at once);
3. a time budget stops starting new work so the run returns before the function times
   out; what is left waits for the next run.

Once one publish fails (Pub/Sub unreachable), the other shards of the run skip their drain:
each failed publish waits for its timeout, and 256 of them would outlast the budget.
Reclaims still happen (they only need Redis); their events wait in the outbox.
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

from shared.clock import server_time_ms
from shared.keys import (
    SHARDS,
    LicenseKeys,
    deadlines_key,
    denials_key,
    outbox_key,
    reaper_lock_key,
)
from shared.pubsub import Publisher, PublishFailed, event_from_entry
from shared.scripts import SeatScripts

RECLAIM_BATCH = 100  # candidates per reclaim.lua call (4 keys each)
SWEEP_LIMIT = 1000  # expired members read per shard per sweep
DRAIN_BATCH = 1000  # outbox entries published per round


@dataclass
class RunReport:
    reclaimed: int = 0
    published: int = 0
    denials: int = 0
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
        report.shards_swept = self.shards
        busy = [s for s in range(self.shards) if candidates[s] or denials[s] or backlog[s]]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for _ in pool.map(
                lambda s: self._work_shard(s, candidates[s], denials[s], deadline, report), busy
            ):
                pass
        report.outbox_backlog = sum(self._pipeline_each(lambda p, s: p.xlen(outbox_key(s))))
        report.budget_exhausted = time.monotonic() > deadline
        report.duration_ms = round((time.monotonic() - started) * 1000, 1)
        return report

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

    def _add(self, report: RunReport, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(report, name, getattr(report, name) + value)

    def _work_shard(
        self, shard: int, candidates: list[str], denials: int, deadline: float, report: RunReport
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
        if time.monotonic() < deadline and not report.publish_errors:
            try:
                self._add(report, published=self.drain(shard, deadline))
            except PublishFailed as exc:
                with self._lock:
                    report.publish_errors.append(f"shard {shard}: {exc}")

    # -- the three jobs, each usable on its own ----------------------------------------

    def reclaim(self, shard: int, members: list[str]) -> int:
        """Reclaim these deadline-index members if (still) expired; returns how many."""
        reclaimed = 0
        for i in range(0, len(members), RECLAIM_BATCH):
            keys = [deadlines_key(shard), outbox_key(shard)]
            args: list[str] = [secrets.token_hex(8)]
            for member in members[i : i + RECLAIM_BATCH]:
                lk, _, session_id = member.partition("|")
                tenant_id, _, license_id = lk.partition("/")
                lic = LicenseKeys.of(tenant_id, license_id)
                keys += [lic.leases, lic.sessions, lic.clients, lic.cfg]
                args += [tenant_id, license_id, session_id]
            reclaimed += int(self.scripts.reclaim(keys=keys, args=args))
        return reclaimed

    def flush_denials(self, shard: int) -> int:
        return int(
            self.scripts.flush_denials(
                keys=[denials_key(shard), outbox_key(shard)], args=[secrets.token_hex(8)]
            )
        )

    def drain(self, shard: int, deadline: float) -> int:
        """Publish the shard's outbox and delete what Pub/Sub confirmed. A per-shard
        lock keeps overlapping runs from publishing the same entries concurrently; a run
        that finds the lock taken leaves the shard to its holder."""
        lock = self.redis.lock(reaper_lock_key(shard), timeout=self.budget + 60, blocking=False)
        try:
            locked = lock.acquire()
        except OutOfMemoryError:
            # Redis is full (noeviction) and the lock is a write. Draining is what frees
            # memory, so drain unlocked: an overlapping run may publish some entries
            # twice, which the audit insert ignores (unique event_id).
            locked = None
        if locked is False:
            return 0
        published = 0
        stream = outbox_key(shard)
        try:
            while time.monotonic() < deadline:
                entries = self.redis.xrange(stream, "-", "+", count=DRAIN_BATCH)
                if not entries:
                    break
                events = [event_from_entry(fields) for _id, fields in entries]
                self.publisher.publish(events)  # raises PublishFailed: entries stay
                self.redis.xdel(stream, *[entry_id for entry_id, _ in entries])
                published += len(entries)
        finally:
            try:
                if locked:
                    lock.release()
            except LockError:  # expired meanwhile: nothing to release
                pass
        return published


_publisher: Publisher | None = None


def default_reaper() -> Reaper:
    """A reaper on the process-wide Redis client and Pub/Sub publisher."""
    global _publisher
    from shared.redisconn import get_redis

    if _publisher is None:
        _publisher = Publisher()
    return Reaper(get_redis(), _publisher)
