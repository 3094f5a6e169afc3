"""The API key format (seatlease/apikeys.py): a made-up key is refused before any backend.

Measured through the real acquire function on a private redis-server and the real
PostgreSQL store: the database's statements are counted with a SQLAlchemy event, Redis's
with its own ``total_commands_processed`` counter.
"""

from __future__ import annotations

import random
import string

import pytest
from http_support import Tenant, acquire, error_of, new_license
from sqlalchemy import event

from seatlease import apikeys
from seatlease.records import db
from seatlease.seats.redisconn import get_redis


@pytest.fixture
def acme(acme: Tenant) -> Tenant:
    """conftest's tenant, with license ``cad`` (2 seats)."""
    new_license(acme, "cad", seats=2)
    return acme


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


def test_ten_thousand_forged_keys_cost_no_backend_call(acme: Tenant) -> None:
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


def test_a_key_with_a_valid_checksum_that_was_never_issued_is_unknown(acme: Tenant) -> None:
    key, prefix = apikeys.generate()
    response = acquire(Tenant("acme", key, prefix), "cad", "ws-1")
    assert error_of(response, 401, "unauthenticated")["message"] == "unknown or revoked API key"


def test_issued_keys_work(acme: Tenant) -> None:
    assert acquire(acme, "cad", "ws-1").status_code == 201


def test_legacy_keys_work_only_while_allowed(acme: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
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
