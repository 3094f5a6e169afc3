"""A failover's recovery window (docs/design.md, "A region lost"): while it lasts, the
holders whose grants this Redis lost come back by their signed lease tokens (acquire.lua's
re-admission) and new grants wait (``503 recovering`` with ``Retry-After``), so no seat is
granted twice; held leases renew as usual. Outside a window a token brings nothing back
(but a borrow the service lost: its client may be offline for days).

A window opens two ways:

- **The operator's**: after the service is brought up on a replica that missed the last
  writes, ``seatlease failover begin`` sets one key, ``sl:failover`` (the Redis time it
  began, ms), read by the seat functions at most every ``CHECK_SECONDS`` per instance
  (``SinceCache``) and handed to acquire.lua. It expires by itself ``MARK_SECONDS``
  after it was set, well after the longest window.
- **The service's own**, when it finds a shard's data gone: every shard has a mark
  (``mark_key``: ``N<ms>``, its data began then), written when a seat call first fills a
  license's configuration there. A Redis that lost its data (a restart without
  persistence, a flushed or replaced node) lost every cached configuration with it, so
  the next call of a license there fills one and finds no mark; the database
  (``SeatHistory.shard_listed``) says whether that shard had served seats. If it had,
  the mark is ``L<ms>``: a window opens for the shard's licenses from then, logged as a
  WARNING and shown by ``failover status``.

Each license's window lasts one heartbeat interval of the longest lease it granted
recently, and ``RECOVERY_SLACK_SECONDS`` (lua/_lib.lua's ``recovery_ends``). When the
shard's data is younger than a token (its mark after the token's iat), what Redis
remembers of ended sessions went with the data: the audit trail says instead
(``SeatHistory.ended_before``)."""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from seatlease.clock import server_time_ms
from seatlease.logs import log
from seatlease.seats.keys import PREFIX, SHARDS, recovered_key, shard_mark_key

FAILOVER_KEY = f"{PREFIX}:failover"
# A holder's next heartbeat comes within one interval of its last success (a third of
# its lease); one whose heartbeat failed during the loss retries at most an interval apart
# (the clients cap a heartbeat's back-off at its interval, docs/client.md). A few seconds
# more cover the replication lag, the call itself and an instance's view of the mark
# (CHECK_SECONDS). lua/_lib.lua's RECOVERY_SLACK_MS is the same.
RECOVERY_SLACK_SECONDS = 5
# Longer than any window (a license whose leases may last a week waits 56 h: the third of
# a week; `seatlease failover end` ends the recovery sooner when the operator chooses to)
MARK_SECONDS = 3 * 24 * 3600
CHECK_SECONDS = 2.0  # how stale an instance's view of the mark may be


class SeatHistory(Protocol):
    """What the database remembers for the seat engine across a loss of Redis's data
    (seatlease.api.runtime's ``DatabaseHistory``)."""

    def shard_listed(self, shard: int) -> bool | None:
        """Whether the shard is listed as one that served seats; None when the database
        cannot say (the shard stays unmarked: asked again next time)."""
        ...

    def list_shard(self, shard: int) -> None:
        """List the shard as one that serves seats."""
        ...

    def ended_before(
        self, tenant_id: str, license_id: str, session_id: str, since_ms: int, before_ms: int
    ) -> str | None:
        """How the audit trail says the session ended before ``before_ms`` (released,
        reclaimed, or lingering since ``since_ms``: a token's iat): ``revoked``, ``ended``,
        or None (no end stored)."""
        ...


def mark_key(shard: int) -> str:
    return shard_mark_key(shard)


def mark_shard(redis: Any, shard: int, history: SeatHistory) -> None:
    """Give the shard its mark if it has none (the engine, before it caches a license's
    configuration there): ``L<now>`` when the shard is listed as one that served seats
    (its data was lost: a recovery window opens now), else ``N<now>``, and then it is
    listed: after its mark, so that a second instance that finds it listed finds the mark
    too (and does not take a new shard for a lost one)."""
    key = mark_key(shard)
    if redis.exists(key):
        return
    lost = history.shard_listed(shard)
    if lost is None:
        return
    began = server_time_ms(redis)
    won = redis.set(key, f"{'L' if lost else 'N'}{began}", nx=True)
    if not lost:
        history.list_shard(shard)
    elif won:
        log(
            "WARNING",
            "recovery: this Redis lost a shard's data (no mark, and the database says it "
            "served seats): a recovery window opened for its licenses",
            shard=shard,
            began_ms=began,
        )


def lost_shards(redis: Any) -> dict[int, int]:
    """The shards whose data was found gone, and when (ms): each opened a window then."""
    pipe = redis.pipeline(transaction=False)
    for shard in range(SHARDS):
        pipe.get(mark_key(shard))
    return {
        shard: int(value[1:])
        for shard, value in enumerate(pipe.execute())
        if value is not None and value.startswith("L")
    }


def begin(redis: Any) -> int:
    """Mark this Redis as recovering from now (Redis time); returns the start (ms). The
    counts of re-admissions start again from 0."""
    began = server_time_ms(redis)
    pipe = redis.pipeline(transaction=False)
    pipe.set(FAILOVER_KEY, began, ex=MARK_SECONDS)
    for shard in range(SHARDS):
        pipe.delete(recovered_key(shard))
    pipe.execute()
    return began


def end(redis: Any) -> bool:
    """End the recovery now (every license grants again): the operator's mark, and the
    windows the service opened on finding a shard's data gone (their marks become ``N``,
    same time); False when none was under way."""
    ended = bool(redis.delete(FAILOVER_KEY))
    for shard, began in lost_shards(redis).items():
        redis.set(mark_key(shard), f"N{began}")
        ended = True
    return ended


def began_ms(redis: Any) -> int | None:
    """When the recovery under way began (Redis time, ms), None when none is."""
    value = redis.get(FAILOVER_KEY)
    return int(value) if value is not None else None


def window_ms(longest_lease_ms: int) -> int:
    """A license's recovery window: one heartbeat interval of the longest lease it granted
    recently (and the slack; lua/_lib.lua's recovery_ends computes the same)."""
    return longest_lease_ms // 3 + RECOVERY_SLACK_SECONDS * 1000


def longest_recent_lease_ms(redis: Any, lmax_keys: list[str], defaults_ms: list[int]) -> list[int]:
    """Each license's longest lease granted recently (its ``lmax`` key), or its default
    lease length without one, as recovery_ends reads them."""
    pipe = redis.pipeline(transaction=False)
    for key in lmax_keys:
        pipe.get(key)
    return [
        int(value.split(":")[0]) if value else default
        for value, default in zip(pipe.execute(), defaults_ms, strict=True)
    ]


def recovered(redis: Any) -> int:
    """Leases re-admitted by their tokens since the recovery began (all shards)."""
    pipe = redis.pipeline(transaction=False)
    for shard in range(SHARDS):
        pipe.get(recovered_key(shard))
    return sum(int(v) for v in pipe.execute() if v is not None)


class SinceCache:
    """A function instance's view of the mark: read at most every ``CHECK_SECONDS``, so
    the seat calls pay nothing for it (one GET every two seconds per instance). Set the
    mark before routing traffic to the recovering region (the runbook says so): an
    instance that read "none" just before sees the mark within ``CHECK_SECONDS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: int | None = None
        self._checked = float("-inf")

    def since(self, redis: Any) -> int | None:
        now = time.monotonic()
        if now - self._checked < CHECK_SECONDS:
            return self._value
        with self._lock:
            if now - self._checked >= CHECK_SECONDS:
                self._value = began_ms(redis)
                self._checked = now
        return self._value

    def forget(self) -> None:
        with self._lock:
            self._checked = float("-inf")
