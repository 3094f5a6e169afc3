"""The ``seatlease`` command. Each command group lives in its own module of this package
and adds its subcommands in ``register(subparsers)``; a command function takes the parsed
arguments and returns the exit code.

Exit codes: 0 ok, 1 failed (the message says why), 2 bad usage, 3 not found,
4 conflict (already exists), 5 a backend is unavailable, 6 saved in the database but the
Redis cache could not be refreshed (it catches up within its TTL; see shared/cli/backend.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_UNAVAILABLE = range(6)

# Command group modules, in the order ``seatlease --help`` lists them.
GROUPS = ("db", "tenants", "licenses", "status", "local", "report", "audit")


class CommandError(Exception):
    """A one-line failure with its exit code; ``error`` is the admin function's error
    object (``{"code", "message", ...}``) when the failure is its answer."""

    def __init__(
        self, message: str, code: int = EXIT_FAILED, error: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.error = error or {}


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="seatlease", description="Floating-license seats: operate a seatlease stack."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        importlib.import_module(f"shared.cli.{group}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or EXIT_OK)
    except CommandError as exc:
        print(f"seatlease: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line, never a traceback
        from shared.errors import BackendUnavailable
        from shared.store import Conflict, NotFound, StoreError

        codes = {NotFound: EXIT_NOT_FOUND, Conflict: EXIT_CONFLICT, StoreError: EXIT_FAILED}
        for kind, code in codes.items():
            if isinstance(exc, kind):
                print(f"seatlease: {exc}", file=sys.stderr)
                return code
        if isinstance(exc, BackendUnavailable) or _is_connection_error(exc):
            print(f"seatlease: cannot reach a backend: {_one_line(exc)}", file=sys.stderr)
            return EXIT_UNAVAILABLE
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
