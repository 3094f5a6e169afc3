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
from seatlease.seats.keys import LicenseKeys, shard_of


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
    """The recovery under way (or none): when it began and who opened it (the operator's
    ``failover begin``, the service on finding shards' data gone, or both), each license's
    window (one heartbeat interval of the longest lease it granted recently + the slack)
    grouped by that lease, how many licenses still hold new grants back, the leases
    re-admitted by their tokens so far."""
    operator = failover.began_ms(redis)
    lost = failover.lost_shards(redis)
    now = server_time_ms(redis)
    rows = store.lease_lengths()
    longest = failover.longest_recent_lease_ms(
        redis,
        [LicenseKeys.of(tenant, lic).lmax for tenant, lic, _ in rows],
        [seconds * 1000 for _t, _l, seconds in rows],
    )
    groups: dict[int, dict[str, Any]] = {}
    waiting, last_end, began_any = 0, None, None
    for (tenant, lic, _), lease_ms in zip(rows, longest, strict=True):
        began = max(operator or 0, lost.get(shard_of(tenant, lic), 0))
        if not began:
            continue
        ends = began + failover.window_ms(lease_ms)
        group = groups.setdefault(
            lease_ms,
            {
                "longest_lease_seconds": lease_ms // 1000,
                "window_seconds": failover.window_ms(lease_ms) // 1000,
                "ends_at_ms": ends,
                "licenses": 0,
                "open": False,
            },
        )
        group["licenses"] += 1
        group["ends_at_ms"] = max(group["ends_at_ms"], ends)
        if now < ends:
            waiting += 1
            group["open"] = True
        last_end = max(last_end or ends, ends)
        began_any = max(began_any or began, began)
    shards_lost = [
        {"shard": shard, "began_at": rfc3339(ms)}
        for shard, ms in sorted(lost.items())
        if now - ms < failover.MARK_SECONDS * 1000
    ]
    if operator is None and not waiting:
        return {"recovering": False, "lost_shards": shards_lost}
    windows = [
        {**{k: v for k, v in g.items() if k != "ends_at_ms"}, "ends_at": rfc3339(g["ends_at_ms"])}
        for _, g in sorted(groups.items())
    ]
    began = operator if operator is not None else began_any
    opened_by = "operator" if operator is not None else "data_lost"
    if operator is not None and any(now < ms + 3 * 24 * 3600 * 1000 for ms in lost.values()):
        opened_by = "both" if waiting else opened_by
    return {
        "recovering": True,
        "opened_by": opened_by,
        "began_at": rfc3339(began),
        "elapsed_seconds": round((now - began) / 1000),
        "windows": windows,
        "licenses_holding_grants": waiting,
        "last_window_ends_at": rfc3339(last_end if last_end is not None else began),
        "recovered_leases": failover.recovered(redis),
        "lost_shards": shards_lost,
    }


def _begin(_req: FailoverBegin) -> tuple[int, dict[str, Any]]:
    from seatlease.api.runtime import refresh_license_cache

    redis = _redis()
    began = failover.begin(redis)
    # The replica holds the licenses' configurations as cached before the changes it
    # missed (a suspension, a term, a deny list of the last seconds): each is cached
    # again from the database, the source of truth, before traffic comes.
    refreshed = 0
    for tenant_id, license_id, _lease in store.lease_lengths():
        refresh_license_cache(tenant_id, license_id)
        refreshed += 1
    log("NOTICE", "failover: recovery began", began_at=rfc3339(began), refreshed=refreshed)
    return 200, {
        **_view(redis),
        "licenses_refreshed": refreshed,
        "note": f"route traffic here now; running function instances see the recovery "
        f"within {failover.CHECK_SECONDS:g} s",
    }


def _status(_req: FailoverStatus) -> tuple[int, dict[str, Any]]:
    return 200, _view(_redis())


def _end(_req: FailoverEnd) -> tuple[int, dict[str, Any]]:
    redis = _redis()
    ended = failover.end(redis)
    if ended:
        log("NOTICE", "failover: recovery ended by the operator (new grants go on now)")
    return 200, {"recovering": False, "ended": ended}


HANDLERS = {FailoverBegin: _begin, FailoverStatus: _status, FailoverEnd: _end}
