"""A region lost: ``failover.begin`` marks the Redis the service now runs on as
recovering, ``failover.status`` shows the windows and what they did, ``failover.end``
ends the recovery sooner (docs/operations.md, "A region lost"; the rules:
seatlease/seats/failover.py)."""

from __future__ import annotations

from typing import Any, Literal

from seatlease.admin.common import Action
from seatlease.clock import rfc3339, server_time_ms
from seatlease.logs import log
from seatlease.records import store
from seatlease.seats import failover


class FailoverBegin(Action):
    action: Literal["failover.begin"]


class FailoverStatus(Action):
    action: Literal["failover.status"]


class FailoverEnd(Action):
    action: Literal["failover.end"]


def _redis() -> Any:
    from seatlease.api.runtime import seat_engine

    return seat_engine().redis


def _view(redis: Any) -> dict[str, Any]:
    """The recovery under way (or none): when it began, each license's window (one
    heartbeat interval of its longest lease + the clients' largest back-off) grouped by
    that length, how many licenses still hold new grants back, the leases re-admitted by
    their tokens so far."""
    began = failover.began_ms(redis)
    if began is None:
        return {"recovering": False}
    now = server_time_ms(redis)
    windows, waiting, last_end = [], 0, began
    for max_lease, count in sorted(store.licenses_by_longest_lease().items()):
        ends = began + failover.window_seconds(max_lease) * 1000
        last_end = max(last_end, ends)
        if now < ends:
            waiting += count
        windows.append(
            {
                "max_lease_seconds": max_lease,
                "window_seconds": failover.window_seconds(max_lease),
                "ends_at": rfc3339(ends),
                "licenses": count,
                "open": now < ends,
            }
        )
    return {
        "recovering": True,
        "began_at": rfc3339(began),
        "elapsed_seconds": round((now - began) / 1000),
        "windows": windows,
        "licenses_holding_grants": waiting,
        "last_window_ends_at": rfc3339(last_end),
        "recovered_leases": failover.recovered(redis),
    }


def _begin(_req: FailoverBegin) -> tuple[int, dict[str, Any]]:
    redis = _redis()
    began = failover.begin(redis)
    log("NOTICE", "failover: recovery began", began_at=rfc3339(began))
    return 200, {
        **_view(redis),
        "note": f"route traffic here now; running function instances see the recovery "
        f"within {failover.CHECK_SECONDS:g} s",
    }


def _status(_req: FailoverStatus) -> tuple[int, dict[str, Any]]:
    return 200, _view(_redis())


def _end(_req: FailoverEnd) -> tuple[int, dict[str, Any]]:
    redis = _redis()
    ended = failover.end(redis)
    if ended:
        log("NOTICE", "failover: recovery ended by the operator")
    return 200, {"recovering": False, "ended": ended}


HANDLERS = {FailoverBegin: _begin, FailoverStatus: _status, FailoverEnd: _end}
