"""release: give a seat back (HTTP Cloud Function, entry point ``release``). Idempotent:
releasing an unknown or already released session answers ``"released": false``."""

import functions_framework

from seatlease.api import answers
from seatlease.api.answers import Answer
from seatlease.api.http import Call, endpoint
from seatlease.api.runtime import seat_engine
from seatlease.api.schemas import SessionRequest
from seatlease.api.tenantlicenses import require_license
from seatlease.api.tenantlimits import rate_limit
from seatlease.api.tokens import signer


@functions_framework.http
@endpoint("release", SessionRequest, needs=("signing", "redis", "database"))
def release(call: Call, body: SessionRequest) -> Answer:
    require_license(call.tenant_id, body.license_id)  # an unknown id: 404, no lookup
    sign = signer()  # before the seat is given back: no key, no change
    engine = seat_engine()
    result = engine.release(
        call.tenant_id,
        body.license_id,
        body.session_id,
        request_id=body.request_id,
        rate_limit=rate_limit(call.tenant_id),
    )
    return answers.released(call, sign, result, body)
