"""seatlease_client: hold a floating-license seat from a vendor's product without
thinking about heartbeats.

Zero runtime dependencies (the standard library only, token verification included) and
Python 3.9 or newer::

    from seatlease_client import SeatClient

    # the vendor's keys: the x of each key of the deployment's JWKS (GET <base_url>/keys)
    client = SeatClient(
        "https://REGION-PROJECT.cloudfunctions.net", api_key, pinned_keys=VENDOR_KEYS
    )
    with client.lease("cad-suite", client_id="host-42", metadata={"user": "ann"}) as lease:
        run_the_product()  # heartbeats run in a background thread; released on exit

Behaviour (docs/client.md in the seatlease repository has the details):

- ``base_url`` is where the functions live: ``POST <base_url>/acquire``, ``/heartbeat``,
  ``/release`` (Cloud Functions' URLs; the local devserver serves the same paths).
- Network errors, ``503`` (and ``429``/``502``/``504`` from a front end) are retried with
  exponential backoff and jitter, never sooner than ``Retry-After`` and never later than
  ``max_backoff``, whatever ``Retry-After`` says. ``timeout`` bounds a whole exchange
  (connect, headers and body). Redirects are never followed. Every call is safe
  to retry: acquiring again with the same ``client_id`` returns the lease already held,
  a heartbeat only extends, a release is idempotent. Other errors raise typed
  exceptions chosen by the answer's ``error.code`` (``NoSeatsAvailable``,
  ``LicenseNotFound``, ...; base ``SeatError``); any other 404 or a redirect is a
  ``ServiceError`` naming the URL, a 2xx that is not the service's an ``InvalidResponse``.
- A held lease heartbeats every ``heartbeat_interval_seconds`` (told by the server)
  minus up to 25 % jitter, from a daemon thread. A heartbeat answered ``410`` ``unknown``
  (the server lost the session, as in a region's loss) is sent once more with the
  session's last ``lease_token``: re-admitted, the seat
  goes on as if nothing happened. When the seat is lost (``410``: the lease expired,
  reason ``expired``, an operator freed it, ``revoked``, or the server does not know it,
  ``unknown``; ``403`` ``license_expired``: the license's term ended; or no renewal
  completed by the lease's deadline, ``unreachable``) the client calls
  ``on_lost(lease, reason)`` once, sets ``lease.lost`` and re-acquires with the same
  ``client_id``; a denial (``409``) is retried at ``Retry-After`` until a seat frees,
  then ``on_regained(lease)`` is called and ``lease.lost`` is False again. A re-acquire
  refused with a ``403`` (term ended or not begun, suspended, not entitled) is final
  until an operator acts: one WARNING, then asked again only every 5 minutes, quietly
  (a renewed license is regained by itself). A suspended license keeps its held seats.
- ``seats=N`` (``acquire`` and ``lease``) takes a lease that counts as N of the
  license's seats (its weight; ``lease.seats``); renewals and re-acquires keep it, and a
  different weight for a lease this ``client_id`` holds raises ``SeatsMismatch``.
- Idle seats (a license with an idle timeout): ``lease.touch()`` on user activity and
  ``with lease.busy():`` around work that must not be interrupted; from the first touch
  on, heartbeats send ``idle_seconds`` (and ``busy: true`` inside a busy scope). A
  warned lease calls ``on_idle_warning(lease, reclaim_at)`` once and sets
  ``lease.idle_reclaim_at``; a touch then sends a heartbeat at once, which cancels the
  warning. A seat reclaimed for idleness is lost with reason ``idle`` and asked for
  again only on the next touch or busy scope.
- ``wait=True`` waits for a seat (up to ``timeout`` seconds, else ``SeatWaitTimeout``),
  retrying at the ``Retry-After`` of each ``409``; the context's ``cancel()``, from
  another thread, ends the wait (``Cancelled``).
- The seat is released on leaving the ``with`` block, at interpreter exit (atexit) and
  on SIGTERM (a handler installed only from the main thread, only while a seat is held,
  chained to the previous handler; with no previous Python handler the process then
  terminates by SIGTERM as it would have), each within ``release_timeout``.
- Verified by default: the signed token of every answer is checked against the vendor's
  ``pinned_keys`` (required) and the deployment's JWKS, with the standard library: a
  forged, tampered, replayed, expired or wrong-audience grant raises a ``TokenError``
  (one subclass per reason), never counts as a seat, and its session is released at
  once. ``insecure_skip_verify=True`` opts out (any server at ``base_url`` can then grant
  seats); ``verify=False`` alone is refused.
- ``borrow(license_id, client_id, seconds, path=...)`` takes a borrowed seat (no
  heartbeats until it ends, for a machine going offline) and saves it with its signed
  token (``user``, ``host``, ``entitlements``, ``version``, ``seats`` as for acquire);
  ``load_borrowed(path)`` verifies the saved token offline later against the pinned
  keys and ``BorrowedSeat.return_early()`` releases it.
- Thread-safe: one ``SeatClient`` may serve many threads, each holding its own leases.
  No global state. The API key never appears in ``repr``, in logs or in exceptions.

The modules behind this one are private: ``_errors`` (the exceptions), ``_claims`` (the
values a token and its answer carry), ``_lease`` (a held seat and its heartbeats) with
``_activity`` (what the product says about its user: touches, busy scopes, warnings),
``_client`` (``SeatClient``), ``_async`` (``AsyncSeatClient``), ``_verify`` (token
verification) over ``_ed25519`` (Ed25519 in pure Python), ``_transport`` (the seam every
request goes through) and ``_http`` (its default: one bounded exchange, no redirects),
``_borrow`` (borrowed seats saved to a file). They import one another without a circle.
"""

from seatlease_client._async import AsyncSeatClient
from seatlease_client._borrow import BorrowedSeat
from seatlease_client._claims import claimed_seats
from seatlease_client._client import SeatClient
from seatlease_client._errors import (
    BackendUnavailable,
    BadSignature,
    Cancelled,
    InvalidRequest,
    InvalidResponse,
    LicenseExpired,
    LicenseNotFound,
    LicenseNotStarted,
    LicenseSuspended,
    MachineMismatch,
    MalformedToken,
    NoSeatsAvailable,
    NotEntitled,
    QueueFull,
    SeatError,
    SeatsMismatch,
    SeatWaitTimeout,
    ServiceError,
    SessionExpired,
    TokenError,
    TokenExpired,
    TokenMismatch,
    TokenMissing,
    TokenReplayed,
    TokenWrongMachine,
    Unauthenticated,
    UnknownKeyId,
    UntrustedKey,
    VersionNotEntitled,
    WrongAudience,
)
from seatlease_client._lease import Lease
from seatlease_client._version import __version__

__all__ = [
    "AsyncSeatClient",
    "BackendUnavailable",
    "BadSignature",
    "BorrowedSeat",
    "Cancelled",
    "InvalidRequest",
    "InvalidResponse",
    "Lease",
    "LicenseExpired",
    "LicenseNotFound",
    "LicenseNotStarted",
    "LicenseSuspended",
    "MachineMismatch",
    "MalformedToken",
    "NoSeatsAvailable",
    "NotEntitled",
    "QueueFull",
    "SeatClient",
    "SeatError",
    "SeatWaitTimeout",
    "SeatsMismatch",
    "ServiceError",
    "SessionExpired",
    "TokenError",
    "TokenExpired",
    "TokenMismatch",
    "TokenMissing",
    "TokenReplayed",
    "TokenWrongMachine",
    "Unauthenticated",
    "UnknownKeyId",
    "UntrustedKey",
    "VersionNotEntitled",
    "WrongAudience",
    "__version__",
    "claimed_seats",
]
