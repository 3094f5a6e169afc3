"""Where the CLI's operator commands run, chosen once for every command:

- ``--admin-url URL`` or ``SEATLEASE_ADMIN_URL``: POST to the ``admin`` function at URL
  (the deployed stack). A non-loopback URL gets ``Authorization: Bearer <Google identity
  token>`` from ``SEATLEASE_ID_TOKEN`` or ``gcloud auth print-identity-token``: Cloud Run
  IAM checks it before the function runs.
- else, when ``REDIS_URL`` is not set and ``seatlease local`` is running from this
  folder (``.seatlease/local.json``): its admin function on loopback, so a second
  terminal sees the local stack's own private Redis;
- otherwise: run the same code in-process against ``DATABASE_URL`` and ``REDIS_URL``
  (an operator inside the VPC).

Both call ``Backend.call(action, **fields)`` and get the admin function's JSON answer, or a
``CommandError`` whose exit code comes from the HTTP status (one mapping for both modes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import ipaddress
import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Protocol

from shared.cli import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CommandError,
)

# Exit code when a change is saved in the database but Redis could not be told: the
# cached copy catches up within its TTL (the message says how long).
EXIT_CACHE_STALE = 6

ADMIN_URL_ENV = "SEATLEASE_ADMIN_URL"
ID_TOKEN_ENV = "SEATLEASE_ID_TOKEN"  # noqa: S105 (a variable name, not a secret)
HTTP_TIMEOUT = 30.0

_EXIT_FOR_STATUS = {
    400: EXIT_USAGE,
    404: EXIT_NOT_FOUND,
    405: EXIT_USAGE,
    409: EXIT_CONFLICT,
    413: EXIT_USAGE,
    415: EXIT_USAGE,
    503: EXIT_UNAVAILABLE,
}


class Backend(Protocol):
    def call(self, action: str, **fields: Any) -> dict[str, Any]: ...


def _failure(status: int, message: str, error: dict[str, Any] | None = None) -> CommandError:
    return CommandError(message.rstrip("."), _EXIT_FOR_STATUS.get(status, EXIT_FAILED), error)


class DirectBackend:
    """The admin actions in this process, against DATABASE_URL and REDIS_URL."""

    def call(self, action: str, **fields: Any) -> dict[str, Any]:
        from shared import admin

        try:
            # The actions' JSON log lines are for Cloud Logging; the CLI prints its own
            # answer, and stdout must stay clean for --json and for `apikey create | tail`.
            with contextlib.redirect_stdout(io.StringIO()):
                _status, body = admin.execute(admin.parse({"action": action, **fields}))
        except Exception as exc:
            error = admin.api_error(exc)  # re-raises what is not an admin/backend error
            raise _failure(error.status, error.message, error.body["error"]) from None
        return body


class HttpBackend:
    """The deployed ``admin`` function, by URL."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise CommandError(f"admin URL {url!r} is not an http(s) URL", EXIT_USAGE)
        self.url = url

    @property
    def loopback(self) -> bool:
        host = urllib.parse.urlsplit(self.url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def request(self, action: str, **fields: Any) -> urllib.request.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if not self.loopback:  # the local stack serves admin unauthenticated on loopback
            headers["Authorization"] = f"Bearer {identity_token()}"
        data = json.dumps({"action": action, **fields}).encode()
        # The scheme was checked in __init__ (http/https only).
        return urllib.request.Request(self.url, data=data, headers=headers, method="POST")  # noqa: S310

    def call(self, action: str, **fields: Any) -> dict[str, Any]:
        request = self.request(action, **fields)
        # A loopback URL never goes through an HTTP(S)_PROXY from the environment.
        opener = urllib.request.build_opener(
            *([urllib.request.ProxyHandler({})] if self.loopback else [])
        )
        try:
            with opener.open(request, timeout=HTTP_TIMEOUT) as response:
                return _json(response.read())
        except urllib.error.HTTPError as exc:
            body = _json(exc.read())
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            message = str(error.get("message") or f"HTTP {exc.code} {exc.reason}")
            if exc.code in (401, 403) and not error:  # Cloud Run's own refusal page
                message = (
                    f"the admin function refused the identity token (HTTP {exc.code}); "
                    "the caller needs roles/run.invoker on it"
                )
            raise _failure(exc.code, message, error) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CommandError(
                f"cannot reach the admin function at {self.url}: {reason}", EXIT_UNAVAILABLE
            ) from None


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def identity_token() -> str:
    """A Google identity token for Cloud Run IAM: ``SEATLEASE_ID_TOKEN`` if set, else
    ``gcloud auth print-identity-token`` (the operator's gcloud login)."""
    token = os.environ.get(ID_TOKEN_ENV, "").strip()
    if token:
        return token
    try:
        proc = subprocess.run(
            ["gcloud", "auth", "print-identity-token"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"cannot run gcloud for an identity token: {exc}") from None
    token = proc.stdout.strip()
    if proc.returncode != 0 or not token:
        first = next((line.strip() for line in proc.stderr.splitlines() if line.strip()), "")
        raise CommandError(
            f"gcloud auth print-identity-token failed ({first or 'no token'}); run "
            "`gcloud auth login` "
            f"or set {ID_TOKEN_ENV}"
        )
    return token


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--admin-url",
        metavar="URL",
        default=None,
        help=f"talk to the deployed admin function at URL (default: ${ADMIN_URL_ENV}; "
        "unset: directly to DATABASE_URL and REDIS_URL)",
    )


def backend_for(args: argparse.Namespace) -> Backend:
    url = (getattr(args, "admin_url", None) or os.environ.get(ADMIN_URL_ENV, "")).strip()
    url = url or running_local_stack_admin_url()
    return HttpBackend(url) if url else DirectBackend()


def running_local_stack_admin_url() -> str:
    """The admin URL of a ``seatlease local`` started from this folder, if it is up and
    no ``REDIS_URL`` says to go elsewhere."""
    if os.environ.get("REDIS_URL"):
        return ""
    from shared.localprocs import port_open
    from shared.localstack import STATE_FILE

    try:
        base = str(json.loads(STATE_FILE.read_text())["base_url"])
    except (OSError, ValueError, KeyError):
        return ""
    port = urllib.parse.urlsplit(base).port
    return f"{base}/admin" if port and port_open(port) else ""


def common_parent() -> argparse.ArgumentParser:
    """Flags every operator command takes: ``--json`` and ``--admin-url``."""
    from shared.cli.output import add_json_flag

    parent = argparse.ArgumentParser(add_help=False)
    add_json_flag(parent)
    add_backend_flags(parent)
    return parent


def warn_if_stale(body: dict[str, Any]) -> int:
    """Print the answer's warning (one line on stderr) and pick the exit code."""
    if body.get("cache_refreshed") is False:
        import sys

        print(f"seatlease: warning: {body.get('warning', 'cache not refreshed')}", file=sys.stderr)
        return EXIT_CACHE_STALE
    return 0
