"""The client's default transport (``HttpTransport``; the seam is ``_transport``): one
HTTP exchange bounded as a whole (connect, headers and body within one time budget), over
urllib (so the environment's proxies apply) with redirects refused.

urllib's ``timeout`` bounds each socket operation, not the exchange: an answer dripped
one byte a second never times out. Here a watchdog timer shuts the exchange's socket
down at its deadline, which ends any read or write blocked on it at once.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, NoReturn

from seatlease_client._transport import MAX_ANSWER, Answer, Redirected, TooLarge


class ExchangeTimeout(OSError):
    """The exchange did not complete within its time budget."""


class Watch:
    """The deadline of one exchange: ``expire()`` (the timer's) shuts down every socket
    the exchange opened, which ends a read or write blocked on it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self.expire)
        self._timer.daemon = True

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def __enter__(self) -> Watch:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()

    def opened(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket: the TLS layer's would unwrap
    # the socket under the reading thread's feet.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _watched(base: type, watch_attribute: str = "_seatlease_watch") -> type:
    class Watched(base):  # type: ignore[misc,valid-type]
        def connect(self) -> None:
            super().connect()
            watch = getattr(self, watch_attribute, None)
            if watch is not None:
                watch.opened(self.sock)

    Watched.__name__ = f"Watched{base.__name__}"
    return Watched


_WatchedHTTP = _watched(http.client.HTTPConnection)
_WatchedHTTPS = _watched(http.client.HTTPSConnection)


def _resolve(host: str, port: int, watch: Watch) -> list[Any]:
    """``getaddrinfo`` within the exchange's time: it cannot be interrupted, so it runs
    in a daemon thread joined for the time left (an address literal needs no thread)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return socket.getaddrinfo(host.strip("[]"), port, 0, socket.SOCK_STREAM)
    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result["infos"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except BaseException as exc:  # handed to the exchange's thread
            result["error"] = exc
        done.set()

    threading.Thread(target=run, name="seatlease-resolve", daemon=True).start()
    if not done.wait(max(0.0, watch.left())):
        raise ExchangeTimeout(f"{host} not resolved within {watch.seconds:g} s")
    if "error" in result:
        raise result["error"]
    return result["infos"]


def _connect(watch: Watch, address: tuple[str, int], timeout: Any, source: Any) -> socket.socket:
    """``socket.create_connection`` within the exchange's time: the name resolved in
    that time, each address tried with the time left, each socket watched before its
    connect (the watchdog ends a connect under way)."""
    host, port = address
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in _resolve(host, port, watch):
        left = watch.left()
        if left <= 0 or watch.expired:
            break
        sock = socket.socket(family, kind, proto)
        try:
            watch.opened(sock)
            sock.settimeout(left)
            if source:
                sock.bind(source)
            sock.connect(sockaddr)
            if watch.expired:
                raise ExchangeTimeout(f"no connection within {watch.seconds:g} s")
            sock.settimeout(None if timeout is socket._GLOBAL_DEFAULT_TIMEOUT else timeout)  # type: ignore[attr-defined]
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    if error is not None and not watch.expired:
        raise error
    raise ExchangeTimeout(f"no connection to {host} within {watch.seconds:g} s")


def _connection_factory(kind: type, watch: Watch | None) -> Any:
    def make(*args: Any, **kwargs: Any) -> Any:
        connection = kind(*args, **kwargs)
        connection._seatlease_watch = watch
        if watch is not None:  # resolve and connect within the exchange's time, and
            # watch the plain socket too, so a stalled TLS handshake ends

            def create_watched(address: Any, timeout: Any = None, source: Any = None) -> Any:
                return _connect(watch, address, timeout, source)

            connection._create_connection = create_watched
        return connection

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_connection_factory(_WatchedHTTP, getattr(req, "watch", None)), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: Any) -> Any:
        factory = _connection_factory(_WatchedHTTPS, getattr(req, "watch", None))
        return self.do_open(factory, req, context=self._context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is not the service's answer: never followed (the API key must not go to
    another host, and a hosts-file entry must not be able to send the client elsewhere)."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> NoReturn:
        fp.close()
        raise Redirected(code, headers.get("Location") if headers is not None else newurl)


def opener(direct: bool) -> urllib.request.OpenerDirector:
    """An opener that bounds its exchanges and refuses redirects; ``direct``: no proxy
    (a loopback address, which a corporate proxy cannot reach)."""
    proxies = urllib.request.ProxyHandler({}) if direct else urllib.request.ProxyHandler()
    return urllib.request.build_opener(proxies, _HTTPHandler, _HTTPSHandler, _NoRedirect)


def _read(resp: Any, watch: Watch) -> bytes:
    """The whole body (at most MAX_ANSWER bytes), or an error: cut short by the watchdog
    (``ExchangeTimeout``) or by the peer (``IncompleteRead``)."""
    raw = resp.read(MAX_ANSWER + 1)
    if watch.expired:
        raise ExchangeTimeout(f"no complete answer within {watch.seconds:g} s")
    if len(raw) > MAX_ANSWER:
        raise TooLarge(f"the answer is larger than {MAX_ANSWER} bytes")
    length = resp.headers.get("Content-Length") if resp.headers is not None else None
    if length is not None and length.strip().isdigit() and len(raw) < int(length):
        raise http.client.IncompleteRead(raw, int(length) - len(raw))
    return raw


def exchange(
    opener_: urllib.request.OpenerDirector, request: urllib.request.Request, seconds: float
) -> tuple[int, Any, bytes]:
    """(status, headers, body) of one exchange completed within ``seconds``, whatever
    its status; ``ExchangeTimeout`` when it did not complete in time, ``Redirected`` for
    a 3xx, ``OSError``/``HTTPException`` when no complete answer came."""
    watch = Watch(seconds)
    request.watch = watch  # type: ignore[attr-defined]
    try:
        with watch:
            try:
                with opener_.open(request, timeout=max(0.01, seconds)) as resp:
                    return resp.status, resp.headers, _read(resp, watch)
            except urllib.error.HTTPError as err:
                try:
                    return err.code, err.headers, _read(err, watch)
                finally:
                    err.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if watch.expired:
            raise ExchangeTimeout(f"no complete answer within {seconds:g} s") from None
        if isinstance(exc, ValueError):  # a read on a socket the watchdog unwrapped
            raise http.client.HTTPException(str(exc)) from None
        raise


class HttpTransport:
    """The client's default ``Transport``: one urllib exchange per request through an
    opener that bounds it and refuses redirects; ``direct``: no proxy (a loopback
    address, which a corporate proxy cannot reach), else the environment's proxies."""

    def __init__(self, direct: bool) -> None:
        self._opener = opener(direct)

    def exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> Answer:
        # The URL's scheme is http or https: SeatClient checks its base_url.
        request = urllib.request.Request(url, data=body, method=method)  # noqa: S310
        for name, value in headers.items():
            if name.lower() == "authorization":  # never carried on to a redirect's host
                request.add_unredirected_header(name, value)
            else:
                request.add_header(name, value)
        return exchange(self._opener, request, timeout)
