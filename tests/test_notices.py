"""The reaper's term notices (docs/design.md, "Notices before the end"): license.expiring
at each threshold before expires_at and license.expired when the grace ends, exactly
once per threshold across reaper runs and restarts, from a per-shard deadline index (no
scan of the licenses), through the outbox, Pub/Sub and the audit function into
PostgreSQL, where the usage rollups leave them out. Real redis-server, Pub/Sub emulator
and PostgreSQL; the thresholds are set in seconds (LICENSE_NOTICE_DAYS) so the test
waits for them instead of days."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import functions_framework
import pytest
from http_support import push_all_to_audit
from sqlalchemy import select

from seatlease.events.pubsub import Publisher
from seatlease.events.reaper import Reaper, notice_days
from seatlease.licenses import LicenseConfig
from seatlease.records import db, event_log, store
from seatlease.records.tables import usage_rollups
from seatlease.seats.engine import SeatEngine
from seatlease.seats.keys import SHARDS, LicenseKeys, notices_key, outbox_key

DAY = 86_400


def days(seconds: float) -> str:
    return repr(seconds / DAY)


def at(engine: SeatEngine, seconds: float) -> datetime:
    return datetime.fromtimestamp(engine.server_time_ms() / 1000, UTC) + timedelta(seconds=seconds)


def until(engine: SeatEngine, moment: datetime) -> None:
    while (left := moment.timestamp() - engine.server_time_ms() / 1000) >= 0:
        time.sleep(left + 0.05)


def notices(redis, tenant_id: str, license_id: str) -> list[dict]:
    shard = LicenseKeys.of(tenant_id, license_id).shard
    found = [json.loads(f["e"]) for _, f in redis.xrange(outbox_key(shard))]
    return [e for e in found if e["license_id"] == license_id and e["type"].startswith("license.")]


@pytest.fixture
def thresholds(monkeypatch):
    """Notices 4 s and 1 s before expires_at."""
    monkeypatch.setenv("LICENSE_NOTICE_DAYS", f"{days(4)},{days(1)}")


def test_notice_days_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("LICENSE_NOTICE_DAYS", raising=False)
    assert notice_days() == (30, 7, 1)
    monkeypatch.setenv("LICENSE_NOTICE_DAYS", "1, 14,3")
    assert notice_days() == (14, 3, 1)
    monkeypatch.setenv("LICENSE_NOTICE_DAYS", "")
    assert notice_days() == ()
    monkeypatch.setenv("LICENSE_NOTICE_DAYS", "-2")
    with pytest.raises(ValueError, match="LICENSE_NOTICE_DAYS"):
        notice_days()


def test_each_threshold_once_across_runs_restarts_and_cache_refills(
    redis_client, engine, configs, thresholds
):
    expires = at(engine, 5.5)
    cfg = configs.add("acme", "cad", seats=2, expires_at=expires, grace_seconds=1)
    engine.cache_config("acme", "cad", cfg)
    reaper = Reaper(redis_client, publisher=None)
    assert reaper.send_notices() == 0  # none due yet: armed for the first threshold
    until(engine, expires - timedelta(seconds=4))
    assert reaper.send_notices() == 1
    assert reaper.send_notices() == 0
    assert Reaper(redis_client, publisher=None).send_notices() == 0  # a restarted reaper
    engine.cache_config("acme", "cad", cfg)  # the cache refilled: the same end
    assert reaper.send_notices() == 0
    until(engine, expires - timedelta(seconds=1))
    assert reaper.send_notices() == 1
    until(engine, expires + timedelta(seconds=1))
    assert Reaper(redis_client, publisher=None).send_notices() == 1
    assert reaper.send_notices() == 0
    sent = notices(redis_client, "acme", "cad")
    assert [e["type"] for e in sent] == ["license.expiring"] * 2 + ["license.expired"]
    assert [e["metadata"].get("threshold_days") for e in sent] == [
        pytest.approx(4 / DAY, rel=1e-5),
        pytest.approx(1 / DAY, rel=1e-5),
        None,
    ]
    assert {e["metadata"]["expires_at"] for e in sent} == {
        expires.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    }
    assert all(e["session_id"] is None and e["seats_used"] is None for e in sent)
    # done: the license left the index
    shard = LicenseKeys.of("acme", "cad").shard
    assert redis_client.zscore(notices_key(shard), "acme/cad") is None


def test_a_late_start_sends_only_the_latest_notice_and_a_renewal_starts_afresh(
    redis_client, engine, configs, thresholds
):
    cfg = configs.add("acme", "late", seats=1, expires_at=at(engine, 2))
    engine.cache_config("acme", "late", cfg)
    reaper = Reaper(redis_client, publisher=None)
    assert reaper.send_notices() == 1  # the 4 s one passed already; the 1 s one not yet
    renewed = replace(cfg, expires_at=at(engine, 3.5))
    engine.cache_config("acme", "late", renewed)  # a renewal: a new end
    assert reaper.send_notices() == 1  # its own 4 s notice
    sent = notices(redis_client, "acme", "late")
    assert [e["metadata"]["expires_at"] for e in sent] == [
        m.expires_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for m in (cfg, renewed)
    ]
    # the term cleared: the license leaves the index, nothing more is sent
    engine.cache_config("acme", "late", replace(renewed, expires_at=None))
    shard = LicenseKeys.of("acme", "late").shard
    assert redis_client.zscore(notices_key(shard), "acme/late") is None


def test_runs_touch_only_the_due_licenses(redis_client, engine, thresholds):
    far = at(engine, 3600)
    for i in range(2000):
        engine.cache_config("acme", f"lic{i}", LicenseConfig(seats=1, expires_at=far))
    reaper = Reaper(redis_client, publisher=None)
    assert reaper.send_notices() == 0  # each armed license placed at its next threshold
    due = sum(redis_client.zcount(notices_key(s), "-inf", engine.server_time_ms())
              for s in range(SHARDS))  # fmt: skip
    assert due == 0
    redis_client.config_resetstat()
    assert reaper.send_notices() == 0
    stats = redis_client.info("commandstats")
    # one ZRANGEBYSCORE per shard, no script: the 2000 licenses are not looked at
    assert "cmdstat_evalsha" not in stats and "cmdstat_hmget" not in stats
    assert stats["cmdstat_zrangebyscore"]["calls"] == SHARDS


def test_notices_reach_the_audit_table_and_no_rollup(
    redis_client, database_url, pubsub, monkeypatch
):
    from seatlease.api.runtime import refresh_license_cache

    monkeypatch.setenv("LICENSE_NOTICE_DAYS", "30")
    store.create_tenant("acme")
    store.create_license(
        "acme", "cad", seats=1, expires_at=datetime.now(UTC) + timedelta(seconds=2)
    )
    refresh_license_cache("acme", "cad")
    report = Reaper(redis_client, Publisher()).run()
    assert report.notices == 1 and report.published == 1
    audit = functions_framework.create_app("audit", "functions/audit/main.py").test_client()
    push_all_to_audit(audit, pubsub.pull())
    rows = event_log.list_events("acme", "cad")
    assert [r["type"] for r in rows] == ["license.expiring"]
    assert rows[0]["metadata"]["threshold_days"] == 30
    with db.get_engine().connect() as conn:
        assert conn.execute(select(usage_rollups)).all() == []
