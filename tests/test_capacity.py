"""``seatlease capacity``: Redis used and maximum memory and what holds it, on a real
redis-server (through the CLI and the admin action) and on the real Redis Cluster."""

from __future__ import annotations

import json

import seatlease_cli as cli
from seatlease.api.runtime import seat_engine
from seatlease.licenses import LicenseConfig
from seatlease.records import store
from seatlease.seats import redisconn
from seatlease.seats.capacity import capacity
from seatlease.seats.engine import SeatEngine, SeatRequest


def test_capacity_shows_used_and_maximum_memory_and_the_leases(stack, redis_client, capsys):
    store.create_tenant("acme")
    store.create_license("acme", "cad", 10)
    for n in range(3):
        seat_engine().acquire(SeatRequest("acme", "cad", f"ws-{n}"))
    redis_client.config_set("maxmemory", 500 * 1024 * 1024)
    try:
        assert cli.main(["capacity", "--json"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert cli.main(["capacity"]) == 0
        text = capsys.readouterr().out
    finally:
        redis_client.config_set("maxmemory", 0)
    assert body["live_leases"] == 3 and body["outbox_backlog"] == 3  # the acquired events
    memory = body["redis"]
    assert memory["maxmemory_bytes"] == 500 * 1024 * 1024
    assert 0 < memory["used_memory_bytes"] < memory["maxmemory_bytes"]
    assert memory["used_ratio"] == round(memory["used_memory_bytes"] / (500 * 1024 * 1024), 4)
    assert memory["maxmemory_policy"]
    first = text.splitlines()[0]
    assert first.startswith("redis memory") and "used of 524.3 MB" in first
    assert "live leases     3 (about" in text


def test_capacity_without_maxmemory_says_so(stack, capsys):
    assert cli.main(["capacity"]) == 0
    assert "no maxmemory set" in capsys.readouterr().out


def test_capacity_sums_a_clusters_primaries(redis_cluster) -> None:
    client = redisconn.connect(redis_cluster.url)
    client.flushall()
    engine = SeatEngine(client, lambda _tenant, _license: LicenseConfig(seats=50))
    for n in range(40):  # licenses spread over shards, so over the nodes
        engine.acquire(SeatRequest("acme", f"lic-{n}", "ws-1"))
    body = capacity(client)
    client.close()
    assert body["live_leases"] == 40
    assert body["redis"]["nodes"] >= 3
    assert body["redis"]["used_memory_bytes"] > 3 * 500_000  # every primary's, summed
