"""The Redis client, built once per process from the environment and reused.

``REDIS_URL``: ``redis://host:port/0`` locally, ``rediss://host:port/0`` on Memorystore with
in-transit encryption. ``REDIS_PASSWORD`` is the AUTH string (Secret Manager in the
cloud); a password inside the URL works too. ``REDIS_CA_CERT`` is the instance's server
CA as PEM text or a path to a PEM file; it may hold several certificates (Terraform
passes every one of ``server_ca_certs``, so that a CA rotation finds the new CA already
trusted). ``REDIS_CLUSTER=1`` (or a ``redis+cluster://`` / ``rediss+cluster://`` URL)
selects redis-py's cluster client for Memorystore for Redis Cluster. ``REDIS_IAM_AUTH=1``:
the cluster uses IAM authentication, and every new connection authenticates with an
OAuth access token of the process's credentials (``AccessTokenCredentials``).

TLS verification (``rediss://``) is explicit, see ``tls_options``: the certificate chain
is always verified; the hostname check is off when ``REDIS_CA_CERT`` pins the
instance's own CA, and on (redis-py's default) when the system CAs are used.

Connections retry with exponential backoff and jitter: Memorystore drops TLS
connections when it rotates its certificate, and a failover takes seconds. Every seat
script is safe to retry (see shared/seatlease/seats/engine.py).
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.credentials import CredentialProvider
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

DEFAULT_URL = "redis://127.0.0.1:6379/0"
_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _ca_data(value: str | None) -> str | None:
    if not value:
        return None
    if "-----BEGIN" in value:
        return value
    return Path(value).read_text()


def tls_options(url: str) -> dict[str, Any]:
    """redis-py TLS arguments for ``url`` (none for a plain ``redis://`` URL).

    Memorystore for Redis names its server in the certificate's subject CN by the
    instance's IP address and puts no subjectAltName in it, while REDIS_URL holds that IP.
    OpenSSL matches an IP only against iPAddress SAN entries, so redis-py's hostname check
    (on by default since redis-py 6) fails every connection. With ``REDIS_CA_CERT`` the
    check is therefore turned off and trust is pinned to the instance's own CA instead:
    the chain must verify against that CA alone (no system CAs), so impersonating the
    server takes a certificate signed by that per-instance CA, i.e. its private key,
    which Google holds. Without ``REDIS_CA_CERT`` the system CAs are trusted, and then
    only the hostname check ties the certificate to this server: it stays on.
    """
    if not url.startswith("rediss://"):
        return {}
    options: dict[str, Any] = {"ssl_cert_reqs": "required"}
    ca = _ca_data(os.environ.get("REDIS_CA_CERT"))
    if ca:
        if "-----BEGIN CERTIFICATE-----" not in ca:
            raise ValueError("REDIS_CA_CERT holds no PEM certificate")
        options["ssl_ca_data"] = ca
        options["ssl_check_hostname"] = False
    else:
        options["ssl_check_hostname"] = True
    return options


class AccessTokenCredentials(CredentialProvider):
    """What a new connection sends as ``AUTH`` to a Memorystore for Redis Cluster with IAM
    authentication: an OAuth access token of ``credentials`` (default: the process's,
    ``google.auth.default()``: the function's service account, which holds
    roles/redis.dbConnectionUser).

    Memorystore checks the token when a connection authenticates and keeps an
    authenticated connection open after the token expires (an hour after it was
    issued), so a token is needed per new connection only. redis-py asks this provider
    on every new connection (cluster nodes included): it answers with the cached token
    while that has more than ``margin`` seconds left, and fetches a new one otherwise, so
    that a connection opened just before the expiry still authenticates.
    """

    SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)

    def __init__(self, credentials: Any = None, margin: float = 300.0) -> None:
        self._credentials = credentials
        self._margin = margin
        self._lock = threading.Lock()

    def get_credentials(self) -> tuple[str]:
        with self._lock:
            if self._credentials is None:
                import google.auth

                self._credentials, _ = google.auth.default(scopes=list(self.SCOPES))
            creds = self._credentials
            if not creds.token or self._expires_soon(creds.expiry):
                from google.auth.transport.requests import Request

                creds.refresh(Request())
            return (creds.token,)

    def _expires_soon(self, expiry: datetime | None) -> bool:
        if expiry is None:  # a token without an expiry (not issued by Google's STS)
            return False
        # google-auth keeps expiry as a naive UTC datetime
        now = datetime.now(UTC).replace(tzinfo=None)
        return (expiry - now).total_seconds() < self._margin


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].endswith("+cluster") or os.environ.get("REDIS_CLUSTER") == "1"


def connect(url: str | None = None, **overrides: Any) -> Any:
    """A new client for ``url`` (default ``REDIS_URL``); prefer ``get_redis()``."""
    url = url or os.environ.get("REDIS_URL", DEFAULT_URL)
    cluster = is_cluster_url(url)
    url = url.replace("+cluster://", "://", 1)
    kwargs: dict[str, Any] = {
        "socket_timeout": float(os.environ.get("REDIS_SOCKET_TIMEOUT", "2")),
        "socket_connect_timeout": float(os.environ.get("REDIS_CONNECT_TIMEOUT", "2")),
        "socket_keepalive": True,
        "health_check_interval": 30,
        "decode_responses": True,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=3),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
    }
    if password := os.environ.get("REDIS_PASSWORD"):
        kwargs["password"] = password
    if os.environ.get("REDIS_IAM_AUTH") == "1":
        if "password" in kwargs:
            raise ValueError("REDIS_IAM_AUTH=1 and REDIS_PASSWORD: a cluster has one or the other")
        kwargs["credential_provider"] = AccessTokenCredentials()
    kwargs.update(tls_options(url))
    kwargs.update(overrides)
    if cluster:
        from redis.cluster import RedisCluster

        kwargs.pop("health_check_interval", None)
        kwargs.pop("retry_on_error", None)
        return RedisCluster.from_url(url, **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def get_redis() -> Any:
    """The process-wide client for ``REDIS_URL`` (its pool lives across invocations)."""
    url = os.environ.get("REDIS_URL", DEFAULT_URL)
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url) or connect(url)
            _clients[url] = client
    return client


def reset() -> None:
    """Forget cached clients (tests that point ``REDIS_URL`` elsewhere)."""
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()
