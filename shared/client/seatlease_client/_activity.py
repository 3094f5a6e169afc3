"""What the product says about its user (issue 50): ``touch()`` on user activity and
``busy()`` around work that must not be interrupted, sent with each heartbeat as
``idle_seconds`` and ``busy``; and the server's idle warning (``idle_reclaim_at``).

A product that never calls ``touch()`` sends no ``idle_seconds``: the server then never
finds it idle. The heartbeat thread is woken (never called from the product's thread: a
touch must not wait on the network) when a touch or a busy scope can cancel a warning, and
when activity comes back to a seat reclaimed for idleness (which is not asked for again
until then)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

from seatlease_client._claims import _parse_time

# The contract's bound of idle_seconds (ten years): a clock gone wrong is sent as this.
MAX_IDLE_SECONDS = 315_360_000


class Activity:
    """The last touch (a ``clock()`` reading, None until the first), the busy count, and
    the warning the last renewal carried. Thread-safe: the product touches from any
    thread while the heartbeat thread reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.last_touch: float | None = None
        self.busy_count = 0
        # While warned: the last touch that the warned heartbeat reported, and whether a
        # heartbeat was already woken for this warning (once per warning: a product that
        # touches on every key press must not send a heartbeat for each).
        self.warned = False
        self._warned_touch: float | None = None
        self._warned_busy = False
        self._woken = False
        # The seat was reclaimed for idleness: asked for again on the next activity.
        self.idle_lost = False
        self.resume = False
        self.wake: Callable[[], None] = lambda: None  # the keeper's: run a step now

    def touch(self, seconds_ago: float = 0.0) -> None:
        """The product saw user activity ``seconds_ago`` seconds ago (default now; the
        latest call wins, so a product may pass the system's own idle time)."""
        if not (isinstance(seconds_ago, (int, float)) and math.isfinite(seconds_ago)):
            raise ValueError("seconds_ago must be a finite number of seconds")
        if seconds_ago < 0:
            raise ValueError("seconds_ago must not be negative")
        with self._lock:
            self.last_touch = self.clock() - seconds_ago
            wake = self._should_wake()
        if wake:
            self.wake()

    def begin_busy(self) -> None:
        with self._lock:
            self.busy_count += 1
            wake = self._should_wake()
        if wake:
            self.wake()

    def end_busy(self) -> None:
        with self._lock:
            if self.busy_count <= 0:
                raise RuntimeError("end_busy() without a begin_busy()")
            self.busy_count -= 1

    def _should_wake(self) -> bool:
        """Under the lock: whether a heartbeat now is worth sending: the seat lost for
        idleness is to be asked for again (once), or a warning can be cancelled by what
        the warned heartbeat did not say: a touch at least a second newer than the one it
        reported (a whole second less idle), or busy. Once per warned answer: a product
        that touches on every key press sends one heartbeat, not one a key."""
        if self.idle_lost:
            wake, self.resume = not self.resume, True
            return wake
        if not self.warned or self._woken:
            return False
        reported = self._warned_touch
        newer = self.last_touch is not None and (
            reported is None or self.last_touch >= reported + 1.0
        )
        self._woken = newer or (self.busy_count > 0 and not self._warned_busy)
        return self._woken

    def report(self) -> Report:
        """The heartbeat's activity fields, and what they say (for ``renewed``)."""
        with self._lock:
            fields: dict[str, Any] = {}
            touched = self.last_touch
            if touched is not None:
                idle = max(0, math.floor(self.clock() - touched))
                fields["idle_seconds"] = min(idle, MAX_IDLE_SECONDS)
            if self.busy_count > 0:
                fields["busy"] = True
            return Report(fields, touched)

    def renewed(self, warned: bool, sent: Report) -> bool:
        """A renewal's answer: warned (it carried ``idle_reclaim_at``) or not, to the
        heartbeat that said ``sent``. True when another should go at once: activity came
        while the warned one was on its way."""
        with self._lock:
            self.warned, self._woken = warned, False
            self._warned_touch = sent.touch if warned else None
            self._warned_busy = bool(sent.fields.get("busy"))
            return warned and self._should_wake()

    def lost_for_idleness(self) -> None:
        with self._lock:
            self.idle_lost, self.resume = True, False
            self.warned, self._warned_touch, self._woken = False, None, False

    def awaits_activity(self) -> bool:
        """The seat was reclaimed for idleness and no activity came since: not asked for."""
        with self._lock:
            return self.idle_lost and not self.resume

    def regained(self) -> None:
        with self._lock:
            self.idle_lost = self.resume = False


class Report:
    """The activity fields of one heartbeat and the touch (a ``clock()`` reading) they
    report."""

    __slots__ = ("fields", "touch")

    def __init__(self, fields: dict[str, Any], touch: float | None) -> None:
        self.fields, self.touch = fields, touch


class BusyScope:
    """``with lease.busy():`` work that must not be interrupted (a render, a solve): while
    any such scope is open (they nest) heartbeats say ``busy: true`` and the seat is never
    reclaimed for idleness. Entered once."""

    def __init__(self, activity: Activity) -> None:
        self._activity = activity
        self._state = "new"

    def __enter__(self) -> BusyScope:
        if self._state != "new":
            raise RuntimeError("a busy scope can be entered once; call lease.busy() again")
        self._state = "open"
        self._activity.begin_busy()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state == "open":
            self._state = "closed"
            self._activity.end_busy()


def parse_reclaim_at(value: Any) -> datetime | None:
    """The answer's ``idle_reclaim_at`` (aware UTC), None when absent."""
    return _parse_time(value) if isinstance(value, str) else None
