"""The Redis connection as Memorystore needs it: ``rediss://`` with in-transit encryption
(the server CA given as PEM text or a file), AUTH from ``REDIS_PASSWORD``, and retries
when the server drops connections (as it does when it rotates its certificate).

The TLS server here presents a certificate shaped like Memorystore for Redis's: the
instance's IP address as the subject CN and no subjectAltName at all, signed by a
per-instance CA. With such a certificate, redis-py's default hostname check (on since
redis-py 6) fails every connection to ``rediss://IP``; the tests show that, and that
the configuration redisconn builds (chain pinned to REDIS_CA_CERT, hostname check off)
connects, accepts a CA bundle holding several CAs (CA rotation), and refuses a server
whose certificate another CA signed."""

from __future__ import annotations

import ssl
import subprocess
import tempfile
from pathlib import Path

import pytest
import redis
from redis.exceptions import AuthenticationError, ConnectionError

from seatlease.licenses import LicenseConfig
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease_cli.procs import Proc, free_port, port_open, spawn, wait_until


def _openssl(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def _ca(work: Path, name: str) -> None:
    """A self-signed CA: NAME.key, NAME.pem."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", f"/O=seatlease tests/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", cwd=work)  # fmt: skip


def _memorystore_shaped_cert(work: Path, ca: str, name: str) -> None:
    """NAME.pem/NAME.key signed by CA: subject CN = the IP, no extensions (no SAN)."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=seatlease tests/CN=127.0.0.1",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=work)  # fmt: skip
    # `x509 -req` without -extfile/-copy_extensions writes no extensions at all.
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", cwd=work)  # fmt: skip


def _tls_server(work: Path, cert: str) -> tuple[Proc, int]:
    port = free_port()
    proc = spawn(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", f"{cert}.pem", "--tls-key-file", f"{cert}.key",
         "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no",
         "--requirepass", "s3cret-auth", "--save", "", "--dir", str(work)],
        work / f"redis-{cert}.log",
        cwd=str(work),
    )  # fmt: skip
    handle = Proc([proc], str(work), f"rediss://127.0.0.1:{port}/0")
    wait_until(lambda: port_open(port), 10, "TLS redis-server")
    return handle, port


@pytest.fixture(scope="module")
def tls_work():
    """CA "ca" (the instance's), CA "other", and a server certificate from each."""
    work = Path(tempfile.mkdtemp(prefix="seatlease-tls-"))
    _ca(work, "ca")
    _ca(work, "other")
    _memorystore_shaped_cert(work, "ca", "server")
    _memorystore_shaped_cert(work, "other", "impostor")
    return work


@pytest.fixture(scope="module")
def tls_redis(tls_work):
    """A private redis-server speaking only TLS, with AUTH, and the CA that signed it."""
    handle, _port = _tls_server(tls_work, "server")
    yield handle, (tls_work / "ca.pem")
    handle.stop()


@pytest.fixture(scope="module")
def impostor_redis(tls_work):
    """The same server, but its certificate comes from another CA."""
    handle, _port = _tls_server(tls_work, "impostor")
    yield handle
    handle.stop()


def test_server_certificate_is_shaped_like_memorystores(tls_work):
    text = _openssl("x509", "-in", "server.pem", "-noout", "-text", cwd=tls_work)
    assert "CN=127.0.0.1" in text.replace(" = ", "=")
    assert "Subject Alternative Name" not in text and "X509v3" not in text


def test_redis_py_default_hostname_check_refuses_such_a_certificate(tls_redis):
    """Why redisconn sets ssl_check_hostname explicitly: the default cannot connect."""
    server, ca = tls_redis
    client = redis.Redis.from_url(server.url, password="s3cret-auth", ssl_ca_certs=str(ca))
    with pytest.raises(ConnectionError, match=r"(?i)mismatch|hostname|IP address"):
        client.ping()


def test_tls_options_pin_the_ca_and_say_the_hostname_check(monkeypatch, tls_redis):
    _server, ca = tls_redis
    monkeypatch.delenv("REDIS_CA_CERT", raising=False)
    assert redisconn.tls_options("redis://127.0.0.1:6379/0") == {}
    assert redisconn.tls_options("rediss://h:6378/0") == {
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
    }
    monkeypatch.setenv("REDIS_CA_CERT", ca.read_text())
    assert redisconn.tls_options("rediss://10.0.0.3:6378/0") == {
        "ssl_cert_reqs": "required",
        "ssl_ca_data": ca.read_text(),
        "ssl_check_hostname": False,
    }
    monkeypatch.setenv("REDIS_CA_CERT", "not a PEM")
    with pytest.raises((ValueError, OSError)):
        redisconn.tls_options("rediss://10.0.0.3:6378/0")


def test_rediss_with_ca_pem_text_and_auth_runs_the_seat_scripts(tls_redis, monkeypatch):
    server, ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", ca.read_text())
    client = redisconn.connect(server.url)
    engine = SeatEngine(client, lambda _t, _l: LicenseConfig(seats=1))
    assert engine.acquire(SeatRequest("t", "lic", "c1")).created
    client.close()


def test_rediss_with_ca_file_path(tls_redis, monkeypatch):
    server, ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", str(ca))
    assert redisconn.connect(server.url).ping()


@pytest.mark.parametrize("order", ["rotated-first", "current-first"])
def test_several_cas_in_redis_ca_cert_all_count(tls_redis, tls_work, monkeypatch, order):
    """During a CA rotation server_ca_certs lists two CAs; the server may use either."""
    server, ca = tls_redis
    pems = [(tls_work / "other.pem").read_text(), ca.read_text()]
    if order == "current-first":
        pems.reverse()
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", "\n".join(pems))
    assert redisconn.connect(server.url).ping()


def test_a_certificate_from_another_ca_is_refused(impostor_redis, tls_redis, monkeypatch):
    """With the hostname check off, the pinned CA is what keeps an impostor out."""
    _server, ca = tls_redis
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-auth")
    monkeypatch.setenv("REDIS_CA_CERT", ca.read_text())
    with pytest.raises(ConnectionError) as err:
        redisconn.connect(impostor_redis.url).ping()
    assert isinstance(err.value.__cause__, ssl.SSLError) or "certificate verify failed" in str(
        err.value
    )


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
    engine.acquire(SeatRequest("t", "lic", "c1"))
    admin = redisconn.connect(redis_server.url)
    admin.client_kill_filter(_type="normal", skipme=True)  # drop every other connection
    assert engine.acquire(SeatRequest("t", "lic", "c2")).created
    client.close()
    admin.close()


def test_get_redis_reuses_one_client_per_url(redis_url):
    assert redisconn.get_redis() is redisconn.get_redis()
