"""Issue 31, item 3: a call on a license the tenant does not have costs no SQL query and
stores nothing in Redis (the tenant's license ids are known: seatlease/api/tenantlicenses.py),
and calls on unknown sessions of a real license count toward the tenant's rate budget.
Through the functions as Cloud Functions loads them, on real Redis and PostgreSQL."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from http_support import Tenant, acquire, error_of, heartbeat, new_license, release
from sqlalchemy import event

from seatlease import admin
from seatlease.api import tenantlicenses, tenantlimits
from seatlease.records import db, store
from seatlease.seats.keys import tenant_licenses_cache_key
from seatlease.seats.redisconn import get_redis

FLOOD = 2_000  # the flood: random ids from one tenant at rate limit 5


@contextmanager
def sql_statements() -> Iterator[list[str]]:
    """Every SQL statement the process sends to the database meanwhile."""
    seen: list[str] = []
    engine = db.get_engine()

    def count(_conn, _cursor, statement, *_args) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def _limit(tenant: Tenant, per_second: int) -> None:
    store.update_tenant(tenant.tenant_id, rate_limit_per_second=per_second)
    tenantlimits.forget(tenant.tenant_id)


def test_a_flood_of_unknown_license_ids_costs_no_sql_and_no_redis_key(acme: Tenant) -> None:
    _limit(acme, 5)
    lic = new_license(acme, "cad", seats=2)
    assert acquire(acme, lic, "ws-1").status_code == 201  # the tenant's ids are known now
    redis = get_redis()
    keys_before = redis.dbsize()
    calls = (acquire, heartbeat, release)
    with sql_statements() as statements:
        for n in range(FLOOD):
            unknown = f"nope-{uuid.uuid4().hex[:12]}"
            subject = f"ws-{n}" if n % 3 == 0 else "KknRb3nMHk4ELnZTVlPgoL6p"
            error_of(calls[n % 3](acme, unknown, subject), 404, "license_not_found")
    assert statements == []  # the rate limit, the key and the license ids: all cached
    assert redis.dbsize() <= keys_before  # (the rate budget's key may have expired)
    assert list(redis.scan_iter("*nope-*")) == []  # no negative entry per id


def test_a_license_made_by_the_admin_is_served_at_once(acme: Tenant) -> None:
    new_license(acme, "cad")
    assert acquire(acme, "cad", "ws-1").status_code == 201  # the set is cached: {cad}
    error_of(acquire(acme, "cam", "ws-1"), 404, "license_not_found")
    admin.execute(
        admin.parse(
            {"action": "license.create", "tenant_id": "acme", "license_id": "cam", "seats": 1}
        )
    )
    assert acquire(acme, "cam", "ws-1").status_code == 201


def test_another_instances_admin_change_is_seen_within_a_second(acme: Tenant) -> None:
    new_license(acme, "cad")
    assert acquire(acme, "cad", "ws-1").status_code == 201
    # Another instance created "cam": the database and the Redis set know it, this
    # process's copy does not.
    store.create_license("acme", "cam", seats=1)
    get_redis().sadd(tenant_licenses_cache_key("acme"), "cam")
    error_of(acquire(acme, "cam", "ws-1"), 404, "license_not_found")
    time.sleep(tenantlicenses.LOCAL_TTL + 0.1)
    assert acquire(acme, "cam", "ws-1").status_code == 201


def test_a_set_without_its_marker_is_filled_from_the_database(acme: Tenant) -> None:
    """An admin change's SADD onto an expired set leaves only its own id: the set is not
    taken as complete, the database fills it."""
    new_license(acme, "cad")
    new_license(acme, "cam")
    redis = get_redis()
    redis.delete(tenant_licenses_cache_key("acme"))
    tenantlicenses.forget_all()
    tenantlicenses.learn("acme", "cam")
    assert acquire(acme, "cad", "ws-1").status_code == 201
    assert redis.smembers(tenant_licenses_cache_key("acme")) == {"*", "cad", "cam"}
    assert redis.ttl(tenant_licenses_cache_key("acme")) > 0


@pytest.mark.parametrize("call", [heartbeat, release])
def test_unknown_sessions_on_a_real_license_count_toward_the_budget(acme: Tenant, call) -> None:
    _limit(acme, 5)
    lic = new_license(acme, "cad")
    answers = [call(acme, lic, f"gone-{n}").status_code for n in range(50)]
    assert answers.count(429) >= 40, answers  # a burst of about 5, then refused
    assert set(answers) <= {200, 410, 429}
    assert error_of(call(acme, lic, "gone-late"), 429, "rate_limited")["retry_after_seconds"] == 1
