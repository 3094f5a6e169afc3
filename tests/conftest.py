"""Real components for the tests: a private redis-server on a free port, a local
three-node Redis Cluster, and a private PostgreSQL database. Nothing is mocked. A missing
component fails the run loudly; it is never skipped.

PostgreSQL: the server at ``SEATLEASE_TEST_PG`` (default the machine's
``postgresql+pg8000://postgres@127.0.0.1:5432/postgres``) gets a fresh database per test
session; if that server is not reachable, a private one is started with initdb.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from client_harness import ClientStack, client_stack
from http_support import Tenant, new_license, new_tenant
from procs import ShiftedClock, start_postgres, start_redis_cluster, start_shifted_redis
from slowmarks import SLOW_FIXTURES, SLOW_MODULES, SLOW_TESTS
from sqlalchemy import create_engine, text

from seatlease import clock, logs
from seatlease.api import auth, tenantlicenses, tenantlimits
from seatlease.records import db, store
from seatlease.seats import redisconn
from seatlease.seats.engine import LicenseConfig, SeatEngine
from seatlease_cli.procs import Proc, port_open, start_pubsub_emulator, start_redis

PG_ADMIN_URL = os.environ.get(
    "SEATLEASE_TEST_PG", "postgresql+pg8000://postgres@127.0.0.1:5432/postgres"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``slow`` marker on the tests tests/slowmarks.py declares, and on every test
    that uses the Pub/Sub emulator or PostgreSQL (so ``-m "not slow"`` is the fast inner
    loop of the pure and Redis-only tests)."""
    here = Path(__file__).parent
    for item in items:
        module = item.path.relative_to(here).as_posix()
        name = getattr(item, "originalname", item.name)
        if (
            module in SLOW_MODULES
            or f"{module}::{name}" in SLOW_TESTS
            or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def json_logs_on_stdout() -> None:
    """Every test starts with the runtime's own logging set-up (JSON lines on stdout at
    INFO), whatever an earlier test's CLI run configured."""
    logs.configure("INFO", stream="stdout")


@pytest.fixture
def restore_environment() -> Iterator[None]:
    """For tests of the local stack, which configures its own process through os.environ
    (REDIS_URL, LOG_LEVEL, PUBSUB_EMULATOR_HOST, ...): the environment put back after,
    and the clients made from it forgotten."""
    from seatlease.events import reaper

    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
    reaper.reset()
    redisconn.reset()
    db.reset()


@pytest.fixture(scope="session", autouse=True)
def signing_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The functions sign lease tokens with a key of this folder (as `make run` does),
    for every test and every process a test starts; tests of rotation use their own."""
    from seatlease.api import signingkeys, tokens

    folder = tmp_path_factory.mktemp("signing-keys")
    signingkeys.next_key_file(folder)
    saved = {name: os.environ.get(name) for name in ("SIGNING_KEYS_DIR", "SEATLEASE_ISSUER")}
    os.environ["SIGNING_KEYS_DIR"] = str(folder)
    os.environ["SEATLEASE_ISSUER"] = "http://seatlease.test"
    tokens.reset()
    yield str(folder)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tokens.reset()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Proc]:
    handle = start_redis()
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def shifted_redis() -> Iterator[tuple[Proc, ShiftedClock]]:
    """A private redis-server whose wall clock the tests move forward (tests/procs.py)."""
    handle, clock = start_shifted_redis()
    yield handle, clock
    handle.stop()


class Timeline:
    """A seat engine on the shifted-clock redis-server, flushed, and its clock:
    ``timeline.advance(seconds)`` is time passing for Redis (deadlines, terms, TTLs)."""

    def __init__(self, engine: SeatEngine, clock: ShiftedClock) -> None:
        self.engine, self.clock = engine, clock
        self.redis = engine.redis

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def now_ms(self) -> int:
        return self.engine.server_time_ms()


@pytest.fixture
def timeline(shifted_redis, configs: ConfigTable) -> Iterator[Timeline]:
    handle, clock = shifted_redis
    client = redisconn.connect(handle.url)
    client.flushall()
    yield Timeline(SeatEngine(client, configs), clock)
    client.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Proc]:
    handle = start_redis_cluster(3)
    yield handle
    handle.stop()


@pytest.fixture
def redis_url(redis_server: Proc, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """REDIS_URL pointing at the private server, flushed before each test."""
    client = redisconn.connect(redis_server.url)
    client.flushall()
    client.close()
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    redisconn.reset()
    tenantlicenses.forget_all()  # this process's copies of what Redis held
    yield redis_server.url
    redisconn.reset()


@pytest.fixture
def redis_client(redis_url: str):
    client = redisconn.get_redis()
    yield client


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    host_port = PG_ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
    host, _, port = host_port.partition(":")
    if port_open(int(port or 5432), host):
        yield PG_ADMIN_URL
        return
    handle = start_postgres()
    yield handle.url
    handle.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A private, migrated database on the real PostgreSQL server."""
    name = f"seatlease_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = postgres_admin_url.rsplit("/", 1)[0] + "/" + name

    engine = db.make_engine(url)
    store.upgrade(engine)
    engine.dispose()
    yield url
    db.reset()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def database_url(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """DATABASE_URL set to the private database, emptied before each test."""
    monkeypatch.setenv("DATABASE_URL", postgres_url)
    monkeypatch.delenv("CLOUD_SQL_INSTANCE", raising=False)
    db.reset()
    with db.get_engine().begin() as conn:
        conn.execute(
            text(
                "TRUNCATE lease_events, usage_rollups, usage_minute_rollups, "
                "usage_client_rollups, usage_leases, usage_refusals, usage_queue_waits, "
                "audit_retention, portal_actions, seat_shards, licenses, api_keys, tenants, "
                "webhook_attempts, webhook_deliveries, webhook_endpoints, license_alerts, "
                "license_alert_state RESTART IDENTITY"
            )
        )
    yield postgres_url
    db.reset()


@pytest.fixture
def acme(redis_url: str, database_url: str) -> Iterator[Tenant]:
    """Tenant ``acme`` with one API key, on the private Redis and the test database (no
    license: each test makes the ones it needs with ``http_support.new_license``)."""
    auth.forget_all()
    tenantlimits.forget_all()
    yield new_tenant("acme")
    auth.forget_all()
    tenantlimits.forget_all()


@pytest.fixture
def acme_cad(acme: Tenant) -> Tenant:
    """``acme`` with license ``cad`` of 2 seats."""
    new_license(acme, "cad", seats=2)
    return acme


@pytest.fixture
def api_key(database_url: str) -> str:
    """An API key of tenant ``acme`` made straight in the store: no license, no cached
    copies forgotten (the client tests' tenant, which they name ``TENANT``)."""
    store.create_tenant("acme")
    return store.create_api_key("acme").key


@pytest.fixture
def fixed_now(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> datetime:
    """``clock.now()`` held at the test module's ``NOW``."""
    now: datetime = request.module.NOW
    monkeypatch.setattr(clock, "now", lambda: now)
    return now


class ConfigTable:
    """License configs for engine tests (the engine reads them on a cache miss)."""

    def __init__(self) -> None:
        self.configs: dict[tuple[str, str], LicenseConfig] = {}

    def __call__(self, tenant_id: str, license_id: str) -> LicenseConfig | None:
        return self.configs.get((tenant_id, license_id))

    def add(self, tenant_id: str, license_id: str, **kwargs) -> LicenseConfig:
        cfg = LicenseConfig(**kwargs)
        self.configs[(tenant_id, license_id)] = cfg
        return cfg


@pytest.fixture
def configs() -> ConfigTable:
    return ConfigTable()


@pytest.fixture
def engine(redis_client, configs: ConfigTable) -> SeatEngine:
    return SeatEngine(redis_client, configs)


# -- Pub/Sub emulator ---------------------------------------------------------------


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[Proc]:
    """The real Pub/Sub emulator (gcloud beta emulators pubsub start), once per session."""
    handle = start_pubsub_emulator("seatlease-test")
    yield handle
    handle.stop()


class PubSubWiring:
    """A fresh topic and pull subscription on the emulator, for one test."""

    def __init__(self, host: str, project: str, topic: str) -> None:
        from google.cloud import pubsub_v1

        self.project, self.topic = project, topic
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()
        self.topic_path = self.publisher.topic_path(project, topic)
        self.subscription = self.subscriber.subscription_path(project, f"{topic}-sub")
        self.publisher.create_topic(name=self.topic_path)
        self.subscriber.create_subscription(name=self.subscription, topic=self.topic_path)

    def pull(self, max_messages: int = 1000, wait: float = 10.0) -> list:
        """Every message available now, acknowledged. Waits up to ``wait`` seconds for
        the first one, then stops at the first empty answer."""
        import time

        messages: list = []
        deadline = time.monotonic() + wait
        while True:
            resp = self.subscriber.pull(
                request={
                    "subscription": self.subscription,
                    "max_messages": max_messages,
                    "return_immediately": True,
                },
                timeout=10,
            )
            if not resp.received_messages:
                if messages or time.monotonic() > deadline:
                    return messages
                time.sleep(0.1)
                continue
            messages += [m.message for m in resp.received_messages]
            self.subscriber.acknowledge(
                subscription=self.subscription,
                ack_ids=[m.ack_id for m in resp.received_messages],
            )


@pytest.fixture
def pubsub(pubsub_emulator: Proc, monkeypatch: pytest.MonkeyPatch) -> PubSubWiring:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "seatlease-test")
    topic = f"seat-events-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PUBSUB_TOPIC", topic)
    import seatlease.events.reaper

    monkeypatch.setattr(seatlease.events.reaper, "_publisher", None)
    return PubSubWiring(pubsub_emulator.url, "seatlease-test", topic)


@pytest.fixture(params=["single", "cluster"])
def seat_engine(request: pytest.FixtureRequest, configs: ConfigTable) -> Iterator[SeatEngine]:
    """A SeatEngine on a flushed private redis-server, or on the local Redis Cluster."""
    server = request.getfixturevalue(
        "redis_server" if request.param == "single" else "redis_cluster"
    )
    client = redisconn.connect(server.url)
    client.flushall()
    yield SeatEngine(client, configs)
    client.close()


@pytest.fixture
def client_functions(redis_url: str, database_url: str) -> Iterator[ClientStack]:
    """The functions served over HTTP on this test's Redis and database, with the test
    controls the Node and Go clients' suites drive (tests/client_harness.py)."""
    with client_stack() as served:
        yield served


@pytest.fixture(params=["postgres", "sqlite"])
def database(request, tmp_path, monkeypatch) -> Iterator[str]:
    """The usage reports' two databases: DATABASE_URL on the private PostgreSQL database
    (emptied) or a new SQLite file."""
    if request.param == "postgres":
        yield request.getfixturevalue("database_url")
        return
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'usage.db'}")
    db.reset()
    store.upgrade()
    yield request.param
    db.reset()


@pytest.fixture
def migration_urls(postgres_admin_url: str, tmp_path) -> Iterator[list[str]]:
    """Two empty databases for a migration test, PostgreSQL's and SQLite's (the local
    stack's), as URLs: nothing migrated yet. The PostgreSQL one is dropped afterwards."""
    name = f"seatlease_mig_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield [postgres_admin_url.rsplit("/", 1)[0] + "/" + name, f"sqlite:///{tmp_path / 'm.db'}"]
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def stack(database_url, redis_url, monkeypatch):
    """The operator's tools (the admin function, the CLI) on this test's database and
    Redis: no SEATLEASE_ADMIN_URL (the CLI works in-process) and no API key cached in the
    process before or after. (A test module may define its own ``stack``.)"""
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    auth.forget_all()
    yield
    auth.forget_all()
