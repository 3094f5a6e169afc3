"""Domain errors: what went wrong, in the domain's words, with the facts a caller needs.

The runtime raises these and nothing else for a caller's mistake or a backend outage;
each caller maps them once: the HTTP boundary to a status, code and body
(``seatlease.api.http.to_api_error``), the CLI to an exit code (``seatlease_cli.exit_code``).
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError


class SeatError(Exception):
    """Base of every error seatlease reports to a caller."""


class InvalidRequest(SeatError):
    """The request breaks a rule of its schema; ``fields`` go into the error body as they
    are (``details``: one ``{"field", "problem"}`` per problem; ``actions``: the valid
    admin actions)."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields


class LicenseNotFound(SeatError):
    pass


class LicenseSuspended(SeatError):
    pass


class LicenseNotStarted(SeatError):
    """The license's term has not begun: nothing is granted before ``starts_at_ms``."""

    def __init__(self, starts_at_ms: int) -> None:
        super().__init__("the license's term has not started")
        self.starts_at_ms = starts_at_ms


class LicenseExpired(SeatError):
    """The license's term and its grace are over (``ended_at_ms`` = expires_at + grace):
    nothing is granted, and with ``end_leases`` a heartbeat ends its lease."""

    def __init__(self, expires_at_ms: int, ended_at_ms: int) -> None:
        super().__init__("the license has expired")
        self.expires_at_ms = expires_at_ms
        self.ended_at_ms = ended_at_ms


class NotEntitled(SeatError):
    """The product needs entitlements the license does not have (``missing``)."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"the license lacks {', '.join(missing)}")
        self.missing = missing


class VersionNotEntitled(SeatError):
    """The product's version is above the license's ``max_version``."""

    def __init__(self, version: str, max_version: str) -> None:
        super().__init__(f"version {version} is above the license's {max_version}")
        self.version = version
        self.max_version = max_version


class LeaseTooLong(SeatError):
    def __init__(self, max_lease_seconds: int) -> None:
        super().__init__(f"lease_seconds may be at most {max_lease_seconds} for this license")
        self.max_lease_seconds = max_lease_seconds


class NoSeatsAvailable(SeatError):
    """No seat for this caller. ``seats_held``: free seats held for clients ahead of it in
    the wait queue (``retry_after_seconds`` is then the first hold's remaining time);
    ``seats_reserved``: free seats reserved for groups the caller is not in. Both 0: all
    seats are in use."""

    def __init__(
        self,
        seats_used: int,
        seats_total: int,
        retry_after_seconds: int,
        seats_held: int = 0,
        seats_reserved: int = 0,
        seats_requested: int = 1,
    ) -> None:
        super().__init__(f"all {seats_total} seats are in use")
        self.seats_used = seats_used
        self.seats_total = seats_total
        self.retry_after_seconds = retry_after_seconds
        self.seats_held = seats_held
        self.seats_reserved = seats_reserved
        self.seats_requested = seats_requested  # the lease asked would count as this many


class QueueFull(SeatError):
    """The license's wait queue holds ``queue_max`` clients: no new place in line."""

    def __init__(self, queue_max: int, seats_used: int, seats_total: int) -> None:
        super().__init__(f"the wait queue is full ({queue_max} waiting)")
        self.queue_max = queue_max
        self.seats_used = seats_used
        self.seats_total = seats_total


class TenantRateLimited(SeatError):
    """The tenant's calls per second are spent (its ``rate_limit_per_second``); nothing
    changed. Repeat after ``retry_after_seconds``."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("the tenant's rate limit is reached")
        self.retry_after_seconds = retry_after_seconds


class UserDenied(SeatError):
    """The license's policy refuses this user any seat (its deny list)."""

    def __init__(self, user: str) -> None:
        super().__init__(f"user {user!r} may not take a seat on this license")
        self.user = user


class UserLimitReached(SeatError):
    """The user's live leases would count more than the license's ``max_per_user`` seats
    (``sessions``: the seats they count now, each lease its weight)."""

    def __init__(
        self,
        user: str,
        max_per_user: int,
        sessions: int,
        retry_after_seconds: int = 1,
        seats_requested: int = 1,
    ) -> None:
        super().__init__(f"user {user!r} holds {sessions} of at most {max_per_user} seats")
        self.user = user
        self.max_per_user = max_per_user
        self.sessions = sessions
        self.retry_after_seconds = retry_after_seconds  # until the user's earliest lease ends
        self.seats_requested = seats_requested


class SeatsMismatch(SeatError):
    """The client holds a live lease of ``held_seats`` seats and asked for ``seats``: a
    lease keeps its weight; release it to take another."""

    def __init__(self, client_id: str, held_seats: int, seats: int) -> None:
        super().__init__(f"client {client_id!r} holds a lease of {held_seats} seats")
        self.client_id = client_id
        self.held_seats = held_seats
        self.seats = seats


class Recovering(SeatError):
    """A failover's recovery window (seatlease/seats/failover.py): no new seat yet, while
    the holders the new primary lost come back with their tokens; retry in
    ``retry_after_seconds`` (the window's end)."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(f"recovering from a failover: retry in {retry_after_seconds} s")
        self.retry_after_seconds = retry_after_seconds


class MachineMismatch(SeatError):
    """The client's borrowed lease was borrowed for another machine: a borrowed seat stays
    on the machine it was borrowed for (its token's ``cnf.machine``)."""

    def __init__(self, client_id: str) -> None:
        super().__init__(f"client {client_id!r} borrowed its seat for another machine")
        self.client_id = client_id


class SessionExpired(SeatError):
    """The session is gone: ``reason`` is ``expired`` or ``unknown``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unauthenticated(SeatError):
    pass


class Forbidden(SeatError):
    """A live API key of the wrong scope for this call (a seat key at the portal, an admin
    key taking a seat)."""


class RateLimited(SeatError):
    """Too many calls with one key; ``retry_after_seconds`` until the next is allowed."""

    def __init__(self, limit: int, period_seconds: int, retry_after_seconds: int) -> None:
        super().__init__(f"at most {limit} calls per {period_seconds} s with one key")
        self.limit = limit
        self.period_seconds = period_seconds
        self.retry_after_seconds = retry_after_seconds


class KeyLookupsLimited(RateLimited):
    """This instance's database lookups of API keys no cache knows are spent for now (a
    flood of forged keys): ``retry_after_seconds`` until the next."""

    def __init__(self, per_second: int) -> None:
        SeatError.__init__(
            self, f"at most {per_second} lookups of unseen API keys per second on this instance"
        )
        self.limit, self.period_seconds, self.retry_after_seconds = per_second, 1, 1


class BackendUnavailable(SeatError):
    """Redis, the database or Pub/Sub cannot be reached; the caller should retry."""

    def __init__(self, backend: str, retry_after_seconds: int = 2) -> None:
        super().__init__(f"{backend} is unavailable")
        self.backend = backend
        self.retry_after_seconds = retry_after_seconds


class CallOutcomeUnknown(BackendUnavailable):
    """Redis did not answer a seat call in time: the script may have run, or may still
    run when Redis resumes. Repeating the call with the same ``request_id`` returns what
    that run did (the scripts keep each reply for REPLY_TTL_SECONDS)."""

    def __init__(self, request_id: str, retry_after_seconds: int = 2) -> None:
        super().__init__("redis", retry_after_seconds)
        self.request_id = request_id


class NotConfigured(SeatError):
    """The deployment lacks a setting (an environment variable, a signing key) only an
    operator can give it: no retry by the client cures it, and no request is served
    until it is given. The message names what is missing, for the operator's log."""


class EventsNotPublished(SeatError):
    """A reaper run ended with lease events Pub/Sub did not confirm; they stay in the
    Redis outboxes for the next run. ``report``: the run's counts."""

    def __init__(self, report: dict[str, Any], retry_after_seconds: int = 30) -> None:
        super().__init__("Pub/Sub did not confirm some events")
        self.report = report
        self.retry_after_seconds = retry_after_seconds


# -- the database's answers (raised by seatlease.records.store, re-exported there) --------------


class StoreError(SeatError):
    """A value the database's rules refuse (e.g. ``max_lease_seconds`` below
    ``lease_seconds``); ``NotFound`` and ``Conflict`` narrow it."""


class NotFound(StoreError):
    pass


class Conflict(StoreError):
    """It already exists."""


class SessionNotLive(NotFound):
    """``revoke`` of a session that is not (or no longer) holding a seat."""


class AmbiguousLicense(SeatError):
    """A license id without a tenant matches several tenants' licenses."""

    def __init__(self, license_id: str, tenants: list[str]) -> None:
        super().__init__(
            f"License {license_id!r} exists in {len(tenants)} tenants ({', '.join(tenants)}); "
            "give tenant_id to choose one."
        )
        self.license_id = license_id
        self.tenants = tenants


# -- backend failures that are outages -------------------------------------------------


def redis_outage(exc: BaseException) -> BackendUnavailable | None:
    """A Redis failure a retry can cure, as ``BackendUnavailable('redis')``; None for
    anything else (a bug, which must surface as one). One classification for the HTTP
    boundary and the CLI."""
    match exc:
        case RedisConnectionError() | RedisTimeoutError():
            return BackendUnavailable("redis")
        # Full (maxmemory with noeviction) or a replica during a failover: writes fail
        # until an operator or the failover acts; retrying later is the client's move.
        case OutOfMemoryError() | ReadOnlyError():
            return BackendUnavailable("redis")
        case ResponseError() if any(w in str(exc) for w in ("OOM", "LOADING", "READONLY")):
            return BackendUnavailable("redis")
        case RedisError() if type(exc).__name__.startswith(("Cluster", "MasterDown", "TryAgain")):
            return BackendUnavailable("redis")
    return None
