"""The in-process cache behind the API key and tenant rate-limit lookups
(seatlease/api/ttlcache.py): fresh, expired and evicted entries, and threads."""

from __future__ import annotations

import threading
import time

from seatlease.api.ttlcache import TTLCache


def test_a_fresh_entry_is_served_an_expired_one_only_peeked():
    cache: TTLCache[int] = TTLCache(ttl_seconds=0.05, max_entries=10)
    assert cache.get("a") is None and cache.peek("a") is None
    cache.put("a", 1)
    assert cache.get("a") == 1 and cache.peek("a") == (1, True)
    time.sleep(0.06)
    assert cache.get("a") is None  # expired: ask Redis again
    assert cache.peek("a") == (1, False)  # but the last known value is still there
    cache.put("a", 2)
    assert cache.get("a") == 2


def test_past_the_bound_the_least_recently_used_entry_goes_not_all_of_them():
    cache: TTLCache[str] = TTLCache(ttl_seconds=60, max_entries=3)
    for key in ("a", "b", "c"):
        cache.put(key, key)
    assert cache.get("a") == "a"  # a is used: b is now the least recent
    cache.put("d", "d")
    assert len(cache) == 3
    assert "b" not in cache
    assert [cache.get(k) for k in ("a", "c", "d")] == ["a", "c", "d"]
    cache.pop("a")
    assert "a" not in cache and len(cache) == 2
    cache.clear()
    assert len(cache) == 0


def test_threads_never_grow_it_past_its_bound():
    cache: TTLCache[int] = TTLCache(ttl_seconds=60, max_entries=100)

    def fill(offset: int) -> None:
        for i in range(2_000):
            cache.put(f"{offset}-{i}", i)
            cache.get(f"{offset}-{i // 2}")

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 100
