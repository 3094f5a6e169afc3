"""keys: the deployment's public signing keys as a JWKS (RFC 7517) (HTTP Cloud Function,
entry point ``keys``; public, no API key).

``GET /keys`` answers ``{"keys": [JWK, ...]}``: every Ed25519 key that may have signed a
live lease token, plus any newer key published before it signs
(shared/seatlease/api/signingkeys.py has the rule). Cached by clients and proxies for
``JWKS_MAX_AGE_SECONDS`` (300 s); ``ETag`` / ``If-None-Match`` answer ``304``. In the cloud
this function reads only the key secret's metadata, never a private key
(shared/seatlease/api/secretmanager.py).
"""

import hashlib
import json
import os
import time
from typing import Any

import functions_framework
from flask import Response

from seatlease.api.http import ApiError, Readiness, guard_bodies, json_error, to_api_error
from seatlease.api.tokens import keyring
from seatlease.logs import log

MEDIA_TYPE = "application/jwk-set+json"  # RFC 7517 section 8.5
MAX_AGE = int(os.environ.get("JWKS_MAX_AGE_SECONDS", "300"))
READINESS = Readiness("keys", ("signing_keys",))  # cold start: a missing key source said once
guard_bodies("keys", ())  # no method takes a body: one sent is never read


@functions_framework.http
def keys(request: Any) -> Any:
    started = time.perf_counter()
    status, outcome = 200, "served"
    try:
        READINESS.check()
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, "method_not_allowed", "Use GET for keys.", {"Allow": "GET, HEAD"})
        jwks = keyring().jwks()
        body = json.dumps(jwks, separators=(",", ":"), sort_keys=True)
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
        headers = {
            "Cache-Control": f"public, max-age={MAX_AGE}",
            "ETag": etag,
            "Access-Control-Allow-Origin": "*",  # public keys: any web page may read them
        }
        if etag in request.headers.get("If-None-Match", ""):
            status, outcome = 304, "not_modified"
            response = Response(status=304, headers=headers)
        else:
            response = Response(body, status=200, mimetype=MEDIA_TYPE, headers=headers)
        fields: dict[str, Any] = {"kids": [k["kid"] for k in jwks["keys"]]}
    except Exception as exc:  # every failure is a contract error body (never a key)
        try:
            error = to_api_error(exc)
        except Exception:
            log("ERROR", "keys: unexpected error", function="keys", error=type(exc).__name__,
                detail=str(exc))  # fmt: skip
            error = ApiError(500, "internal_error", "Internal error; it has been logged.")
        status, outcome, fields = error.status, error.code, dict(error.log_fields or {})
        response = json_error(error)
    severity = "ERROR" if status >= 500 else "INFO"
    latency_ms = round((time.perf_counter() - started) * 1000, 2)
    log(severity, f"keys {status} {outcome}", function="keys", status=status,
        latency_ms=latency_ms, outcome=outcome, **fields)  # fmt: skip
    return response
