"""How full Redis is: used and maximum memory (``INFO memory``, summed over a cluster's
primaries) and what holds it (live leases, the outbox backlog), for ``seatlease
capacity``. Reads only: 256 ZCARDs and XLENs in one pipeline, never SCAN or KEYS.

The bytes per item are measured by bench/redis_memory.py (docs/operations.md, "Capacity");
the answer uses them to say what the leases and a full reply store take.
"""

from __future__ import annotations

from typing import Any

from seatlease.seats.keys import SHARDS, deadlines_key, outbox_key

# docs/operations.md "Capacity" (bench/redis_memory.py, 2026-11-24): per live lease
# (its sessions record with short metadata, the lease and deadline index entries, the
# client entry), per stored reply (a busy license's hash table; small ones less), per
# outbox event waiting for the reaper.
BYTES_PER_LEASE = 420
BYTES_PER_REPLY = 110
BYTES_PER_OUTBOX_EVENT = 340


def _memory(redis: Any) -> dict[str, Any]:
    try:
        from redis.cluster import RedisCluster
    except ImportError:  # pragma: no cover (redis-py always has it)
        RedisCluster = None
    if RedisCluster is not None and isinstance(redis, RedisCluster):
        per_node = redis.info("memory", target_nodes=RedisCluster.PRIMARIES)
        infos = list(per_node.values()) if isinstance(per_node, dict) else [per_node]
        if infos and not isinstance(infos[0], dict):  # one node answered: not per node
            infos = [per_node]
    else:
        infos = [redis.info("memory")]
    used = sum(int(i["used_memory"]) for i in infos)
    maximum = sum(int(i.get("maxmemory", 0)) for i in infos)
    policies = sorted({str(i.get("maxmemory_policy", "")) for i in infos})
    return {
        "used_memory_bytes": used,
        "maxmemory_bytes": maximum,  # 0: no limit (a local redis-server)
        "used_ratio": round(used / maximum, 4) if maximum else None,
        "maxmemory_policy": ",".join(policies),
        "nodes": len(infos),
    }


def capacity(redis: Any) -> dict[str, Any]:
    """Redis memory now, the live leases and the outbox backlog, with the memory each
    kind takes by the measured per-item sizes."""
    pipe = redis.pipeline(transaction=False)
    for shard in range(SHARDS):
        pipe.zcard(deadlines_key(shard))
        pipe.xlen(outbox_key(shard))
    counts = pipe.execute()
    leases, backlog = sum(counts[0::2]), sum(counts[1::2])
    return {
        "redis": _memory(redis),
        "live_leases": leases,
        "outbox_backlog": backlog,
        "estimate_bytes": {
            "leases": leases * BYTES_PER_LEASE,
            "outbox": backlog * BYTES_PER_OUTBOX_EVENT,
        },
        "bytes_per": {
            "lease": BYTES_PER_LEASE,
            "reply": BYTES_PER_REPLY,
            "outbox_event": BYTES_PER_OUTBOX_EVENT,
        },
    }
