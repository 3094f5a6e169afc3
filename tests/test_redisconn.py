"""The Redis connection as Memorystore needs it: ``rediss://`` with in-transit encryption
(the server CA given as PEM text or a file), AUTH from ``REDIS_PASSWORD``, and retries
when the server drops connections (as it does when it rotates its certificate)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from redis.exceptions import AuthenticationError, ConnectionError

from shared import redisconn
from shared.engine import LicenseConfig, SeatEngine
from shared.localprocs import Proc, _spawn, free_port, port_open, wait_until


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_redis():
    """A private redis-server speaking only TLS, with AUTH, and a CA that signed it."""
    work = Path(tempfile.mkdtemp(prefix="seatlease-tls-"))
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=seatlease-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        cwd=work,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        cwd=work,
    )
    (work / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem",
             cwd=work)  # fmt: skip
    port = free_port()
    proc = _spawn(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "server.pem", "--tls-key-file", "server.key",
         "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no",
         "--requirepass", "s3cret-auth", "--save", "", "--dir", str(work)],
        work / "redis.log",
        cwd=str(work),
    )  # fmt: skip
    handle = Proc([proc], str(work), f"rediss://127.0.0.1:{port}/0")
    wait_until(lambda: port_open(port), 10, "TLS redis-server")
    yield handle, (work / "ca.pem")
    handle.stop()


def test_rediss_with_ca_pem_text_and_auth_runs_the_seat_scripts(tls_redis, monkeypatch):
    server, ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", ca.read_text())
    client = redisconn.connect(server.url)
    engine = SeatEngine(client, lambda _t, _l: LicenseConfig(seats=1))
    assert engine.acquire("t", "lic", "c1").created
    client.close()


def test_rediss_with_ca_file_path(tls_redis, monkeypatch):
    server, ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", str(ca))
    assert redisconn.connect(server.url).ping()


def test_wrong_ca_or_password_fails_clearly(tls_redis, monkeypatch):
    server, _ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.delenv("REDIS_CA_CERT", raising=False)  # system CAs do not know ours
    with pytest.raises(ConnectionError):
        redisconn.connect(server.url).ping()
    monkeypatch.setenv("REDIS_CA_CERT", str(_ca))
    monkeypatch.setenv("REDIS_PASSWORD", "wrong")
    with pytest.raises((AuthenticationError, ConnectionError)):
        redisconn.connect(server.url).ping()


def test_dropped_connections_are_retried(redis_server):
    """Memorystore closes connections during certificate rotation and failover: the next
    call reconnects and succeeds without the caller noticing."""
    client = redisconn.connect(redis_server.url)
    engine = SeatEngine(client, lambda _t, _l: LicenseConfig(seats=5))
    client.flushall()
    engine.acquire("t", "lic", "c1")
    admin = redisconn.connect(redis_server.url)
    admin.client_kill_filter(_type="normal", skipme=True)  # drop every other connection
    assert engine.acquire("t", "lic", "c2").created
    client.close()
    admin.close()


def test_get_redis_reuses_one_client_per_url(redis_url):
    assert redisconn.get_redis() is redisconn.get_redis()
