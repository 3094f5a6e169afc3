"""release: give a seat back (HTTP Cloud Function, entry point ``release``). Idempotent:
releasing an unknown or already released session answers ``"released": false``."""

from typing import Any

import functions_framework

from shared.http import Call, endpoint
from shared.runtime import seat_engine
from shared.schemas import SessionRequest


@functions_framework.http
@endpoint("release", SessionRequest)
def release(call: Call, body: SessionRequest) -> tuple[int, dict[str, Any]]:
    result = seat_engine().release(call.tenant_id, body.license_id, body.session_id)
    call.log.update(
        outcome="released" if result.released else "already_gone",
        seats_used=result.seats_used,
        seats_total=result.seats_total,
    )
    return 200, {"released": result.released, "seats_used": result.seats_used}
