"""Memorystore for Redis Cluster's IAM authentication as the functions use it
(``REDIS_IAM_AUTH=1``, redisconn.AccessTokenCredentials; issue 53, item 4).

A private redis-server plays Memorystore's side: its default user's password is the one
access token it accepts now, changed with ``ACL SETUSER`` as tokens come and go, and a
connection authenticated earlier stays open when its token is no longer accepted (as
Memorystore keeps a connection that authenticated with a token that since expired).
Google's token service is the one stand-in: ``TokenService`` issues numbered tokens with
an expiry, as google-auth credentials do (``token``, ``expiry``, ``refresh``).
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from redis.exceptions import AuthenticationError

from seatlease.seats import redisconn
from seatlease_cli.procs import Proc, free_port, port_open, spawn, wait_until


class TokenService:
    """google-auth credentials' interface: ``token``, ``expiry`` (naive UTC), ``refresh``."""

    def __init__(self, lifetime: timedelta = timedelta(hours=1)) -> None:
        self.lifetime = lifetime
        self.issued = 0
        self.token: str | None = None
        self.expiry: datetime | None = None

    def refresh(self, request) -> None:
        assert request is not None  # a google.auth transport Request, as google-auth gets
        self.issued += 1
        self.token = f"token-{self.issued}"
        self.expiry = datetime.now(UTC).replace(tzinfo=None) + self.lifetime


@pytest.fixture(scope="module")
def auth_redis():
    work = Path(tempfile.mkdtemp(prefix="seatlease-iam-"))
    port = free_port()
    proc = spawn(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--dir", str(work)],
        work / "redis.log",
        cwd=str(work),
    )  # fmt: skip
    handle = Proc([proc], str(work), f"redis://127.0.0.1:{port}/0")
    wait_until(lambda: port_open(port), 10, "redis-server")
    # The admin connection authenticated before any password: it stays open throughout.
    admin = redis.Redis(port=port, decode_responses=True)
    yield handle, admin
    admin.close()
    handle.stop()


def accept_only(admin: redis.Redis, token: str) -> None:
    admin.execute_command("ACL", "SETUSER", "default", "on", "resetpass", f">{token}")


def test_a_new_connection_authenticates_with_a_fresh_token(auth_redis):
    handle, admin = auth_redis
    service = TokenService()
    provider = redisconn.AccessTokenCredentials(service)
    accept_only(admin, "token-1")
    client = redisconn.connect(handle.url, credential_provider=provider)
    try:
        assert client.ping() is True
        assert service.issued == 1
        # Another connection while the token has more than the margin left: the same one.
        other = redisconn.connect(handle.url, credential_provider=provider)
        assert other.set("k", "v") is True
        other.close()
        assert service.issued == 1
    finally:
        client.close()


def test_a_token_about_to_expire_is_replaced_and_old_connections_stay(auth_redis):
    handle, admin = auth_redis
    service = TokenService(lifetime=timedelta(seconds=60))  # inside the 300 s margin
    provider = redisconn.AccessTokenCredentials(service)
    accept_only(admin, "token-1")
    first = redis.Redis.from_url(handle.url, credential_provider=provider)
    assert first.ping() is True and service.issued == 1
    # The service now accepts only a newer token; the open connection keeps working.
    accept_only(admin, "token-2")
    assert first.ping() is True
    second = redis.Redis.from_url(handle.url, credential_provider=provider)
    assert second.ping() is True
    assert service.issued == 2 and service.token == "token-2"
    first.close()
    second.close()


def test_a_token_the_server_refuses_fails_the_connection(auth_redis):
    handle, admin = auth_redis
    accept_only(admin, "some-other-token")
    provider = redisconn.AccessTokenCredentials(TokenService())
    client = redis.Redis.from_url(handle.url, credential_provider=provider)
    with pytest.raises(AuthenticationError):
        client.ping()
    client.close()


def test_redis_iam_auth_selects_the_token_provider(monkeypatch):
    monkeypatch.setenv("REDIS_IAM_AUTH", "1")
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    client = redisconn.connect("redis://127.0.0.1:1/0")  # no connection is opened here
    provider = client.connection_pool.connection_kwargs["credential_provider"]
    assert isinstance(provider, redisconn.AccessTokenCredentials)
    client.close()
    monkeypatch.setenv("REDIS_PASSWORD", "an-auth-string")
    with pytest.raises(ValueError, match="one or the other"):
        redisconn.connect("redis://127.0.0.1:1/0")
    monkeypatch.delenv("REDIS_IAM_AUTH")
    client = redisconn.connect("redis://127.0.0.1:1/0")
    assert "credential_provider" not in client.connection_pool.connection_kwargs
    client.close()


def test_a_token_without_an_expiry_is_kept():
    service = TokenService()
    service.token, service.expiry = "static", None
    provider = redisconn.AccessTokenCredentials(service)
    assert provider.get_credentials() == ("static",)
    assert service.issued == 0
