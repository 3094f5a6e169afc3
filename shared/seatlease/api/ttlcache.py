"""A small in-process cache whose entries expire: what a function instance remembers of
the database between calls (an API key's tenant, a tenant's rate limit), so the hot path
asks neither Redis nor the database for it.

Thread-safe (an instance serves several requests at once). Bounded: past ``max_entries``
the least recently used entry goes, so a burst of new keys never evicts every live one.
An expired entry stays readable through ``peek`` (the last known value, for when the
database is down) until it is replaced or evicted.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class TTLCache(Generic[V]):
    def __init__(self, ttl_seconds: float, max_entries: int) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[V, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        """The value if it is still fresh, else None."""
        found = self.peek(key)
        return found[0] if found is not None and found[1] else None

    def peek(self, key: str) -> tuple[V, bool] | None:
        """``(value, fresh)`` for a key held fresh or expired, None for one not held."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        return entry[0], entry[1] > time.monotonic()

    def put(self, key: str, value: V, ttl_seconds: float | None = None) -> None:
        """Hold ``value`` for ``ttl_seconds`` (default: the cache's own)."""
        ttl = self.ttl_seconds if ttl_seconds is None else ttl_seconds
        with self._lock:
            self._entries[key] = (value, time.monotonic() + ttl)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def pop(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
