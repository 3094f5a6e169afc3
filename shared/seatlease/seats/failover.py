"""A failover's recovery window (docs/design.md, "A region lost"): after the service is
brought up on a replica that missed the last writes, ``seatlease failover begin`` marks
this Redis as *recovering*. For each license, for one heartbeat interval of its longest
lease (``max_lease_seconds`` / 3, plus ``RECOVERY_SLACK_SECONDS``), new grants wait
(``503 recovering`` with ``Retry-After``): the holders whose grants the replica never
saw come back within that time and are re-admitted by their signed lease tokens
(``readmit.lua``), so no seat is granted twice. Held leases renew as usual.

The mark is one key, ``sl:failover`` (the Redis time the window began, ms), read by the
seat functions at most every ``CHECK_SECONDS`` per instance (``recovering_since``) and
handed to acquire.lua, which computes each license's window from its own configuration.
It expires by itself ``MARK_SECONDS`` after it was set, well after the longest window."""

from __future__ import annotations

import threading
import time
from typing import Any

from seatlease.clock import server_time_ms
from seatlease.seats.keys import PREFIX, SHARDS, shard_prefix

FAILOVER_KEY = f"{PREFIX}:failover"
# A holder's next heartbeat comes within one interval of its last success (a third of
# its lease, at most a third of the license's longest); one whose heartbeat failed during
# the loss retries at most an interval apart (the clients cap a heartbeat's back-off at
# its interval, docs/client.md). A few seconds more cover the call itself and an
# instance's view of the mark (CHECK_SECONDS).
RECOVERY_SLACK_SECONDS = 5
# Longer than any window (a license whose leases may last a week waits 56 h: the third of
# a week; `seatlease failover end` ends the recovery sooner when the operator chooses to)
MARK_SECONDS = 3 * 24 * 3600
CHECK_SECONDS = 2.0  # how stale an instance's view of the mark may be


def recovered_key(shard: int) -> str:
    """The shard's count of leases re-admitted by their tokens (``readmit.lua``)."""
    return f"{shard_prefix(shard)}:recovered"


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
    """End the recovery now (every license grants again); False when none was under way."""
    return bool(redis.delete(FAILOVER_KEY))


def began_ms(redis: Any) -> int | None:
    """When the recovery under way began (Redis time, ms), None when none is."""
    value = redis.get(FAILOVER_KEY)
    return int(value) if value is not None else None


def window_seconds(max_lease_seconds: int) -> int:
    """A license's recovery window: one heartbeat interval of its longest lease (and the
    slack; acquire.lua computes the same)."""
    return max_lease_seconds // 3 + RECOVERY_SLACK_SECONDS


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
