"""Where the CLI's operator commands run, chosen once for every command, in this order;
the CLI never guesses (no default database, no default Redis, no file created outside
the local stack's folder):

1. ``--admin-url URL`` or ``SEATLEASE_ADMIN_URL``: POST to the ``admin`` function at URL
   (the deployed stack). A non-loopback URL gets ``Authorization: Bearer <Google
   identity token>`` from ``SEATLEASE_ID_TOKEN`` or ``gcloud auth print-identity-token``:
   Cloud Run IAM checks it before the function runs.
2. ``DATABASE_URL`` (or ``CLOUD_SQL_INSTANCE``) and ``REDIS_URL`` both set: run the same
   code in-process against them (an operator inside the VPC, or the tests).
3. a ``seatlease local`` (``make run``) started from this folder or a parent folder, as
   recorded in its ``.seatlease/local.json`` (the nearest one, as git finds ``.git``):
   its admin function on loopback, so a second terminal sees
   the local stack's own private Redis and database. A recorded stack that is no longer
   running is an error (exit 5) that says to start it, never a fall-back.
4. nothing of the above: an error (exit 2) that lists these three ways.

Both call ``Backend.call(action, **fields)`` and get the admin function's JSON answer, or a
``CommandError`` carrying its error object: in-process the exit code comes from the domain
error (``seatlease_cli.exits.exit_code``), over HTTP from the status the function answered
(which ``seatlease.api.http`` derived from the same error).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from seatlease_cli.exits import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CommandError,
    exit_code,
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
        from seatlease import admin

        try:
            _status, body = admin.execute(admin.parse({"action": action, **fields}))
        except Exception as exc:
            code = exit_code(exc)  # from the domain error itself, no HTTP status
            if code is None:
                raise  # a bug: main() reports it in one line
            # The error object the admin function would answer ({"code", "message", ...}),
            # so a command reads a failure the same way whichever backend ran it.
            from seatlease.api.http import to_api_error

            error = to_api_error(exc).body["error"]
            raise CommandError(str(error["message"]).rstrip("."), code, error) from None
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


def add_backend_flags(parser: argparse.ArgumentParser, dest: str = "admin_url") -> None:
    parser.add_argument(
        "--admin-url",
        metavar="URL",
        dest=dest,
        default=None,
        help=f"talk to the deployed admin function at URL (default: ${ADMIN_URL_ENV}; "
        "unset: DATABASE_URL and REDIS_URL directly if both are set, else the local stack "
        "started in this folder or a parent folder)",
    )


# What to do when no backend is configured: the three ways, in one line.
HOW_TO_CHOOSE = (
    "start the local stack with `make run` (or `seatlease local`) in the project's folder "
    "(the CLI finds it from there or any folder below), or set "
    "DATABASE_URL and REDIS_URL to work on them directly, or pass --admin-url URL (or set "
    f"{ADMIN_URL_ENV}) for the deployed admin function"
)


def backend_for(args: argparse.Namespace) -> Backend:
    url = (getattr(args, "admin_url", None) or os.environ.get(ADMIN_URL_ENV, "")).strip()
    if url:
        return HttpBackend(url)
    database, redis = direct_settings()
    if database and redis:
        return DirectBackend()
    url = running_local_stack_admin_url()
    if url:
        return HttpBackend(url)
    if database or redis:
        have, lack = ("DATABASE_URL", "REDIS_URL") if database else ("REDIS_URL", "DATABASE_URL")
        raise CommandError(
            f"{have} is set but {lack} is not: working on them directly needs both (there "
            "is no default); or start the local stack with `make run` (or `seatlease "
            f"local`) in the project's folder, or pass --admin-url URL (or set {ADMIN_URL_ENV})",
            EXIT_USAGE,
        )
    raise CommandError(
        "no backend to work on (no .seatlease/local.json in this folder or its parents): "
        + HOW_TO_CHOOSE,
        EXIT_USAGE,
    )


def direct_settings() -> tuple[bool, bool]:
    """Whether the database and Redis are configured explicitly (direct mode needs both)."""
    database = any(os.environ.get(v, "").strip() for v in ("DATABASE_URL", "CLOUD_SQL_INSTANCE"))
    return database, bool(os.environ.get("REDIS_URL", "").strip())


def require_database(command: str) -> None:
    """Commands that always work on the database directly (``db upgrade``, ``audit
    replay-dead-letters``) need it named: the runtime's SQLite default is the local
    stack's own business, never a CLI guess."""
    if not direct_settings()[0]:
        raise CommandError(
            f"{command} works on the database directly: set DATABASE_URL (or "
            "CLOUD_SQL_INSTANCE); there is no default database",
            EXIT_USAGE,
        )


def find_state_file(start: Path | None = None) -> Path | None:
    """The ``.seatlease/local.json`` of this folder or the nearest parent folder that has
    one (as git finds ``.git``): the CLI run from ``docs/`` finds the stack started at the
    project's root. None when no folder up to the root has one."""
    from seatlease_cli.localstate import STATE_FILE

    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / STATE_FILE).is_file():
            return folder / STATE_FILE
    return None


def _shown(state_file: Path) -> str:
    """The stack's folder as a person reads it: ``./.seatlease`` here, else its path."""
    folder = state_file.parent
    try:
        relative = folder.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(folder)
    return f"./{relative}"


def local_stack_state(*, others: bool = True) -> dict[str, Any] | None:
    """What ``seatlease local`` wrote to ``.seatlease/local.json`` in this folder or the
    nearest parent that has one (``find_state_file``): None when there is none; a
    ``CommandError`` (exit 5) when the file is there but that stack no longer runs (its
    process is gone or its port is closed), so nothing ever falls back to another
    backend. ``others``: the message also names the other backends (not for
    ``seatlease demo``)."""
    from seatlease_cli.localstate import running

    state_file = find_state_file()
    if state_file is None:
        return None
    try:
        state = json.loads(state_file.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        state = None
    if running(state):
        assert isinstance(state, dict)
        return state
    where = _shown(state_file)
    raise CommandError(
        f"the local stack in {where} is not running ({where}/{state_file.name} is left "
        "from an earlier run); start it with `make run` (or `seatlease local`) in "
        + ("this folder" if where.startswith("./.") else str(state_file.parent.parent))
        + (", or set DATABASE_URL and REDIS_URL, or pass --admin-url" if others else ""),
        EXIT_UNAVAILABLE,
    )


def running_local_stack_admin_url() -> str:
    """The admin URL of the ``seatlease local`` started from this folder or a parent; ""
    when none was, a ``CommandError`` when it was but is not running any more."""
    state = local_stack_state()
    return f"{state['base_url']}/admin" if state else ""


def common_parent() -> argparse.ArgumentParser:
    """Flags every operator command takes: ``--json`` and ``--admin-url`` (also accepted
    before the command: ``seatlease --json status``, see ``seatlease_cli.build_parser``)."""
    from seatlease_cli.output import add_json_flag

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
