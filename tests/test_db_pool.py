"""The database pool's bounds come from the environment (issue 33, item 2).

Terraform sets ``DB_POOL_SIZE`` per function from its concurrency and
``DB_MAX_OVERFLOW = 0`` (terraform/modules/functions/sql_pool.tf), so that the functions
at their maximum instance counts never open more connections than the Cloud SQL tier
accepts. Here, on a real PostgreSQL: with a pool of two and no overflow, a third
concurrent checkout waits for one of the two instead of opening a third connection.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from seatlease.records import db


@pytest.fixture
def pool_env(database_url: str, monkeypatch: pytest.MonkeyPatch):
    db.reset()
    yield monkeypatch
    db.reset()


def test_a_pool_of_two_without_overflow_never_opens_a_third_connection(pool_env) -> None:
    pool_env.setenv("DB_POOL_SIZE", "2")
    pool_env.setenv("DB_MAX_OVERFLOW", "0")
    engine = db.get_engine()
    held = [engine.connect() for _ in range(2)]
    for conn in held:
        conn.execute(text("SELECT 1"))
    third_done = threading.Event()

    def third() -> None:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        third_done.set()

    waiting = threading.Thread(target=third)
    waiting.start()
    assert not third_done.wait(1.5), "a third connection was opened beside the pool's two"
    held.pop().close()  # back to the pool: the waiting checkout gets it
    assert third_done.wait(10)
    waiting.join()
    held.pop().close()
    assert engine.pool.size() == 2 and engine.pool.checkedout() == 0


def test_without_settings_the_pool_keeps_its_old_bounds(pool_env) -> None:
    pool_env.delenv("DB_POOL_SIZE", raising=False)
    pool_env.delenv("DB_MAX_OVERFLOW", raising=False)
    engine = db.get_engine()
    held = [engine.connect() for _ in range(10)]  # 5 kept + 5 overflow, none waits
    for conn in held:
        conn.execute(text("SELECT 1"))
    assert engine.pool.size() == 5 and engine.pool.overflow() == 5
    for conn in held:
        conn.close()


def test_the_cloud_sql_engine_takes_the_same_bounds(
    pool_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Cloud SQL Python Connector path (built, not connected: the connector needs
    credentials to start, a service account key of no project here)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    credentials = tmp_path / "sa.json"
    credentials.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "k",
                "private_key": pem,
                "client_email": "seatlease-acquire@p.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
    monkeypatch.setenv("CLOUD_SQL_INSTANCE", "p:europe-west1:seatlease-dev")
    monkeypatch.setenv("DB_NAME", "seatlease")
    monkeypatch.setenv("DB_USER", "seatlease")
    monkeypatch.setenv("DB_PASSWORD", "x")
    pool_env.setenv("DB_POOL_SIZE", "3")
    pool_env.setenv("DB_MAX_OVERFLOW", "0")
    engine = db.get_engine()
    assert engine.pool.size() == 3
    assert engine.pool._max_overflow == 0  # no public accessor for the bound itself


def test_a_call_that_finds_the_pool_busy_answers_backend_unavailable(pool_env) -> None:
    """DB_POOL_TIMEOUT seconds of waiting, then 503 (BackendUnavailable), not a 500."""
    from seatlease.errors import BackendUnavailable
    from seatlease.records import store

    pool_env.setenv("DB_POOL_SIZE", "1")
    pool_env.setenv("DB_MAX_OVERFLOW", "0")
    pool_env.setenv("DB_POOL_TIMEOUT", "1")
    engine = db.get_engine()
    with engine.connect() as busy:
        busy.execute(text("SELECT 1"))
        with pytest.raises(BackendUnavailable), store.transaction(engine) as conn:
            conn.execute(text("SELECT 1"))
    with store.transaction(engine) as conn:  # free again
        assert conn.execute(text("SELECT 1")).scalar_one() == 1
