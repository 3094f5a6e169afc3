"""heartbeat: keep a lease alive (HTTP Cloud Function, entry point ``heartbeat``).

410 ``session_expired`` (with ``reason`` ``expired``, ``unknown`` or ``revoked``: an
operator freed the seat) tells the client to acquire again; an ``unknown`` session with
its ``lease_token`` may come back instead (shared/seatlease/api/recovery.py). The rules
live in shared/seatlease/seats/lua/heartbeat.lua; the answer, as acquire's, in
shared/seatlease/api/answers.py.
"""

import functions_framework

from seatlease.api import answers, recovery
from seatlease.api.answers import Answer
from seatlease.api.http import Call, endpoint
from seatlease.api.runtime import seat_engine
from seatlease.api.schemas import HeartbeatRequest
from seatlease.api.tenantlicenses import require_license
from seatlease.api.tenantlimits import rate_limit
from seatlease.api.tokens import signer


@functions_framework.http
@endpoint("heartbeat", HeartbeatRequest, needs=("signing", "redis", "database"))
def heartbeat(call: Call, body: HeartbeatRequest) -> Answer:
    require_license(call.tenant_id, body.license_id)  # an unknown id: 404, no lookup
    sign = signer()  # before the lease is extended: no key, no change
    engine, limit = seat_engine(), rate_limit(call.tenant_id)
    # a session this Redis lost comes back by its lease_token (seatlease.api.recovery)
    renewal = recovery.heartbeat(engine, call.tenant_id, body, limit)
    return answers.renewed(call, sign, renewal, body)
