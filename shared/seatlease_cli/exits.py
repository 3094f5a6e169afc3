"""The CLI's exit codes, ``CommandError`` and ``exit_code`` (a domain error's exit code):
what every command module shares. It imports no other module of the CLI, so they all
import it rather than the package (whose ``main`` imports them); ``seatlease_cli``
re-exports these names.
"""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_UNAVAILABLE = range(6)


class CommandError(Exception):
    """A one-line failure with its exit code; ``error`` is the admin function's error
    object (``{"code", "message", ...}``) when the failure is its answer."""

    def __init__(
        self, message: str, code: int = EXIT_FAILED, error: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.error = error or {}


def exit_code(exc: BaseException) -> int | None:
    """The exit code of a domain error or a backend outage (``seatlease.errors``), the
    CLI's counterpart of the HTTP boundary's ``seatlease.api.http.to_api_error``; None for
    anything else, which is a bug and is reported as one."""
    from seatlease import errors

    match exc:
        case errors.NotFound() | errors.LicenseNotFound():
            return EXIT_NOT_FOUND
        case (
            errors.Conflict()
            | errors.NoSeatsAvailable()
            | errors.UserLimitReached()
            | errors.QueueFull()
            | errors.SeatsMismatch()
            | errors.MachineMismatch()
        ):
            return EXIT_CONFLICT
        # A value the rules refuse: the command line asked for something invalid.
        case (
            errors.InvalidRequest()
            | errors.StoreError()
            | errors.AmbiguousLicense()
            | errors.LeaseTooLong()
        ):
            return EXIT_USAGE
        # NotConfigured: the admin function answers it as a 503, so both backends exit alike.
        case (
            errors.BackendUnavailable()
            | errors.EventsNotPublished()
            | errors.NotConfigured()
            | errors.Recovering()
        ):
            return EXIT_UNAVAILABLE
        case errors.SeatError():  # suspended license, expired session, refused key
            return EXIT_FAILED
    return EXIT_UNAVAILABLE if errors.redis_outage(exc) is not None else None
