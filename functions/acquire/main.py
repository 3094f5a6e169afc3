"""acquire: take a seat on a license (HTTP Cloud Function, entry point ``acquire``).

201 for a new lease, 200 when this client_id already held a live lease (extended).
The seat rules live in shared/lua/acquire.lua; the HTTP mapping in shared/http.py.
"""

from typing import Any

import functions_framework

from shared.clock import rfc3339
from shared.http import Call, endpoint
from shared.runtime import seat_engine
from shared.schemas import AcquireRequest


@functions_framework.http
@endpoint("acquire", AcquireRequest)
def acquire(call: Call, body: AcquireRequest) -> tuple[int, dict[str, Any]]:
    lease = seat_engine().acquire(
        call.tenant_id, body.license_id, body.client_id, body.lease_seconds, body.metadata
    )
    call.log.update(
        outcome="acquired" if lease.created else "renewed",
        seats_used=lease.seats_used,
        seats_total=lease.seats_total,
    )
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
    }
