"""The API key format (seatlease/apikeys.py): a made-up key is refused before any backend.

Measured through the real acquire function on a private redis-server and the real
PostgreSQL store: the database's statements are counted with a SQLAlchemy event, Redis's
with its own ``total_commands_processed`` counter.
"""

from __future__ import annotations

import random
import string
import time

import pytest
from http_support import Tenant, acquire, error_of
from sqlalchemy import event

from seatlease import apikeys
from seatlease.records import db
from seatlease.seats.redisconn import get_redis


def test_generated_keys_are_well_formed_and_unique() -> None:
    made = [apikeys.generate() for _ in range(2000)]
    assert len({key for key, _ in made}) == 2000
    for key, prefix in made[:200]:
        assert key.startswith(prefix + "_") and len(key) == len(prefix) + 1 + 38
        assert apikeys.well_formed(key)


def test_one_changed_character_breaks_the_checksum() -> None:
    key, _ = apikeys.generate()
    alphabet = string.ascii_letters + string.digits
    rng = random.Random(7)
    broken = 0
    for position in range(12, len(key)):  # every character of the secret and checksum
        other = rng.choice([c for c in alphabet if c != key[position]])
        broken += not apikeys.well_formed(key[:position] + other + key[position + 1 :])
    assert broken == len(key) - 12


def _random_key(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits
    prefix = "sl_" + "".join(rng.choice("0123456789abcdef") for _ in range(8))
    return prefix + "_" + "".join(rng.choice(alphabet) for _ in range(38))


def _redis_commands() -> int:
    return int(get_redis().info("stats")["total_commands_processed"])


def test_ten_thousand_forged_keys_cost_no_backend_call(acme_cad: Tenant) -> None:
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = db.get_engine()
    event.listen(engine, "before_cursor_execute", count)
    rng = random.Random(2026)
    try:
        before = _redis_commands()
        idle = _redis_commands() - before  # the INFO call itself
        before = _redis_commands()
        for _ in range(10_000):
            response = acquire(Tenant("acme", _random_key(rng), "x"), "cad", "ws-1")
            assert response.status_code == 401
        redis_calls = _redis_commands() - before - idle
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert statements == []
    assert redis_calls == 0
    assert error_of(response, 401, "unauthenticated")["message"] == "malformed API key"


def test_a_key_with_a_valid_checksum_that_was_never_issued_is_unknown(acme_cad: Tenant) -> None:
    key, prefix = apikeys.generate()
    response = acquire(Tenant("acme", key, prefix), "cad", "ws-1")
    assert error_of(response, 401, "unauthenticated")["message"] == "unknown or revoked API key"


def test_issued_keys_work(acme_cad: Tenant) -> None:
    assert acquire(acme_cad, "cad", "ws-1").status_code == 201


def test_legacy_keys_work_only_while_allowed(
    acme_cad: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key issued before the checksum existed (``sl_<id>_`` + 32 URL-safe characters),
    stored as such in the database."""
    from sqlalchemy import insert

    from seatlease.records.tables import api_keys

    legacy = "sl_0a1b2c3d_" + "Legacy-key_0123456789abcdefghijk"
    assert len(legacy.split("_", 2)[2]) == 32
    with db.get_engine().begin() as conn:
        conn.execute(
            insert(api_keys).values(
                tenant_id="acme", prefix="sl_0a1b2c3d", key_hash=apikeys.hash_key(legacy), label=""
            )
        )
    old = Tenant("acme", legacy, "sl_0a1b2c3d")
    monkeypatch.delenv(apikeys.LEGACY_ENV, raising=False)
    error_of(acquire(old, "cad", "ws-1"), 401, "unauthenticated")
    monkeypatch.setenv(apikeys.LEGACY_ENV, "1")
    assert acquire(old, "cad", "ws-1").status_code == 201


# -- forged keys with a valid checksum (issue 31, item 4) --------------------------------


def test_a_flood_of_forged_keys_reaches_the_database_at_a_bounded_rate(acme_cad: Tenant) -> None:
    """2,000 never-issued keys with valid checksums: the database sees at most the
    instance's lookup budget, the rest are 429 before any query; the live key goes on."""
    from seatlease.api import auth

    auth.forget_all()
    assert acquire(acme_cad, "cad", "ws-1").status_code == 201  # the live key, cached
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = db.get_engine()
    event.listen(engine, "before_cursor_execute", count)
    started = time.monotonic()
    statuses: list[int] = []
    try:
        for n in range(2_000):
            key, prefix = apikeys.generate()
            response = acquire(Tenant("acme", key, prefix), "cad", "ws-1")
            statuses.append(response.status_code)
            if response.status_code == 429:
                error = error_of(response, 429, "rate_limited")
                assert response.headers["Retry-After"] == "1" and error["retry_after_seconds"] == 1
            if n % 100 == 0:  # the live key meanwhile: served, no query of its own
                assert acquire(acme_cad, "cad", "ws-1").status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", count)
    elapsed = time.monotonic() - started
    assert set(statuses) == {401, 429}
    budget = auth.LOOKUPS_PER_SECOND * (elapsed + 1)
    assert statuses.count(401) <= budget and len(statements) <= budget, (len(statements), elapsed)
    assert statuses.count(429) >= 2_000 - budget


def test_forged_keys_never_evict_a_live_key_from_the_instance(acme_cad: Tenant) -> None:
    """More unknown keys than the in-process cache holds (their negative entries already
    in Redis, as another instance's flood leaves them): the live key stays cached."""
    from seatlease.api import auth
    from seatlease.seats.keys import api_key_cache_key

    auth.forget_all()
    assert acquire(acme_cad, "cad", "ws-1").status_code == 201
    live_hash = apikeys.hash_key(acme_cad.key)
    forged = [apikeys.generate()[0] for _ in range(auth._LOCAL_MAX + 1)]
    redis = get_redis()
    pipe = redis.pipeline(transaction=False)
    for key in forged:
        pipe.set(api_key_cache_key(apikeys.hash_key(key)), "-", ex=60)
    pipe.execute()
    for key in forged:
        with pytest.raises(auth.Unauthenticated):
            auth.identify(f"Bearer {key}")
    assert auth.cached_locally(live_hash)
    redis.delete(api_key_cache_key(live_hash))  # only this process's copy can answer now
    assert auth.identify(acme_cad.auth["Authorization"]).tenant_id == "acme"
    assert not redis.exists(api_key_cache_key(live_hash))
