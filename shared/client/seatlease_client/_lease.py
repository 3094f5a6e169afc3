"""A held seat: ``Lease`` (what the product sees), ``_Keeper`` (the first acquire, then
heartbeats and re-acquires, one ``step`` at a time) and ``LeaseContext`` (the ``with``
block that runs the keeper in a daemon thread)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

from seatlease_client._activity import Activity, BusyScope, parse_reclaim_at
from seatlease_client._claims import _parse_time, claimed_seats  # noqa: F401 (re-exported)
from seatlease_client._errors import (
    BackendUnavailable,
    Cancelled,
    LicenseSuspended,
    NoSeatsAvailable,
    SeatError,
    SeatWaitTimeout,
    SessionExpired,
)

log = logging.getLogger("seatlease.client")

OnLost = Callable[["Lease", str], None]
OnRegained = Callable[["Lease"], None]
OnIdleWarning = Callable[["Lease", datetime], None]

# A re-acquire refused with a 403 (the license's term ended or has not begun, it is
# suspended, it does not entitle this product, version or user) stays refused until an
# operator acts: asked again only this rarely (plus up to 20 % jitter), so that a renewal
# is noticed by itself without a stream of refused requests and log lines.
FINAL_REFUSAL_PAUSE = 300.0
# A seat reclaimed for idleness is asked for again on the product's next activity (a
# touch or a busy scope wakes the heartbeat thread), not before: re-acquired at once, an
# idle product would take its seat straight back. Meanwhile the thread only sleeps.
IDLE_LOST_PAUSE = 3600.0


class Lease:
    """A seat held by this process, updated in place by heartbeats and re-acquires.

    ``lost`` is True from the moment the seat is known to be gone until it is regained
    (``lost_reason`` says why: ``expired``, ``unknown``, ``revoked`` (an operator freed the
    seat), ``idle`` (reclaimed for idleness: asked for again on the next ``touch()`` or
    ``busy()``), ``unreachable``, or the refusal's code such as ``license_expired``).
    ``expires_at`` is the server's deadline (aware UTC).

    Idle reporting (a license with an idle timeout): call ``touch()`` on user activity
    and wrap work that must not be interrupted in ``with lease.busy():``; heartbeats then
    say how long the user has been idle. ``idle_reclaim_at`` (aware UTC) is set while the
    server has warned that the seat will be reclaimed for idleness then.
    """

    def __init__(
        self, license_id: str, client_id: str, metadata: dict[str, Any] | None = None
    ) -> None:
        self.license_id = license_id
        self.client_id = client_id
        self.metadata = metadata
        self.session_id = ""
        self.expires_at: datetime | None = None
        self.lease_seconds = 0
        self.heartbeat_interval_seconds = 0
        self.seats_used = 0
        self.seats_total = 0
        # This lease's weight: how many of the license's seats it counts as (the answer's
        # ``seats``; 1 from a server that does not say).
        self.seats = 1
        self.overage = False
        self.lost = False
        self.lost_reason: str | None = None
        self.released = False
        # The last lease token of this session (verified, unless the client opted out with
        # insecure_skip_verify; e.g. for a product that keeps proof of its grant). It is
        # the proof a heartbeat shows to keep the seat after the server lost the session
        # (a region's loss). None from a server that sends none.
        self.token: str | None = None
        # The license's term and entitlements, when it has some (else [], None, False):
        # what it entitles to, when it expires (aware UTC; its grace may run after it),
        # whether it is in its grace now, and the highest version entitled.
        self.entitlements: list[str] = []
        self.license_expires_at: datetime | None = None
        self.in_grace = False
        self.max_version: str | None = None
        # Set while the last renewal carried an idle warning: the reclaim's earliest time.
        self.idle_reclaim_at: datetime | None = None
        self._activity = Activity()

    def touch(self, seconds_ago: float = 0.0) -> None:
        """The product saw user activity (a key press, a command) ``seconds_ago`` seconds
        ago (default now; the latest call wins, so the system's own idle time may be
        passed). Cheap and non-blocking: call it on every input. From the first call on,
        each heartbeat sends the whole seconds since the last touch (``idle_seconds``); a
        product that never calls it is never idle. While warned (``idle_reclaim_at``),
        a touch sends a heartbeat at once from the heartbeat thread, which cancels the
        warning; after a loss for idleness it asks for a seat again."""
        self._activity.touch(seconds_ago)

    def busy(self) -> BusyScope:
        """``with lease.busy():`` work that must not be interrupted (a render, a solve):
        while any busy scope is open (they nest) heartbeats send ``busy: true`` and the
        seat is never reclaimed for idleness. Does not count as a touch."""
        return BusyScope(self._activity)

    def __repr__(self) -> str:
        return (
            f"Lease(license_id={self.license_id!r}, client_id={self.client_id!r}, "
            f"session_id={self.session_id!r}, expires_at={self.expires_at!r}, "
            f"seats={self.seats_used}/{self.seats_total}, weight={self.seats}, "
            f"lost={self.lost})"
        )

    def _apply(self, body: dict[str, Any]) -> None:
        session_id = body.get("session_id")
        session_id = session_id if isinstance(session_id, str) and session_id else self.session_id
        if session_id != self.session_id:
            self.token = None  # a token names one session: never show another's
        self.session_id = session_id
        if isinstance(body.get("lease_expires_at"), str):
            self.expires_at = _parse_time(body["lease_expires_at"])
        for name in ("lease_seconds", "heartbeat_interval_seconds", "seats_used", "seats_total"):
            if isinstance(body.get(name), int):
                setattr(self, name, body[name])
        weight = body.get("seats", 1)  # absent from older servers: a plain lease
        if isinstance(weight, int) and not isinstance(weight, bool) and weight >= 1:
            self.seats = weight
        if "overage" in body:
            self.overage = bool(body["overage"])
        if isinstance(body.get("lease_token"), str):
            self.token = body["lease_token"]
        if isinstance(body.get("entitlements"), list):
            self.entitlements = [str(e) for e in body["entitlements"]]
        if isinstance(body.get("license_expires_at"), str):
            self.license_expires_at = _parse_time(body["license_expires_at"])
        self.in_grace = body.get("in_grace") is True
        if isinstance(body.get("max_version"), str):
            self.max_version = body["max_version"]


class LeaseClient(Protocol):
    """What a ``_Keeper`` and its ``LeaseContext`` ask of their client (``SeatClient`` is
    one): its calls, their pacing and the keepers' registration for atexit and SIGTERM.
    Declared here, so that the lease depends on no client module."""

    timeout: float
    max_backoff: float
    release_timeout: float

    def _acquire_body(
        self,
        license_id: str,
        client_id: str,
        lease_seconds: int | None,
        metadata: dict[str, Any] | None,
        **fields: Any,
    ) -> dict[str, Any]: ...

    def _send(self, function: str, body: dict[str, Any], timeout: float | None = None) -> Any: ...

    def _call(
        self,
        function: str,
        body: dict[str, Any],
        *,
        retries: int | None = None,
        budget: float | None = None,
        stop: threading.Event | None = None,
    ) -> Any: ...

    def _wait_pause(self, denied: NoSeatsAvailable) -> float: ...

    def _backoff_delay(self, attempt: int, retry_after: float | None, cap: float) -> float: ...

    def _release_quietly(
        self, license_id: str, session_id: str, budget: float | None = None
    ) -> None: ...

    def _register(self, keeper: _Keeper) -> None: ...

    def _unregister(self, keeper: _Keeper) -> None: ...

    def _close(self, keeper: _Keeper, budget: float | None = None) -> None: ...


class _Keeper:
    """Keeps one lease: the first acquire, then one heartbeat (or re-acquire while the
    seat is lost) per ``step``; the thread (or asyncio task) only schedules steps."""

    def __init__(
        self,
        client: LeaseClient,
        lease: Lease,
        lease_seconds: int | None,
        on_lost: OnLost | None,
        on_regained: OnRegained | None,
        on_idle_warning: OnIdleWarning | None = None,
    ) -> None:
        self.client, self.lease, self.requested_seconds = client, lease, lease_seconds
        self.on_lost, self.on_regained = on_lost, on_regained
        self.on_idle_warning = on_idle_warning
        self.stop = threading.Event()
        # Set to run the next step now (a touch that can cancel an idle warning, and
        # close()); ``notify`` tells an asyncio heartbeat task the same.
        self.wake = threading.Event()
        self.notify: Callable[[], None] | None = None
        lease._activity.wake = self._wake_up
        # Guards the session id between a late acquire and close(); re-entrant because
        # the SIGTERM handler may run close() in a thread that already holds it.
        self.lock = threading.RLock()
        self.failures = 0
        self.valid_until = 0.0  # monotonic time after which the server surely expired it
        self.thread: threading.Thread | None = None
        # user, host, entitlements, version and seats (the weight), sent with every
        # acquire: a re-acquire after a loss asks for the same weight
        self.identity: dict[str, Any] = {}
        self.place: dict[str, Any] = {}  # queue and ticket while waiting in line
        # The code of the refusal already said (a WARNING once; repeats are INFO), until
        # the seat is back.
        self.announced: str | None = None
        self.cancelled = False  # LeaseContext.cancel(): the acquire or wait ends

    # -- requests ----------------------------------------------------------------------

    def _acquire_body(self) -> dict[str, Any]:
        return self.client._acquire_body(
            self.lease.license_id, self.lease.client_id, self.requested_seconds,
            self.lease.metadata, **self.identity, **self.place,
        )  # fmt: skip

    def _took(self, body: dict[str, Any], received: float) -> None:
        self.lease._apply(body)
        # The server's deadline is (its processing time + lease) < (our receipt + lease).
        self.valid_until = received + self.lease.lease_seconds

    def acquire_first(self, wait: bool, timeout: float | None) -> None:
        """The ``with`` statement's acquire: raises, or waits for a seat if ``wait``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        # Waiting asks for a place in line; a license without a queue ignores it.
        self.place = {"queue": True} if wait else {}
        while True:
            self._check_cancelled()
            budget = None if deadline is None else max(0.05, deadline - time.monotonic())
            try:
                body = self.client._call(
                    "acquire", self._acquire_body(), stop=self.stop, budget=budget
                )
                if body.get("queued") is True:
                    raise _InLine(body)
            except BackendUnavailable:
                self._check_cancelled()
                # Waiting for a seat also waits out an outage, within the same timeout.
                out_of_time = deadline is not None and time.monotonic() >= deadline
                if not wait or out_of_time:
                    raise
                if self.stop.wait(1.0):
                    self._check_cancelled()
                    raise
                continue
            except NoSeatsAvailable as denied:
                left = None if deadline is None else deadline - time.monotonic()
                self._check_cancelled()
                if not wait:
                    raise
                if isinstance(denied, _InLine):  # keep the place: come back with the ticket
                    self.place = {"queue": True, "ticket": denied.body["ticket"]}
                    log.info(
                        "seatlease: waiting in line for %s, position %s",
                        self.lease.license_id, denied.body.get("position"),
                    )  # fmt: skip
                if left is not None and left <= 0:
                    raise SeatWaitTimeout(
                        409, "seat_wait_timeout",
                        f"No seat on {self.lease.license_id!r} came free within {timeout} s.",
                        denied.body, denied.retry_after_seconds,
                    ) from None  # fmt: skip
                pause = self.client._wait_pause(denied)
                log.info(
                    "seatlease: no seat on %s (%d/%d in use); retrying in %.1f s",
                    self.lease.license_id, denied.seats_used, denied.seats_total, pause,
                )  # fmt: skip
                if self.stop.wait(pause if left is None else min(pause, left)):
                    self._check_cancelled()
                    raise
                continue
            self.place = {}
            with self.lock:
                if self.stop.is_set():  # cancelled while the acquire was in flight
                    self.client._release_quietly(self.lease.license_id, body["session_id"])
                    raise Cancelled(0, "cancelled", "The lease was cancelled while acquiring.")
                self._took(body, time.monotonic())
            return

    def _check_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled(
                0, "cancelled", f"The acquire of {self.lease.license_id!r} was cancelled."
            )

    # -- the heartbeat loop ------------------------------------------------------------

    def beat_delay(self) -> float:
        """Time to the next heartbeat: the server's interval minus up to 25 % jitter, so
        thousands of copies started together do not beat in step."""
        # An answer without heartbeat_interval_seconds: a third of the lease.
        interval = float(
            self.lease.heartbeat_interval_seconds or max(1, self.lease.lease_seconds // 3)
        )
        if self.lease.lease_seconds:  # the server's whole-second interval is too long for
            interval = min(interval, self.lease.lease_seconds / 3)  # 1-2 s leases
        interval = max(0.2, interval)
        return random.uniform(interval * 0.75, interval)

    def run(self) -> None:
        delay = self.beat_delay()
        while True:
            self.wake.wait(delay)
            self.wake.clear()  # a wake from here on runs one more step after this one
            if self.stop.is_set():
                return
            delay = self.step()

    def _wake_up(self) -> None:
        """From any thread (the product's): run the next step now, without waiting."""
        self.wake.set()
        notify = self.notify
        if notify is not None:
            try:
                notify()
            except RuntimeError:  # the event loop has closed: its task is gone too
                pass

    def step(self) -> float:
        """One heartbeat, or one re-acquire while the seat is lost; the next delay."""
        if self.lease.lost and self.lease._activity.awaits_activity():
            return IDLE_LOST_PAUSE  # reclaimed for idleness: a touch wakes us
        try:
            return self._regain() if self.lease.lost else self._beat()
        except BackendUnavailable as exc:
            return self._after_transient(exc)
        except Exception:  # a bug must not end the heartbeats: log it and carry on
            log.exception("seatlease: heartbeat step failed")
            self.failures += 1
            return self._backoff(None)

    def _beat(self) -> float:
        lease = self.lease
        body = {"license_id": lease.license_id, "session_id": lease.session_id}
        sent = lease._activity.report()
        body.update(sent.fields)
        # A renewal that has not completed by the lease's deadline is too late: the seat
        # is then lost (unreachable), whatever the answer still on its way says.
        timeout = self.client.timeout
        if self.valid_until:
            timeout = max(0.05, min(timeout, self.valid_until - time.monotonic()))
        try:
            reply = self.client._send("heartbeat", body, timeout)
        except SessionExpired as gone:
            recovered = self._recover(body) if gone.reason == "unknown" else None
            if recovered is None:
                if gone.reason == "idle":
                    lease._activity.lost_for_idleness()
                if not self.stop.is_set():
                    self._lose(gone.reason)
                return 0.0  # ask for the seat again at once (after idleness: on activity)
            reply = recovered
        except BackendUnavailable:
            raise
        except SeatError as refused:
            # 401 (key revoked), 403 (the license's term ended or has not begun), 404:
            # it cannot be renewed. (A suspended license's held seats keep renewing.)
            if not self.stop.is_set():
                self._lose(refused.code, refused)
            self.failures += 1
            return self._backoff(None, cap=self.client.max_backoff)
        with self.lock:
            if not self.stop.is_set():
                self._took(reply, time.monotonic())
        self.failures = 0
        return 0.0 if self._warned(reply, sent) else self.beat_delay()

    def _warned(self, reply: dict[str, Any], sent: Any) -> bool:
        """The renewal's idle warning applied (``on_idle_warning`` once per warning);
        True when a heartbeat should go at once (activity came meanwhile)."""
        reclaim_at = parse_reclaim_at(reply.get("idle_reclaim_at"))
        newly = reclaim_at is not None and self.lease.idle_reclaim_at is None
        self.lease.idle_reclaim_at = reclaim_at
        again = self.lease._activity.renewed(reclaim_at is not None, sent)
        if newly and not self.stop.is_set():
            log.warning(
                "seatlease: %s idle: the seat may be reclaimed from %s unless there is "
                "activity", self.lease.license_id, reply.get("idle_reclaim_at"),
            )  # fmt: skip
            self._callback(self.on_idle_warning, self.lease, reclaim_at)
        return again

    def _recover(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """After a ``410`` ``unknown`` (the server does not know the session: it may have
        lost its last writes with a region), the same heartbeat once more with the
        session's last lease token, which the server may take as proof of the seat. The
        renewal, or None: then the seat is lost as before. Only then is the token sent
        (a normal heartbeat does not carry its 400 bytes); never after ``expired`` or
        ``revoked`` (an operator's revoke is final: the server refuses its token)."""
        token = self.lease.token
        if token is None or self.stop.is_set():
            return None
        try:  # a fresh request_id: this is not a retry of the refused heartbeat
            return self.client._call("heartbeat", {**body, "lease_token": token}, retries=0)
        except SeatError as refused:
            log.info("seatlease: %s not re-admitted: %s", self.lease.license_id, refused)
            return None

    def _regain(self) -> float:
        try:
            reply = self.client._send("acquire", self._acquire_body())
        except NoSeatsAvailable as denied:
            self.failures = 0
            pause = self.client._wait_pause(denied)
            log.info(
                "seatlease: seat on %s still lost (%d/%d in use); retrying in %.1f s",
                self.lease.license_id, denied.seats_used, denied.seats_total, pause,
            )  # fmt: skip
            return pause
        except BackendUnavailable:
            raise
        except LicenseSuspended as refused:
            # 403: the term ended or has not begun, suspended, not entitled: final until an
            # operator acts. Said once, then asked again only every few minutes.
            self._say_refused(refused)
            self.failures = 0
            return random.uniform(FINAL_REFUSAL_PAUSE, FINAL_REFUSAL_PAUSE * 1.2)
        except SeatError as refused:  # deleted, key revoked, a bad answer: try now and then
            self._say_refused(refused)
            self.failures += 1
            return self._backoff(None, cap=self.client.max_backoff)
        with self.lock:
            if self.stop.is_set():  # closed meanwhile: give the new seat straight back
                self.client._release_quietly(self.lease.license_id, reply["session_id"])
                return 0.0
            self._took(reply, time.monotonic())
            self.lease.lost, self.lease.lost_reason = False, None
        self.lease._activity.regained()
        self.failures = 0
        self.announced = None
        log.warning(
            "seatlease: seat on %s regained (session %s)",
            self.lease.license_id, self.lease.session_id,
        )  # fmt: skip
        self._callback(self.on_regained, self.lease)
        return self.beat_delay()

    def _after_transient(self, exc: BackendUnavailable) -> float:
        self.failures += 1
        # (a renewal abandoned at the deadline ends a moment before it: 50 ms allowed)
        if not self.lease.lost and time.monotonic() > self.valid_until - 0.05:
            self._lose("unreachable")  # no renewal reached the server before the deadline
        log.info("seatlease: %s unreachable (%s); retrying", self.lease.license_id, exc)
        return self._backoff(exc.retry_after_seconds)

    def _backoff(self, retry_after: float | None, cap: float | None = None) -> float:
        # While the lease runs, never wait longer than one heartbeat interval between
        # attempts, and retry faster as the deadline nears (at most a third of the time
        # left): the seat is kept only if a renewal gets through before the deadline.
        if cap is None:
            interval = float(self.lease.heartbeat_interval_seconds or 1)
            cap = min(self.client.max_backoff, max(0.2, interval))
            left = self.valid_until - time.monotonic()
            if not self.lease.lost and left > 0:
                cap = min(cap, max(0.05, left / 3))
        return self.client._backoff_delay(self.failures - 1, retry_after, cap)

    def _say_refused(self, refused: SeatError) -> None:
        """Log a refused re-acquire: a WARNING the first time for its code, INFO after (a
        refusal that lasts, an ended term, must not fill the product's log)."""
        level = logging.INFO if refused.code == self.announced else logging.WARNING
        self.announced = refused.code
        log.log(level, "seatlease: re-acquire of %s refused: %s", self.lease.license_id, refused)

    def _lose(self, reason: str, refused: SeatError | None = None) -> None:
        with self.lock:
            if self.lease.lost:
                return
            self.lease.lost, self.lease.lost_reason = True, reason
            self.lease.idle_reclaim_at = None
        if reason == "idle":
            log.warning(
                "seatlease: seat on %s reclaimed for idleness; asked for again on the next "
                "activity", self.lease.license_id,
            )  # fmt: skip
        elif refused is None:
            log.warning(
                "seatlease: seat on %s lost (%s); re-acquiring", self.lease.license_id, reason
            )
        else:  # said here: the same refusal of the re-acquire that follows is not said again
            self.announced = refused.code
            log.warning("seatlease: seat on %s lost: %s", self.lease.license_id, refused)
        self._callback(self.on_lost, self.lease, reason)

    def _callback(self, callback: Callable[..., Any] | None, *args: Any) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:  # the product's callback must not end the heartbeats
            log.exception("seatlease: lease callback %r failed", callback)

    # -- the end -----------------------------------------------------------------------

    def close(self, budget: float | None) -> None:
        """Stop the heartbeats and release the seat (once; safe from any thread), all
        within ``budget`` seconds (default the client's ``release_timeout``)."""
        budget = self.client.release_timeout if budget is None else budget
        give_up = time.monotonic() + budget
        with self.lock:
            if self.lease.released:
                return
            self.stop.set()
            self._wake_up()  # the heartbeat thread ends now, not after its sleep
            self.lease.released = True
            session_id, lost = self.lease.session_id, self.lease.lost
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            # A heartbeat in flight is harmless (it answers 410 after the release) and a
            # late re-acquire releases its own seat, so this join only tidies up.
            thread.join(timeout=min(0.5, budget / 4))
        if session_id and not lost:
            left = max(0.05, give_up - time.monotonic())
            self.client._release_quietly(self.lease.license_id, session_id, left)


class LeaseContext:
    """``with client.lease(...) as lease``: acquire on entry, keep, release on exit."""

    def __init__(self, keeper: _Keeper, wait: bool, timeout: float | None) -> None:
        self._keeper, self._wait, self._timeout = keeper, wait, timeout
        self._entered = False

    def cancel(self) -> None:
        """End the acquire (or the wait for a seat, ``wait=True``) under way in the
        ``with`` statement, from any thread: it raises ``Cancelled`` promptly (an
        exchange in flight ends within the client's ``timeout``) and a seat granted
        meanwhile is released. A no-op once the seat is held: leave the ``with`` block."""
        keeper = self._keeper
        with keeper.lock:
            if keeper.thread is not None:  # held: the with block's exit releases it
                return
            keeper.cancelled = True
            keeper.stop.set()

    def __enter__(self) -> Lease:
        if self._entered:
            raise RuntimeError("a lease context can be entered once; call client.lease() again")
        self._entered = True
        keeper, client = self._keeper, self._keeper.client
        # Registered before acquiring so that a SIGTERM during the acquire is handled.
        client._register(keeper)
        try:
            keeper.acquire_first(self._wait, self._timeout)
        except BaseException:
            client._unregister(keeper)
            raise
        with keeper.lock:
            cancelled = keeper.cancelled  # cancel() between the grant and here
            if not cancelled:
                keeper.thread = threading.Thread(
                    target=keeper.run, name=f"seatlease-heartbeat-{keeper.lease.license_id}",
                    daemon=True,
                )  # fmt: skip
        if cancelled:
            client._close(keeper)
            keeper._check_cancelled()
        assert keeper.thread is not None
        keeper.thread.start()
        return keeper.lease

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._keeper.client._close(self._keeper)


class _InLine(NoSeatsAvailable):
    """A 202 place in the license's wait queue, handled like a denial by the waiting
    loop (same pause: its ``retry_after_seconds``), but keeping the ticket."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(202, "queued", "Waiting in line for a seat.", body, None)
