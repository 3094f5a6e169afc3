"""An acquire's validated body and its caller as the seat engine's ``SeatRequest``, in one
call: the body's fields as the engine names them, with what the instance knows of the
tenant (its rate limit, ``seatlease.api.tenantlimits``) and of a failover's recovery under
way (``seatlease.api.runtime``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatlease.api.runtime import failover_began_ms
from seatlease.api.tenantlimits import rate_limit
from seatlease.seats.values import SeatRequest

if TYPE_CHECKING:
    from seatlease.api.schemas import AcquireRequest


def seat_request(tenant_id: str, body: AcquireRequest) -> SeatRequest:
    """What ``tenant_id``'s caller asks for with ``body``. Its ``lease_token`` is not read
    here: a token is verified only when the call is run (``seatlease.api.recovery``)."""
    return SeatRequest(
        tenant_id=tenant_id,
        license_id=body.license_id,
        client_id=body.client_id,
        lease_seconds=body.lease_seconds,
        metadata=body.metadata,
        request_id=body.request_id,
        borrow_seconds=body.borrow_seconds,
        rate_limit=rate_limit(tenant_id),
        user=body.user,
        host=body.host,
        queue=body.queue,
        ticket=body.ticket,
        entitlements=tuple(body.entitlements or ()),
        version=body.version,
        seats=body.seats,
        fingerprint=body.fingerprint,
        failover_began_ms=failover_began_ms(),
    )
