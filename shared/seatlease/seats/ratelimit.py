"""A per-key request limit in Redis: at most ``limit`` calls in each fixed window of
``period_seconds``. One pipelined round trip per call, no Lua: ``SET counter 0 EX
2*period NX`` then ``INCR``, both on one key (one Redis Cluster slot). The window is this
instance's clock divided by the period: instances' clocks differ by milliseconds, which
moves a window's edge by as much, harmless for a limit (the lease deadlines, which it would
not be harmless for, use the Redis server's clock).

This is the portal's own limit, deliberately small: a tenant admin key runs a person's
page, not a program, so a fixed window (which lets at most twice the limit through around
a window's edge) is enough. The client API's per-tenant limits are another matter.
"""

from __future__ import annotations

import time
from typing import Any

from seatlease.errors import RateLimited
from seatlease.seats.keys import rate_limit_key


def hit(
    redis: Any, scope: str, who: str, limit: int, period_seconds: int, now: float | None = None
) -> int:
    """Count one call of ``who``; ``RateLimited`` (with the seconds until the window
    ends) when it is over ``limit``. Returns the calls counted in this window. ``now``:
    this instance's clock (``time.time()``) unless given."""
    window, into = divmod(int(time.time() if now is None else now), period_seconds)
    key = rate_limit_key(scope, who, window)
    pipe = redis.pipeline(transaction=False)
    pipe.set(key, 0, ex=2 * period_seconds, nx=True)  # expires after its window is over
    pipe.incr(key)
    count = int(pipe.execute()[1])
    if count > limit:
        raise RateLimited(limit, period_seconds, max(1, period_seconds - into))
    return count
