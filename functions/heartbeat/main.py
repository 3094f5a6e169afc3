"""heartbeat: keep a lease alive (HTTP Cloud Function, entry point ``heartbeat``).

410 ``session_expired`` (with ``reason`` ``expired`` or ``unknown``) tells the client to
acquire again. The rules live in shared/lua/heartbeat.lua.
"""

from typing import Any

import functions_framework

from shared.clock import rfc3339
from shared.http import Call, endpoint
from shared.runtime import seat_engine
from shared.schemas import SessionRequest


@functions_framework.http
@endpoint("heartbeat", SessionRequest)
def heartbeat(call: Call, body: SessionRequest) -> tuple[int, dict[str, Any]]:
    renewal = seat_engine().heartbeat(call.tenant_id, body.license_id, body.session_id)
    call.log["outcome"] = "renewed"
    return 200, {
        "session_id": renewal.session_id,
        "lease_expires_at": rfc3339(renewal.expires_at_ms),
        "lease_seconds": renewal.lease_seconds,
        "heartbeat_interval_seconds": renewal.heartbeat_interval_seconds,
    }
