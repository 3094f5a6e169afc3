"""acquire: take a seat on a license (HTTP Cloud Function, entry point ``acquire``).

201 for a new lease, 200 when this client_id already held a live lease (extended), or a
lingering one (taken back), or when its ``lease_token``'s lease came back (re-admitted:
seatlease.api.recovery); 202 with a place in the license's wait queue for
``"queue": true`` on a full license that has one. With ``borrow_seconds`` the seat is
borrowed: no heartbeats until ``lease_expires_at``, which the token's ``exp`` carries
(with ``borrowed: true``).
The seat rules live in shared/seatlease/seats/lua/acquire.lua; the HTTP mapping in
shared/seatlease/api/http.py.
"""

from typing import Any

import functions_framework

from seatlease.api.http import Call, endpoint
from seatlease.api.runtime import failover_began_ms, seat_engine
from seatlease.api.schemas import AcquireRequest
from seatlease.api.tenantlicenses import require_license
from seatlease.api.tenantlimits import rate_limit
from seatlease.api.tokens import (
    machine_claim,
    recovering_answer,
    signer,
    terms_answer,
    user_claim,
    weight_field,
)
from seatlease.clock import rfc3339
from seatlease.seats.engine import QueuePlace, SeatRequest


@functions_framework.http
@endpoint("acquire", AcquireRequest, needs=("signing", "redis", "database"))
def acquire(call: Call, body: AcquireRequest) -> tuple[int, dict[str, Any]]:
    require_license(call.tenant_id, body.license_id)  # an unknown id: 404, no lookup
    sign = signer()  # before the seat is taken: no key, no seat
    engine = seat_engine()
    recover = None
    if body.lease_token is not None:
        # A token's lease comes back when this Redis lost it (seatlease.api.recovery), in
        # this same call; otherwise the client asks for a seat as anyone does.
        from seatlease.api.recovery import acquire_grant

        recover = acquire_grant(body.lease_token, call.tenant_id, body.license_id, body.client_id)
    lease = engine.acquire(
        SeatRequest(
            tenant_id=call.tenant_id,
            license_id=body.license_id,
            client_id=body.client_id,
            lease_seconds=body.lease_seconds,
            metadata=body.metadata,
            request_id=body.request_id,
            borrow_seconds=body.borrow_seconds,
            rate_limit=rate_limit(call.tenant_id),
            user=body.user,
            host=body.host,
            queue=body.queue,
            ticket=body.ticket,
            entitlements=tuple(body.entitlements or ()),
            version=body.version,
            seats=body.seats,
            fingerprint=body.fingerprint,
            failover_began_ms=failover_began_ms(),
            recover=recover,
        )
    )
    if isinstance(lease, QueuePlace):  # a full license with a queue: a place in line
        call.log.update(outcome="queued", position=lease.position)
        retry_after = {"Retry-After": str(lease.retry_after_seconds)}  # as for 409 and 429
        return (
            202,
            {
                "queued": True,
                "license_id": lease.license_id,
                "client_id": lease.client_id,
                "position": lease.position,
                "ticket": lease.ticket,
                "retry_after_seconds": lease.retry_after_seconds,
                "seats_used": lease.seats_used,
                "seats_total": lease.seats_total,
                **weight_field(lease.seats),
            },
            retry_after,
        )
    call.log.update(
        outcome="acquired" if lease.created else "renewed",
        seats_used=lease.seats_used,
        seats_total=lease.seats_total,
    )
    if lease.borrowed:
        call.log["borrowed"] = True
    if recover is not None:
        from seatlease.api.recovery import recovered

        if recovered(lease):
            call.log["recovered"] = True
    terms = lease.terms
    return (201 if lease.created else 200), {
        "session_id": lease.session_id,
        "license_id": lease.license_id,
        "client_id": lease.client_id,
        "lease_expires_at": rfc3339(lease.expires_at_ms),
        "lease_seconds": lease.lease_seconds,
        "heartbeat_interval_seconds": lease.heartbeat_interval_seconds,
        "seats_used": lease.seats_used,
        "seats_total": lease.seats_total,
        "overage": lease.overage,
        "borrowed": lease.borrowed,
        **weight_field(lease.seats),
        **terms_answer(terms),
        **recovering_answer(lease.recovering_until_ms),
        **sign.lease(
            tenant_id=call.tenant_id,
            license_id=lease.license_id,
            session_id=lease.session_id,
            client_id=lease.client_id,
            issued_at_ms=lease.now_ms,
            expires_at_ms=lease.expires_at_ms,
            nonce=body.nonce,
            **({"borrowed": True} if lease.borrowed else {}),
            **weight_field(lease.seats),
            **(terms.claims() if terms else {}),
            # the machine it was taken for: a client refuses a borrowed token elsewhere
            # (a borrowed lease's own: the machine it was borrowed for, whoever asks)
            **machine_claim(lease.machine or body.fingerprint),
            **user_claim(lease.user),
        ),
    }
