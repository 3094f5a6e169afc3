"""The Python client's retries carry one request id, so a lost reply changes nothing.

Between the client and the real functions (served over HTTP on loopback, real Redis and
PostgreSQL) sits a small TCP proxy that forwards each request and, for the first call
to a chosen function, drops the reply: the call reached the server and took effect, the
client saw a broken connection. The client's retry must get that first call's answer.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import serving

from seatlease.api import runtime, tokens
from seatlease.events.pubsub import outbox_events
from seatlease.records import store
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis
from seatlease_cli import devserver
from seatlease_client import SeatClient


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


class ReplyDropper:
    """Forwards HTTP/1.1 requests to ``upstream``; drops the first reply to ``path``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.drop_path: bytes | None = None
        self.replies: list[tuple[bytes, bytes]] = []  # (path, status line) as forwarded
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            request = _read_request(conn)
            path = request.split(b" ", 2)[1]
            # One request per upstream connection: the reply ends when upstream closes.
            request = request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
            with socket.create_connection(("127.0.0.1", self.upstream_port)) as up:
                up.sendall(request)
                reply = b""
                while chunk := up.recv(65536):
                    reply += chunk
            self.replies.append((path, reply.split(b"\r\n", 1)[0]))
            if path == self.drop_path:
                self.drop_path = None
                return  # the call took effect; its answer never reaches the client
            conn.sendall(reply)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy(redis_url: str, database_url: str) -> Iterator[ReplyDropper]:
    with serving(devserver.create_app(["acquire", "release", "keys"])) as url:
        dropper = ReplyDropper(int(url.rsplit(":", 1)[1]))
        yield dropper
        dropper.close()


@pytest.fixture
def client(proxy: ReplyDropper) -> SeatClient:
    store.create_tenant("acme")
    key = store.create_api_key("acme").key
    store.create_license("acme", "cad", seats=2, lease_seconds=60)
    runtime.refresh_license_cache("acme", "cad")
    pinned = tokens.keyring().jwks()["keys"]  # the vendor's keys
    return SeatClient(
        f"http://127.0.0.1:{proxy.port}", key, retries=3, backoff=0.05, pinned_keys=pinned
    )


def _acquired(outbox: list[dict[str, Any]]) -> list[str]:
    return [e["session_id"] for e in outbox if e["type"] == "lease.acquired"]


def test_a_lost_acquire_reply_is_answered_by_the_retry(client, proxy) -> None:
    proxy.drop_path = b"/acquire"
    lease = client.acquire("cad", "pc-1")
    statuses = [status for path, status in proxy.replies if path == b"/acquire"]
    # Both attempts were answered 201 (created) by the server: the retry was told what
    # the first attempt did, not "200, you already hold a lease".
    assert statuses == [b"HTTP/1.1 201 CREATED"] * 2
    outbox = outbox_events(get_redis(), LicenseKeys.of("acme", "cad").outbox)
    assert _acquired(outbox) == [lease["session_id"]]


def test_a_lost_release_reply_is_answered_by_the_retry(client, proxy) -> None:
    lease = client.acquire("cad", "pc-1")
    proxy.drop_path = b"/release"
    answer = client.release("cad", lease["session_id"])
    assert (answer["released"], answer["seats_used"]) == (True, 0)
    assert [s for p, s in proxy.replies if p == b"/release"] == [b"HTTP/1.1 200 OK"] * 2
