"""acquire: take a seat on a license (HTTP Cloud Function, entry point ``acquire``).

201 for a new lease, 200 when this client_id already held a live lease (extended), or a
lingering one (taken back), or when its ``lease_token``'s lease came back (re-admitted:
seatlease.api.recovery); 202 with a place in the license's wait queue for
``"queue": true`` on a full license that has one. With ``borrow_seconds`` the seat is
borrowed: no heartbeats until ``lease_expires_at``, which the token's ``exp`` carries
(with ``borrowed: true``).
The seat rules live in shared/seatlease/seats/lua/acquire.lua; the body becomes the
engine's request in shared/seatlease/api/seatrequest.py, the answer is written in
shared/seatlease/api/answers.py, the HTTP mapping in shared/seatlease/api/http.py.
"""

import functions_framework

from seatlease.api import answers, recovery
from seatlease.api.answers import Answer
from seatlease.api.http import Call, endpoint
from seatlease.api.runtime import seat_engine
from seatlease.api.schemas import AcquireRequest
from seatlease.api.seatrequest import seat_request
from seatlease.api.tenantlicenses import require_license
from seatlease.api.tokens import signer


@functions_framework.http
@endpoint("acquire", AcquireRequest, needs=("signing", "redis", "database"))
def acquire(call: Call, body: AcquireRequest) -> Answer:
    require_license(call.tenant_id, body.license_id)  # an unknown id: 404, no lookup
    sign = signer()  # before the seat is taken: no key, no seat
    engine = seat_engine()
    lease = recovery.acquire(engine, seat_request(call.tenant_id, body), body.lease_token)
    return answers.acquired(call, sign, lease, body)
