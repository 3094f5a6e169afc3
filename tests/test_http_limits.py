"""The HTTP boundary's limits on real servers, not Flask's test client: the functions
served by ``seatlease_cli.devserver.create_app`` on werkzeug (a thread of this process)
and under gunicorn (a subprocess: gthread, as Cloud Functions gen2 runs
functions-framework), driven with raw sockets, on the real Redis and PostgreSQL.

- A body that ends before its ``Content-Length`` (the client half-closes) is a 400
  ``invalid_request`` logged at WARNING with outcome ``client_disconnected``: never a 500,
  never an ERROR line or a stack trace.
- A request refused on its headers (no or a malformed ``Authorization``, a
  ``Content-Length`` over 16 KiB) is answered while the client still has most of the body
  unsent, and the server does not grow by the body's size; a chunked body is capped while
  it streams in.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from http_support import Tenant, log_lines, new_license, new_tenant, serving

from seatlease.api.http import MAX_BODY_BYTES
from seatlease_cli import devserver
from seatlease_cli.procs import Proc, free_port, port_open, wait_until

REPO = Path(__file__).resolve().parent.parent
LICENSE = "cad"
FUNCTIONS = ("acquire", "heartbeat", "release", "admin")
SERVED = (*FUNCTIONS, "keys", "portal", "reaper", "audit")
BIG = 32 * 1024 * 1024  # the hostile body
BLOCK = b" " * (64 * 1024)


# -- the servers ---------------------------------------------------------------------


@dataclass
class Server:
    kind: str
    port: int
    pid: int  # the process that handles requests (this one, or gunicorn's worker)
    output: Callable[[], str]  # what the server has logged so far


@pytest.fixture(scope="module")
def werkzeug_app() -> Any:
    return devserver.create_app(list(SERVED))


def _worker_pid(master: int) -> int:
    """gunicorn's one worker: the only child of the arbiter."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0])


@pytest.fixture(scope="module")
def gunicorn_server(
    redis_server: Proc, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """gunicorn with one gthread worker, as functions-framework runs a function in the
    cloud; it points at the same Redis and database the per-test fixtures empty."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn") / "server.log"
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "DATABASE_URL": postgres_url,
        "PYTHONUNBUFFERED": "1",  # each JSON line reaches the file as it is logged
    }
    env.pop("CLOUD_SQL_INSTANCE", None)
    app = f"seatlease_cli.devserver:create_app({list(SERVED)!r})"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
             "--workers", "1", "--worker-class", "gthread", "--threads", "8", app],
            cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: port_open(port) or proc.poll() is not None, 60, "gunicorn")
        assert proc.poll() is None, log_path.read_text()
        wait_until(
            lambda: bool(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()),
            30,
            "gunicorn's worker",
        )
        yield Server("gunicorn", port, _worker_pid(proc.pid), log_path.read_text)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(params=["werkzeug", "gunicorn"])
def server(
    request: pytest.FixtureRequest,
    redis_url: str,
    database_url: str,
    capfd: pytest.CaptureFixture[str],
) -> Iterator[Server]:
    if request.param == "gunicorn":
        shared: Server = request.getfixturevalue("gunicorn_server")
        start = len(shared.output())  # this test's lines only
        yield Server("gunicorn", shared.port, shared.pid, lambda: shared.output()[start:])
        return
    seen: list[str] = []

    def output() -> str:  # this process's stdout and stderr, since the test started
        out, err = capfd.readouterr()
        seen.append(out + err)
        return "".join(seen)

    with serving(request.getfixturevalue("werkzeug_app"), quiet=True) as url:
        yield Server("werkzeug", int(url.rsplit(":", 1)[1]), os.getpid(), output)


@pytest.fixture
def served_acme(server: Server) -> Tenant:
    """Tenant ``acme`` with LICENSE (5 seats, leases of 60 s), made once ``server`` (werkzeug
    or gunicorn) serves this test's Redis and database."""
    tenant = new_tenant("acme")
    new_license(tenant, LICENSE, seats=5, lease_seconds=60)
    return tenant


# -- raw HTTP ------------------------------------------------------------------------


def head(
    function: str,
    *,
    key: str | None = None,
    length: int | None = None,
    chunked: bool = False,
    method: str = "POST",
) -> bytes:
    lines = [f"{method} /{function} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    sent: int  # body bytes the client had sent when the answer came (or it gave up)


def read_answer(
    sock: socket.socket, sent: int, timeout: float = 30, json_only: bool = True
) -> Answer:
    sock.settimeout(timeout)
    response = http.client.HTTPResponse(sock)
    response.begin()
    raw = response.read()
    if not json_only and response.getheader("Content-Type") != "application/json":
        return Answer(response.status, {"content_type": response.getheader("Content-Type")}, sent)
    assert response.getheader("Content-Type") == "application/json", raw[:300]
    return Answer(response.status, json.loads(raw), sent)


def send_until_answered(
    port: int, request_head: bytes, size: int, *, chunked: bool = False
) -> Answer:
    """Send ``request_head`` then up to ``size`` body bytes in 64 KiB pieces, as a careful
    HTTP client does: stop sending as soon as the server has answered (or stopped
    reading), then read the answer."""
    piece = BLOCK if not chunked else f"{len(BLOCK):x}\r\n".encode() + BLOCK + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_head)
        sent = 0
        deadline = time.monotonic() + 60
        sock.settimeout(2)
        while sent < size and time.monotonic() < deadline:
            if select.select([sock], [], [], 0)[0]:
                break  # the answer (or the end of the connection) is here
            try:
                sock.sendall(piece)
            except TimeoutError:
                continue  # the server stopped reading: look for its answer
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(BLOCK)
        else:
            if chunked and sent >= size:
                sock.sendall(b"0\r\n\r\n")
        return read_answer(sock, sent)


def send_truncated(port: int, request_head_: bytes, part: bytes) -> Answer:
    """Headers and the first bytes of the body, then the client half-closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_head_ + part)
        sock.shutdown(socket.SHUT_WR)
        return read_answer(sock, len(part))


def body_for(function: str, session_id: str = "no-such-session") -> bytes:
    if function == "acquire":
        return json.dumps({"license_id": LICENSE, "client_id": "ws-1"}).encode()
    if function == "admin":
        return json.dumps({"action": "status"}).encode()
    return json.dumps({"license_id": LICENSE, "session_id": session_id}).encode()


def assert_error(answer: Answer, status: int, code: str) -> dict[str, Any]:
    assert answer.status == status, answer
    assert answer.body["error"]["code"] == code, answer
    return answer.body["error"]


def lines_of(server: Server, function: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(server.output()) if line.get("function") == function]


def small_request(port: int, function: str, key: str | None) -> Answer:
    """One complete, small request (any answer): it warms up what a first request loads
    (imports, connection pools, threads' memory), which would otherwise show up as growth
    in a measurement."""
    body = body_for(function)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head(function, key=key, length=len(body)) + body)
        return read_answer(sock, len(body))


def concurrently(work: Callable[[str], Answer], functions: list[str]) -> list[Answer]:
    answers: list[Answer] = []
    errors: list[BaseException] = []

    def one(function: str) -> None:
        try:
            answers.append(work(function))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(answers) == len(functions)
    return answers


class PeakRss:
    """The highest resident set size of a process while in use, sampled every 2 ms."""

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.baseline = self.peak = self.read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def read(self) -> int:
        for line in self.status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.read())
            time.sleep(0.002)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.read())

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


# -- a body that ends early ----------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_truncated_body_is_400_logged_as_client_disconnected(
    server: Server, served_acme: Tenant, function: str
) -> None:
    key = None if function == "admin" else served_acme.key
    part = body_for(function)[:20]
    answer = send_truncated(server.port, head(function, key=key, length=1000), part)
    error = assert_error(answer, 400, "invalid_request")
    assert "ended before its Content-Length" in error["message"]

    wait_until(lambda: lines_of(server, function), 10, f"{function}'s log line")
    [line] = lines_of(server, function)
    assert line["status"] == 400 and line["outcome"] == "client_disconnected"
    assert line["severity"] == "WARNING" and "stack_trace" not in line
    output = server.output()
    assert "Traceback" not in output and '"ERROR"' not in output and "ERROR" not in output


def test_truncated_chunked_body_is_400(server: Server, served_acme: Tenant) -> None:
    part = b"10\r\n" + body_for("acquire")[:16] + b"\r\n40\r\n" + b" " * 10  # then nothing
    answer = send_truncated(server.port, head("acquire", key=served_acme.key, chunked=True), part)
    assert_error(answer, 400, "invalid_request")
    wait_until(lambda: lines_of(server, "acquire"), 10, "acquire's log line")
    [line] = lines_of(server, "acquire")
    assert line["outcome"] == "client_disconnected" and line["severity"] == "WARNING"
    assert "Traceback" not in server.output()


# -- refused on the headers, before the body -----------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_oversize_body_without_credentials_is_refused_before_it_is_sent(
    server: Server, served_acme: Tenant, function: str
) -> None:
    """401 for the client functions (no key), 413 for admin (Cloud Run IAM authenticates
    it, the size cap still applies); answered when the client has sent a fraction."""
    answer = send_until_answered(server.port, head(function, length=BIG), BIG)
    if function == "admin":
        assert_error(answer, 413, "payload_too_large")
    else:
        assert_error(answer, 401, "unauthenticated")
    assert answer.sent < BIG // 4, f"answered after {answer.sent} of {BIG} bytes"


@pytest.mark.parametrize("function", ["acquire", "heartbeat", "release"])
def test_malformed_credentials_are_refused_before_the_body(
    server: Server, served_acme: Tenant, function: str
) -> None:
    for key in ("sl_not-a-real-key", ""):
        request = head(function, key=key, length=BIG)
        answer = send_until_answered(server.port, request, BIG)
        assert_error(answer, 401, "unauthenticated")
        assert answer.sent < BIG // 4


@pytest.mark.parametrize("function", FUNCTIONS)
def test_content_length_over_the_cap_is_413_before_the_body(
    server: Server, served_acme: Tenant, function: str
) -> None:
    key = None if function == "admin" else served_acme.key
    answer = send_until_answered(server.port, head(function, key=key, length=BIG), BIG)
    assert_error(answer, 413, "payload_too_large")
    assert answer.sent < BIG // 4


@pytest.mark.parametrize("function", FUNCTIONS)
def test_chunked_body_over_the_cap_is_413_while_it_streams(
    server: Server, served_acme: Tenant, function: str
) -> None:
    key = None if function == "admin" else served_acme.key
    request = head(function, key=key, chunked=True)
    small_request(server.port, function, key)
    with PeakRss(server.pid) as rss:
        answer = send_until_answered(server.port, request, BIG, chunked=True)
    assert rss.growth < 10 * 2**20, f"server grew {rss.growth / 2**20:.1f} MiB"
    assert_error(answer, 413, "payload_too_large")
    assert answer.sent < BIG // 4


def test_chunked_body_without_credentials_is_401_while_it_streams(
    server: Server, served_acme: Tenant
) -> None:
    answer = send_until_answered(server.port, head("acquire", chunked=True), BIG, chunked=True)
    assert_error(answer, 401, "unauthenticated")
    assert answer.sent < BIG // 4


def test_concurrent_unauthenticated_32_mib_bodies_do_not_grow_the_server(
    server: Server, served_acme: Tenant
) -> None:
    """The issue's attack: four 32 MiB POSTs at once without a key."""
    functions = ["acquire", "heartbeat", "release", "acquire"]
    concurrently(lambda function: small_request(server.port, function, None), functions)
    with PeakRss(server.pid) as rss:
        answers = concurrently(
            lambda function: send_until_answered(server.port, head(function, length=BIG), BIG),
            functions,
        )
    assert rss.growth < 10 * 2**20, f"server grew {rss.growth / 2**20:.1f} MiB"
    assert [a.status for a in answers] == [401] * 4
    assert all(a.sent < BIG // 4 for a in answers), [a.sent for a in answers]


def send_whole(port: int, request_head: bytes, size: int, json_only: bool = True) -> Answer:
    """A blunt client (curl -d @file, most HTTP libraries): the whole body, then the
    answer. It stops only when the server closes the connection on it."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_head)
        try:
            while sent < size:
                sock.sendall(BLOCK)
                sent += len(BLOCK)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed on us: the answer is already here
        return read_answer(sock, sent, json_only=json_only)


def test_concurrent_unauthenticated_32_mib_bodies_sent_whole_do_not_grow_the_server(
    server: Server, served_acme: Tenant
) -> None:
    """The same attack by clients that send the whole body before they read: what the
    server does with the rest of a refused body (werkzeug drained it in 10 MB reads,
    about 15 MB per connection) must cost it less than one body, here under 10 MiB for
    four, and the clients still get their 401."""
    functions = ["acquire", "heartbeat", "release", "acquire"]
    concurrently(lambda function: small_request(server.port, function, None), functions)
    with PeakRss(server.pid) as rss:
        answers = concurrently(
            lambda function: send_whole(server.port, head(function, length=BIG), BIG),
            functions,
        )
    assert rss.growth < 10 * 2**20, f"server grew {rss.growth / 2**20:.1f} MiB"
    assert [a.status for a in answers] == [401] * 4


# -- what still works ----------------------------------------------------------------


def test_bodies_up_to_the_cap_still_work_on_a_real_server(
    server: Server, served_acme: Tenant
) -> None:
    body = body_for("acquire")
    padded = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("acquire", key=served_acme.key, length=len(padded)) + padded)
        answer = read_answer(sock, len(padded))
    assert answer.status == 201, answer
    session = answer.body["session_id"]

    # The same request chunked (no Content-Length), in pieces across two chunks.
    beat = body_for("heartbeat", session)
    chunked = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (beat[:10], beat[10:])
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("heartbeat", key=served_acme.key, chunked=True) + chunked + b"0\r\n\r\n")
        answer = read_answer(sock, len(beat))
    assert answer.status == 200 and answer.body["session_id"] == session, answer

    over = padded[:-1] + b" }"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("acquire", key=served_acme.key, length=len(over)) + over)
        assert_error(read_answer(sock, len(over)), 413, "payload_too_large")


# -- bodies on routes that need none (issue 31, items 5 and 6) ---------------------------

# The functions and methods that take no body, and the audit, which bounds its own.
NO_BODY = [("keys", "GET"), ("portal", "GET"), ("reaper", "POST"), ("keys", "GET")]


def _eight(server: Server) -> list[Answer]:
    """The issue's attack: eight parallel 32 MiB bodies on the public routes that need
    none (and the audit, whose cap is under 32 MiB), sent whole."""
    targets = [*NO_BODY, ("audit", "POST"), ("portal", "GET"), ("keys", "GET"), ("audit", "POST")]

    def one(target: str) -> Answer:
        function, method = target.split(" ")
        return send_whole(server.port, head(function, length=BIG, method=method), BIG, False)

    return concurrently(one, [f"{f} {m}" for f, m in targets])


def test_eight_parallel_32_mib_bodies_on_routes_that_need_none_do_not_grow_the_server(
    server: Server, served_acme: Tenant
) -> None:
    for function, method in [*NO_BODY, ("audit", "POST")]:  # warm: imports, pools, threads
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(head(function, length=0, method=method))
            read_answer(sock, 0, json_only=False)
    with PeakRss(server.pid) as rss:
        answers = _eight(server)
    # docs/operations.md records these (run with -s)
    print(
        f"\n{server.kind}: RSS {rss.baseline / 2**20:.0f} MiB, peak +{rss.growth / 2**20:.1f} MiB"
    )
    assert rss.growth < 16 * 2**20, f"server grew {rss.growth / 2**20:.1f} MiB"
    statuses = sorted(a.status for a in answers)
    assert statuses.count(413) == 2, statuses  # the audit: over its cap, never read
    assert statuses.count(200) >= 5, statuses  # keys and the portal's page: served


def test_audit_content_length_over_its_cap_is_413_before_the_body(
    server: Server, served_acme: Tenant
) -> None:
    answer = send_until_answered(server.port, head("audit", length=BIG), BIG)
    assert_error(answer, 413, "payload_too_large")
    assert answer.sent < BIG // 4


def test_audit_chunked_body_over_its_cap_is_413_while_it_streams(
    server: Server, served_acme: Tenant
) -> None:
    answer = send_until_answered(server.port, head("audit", chunked=True), BIG, chunked=True)
    assert_error(answer, 413, "payload_too_large")
    assert answer.sent < 20 * 2**20


@pytest.mark.parametrize("chunks", [b"zz\r\nab\r\n0\r\n\r\n", b"4\r\nabcdefgh\r\n0\r\n\r\n"])
def test_malformed_chunked_body_to_audit_is_a_json_400_without_a_traceback(
    server: Server, served_acme: Tenant, chunks: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("audit", chunked=True) + chunks)
        answer = read_answer(sock, len(chunks))
    assert_error(answer, 400, "invalid_request")
    time.sleep(0.2)
    assert "Traceback" not in server.output()


def test_a_valid_push_still_reaches_the_audit_chunked_or_not(
    server: Server, served_acme: Tenant
) -> None:
    import base64

    envelope = json.dumps(
        {"message": {"data": base64.b64encode(b"[]").decode(), "messageId": "m-1",
                     "publishTime": "2026-11-26T00:00:00Z"},
         "subscription": "projects/p/subscriptions/s"}
    ).encode()  # fmt: skip
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("audit", length=len(envelope)) + envelope)
        assert read_answer(sock, len(envelope), json_only=False).status == 200
    chunked = f"{len(envelope):x}\r\n".encode() + envelope + b"\r\n0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("audit", chunked=True) + chunked)
        assert read_answer(sock, len(envelope), json_only=False).status == 200


def _closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes the connection (the client keeps it open and
    sends nothing more); ``limit`` if it does not."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return limit
    except ConnectionResetError:
        pass
    return time.monotonic() - started


@pytest.mark.parametrize(("function", "method"), NO_BODY[:3])
def test_a_slow_body_on_a_route_that_needs_none_holds_nothing(
    server: Server, served_acme: Tenant, function: str, method: str
) -> None:
    """Content-Length 10, 3 bytes sent, then silence: answered at once, and the server
    lets the connection go within its drain bound (gunicorn's 5 s), not when the client
    gives up."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(head(function, length=10, method=method) + b"abc")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status < 500 or function == "reaper"
        response.read()
        assert time.monotonic() - started < 3
        assert _closed_after(sock, 15) < 7


def test_a_slow_body_where_one_is_needed_is_408_in_bounded_time(
    server: Server, served_acme: Tenant
) -> None:
    from seatlease.api.bodies import BODY_READ_SECONDS

    for function in ("acquire", "audit"):
        key = served_acme.key if function == "acquire" else None
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            started = time.monotonic()
            sock.sendall(head(function, key=key, length=100) + b'{"lic')
            answer = read_answer(sock, 5, timeout=BODY_READ_SECONDS + 10)
            took = time.monotonic() - started
        assert_error(answer, 408, "request_timeout")
        assert BODY_READ_SECONDS - 0.5 < took < BODY_READ_SECONDS + 3, took
