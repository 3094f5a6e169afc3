"""Per-tenant rate limits (lua/_ratelimit.lua, GCRA on Redis): on the engine against a
real redis-server and the real Redis Cluster, and through the functions as Cloud
Functions runs them (real Redis and PostgreSQL). Nothing is mocked."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from http_support import acquire, app, error_of, heartbeat, new_license, new_tenant, release

from seatlease import admin
from seatlease.api import tenantlimits
from seatlease.errors import TenantRateLimited
from seatlease.records import db, store
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys, tenant_rate_cache_key


@pytest.fixture
def fresh_rates():
    tenantlimits.forget_all()
    yield
    tenantlimits.forget_all()


def drain(engine: SeatEngine, tenant: str, license_id: str, rate: int) -> int:
    """Spend the tenant's budget in the license's shard; how many acquires passed."""
    passed = 0
    for n in range(4 * rate + 10):
        try:
            engine.acquire(SeatRequest(tenant, license_id, f"drain-{n}", rate_limit=rate))
            passed += 1
        except TenantRateLimited:
            return passed
    raise AssertionError("the budget never ran out")


def refilled(rate: int, since: float) -> int:
    """How many calls the budget can have refilled since ``since`` (time.monotonic()) at
    ``rate`` a second, plus one for the interval under way: what a slow or loaded machine
    adds to a count, so that the counts below bound the limiter, not the machine."""
    return int(rate * (time.monotonic() - since)) + 1


# -- the engine, single Redis and Cluster ------------------------------------------------


def test_a_burst_of_one_seconds_worth_passes_then_429_with_retry_after(seat_engine, configs):
    configs.add("a", "cad", seats=1000)
    configs.add("b", "cad", seats=1000)
    began = time.monotonic()
    passed = drain(seat_engine, "a", "cad", rate=20)
    # the burst: one second's worth, plus what refilled while it was spent
    assert 18 <= passed <= 20 + refilled(20, began), passed
    # Refused at once with Retry-After 1 (a call let through because a slow machine took
    # an interval to get here is a refill, counted as such).
    for late in range(5):
        try:
            seat_engine.acquire(SeatRequest("a", "cad", f"late-{late}", rate_limit=20))
            passed += 1
        except TenantRateLimited as refused:
            assert refused.retry_after_seconds == 1
            break
    else:
        raise AssertionError("5 calls at once after the burst: none refused")
    # Nothing was taken by the refused calls, and another tenant is untouched.
    assert len(seat_engine.live_leases("a", "cad")) == passed
    assert seat_engine.acquire(SeatRequest("b", "cad", "ws-1", rate_limit=20)).created
    # No limit (an operator's call, or a tenant with 0) is never refused.
    assert seat_engine.acquire(SeatRequest("a", "cad", "operator", rate_limit=0)).created


def test_the_budget_refills_at_the_rate(seat_engine, configs):
    configs.add("a", "cad", seats=1000)
    drain(seat_engine, "a", "cad", rate=10)
    drained = time.monotonic()
    time.sleep(0.35)  # 3.5 intervals of 100 ms: three calls fit again, not ten
    passed = 0
    for n in range(10):
        try:
            seat_engine.acquire(SeatRequest("a", "cad", f"again-{n}", rate_limit=10))
            passed += 1
        except TenantRateLimited:
            pass
    assert 2 <= passed <= max(5, refilled(10, drained)), passed
    assert passed < 10  # a refill, never the whole budget back


def test_the_budget_is_shared_by_every_instance(seat_engine, configs):
    """Two engines (two function instances) on one Redis draw from one budget."""
    configs.add("a", "cad", seats=1000)
    other = SeatEngine(seat_engine.redis, configs)
    passed, began = 0, time.monotonic()
    for n in range(60):
        engine = seat_engine if n % 2 else other
        try:
            engine.acquire(SeatRequest("a", "cad", f"c{n}", rate_limit=20))
            passed += 1
        except TenantRateLimited:
            pass
    assert passed <= 20 + refilled(20, began), passed


def test_a_repeated_request_id_is_answered_even_over_the_budget(seat_engine, configs):
    configs.add("a", "cad", seats=1000)
    first = seat_engine.acquire(SeatRequest("a", "cad", "ws-1", request_id="rid-1", rate_limit=5))
    drain(seat_engine, "a", "cad", rate=5)
    again = seat_engine.acquire(SeatRequest("a", "cad", "ws-1", request_id="rid-1", rate_limit=5))
    assert again == first


def test_an_early_heartbeat_is_refused_one_on_schedule_passes(seat_engine, configs):
    """Over the budget, a heartbeat is refused only while more than two thirds of its
    lease is left: one that comes on schedule passes, so a limit never costs a lease."""
    configs.add("a", "cad", seats=1000, lease_seconds=3)
    lease = seat_engine.acquire(SeatRequest("a", "cad", "ws-1", rate_limit=0))
    drain(seat_engine, "a", "cad", rate=2)
    with pytest.raises(TenantRateLimited) as early:
        seat_engine.heartbeat("a", "cad", lease.session_id, rate_limit=2)
    assert early.value.retry_after_seconds >= 1
    time.sleep(1.1)  # the heartbeat interval (a third of 3 s) has come
    drain(seat_engine, "a", "cad", rate=2)
    renewal = seat_engine.heartbeat("a", "cad", lease.session_id, rate_limit=2)
    assert renewal.expires_at_ms > lease.expires_at_ms


def test_a_borrowed_lease_refused_a_heartbeat_keeps_its_deadline(seat_engine, configs):
    configs.add("a", "cad", seats=10, max_borrow_seconds=3600)
    lease = seat_engine.acquire(SeatRequest("a", "cad", "ws-1", borrow_seconds=3600))
    drain(seat_engine, "a", "cad", rate=2)
    with pytest.raises(TenantRateLimited):
        seat_engine.heartbeat("a", "cad", lease.session_id, rate_limit=2)
    (held,) = [x for x in seat_engine.live_leases("a", "cad") if x["client_id"] == "ws-1"]
    assert held["expires_at_ms"] == lease.expires_at_ms


def test_a_release_over_the_budget_changes_nothing(seat_engine, configs):
    configs.add("a", "cad", seats=1000)
    lease = seat_engine.acquire(SeatRequest("a", "cad", "ws-1"))
    drain(seat_engine, "a", "cad", rate=3)
    with pytest.raises(TenantRateLimited):
        seat_engine.release("a", "cad", lease.session_id, rate_limit=3)
    assert lease.session_id in {x["session_id"] for x in seat_engine.live_leases("a", "cad")}


def test_the_budget_key_lives_in_the_license_slot_and_expires(seat_engine, configs):
    configs.add("a", "cad", seats=10)
    seat_engine.acquire(SeatRequest("a", "cad", "ws-1", rate_limit=1))
    keys = LicenseKeys.of("a", "cad")
    assert keys.rate.startswith(f"sl:{{{keys.shard}}}:")
    ttl_ms = seat_engine.redis.pttl(keys.rate)
    assert 0 < ttl_ms <= 1000  # one interval (1 s at 1 a second): an idle tenant holds nothing


# -- through the functions -----------------------------------------------------------------


def used_memory(redis_client) -> int:
    return int(redis_client.info("memory")["used_memory"])


def test_a_flooding_tenant_gets_429s_and_another_tenant_is_served(
    acme, redis_client, fresh_rates
) -> None:
    """Tenant A floods 5,000 acquires with fresh request ids as fast as it can: A gets
    429s with Retry-After, B's acquire/heartbeat/release all succeed while it lasts, and
    Redis grows by less than 1 MB."""
    flooder = acme
    store.update_tenant(flooder.tenant_id, rate_limit_per_second=100)
    new_license(flooder, "cad", seats=50)
    other = new_tenant("globex")
    new_license(other, "cad", seats=5)
    acquire(flooder, "cad", "warm-up")  # caches: key, config, scripts
    before = used_memory(redis_client)

    def flood(worker: int) -> list[tuple[int, str | None]]:
        answers = []
        for n in range(1250):
            response = acquire(flooder, "cad", f"w{worker}-{n % 200}", request_id=uuid.uuid4().hex)
            answers.append((response.status_code, response.headers.get("Retry-After")))
        return answers

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        floods = [pool.submit(flood, w) for w in range(4)]
        for n in range(20):  # tenant B meanwhile
            lease = acquire(other, "cad", f"b-{n}")
            assert lease.status_code == 201, lease.get_json()
            sid = lease.get_json()["session_id"]
            assert heartbeat(other, "cad", sid).status_code == 200
            assert release(other, "cad", sid).get_json()["released"] is True
        answers = [a for f in floods for a in f.result()]
    elapsed = time.monotonic() - started

    assert len(answers) == 5000
    limited = [a for a in answers if a[0] == 429]
    assert limited  # (how many depends on how fast this machine sends: bounded below)
    # GCRA, concurrent callers: at most the burst (one second's worth) plus the rate.
    assert len(answers) - len(limited) <= 100 + 100 * elapsed + 5
    assert all(retry_after and int(retry_after) >= 1 for _, retry_after in limited)
    assert {status for status, _ in answers} <= {200, 201, 409, 429}
    assert used_memory(redis_client) - before < 1_000_000


def test_the_429_body(acme, fresh_rates) -> None:
    store.update_tenant(acme.tenant_id, rate_limit_per_second=1)
    new_license(acme, "cad", seats=10)
    answers = [acquire(acme, "cad", f"ws-{n}") for n in range(3)]
    assert answers[0].status_code == 201
    error = error_of(answers[-1], 429, "rate_limited")
    assert error["retry_after_seconds"] == int(answers[-1].headers["Retry-After"]) >= 1
    assert "nothing changed" in error["message"]


def test_a_tenant_with_no_limit_is_not_limited(acme, fresh_rates) -> None:
    store.update_tenant(acme.tenant_id, rate_limit_per_second=0)
    new_license(acme, "cad", seats=500)
    assert all(acquire(acme, "cad", f"ws-{n}").status_code == 201 for n in range(300))


def test_a_changed_limit_applies_at_once_where_the_cache_is_dropped(acme, fresh_rates) -> None:
    new_license(acme, "cad", seats=10)
    assert tenantlimits.rate_limit(acme.tenant_id) == tenantlimits.DEFAULT_RATE_LIMIT
    admin.execute(
        admin.parse({"action": "tenant.update", "tenant_id": "acme", "rate_limit_per_second": 7})
    )
    assert tenantlimits.rate_limit(acme.tenant_id) == 7


# -- the setting: bad input names the field ------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, 1_000_001])
@pytest.mark.parametrize("action", ["tenant.create", "tenant.update"])
def test_a_bad_rate_limit_is_a_400_naming_the_field(database_url, redis_url, action, bad) -> None:
    store.create_tenant("acme")
    body = {"action": action, "tenant_id": "acme", "rate_limit_per_second": bad}
    response = app("admin").test_client().post("/", json=body)
    error = error_of(response, 400, "invalid_request")
    assert "rate_limit_per_second" in {d["field"] for d in error["details"]}
    assert "rate_limit_per_second" in error["message"]
    assert store.tenant_rate_limit("acme") == tenantlimits.DEFAULT_RATE_LIMIT  # unchanged


# -- the migration -------------------------------------------------------------------------


def test_migration_0007_gives_every_tenant_the_default_and_downgrades(migration_urls) -> None:
    """On PostgreSQL and on SQLite (the local stack's), with a tenant that has a key and a
    license (foreign keys to tenants): 500 for it, the CHECK in force, and back again."""

    from sqlalchemy import inspect, text

    from seatlease.records import db

    for url in migration_urls:
        engine = db.make_engine(url)
        store.upgrade(engine, "0006")
        # Rows as the schema at 0006 holds them (today's store writes later columns).
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO tenants (tenant_id, name) VALUES ('acme', '')"))
            conn.execute(
                text(
                    "INSERT INTO licenses (tenant_id, license_id, seats) VALUES ('acme', 'cad', 3)"
                )
            )
        store.upgrade(engine)
        assert store.tenant_rate_limit("acme", engine) == 500
        with pytest.raises(Exception, match="ck_tenants_rate_limit"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE tenants SET rate_limit_per_second = -1"))
        store.downgrade(engine, "0006")
        columns = {c["name"] for c in inspect(engine).get_columns("tenants")}
        assert "rate_limit_per_second" not in columns
        with engine.connect() as conn:  # (today's store reads later columns too)
            seats = conn.execute(text("SELECT seats FROM licenses WHERE license_id = 'cad'"))
            assert seats.scalar_one() == 3
        engine.dispose()


def test_a_database_outage_never_fails_the_rate_limit_lookup(
    acme, redis_client, fresh_rates, monkeypatch
) -> None:
    """The lookup falls back to the last known value (or the default) instead of a 503:
    the seat calls go on without the database, as the API key cache lets them."""
    store.update_tenant(acme.tenant_id, rate_limit_per_second=42)
    assert tenantlimits.rate_limit(acme.tenant_id) == 42
    monkeypatch.setattr(tenantlimits, "LOCAL_TTL", 0.0)  # the local copy is now stale
    tenantlimits._remember(acme.tenant_id, 42)
    redis_client.delete(tenant_rate_cache_key(acme.tenant_id))  # and the Redis copy gone
    monkeypatch.setenv("DATABASE_URL", "postgresql+pg8000://nobody@127.0.0.1:1/none")
    db.reset()
    assert tenantlimits.rate_limit(acme.tenant_id) == 42  # the stale value, no 503
    tenantlimits.forget_all()
    assert tenantlimits.rate_limit(acme.tenant_id) == tenantlimits.DEFAULT_RATE_LIMIT
    assert redis_client.get(tenant_rate_cache_key(acme.tenant_id)) is None
    db.reset()
