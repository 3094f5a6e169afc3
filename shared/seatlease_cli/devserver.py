"""Serve every function of functions/ on one port, at ``/<function name>``: the same paths
Cloud Functions gives them (``https://REGION-PROJECT.cloudfunctions.net/acquire``). Each
function is loaded through ``functions_framework.create_app``, exactly as in the cloud.

    python -m seatlease_cli.devserver --port 8080            # werkzeug, for a laptop
    gunicorn 'seatlease_cli.devserver:create_app()'          # as Cloud Functions serves it
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler
from werkzeug.serving import make_server as werkzeug_server

FUNCTIONS_DIR = Path(
    # The repository checkout this package is installed from (editable, as make installs it).
    os.environ.get("SEATLEASE_FUNCTIONS_DIR", Path(__file__).resolve().parents[2] / "functions")
)


# Entry points served from another function's source, as Terraform deploys them: the
# name's path, its folder in functions/ (functions-framework's FUNCTION_TARGET).
EXTRA_ENTRY_POINTS = {"webhooks_retry": "webhooks"}


def function_names(functions_dir: Path = FUNCTIONS_DIR) -> list[str]:
    folders = sorted(p.parent.name for p in functions_dir.glob("*/main.py"))
    extra = [name for name, folder in EXTRA_ENTRY_POINTS.items() if folder in folders]
    return sorted(folders + extra)


def _not_found(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = json.dumps(
        {"error": {"code": "not_found", "message": "No such function; try /acquire."}}
    ).encode()
    start_response("404 Not Found", [("Content-Type", "application/json")])
    return [body]


# The functions Cloud Run IAM guards in the cloud, served here without authentication: a
# web page the operator's browser opens must not reach them by DNS rebinding (its name
# resolving to 127.0.0.1: the browser then sends that name as Host, and its own origin).
LOOPBACK_ONLY = frozenset({"admin", "reaper", "audit", "webhooks", "webhooks_retry"})


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_request(environ: dict[str, Any]) -> bool:
    """Is the ``Host`` a loopback name or address (any port), and the ``Origin``, when a
    browser sends one, a loopback origin?"""
    host = environ.get("HTTP_HOST", "")
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:
        return False
    if not _is_loopback(name):
        return False
    origin = environ.get("HTTP_ORIGIN")
    if origin is None:
        return True
    try:
        return _is_loopback(urlsplit(origin).hostname)
    except ValueError:
        return False


def _forbidden(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = json.dumps(
        {
            "error": {
                "code": "forbidden",
                "message": "The local stack's operator functions answer only requests to a "
                "loopback host (127.0.0.1, localhost, ::1) from no or a loopback origin.",
            }
        }
    ).encode()
    start_response("403 Forbidden", [("Content-Type", "application/json")])
    return [body]


def create_app(names: list[str] | None = None, functions_dir: Path = FUNCTIONS_DIR) -> Any:
    """One WSGI app routing ``/<name>[/...]`` to that function's functions-framework app."""
    import functions_framework

    mounts = {
        name: functions_framework.create_app(
            name, str(functions_dir / EXTRA_ENTRY_POINTS.get(name, name) / "main.py")
        )
        for name in (names or function_names(functions_dir))
    }

    def dispatch(environ: dict[str, Any], start_response: Any) -> Any:
        name, _, rest = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        target = mounts.get(name)
        if target is None:
            return _not_found(environ, start_response)
        if name in LOOPBACK_ONLY and not loopback_request(environ):
            return _forbidden(environ, start_response)
        environ = {**environ, "PATH_INFO": "/" + rest}
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + name
        return target(environ, start_response)

    return dispatch


# What werkzeug may still read of a request once it has answered, and in what pieces.
DRAIN_BYTES = 1024 * 1024
DRAIN_PIECE = 64 * 1024


class _BoundedReads:
    """The connection's input stream, read in pieces of at most ``DRAIN_PIECE`` bytes and
    ``DRAIN_BYTES`` in all, after which it ends.

    After every answer werkzeug reads whatever the client still sends, so that it sees
    the answer rather than a reset, in reads of 10 MB: a client that sends a refused
    32 MiB body whole made the server hold about 15 MB per connection while it did
    (63 MiB for four, tests/test_http_limits.py). Here that costs one 64 KiB piece at a
    time, and past 1 MiB the stream ends, so werkzeug stops and closes the connection
    (it closes every one after its answer anyway). The request's own body does not go
    through here (``RequestHandler.make_environ``); request and header lines go through
    ``readline``, untouched."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._left = DRAIN_BYTES

    def read(self, size: int | None = -1) -> bytes:
        if self._left <= 0:
            return b""
        want = DRAIN_PIECE if size is None or size < 0 else min(size, DRAIN_PIECE)
        # What has arrived, never waiting for more: werkzeug drains only while the socket
        # is readable, and a slow client (Content-Length 10, 3 bytes sent) must not hold
        # the thread until it sends the rest.
        data = self._stream.read1(min(want, self._left))
        self._left -= len(data)
        return data

    def __getattr__(self, name: str) -> Any:  # readline, readinto, close, ...
        return getattr(self._stream, name)


class RequestHandler(WSGIRequestHandler):
    """werkzeug's handler, with the connection's input read in bounded pieces."""

    def setup(self) -> None:
        super().setup()
        self.rfile = _BoundedReads(self.rfile)  # type: ignore[assignment]

    def make_environ(self) -> dict[str, Any]:
        """The request's own body is read from the connection as it is (each function
        bounds its body: seatlease.api.bodies); only werkzeug's drain after the answer
        goes through ``_BoundedReads``."""
        bounded = self.rfile
        self.rfile = bounded._stream  # type: ignore[attr-defined]
        try:
            return super().make_environ()
        finally:
            self.rfile = bounded


def make_server(host: str, port: int, app: Any, fd: int | None = None) -> BaseWSGIServer:
    """A threaded werkzeug server for ``app`` with ``RequestHandler`` (`seatlease local`);
    ``fd``: a socket already bound and listening (the stack takes its port first)."""
    return werkzeug_server(host, port, app, threaded=True, request_handler=RequestHandler, fd=fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("names", nargs="*", help="functions to serve (default: all)")
    args = parser.parse_args()
    from werkzeug.serving import run_simple

    run_simple(
        args.host,
        args.port,
        create_app(args.names or None),
        threaded=True,
        request_handler=RequestHandler,
    )


if __name__ == "__main__":
    main()
