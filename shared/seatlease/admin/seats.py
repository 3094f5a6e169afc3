"""Seats in use: ``status`` (FlexNet's ``lmstat -a``), ``revoke`` (``lmremove``) and
Redis ``capacity``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from seatlease.admin.common import Action, license_rows, require_license
from seatlease.admin.licenses import license_view
from seatlease.clock import rfc3339, server_time_ms
from seatlease.errors import AmbiguousLicense, NotFound, SessionNotLive
from seatlease.fields import Identifier
from seatlease.logs import log
from seatlease.records import store


class Status(Action):
    action: Literal["status"]
    tenant_id: Identifier | None = None
    # without tenant_id: the one tenant that has it (as revoke; several: ambiguous_license)
    license_id: Identifier | None = None


class Capacity(Action):
    action: Literal["capacity"]


class Revoke(Action):
    action: Literal["revoke"]
    tenant_id: Identifier | None = None  # absent: the one tenant that has license_id
    license_id: Identifier
    session_id: Identifier | None = None
    client_id: Identifier | None = None  # instead of session_id: the lease it holds

    @model_validator(mode="after")
    def _one_lease(self) -> Revoke:
        if (self.session_id is None) == (self.client_id is None):
            raise ValueError("give session_id or client_id (the lease it holds), one of them")
        return self


def _lease_view(lease: dict[str, Any], now_ms: int) -> dict[str, Any]:
    metadata = lease["metadata"] if isinstance(lease["metadata"], dict) else {}
    idle_at = lease.get("idle_reclaim_at_ms")
    return {
        "session_id": lease["session_id"],
        "client_id": lease["client_id"],
        "user": metadata.get("user"),
        "host": metadata.get("host"),
        "metadata": metadata,
        "acquired_at": rfc3339(int(lease["acquired_at_ms"])),
        "expires_at": rfc3339(lease["expires_at_ms"]),
        "expires_in_seconds": max(0, round((lease["expires_at_ms"] - now_ms) / 1000)),
        "lease_seconds": lease["lease_seconds"],
        # Borrowed: no heartbeats until it expires. Lingering: released by its client,
        # the seat held for that client alone until it expires.
        "borrowed": bool(lease.get("borrowed")),
        "lingering": bool(lease.get("lingering")),
        # The lease's weight: how many of the license's seats it counts as (1 for most).
        "seats": int(lease.get("seats", 1)),
        # Issue 50 (.get: an engine before it says neither). Idle: warned by the license's
        # idle rule, reclaimed at idle_reclaim_at unless its client says it is in use by
        # then; None when not warned. Shared: the share key (the user, the host or
        # user@host) of the seat group it is in, and how many sessions share that seat
        # group (itself included); None when it shares no seat.
        "idle_reclaim_at": None if idle_at is None else rfc3339(int(idle_at)),
        "shared": lease.get("shared"),
        "shared_sessions": lease.get("shared_sessions"),
    }


def _waiting_view(ticket: dict[str, Any], now_ms: int) -> dict[str, Any]:
    held = ticket["held_since_ms"]
    return {
        "position": ticket["position"],
        "client_id": ticket["client_id"],
        "user": ticket["user"],
        "host": ticket["host"],
        "waiting_seconds": max(0, round((now_ms - ticket["joined_at_ms"]) / 1000)),
        "expires_in_seconds": max(0, round((ticket["expires_at_ms"] - now_ms) / 1000)),
        # a freed seat waits for this ticket (until expires_in_seconds)
        "seat_held": held is not None,
        "seats": int(ticket.get("seats", 1)),  # the seats it waits for
    }


def _status(req: Status) -> tuple[int, dict[str, Any]]:
    """``lmstat -a``: each license with its seats in use and its live leases."""
    from seatlease.api.runtime import seat_engine

    if req.license_id is not None:
        tenant_id = _license_tenant(req.tenant_id, req.license_id)
        rows = [require_license(tenant_id, req.license_id)]
    else:
        rows = license_rows(req.tenant_id)
    engine = seat_engine()
    now_ms = server_time_ms(engine.redis)  # the clock the lease deadlines are on
    licenses = []
    for row in rows:
        view = license_view(row)
        leases = engine.live_leases(view["tenant_id"], view["license_id"])
        used = seats_in_use(leases, view.get("share_limit") or 0)  # as Redis counts them
        entry = {
            **view,
            "seats_used": used,
            "overage_in_use": used > view["seats"],
            "leases": [_lease_view(lease, now_ms) for lease in leases],
        }
        if view["policy"] and view["policy"]["queue"]:
            entry["queue"] = [
                _waiting_view(ticket, now_ms)
                for ticket in engine.waiting(view["tenant_id"], view["license_id"])
            ]
        licenses.append(entry)
    return 200, {"at": rfc3339(now_ms), "licenses": licenses}


def seats_in_use(leases: list[dict[str, Any]], share_limit: int) -> int:
    """The seats the live leases hold, as Redis counts them: each lease its weight, but
    the sessions of a share group (issue 50) its seats once: the engine's
    ``shared_seats`` when it says, else the fewest the group can hold (one seat per
    ``share_limit`` sessions; one with no limit)."""
    used = 0
    groups: dict[str, int] = {}
    for lease in leases:
        key = lease.get("shared")
        if not key:
            used += int(lease.get("seats", 1))
            continue
        seats = lease.get("shared_seats")
        if seats is None:
            sessions = int(lease.get("shared_sessions") or 1)
            seats = -(-sessions // share_limit) if share_limit > 0 else 1
        groups[key] = max(groups.get(key, 0), int(seats))
    return used + sum(groups.values())


def _license_tenant(tenant_id: str | None, license_id: str) -> str:
    """The tenant a request means: the one given (which must have the license), else the
    only tenant with a license of that id. Several: 400 ``ambiguous_license`` listing
    them (``tenants``), so the caller can name one."""
    if tenant_id is not None:
        require_license(tenant_id, license_id)
        return tenant_id
    found = store.tenants_with_license(license_id)
    if not found:
        raise NotFound(f"license {license_id!r} not found in any tenant")
    if len(found) > 1:
        raise AmbiguousLicense(license_id, found)
    return found[0]


def _capacity(_req: Capacity) -> tuple[int, dict[str, Any]]:
    """Redis used and maximum memory and what holds it (seatlease/seats/capacity.py)."""
    from seatlease.api.runtime import seat_engine
    from seatlease.seats.capacity import capacity

    return 200, capacity(seat_engine().redis)


def _revoke(req: Revoke) -> tuple[int, dict[str, Any]]:
    """``lmremove``: end a live lease now, recorded as ``lease.revoked``; the client's
    next heartbeat answers 410."""
    from seatlease.api.runtime import seat_engine

    tenant_id = _license_tenant(req.tenant_id, req.license_id)
    engine = seat_engine()
    live = engine.live_leases(tenant_id, req.license_id)
    if req.client_id is not None:
        mine = [lease for lease in live if lease["client_id"] == req.client_id]
        if not mine:
            raise SessionNotLive(
                f"client {req.client_id!r} holds no seat on {tenant_id}/{req.license_id}"
            )
        session_id = mine[0]["session_id"]  # a client holds one lease per license
    else:
        session_id = req.session_id  # type: ignore[assignment]
    before = next((lease for lease in live if lease["session_id"] == session_id), None)
    result = engine.release(tenant_id, req.license_id, session_id, revoke=True)
    if not result.released:
        raise SessionNotLive(
            f"session {session_id!r} holds no seat on {tenant_id}/{req.license_id} "
            "(unknown, released, expired or already revoked)"
        )
    body: dict[str, Any] = {
        "revoked": True,
        "tenant_id": tenant_id,
        "license_id": req.license_id,
        "session_id": session_id,
        "seats_used": result.seats_used,
        "seats_total": result.seats_total,
    }
    if before is not None:
        lease = _lease_view(before, before["expires_at_ms"])
        body.update({k: lease[k] for k in ("client_id", "user", "host", "metadata", "acquired_at")})
    log(
        "NOTICE",
        "admin: lease revoked",
        tenant_id=tenant_id,
        license_id=req.license_id,
        session_id=session_id,
        client_id=body.get("client_id"),
    )
    return 200, body


HANDLERS = {
    Status: _status,
    Capacity: _capacity,
    Revoke: _revoke,
}
