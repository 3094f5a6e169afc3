"""The ``seatlease`` command. Each command group lives in its own module of this package
and adds its subcommands in ``register(subparsers)``; a command function takes the parsed
arguments and returns the exit code.

Exit codes: 0 ok, 1 failed (the message says why), 2 bad usage (also: no backend
configured, see backend.py), 3 not found, 4 conflict (already exists), 5 a backend is
unavailable (also: the local stack of this folder has stopped), 6 saved in the database
but the Redis cache could not be refreshed (it catches up within its TTL; see backend.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from seatlease_cli.exits import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CommandError,
    exit_code,
)

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "GROUPS",
    "CommandError",
    "build_parser",
    "exit_code",
    "main",
]

# Command group modules, in the order ``seatlease --help`` lists them.
GROUPS = (
    "db",
    "tenants",
    "licenses",
    "status",
    "failover",
    "local",
    "report",
    "audit",
    "keys",
    "webhooks",
)


class CommandParser(argparse.ArgumentParser):
    """A parser that refuses what it does not know itself: argparse hands a subcommand's
    unknown arguments up to the top-level parser, whose usage then says nothing of the
    subcommand (``seatlease status --tenat x`` printed ``usage: seatlease ... COMMAND``).
    Subparsers are made of their parent's class, so each one names its own usage."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = CommandParser(
        prog="seatlease", description="Floating-license seats: operate a seatlease stack."
    )
    # The operator commands' common options are accepted before the command too
    # (`seatlease --admin-url URL status`), under their own names: a subparser's defaults
    # would overwrite the values (argparse), so main() merges them (_apply_global_options).
    from seatlease._version import __version__
    from seatlease_cli.backend import add_backend_flags

    parser.add_argument("--version", action="version", version=f"seatlease {__version__}")
    parser.add_argument(
        "--json", dest="global_json", action="store_true", help="print JSON for scripts"
    )
    add_backend_flags(parser, dest="global_admin_url")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        importlib.import_module(f"seatlease_cli.{group}").register(subparsers)
    return parser


def _apply_global_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--json`` / ``--admin-url`` given before the command count as given after it (the
    command's own wins if both are); a command that takes neither refuses them rather
    than ignoring them (``seatlease --admin-url URL db upgrade`` would mislead)."""
    for name in ("json", "admin_url"):
        value = getattr(args, f"global_{name}", None)
        if not value:
            continue
        if not hasattr(args, name):
            flag = "--" + name.replace("_", "-")
            parser.error(f"the {args.command} command does not take {flag}")
        if not getattr(args, name):
            setattr(args, name, value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _apply_global_options(parser, args)
    from seatlease import logs

    # The runtime's JSON log lines are for Cloud Logging; the CLI prints its own answer,
    # and stdout must stay clean for --json and `apikey create | tail`: they go to stderr,
    # and only when LOG_LEVEL asks for them (seatlease local sets its own, for the stack).
    logs.configure(os.environ.get("LOG_LEVEL", "CRITICAL"), stream="stderr")
    from seatlease_cli.output import VisibleControls

    # Whatever a command prints (tables, messages, errors quoting a label or a user),
    # control characters reach the terminal as text (seatlease_cli/output.py).
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleControls(out), VisibleControls(err)  # type: ignore[assignment]
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or EXIT_OK)
    except CommandError as exc:
        print(f"seatlease: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`seatlease status | head -1`): stop quietly, as `ls | head`
        # does; later writes (the interpreter's flush at exit) go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer the pipe ended
    except Exception as exc:  # one clear line, never a traceback
        code = exit_code(exc)
        if code == EXIT_UNAVAILABLE or (code is None and _is_connection_error(exc)):
            print(f"seatlease: cannot reach a backend: {_one_line(exc)}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        if code is not None:
            print(f"seatlease: {exc}", file=sys.stderr)
            return code
        print(f"seatlease: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED


def _one_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _is_connection_error(exc: Exception) -> bool:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from sqlalchemy.exc import OperationalError

    return isinstance(exc, RedisConnectionError | OperationalError | ConnectionError)


if __name__ == "__main__":
    sys.exit(main())
