"""Domain errors. The HTTP layer (shared/http.py) maps each to one status and code."""

from __future__ import annotations


class SeatError(Exception):
    """Base of every error seatlease reports to a caller."""


class LicenseNotFound(SeatError):
    pass


class LicenseSuspended(SeatError):
    pass


class LeaseTooLong(SeatError):
    def __init__(self, max_lease_seconds: int) -> None:
        super().__init__(f"lease_seconds may be at most {max_lease_seconds} for this license")
        self.max_lease_seconds = max_lease_seconds


class NoSeatsAvailable(SeatError):
    def __init__(self, seats_used: int, seats_total: int, retry_after_seconds: int) -> None:
        super().__init__(f"all {seats_total} seats are in use")
        self.seats_used = seats_used
        self.seats_total = seats_total
        self.retry_after_seconds = retry_after_seconds


class SessionExpired(SeatError):
    """The session is gone: ``reason`` is ``expired`` or ``unknown``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unauthenticated(SeatError):
    pass


class BackendUnavailable(SeatError):
    """Redis, the database or Pub/Sub cannot be reached; the caller should retry."""

    def __init__(self, backend: str, retry_after_seconds: int = 2) -> None:
        super().__init__(f"{backend} is unavailable")
        self.backend = backend
        self.retry_after_seconds = retry_after_seconds
