"""A real webhook receiver for the tests: an HTTP server on 127.0.0.1 in a thread of the
test process (http.server), each path answering a script of statuses (then 200) after a
delay of its own, recording every request: headers, body, when it came and when it was
answered, and how many were in the handler at once (per path)."""

from __future__ import annotations

import ssl
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    came: float  # time.monotonic()
    answered: float = 0.0
    status: int = 0


@dataclass
class Receiver:
    port: int = 0
    requests: list[Received] = field(default_factory=list)
    statuses: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    delays: dict[str, float] = field(default_factory=dict)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    active: Counter = field(default_factory=Counter)
    most_active: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int, seconds: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [r for r in self.at(path) if r.answered]
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{path}: {len(self.at(path))} requests, not {count}")


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path
            seen = Received(path, {k.lower(): v for k, v in self.headers.items()}, body,
                            time.monotonic())  # fmt: skip
            with receiver.lock:
                receiver.requests.append(seen)
                receiver.active[path] += 1
                receiver.most_active[path] = max(receiver.most_active[path], receiver.active[path])
                script = receiver.statuses[path]
                status = script.pop(0) if script else 200
            try:
                time.sleep(receiver.delays.get(path, 0.0))
                self.send_response(status)
                for name, value in receiver.headers.get(path, {}).items():
                    self.send_header(name, value)
                answer = b"nope" if status >= 300 else b""
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except OSError:
                pass  # the sender gave up (its timeout): nothing to answer
            finally:
                with receiver.lock:
                    receiver.active[path] -= 1
                    seen.answered, seen.status = time.monotonic(), status

        def log_message(self, *_args: object) -> None:
            pass

    return Handler


@contextmanager
def receiving(tls: tuple[str, str] | None = None) -> Iterator[Receiver]:
    """A receiver; with ``tls`` (certificate and key files) it speaks HTTPS."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
