"""heartbeat: keep a lease alive (HTTP Cloud Function, entry point ``heartbeat``).

410 ``session_expired`` (with ``reason`` ``expired``, ``unknown`` or ``revoked``: an
operator freed the seat) tells the client to acquire again. The rules live in
shared/seatlease/seats/lua/heartbeat.lua.
"""

from typing import Any

import functions_framework

from seatlease.api.http import Call, endpoint
from seatlease.api.runtime import failover_began_ms, seat_engine
from seatlease.api.schemas import HeartbeatRequest
from seatlease.api.tenantlicenses import require_license
from seatlease.api.tenantlimits import rate_limit
from seatlease.api.tokens import machine_claim, signer, terms_answer, user_claim, weight_field
from seatlease.clock import rfc3339
from seatlease.errors import SessionExpired


@functions_framework.http
@endpoint("heartbeat", HeartbeatRequest, needs=("signing", "redis", "database"))
def heartbeat(call: Call, body: HeartbeatRequest) -> tuple[int, dict[str, Any]]:
    require_license(call.tenant_id, body.license_id)  # an unknown id: 404, no lookup
    sign = signer()  # before the lease is extended: no key, no change
    engine, limit = seat_engine(), rate_limit(call.tenant_id)
    try:
        renewal = engine.heartbeat(
            call.tenant_id,
            body.license_id,
            body.session_id,
            request_id=body.request_id,
            rate_limit=limit,
        )
    except SessionExpired as gone:
        # A session this Redis does not know (a region lost, its data lost): its token may
        # bring it back (seatlease.api.recovery), in one call answered as this heartbeat.
        if gone.reason != "unknown" or body.lease_token is None:
            raise
        from seatlease.api.recovery import readmit

        renewal = readmit(
            engine,
            call.tenant_id,
            body.license_id,
            body.session_id,
            body.lease_token,
            request_id=f"{body.request_id}-r" if body.request_id else None,
            rate_limit=limit,
            failover_began_ms=failover_began_ms(),
        )
        call.log["recovered"] = True
    call.log["outcome"] = "renewed"
    return 200, {
        "session_id": renewal.session_id,
        "lease_expires_at": rfc3339(renewal.expires_at_ms),
        "lease_seconds": renewal.lease_seconds,
        "heartbeat_interval_seconds": renewal.heartbeat_interval_seconds,
        "borrowed": renewal.borrowed,
        **weight_field(renewal.seats),
        **terms_answer(renewal.terms),
        **sign.lease(
            tenant_id=call.tenant_id,
            license_id=body.license_id,
            session_id=renewal.session_id,
            client_id=renewal.client_id,
            issued_at_ms=renewal.now_ms,
            expires_at_ms=renewal.expires_at_ms,
            nonce=body.nonce,
            **({"borrowed": True} if renewal.borrowed else {}),
            **weight_field(renewal.seats),
            **(renewal.terms.claims() if renewal.terms else {}),
            **machine_claim(renewal.machine),  # a borrowed lease's machine
            **user_claim(renewal.user),
        ),
    }
