"""A tiny fake server of bad answers (and of behaviours no real server shows on demand: a
stalled answer, a long Retry-After, a region's loss, an operator's revoke, a term that
ended) for the clients' tests (tests/test_client_c.py, tests/test_client_java.py, and the
others'): never the real functions.
Each scenario is a base URL, ``<server>/<scenario>``; its ``/acquire``, ``/heartbeat``,
``/release`` and ``/keys`` answer as listed in ``SCENARIOS`` whatever is asked (but for
``weights``, which echoes the weight asked: see ``weights``). The
clients' own suites (shared/clients/c/tests/test_bad_answers.c, the Java BadAnswers
tests) name the scenarios and the typed error each must give; they read the server's URL
from ``SEATLEASE_BAD_URL``."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_support import serving
from werkzeug.wrappers import Request, Response


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jwt_shaped() -> str:
    """A JWT's shape with a kid no JWKS here has (its signature is 64 zero bytes)."""
    header = _b64(json.dumps({"alg": "EdDSA", "kid": "1", "typ": "seatlease-lease+jwt"}).encode())
    claims = _b64(json.dumps({"iss": "x", "aud": "acme/lic", "sid": "s"}).encode())
    return f"{header}.{claims}.{_b64(bytes(64))}"


# -- the fake vendor's signing key (issue 48: every client verifies by default) ------------
# The behaviour scenarios below answer as a real deployment would: each grant, renewal
# and release carries a token for that very request (its nonce, client, session and
# license), signed with KEY; their /keys serves KEY's JWK. A client pins KEY_X (the
# suites read it from SEATLEASE_BAD_PINNED_KEY). FOREIGN_KEY signs the ``foreign_key``
# scenario's tokens: a valid signature by a key that is not the vendor's.
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
FOREIGN_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
TENANT = "acme"


def _x(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _b64(raw)


KEY_X = _x(KEY)
KID, FOREIGN_KID = "bad-server-1", "bad-server-foreign"


ROTATED_KID = "bad-server-2"  # KEY again under a new kid: a rotation the client must fetch


def jwks(foreign: bool = False, rotated: bool = False) -> dict:
    key, kid = (FOREIGN_KEY, FOREIGN_KID) if foreign else (KEY, KID)
    kids = [kid, ROTATED_KID] if rotated else [kid]
    return {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": _x(key), "kid": k, "alg": "EdDSA",
                      "use": "sig"} for k in kids]}  # fmt: skip


def _epoch(rfc3339: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp())


def sign(kind: str, claims: dict, foreign: bool = False, kid: str | None = None) -> str:
    """A compact JWS of ``claims`` (EdDSA), typ ``seatlease-<kind>+jwt``."""
    key, kid = (FOREIGN_KEY, FOREIGN_KID) if foreign else (KEY, kid or KID)
    header = {"alg": "EdDSA", "kid": kid, "typ": f"seatlease-{kind}+jwt"}
    signing_input = (
        _b64(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64(json.dumps(claims, separators=(",", ":")).encode())
    )
    return signing_input + "." + _b64(key.sign(signing_input.encode()))


def signed(
    function: str, body: dict, answer: dict, foreign: bool = False, kid: str | None = None
) -> dict:
    """``answer`` with the token a real deployment would sign for the request ``body``."""
    import time

    now = int(time.time())
    license_id = body.get("license_id") or "lic"
    claims: dict = {"iss": "http://bad-server", "aud": f"{TENANT}/{license_id}"}
    if function == "release":
        claims.update(sid=body.get("session_id"), released=answer.get("released", True),
                      iat=now, nbf=now, exp=now + 300)  # fmt: skip
        kind, field = "release", "release_token"
    else:
        if body.get("client_id") is not None:
            claims["sub"] = body["client_id"]
        session = answer.get("session_id") or GRANT["session_id"]
        expires = _epoch(answer.get("lease_expires_at") or GRANT["lease_expires_at"])
        claims.update(sid=session, iat=now, nbf=now, exp=expires)
        if isinstance(answer.get("seats"), int) and answer["seats"] > 1:
            claims["seats"] = answer["seats"]
        kind, field = "lease", "lease_token"
    if body.get("nonce") is not None:
        claims["nonce"] = body["nonce"]
    return {**answer, field: sign(kind, claims, foreign, kid)}


GRANT = {
    "session_id": "c2Vzc2lvbi0wMDAwMDAwMDAx",
    "license_id": "lic",
    "client_id": "pc-1",
    "lease_expires_at": "2100-01-01T00:00:00.000Z",
    "lease_seconds": 60,
    "heartbeat_interval_seconds": 20,
    "seats_used": 1,
    "seats_total": 2,
}
MISMATCH = {
    "code": "seats_mismatch",
    "message": "client pc-1 holds a lease of 4 seats; release it to take 2",
    "held_seats": 4,
    "seats": 2,
}
WEIGHTED_DENIAL = {
    "code": "no_seats_available",
    "message": "All 8 seats are in use: 2 seats are free, 4 asked; retry after 5 s.",
    "seats_used": 6,
    "seats_total": 8,
    "seats_held": 0,
    "seats_reserved": 0,
    "retry_after_seconds": 5,
    "seats_requested": 4,
}
MACHINE_MISMATCH = {
    "code": "machine_mismatch",
    "message": "Client 'pc-1' borrowed its seat for another machine: a borrowed seat stays on "
    "the machine it was borrowed for until it is returned (release) or its borrow ends.",
}
HUGE = b'{"session_id": "' + b"a" * (5 * 1024 * 1024) + b'"}'

# scenario: (status, body of acquire/heartbeat/release, body of /keys)
SCENARIOS: dict[str, tuple[int, bytes, bytes]] = {
    "truncated": (201, b'{"session_id": "c2Vzc2lvbi0w', b'{"keys": []}'),
    "wrong_types": (
        201,
        json.dumps({**GRANT, "session_id": 7, "seats_used": "one"}).encode(),
        b'{"keys": []}',
    ),
    "not_an_object": (201, b"[1, 2, 3]", b'{"keys": []}'),
    "empty": (201, b"", b'{"keys": []}'),
    "html": (200, b"<html><body>Welcome to the captive portal</body></html>", b""),
    "no_token": (201, json.dumps(GRANT).encode(), b'{"keys": []}'),
    "token_not_a_string": (201, json.dumps({**GRANT, "lease_token": 12}).encode(), b""),
    "huge": (201, HUGE, b'{"keys": []}'),
    "huge_error": (409, HUGE, b'{"keys": []}'),
    "error_wrong_types": (409, b'{"error": {"code": 5, "message": ["x"]}}', b""),
    "error_not_json": (400, b"Bad Request", b""),
    "jwks_not_a_key_set": (
        201,
        json.dumps({**GRANT, "lease_token": _jwt_shaped()}).encode(),
        b'{"keys": 5}',
    ),
    "jwks_truncated": (
        201,
        json.dumps({**GRANT, "lease_token": _jwt_shaped()}).encode(),
        b'{"keys": [{"kty": "OKP", ',
    ),
    "release_wrong_types": (200, b'{"released": "yes", "seats_used": 0}', b""),
    "deep_nesting": (201, b"[" * 100000 + b"]" * 100000, b""),
    "absurd_numbers": (
        503,
        b'{"error": {"code": "backend_unavailable", "retry_after_seconds": 1e300}}',
        b"",
    ),
    # weighted seats: another weight than the lease held, and a denial of 4 seats
    "seats_mismatch": (
        409,
        json.dumps({"error": MISMATCH}).encode(),
        b"",
    ),
    "weighted_denial": (
        409,
        json.dumps({"error": WEIGHTED_DENIAL}).encode(),
        b"",
    ),
    # a borrowed seat asked from another machine (issue 38): typed, never waited for
    "machine_mismatch": (
        409,
        json.dumps({"error": MACHINE_MISMATCH}).encode(),
        b"",
    ),
    # 404s that are not the service's "no such license" (issue 48): the service's own
    # not_found (a wrong base URL) and a middlebox's empty 404; and the one that is
    "not_found": (
        404,
        b'{"error": {"code": "not_found", "message": "No such function: /nope/acquire."}}',
        b"",
    ),
    "empty_404": (404, b"", b""),
    "license_not_found": (
        404,
        b'{"error": {"code": "license_not_found", "message": "No license \'lic\' here."}}',
        b"",
    ),
    "absurd_numbers_409": (
        409,
        b'{"error": {"code": "no_seats_available", "seats_used": -1e300, "seats_total": 1e300,'
        b' "retry_after_seconds": 1e300}}',
        b"",
    ),
}


def weights(request: Request, function: str) -> Response:
    """The ``weights`` scenario (not a bad answer): a grant whose ``seats`` is the weight
    the request asked, none when it asked none (an older server); a ``seats`` that is
    not a positive integer is refused, so a client that sends one by default fails."""
    body = json.loads(request.get_data() or b"{}")
    if function == "keys":
        return _json(200, jwks())
    if function == "release":
        return _json(200, signed(function, body, {"released": True, "seats_used": 0}))
    grant = dict(GRANT)
    if "seats" in body:
        seats = body["seats"]
        if not isinstance(seats, int) or isinstance(seats, bool) or seats < 1:
            error = {"code": "invalid_request", "message": "seats: not a positive integer"}
            return Response(json.dumps({"error": error}), status=400, mimetype="application/json")
        grant["seats"] = seats
    status = 201 if function == "acquire" else 200
    return _json(status, signed(function, body, grant))


# -- scenarios of behaviour, not of bad bytes (issues 39, 40 and 42) ----------------------

TOKEN = _jwt_shaped()  # the token the "recover" scenario grants and takes back
RENEWAL = {
    "session_id": GRANT["session_id"],
    "lease_expires_at": "2100-01-01T00:00:00.000Z",
    "lease_seconds": 60,
    "heartbeat_interval_seconds": 20,
    "borrowed": False,
    "lease_token": TOKEN,
}
SESSION_UNKNOWN = {
    "code": "session_expired",
    "message": "The session is gone (unknown): acquire again.",
    "reason": "unknown",
}
SESSION_REVOKED = {
    "code": "session_expired",
    "message": "The session has expired or was released, reclaimed or revoked; "
    "acquire a seat again.",
    "reason": "revoked",
}
REGRANTED = "c2Vzc2lvbi0wMDAwMDAwMDAy"  # the "revoked" scenario's second session
LICENSE_EXPIRED = {
    "code": "license_expired",
    "message": "This license's term ended at 2026-11-28T03:12:21Z; its seats stopped at "
    "2026-11-28T03:12:24Z (the end of its grace).",
    "expires_at": "2026-11-28T03:12:21Z",
    "expired_at": "2026-11-28T03:12:24Z",
}
UNAVAILABLE = {"code": "backend_unavailable", "message": "Redis is unreachable; retry."}
DRIP_SECONDS = 1.0  # between two bytes of a dripped answer


def _json(status: int, body: object, headers: dict | None = None) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json", headers=headers)


def _drip(status: int, body: object) -> Response:
    """``body`` with its status, Content-Length and Content-Type sent at once, then one
    byte every DRIP_SECONDS: a reverse proxy or a link that stalls mid-answer. A client
    whose timeout covers only the wait for the headers hangs for the whole body."""
    raw = json.dumps(body).encode()

    def drip():
        import time

        for i in range(len(raw)):
            yield raw[i : i + 1]
            time.sleep(DRIP_SECONDS)

    return Response(
        drip(), status=status, mimetype="application/json",
        headers={"Content-Length": str(len(raw))}, direct_passthrough=True,
    )  # fmt: skip


def behaviour(scenario: str, request: Request, function: str) -> Response | None:
    """The scenarios that answer by what is asked:

    - ``drip``: every answer (a grant, a renewal, a release) dripped after its headers;
    - ``drip_heartbeat``: acquire and release answer at once, a heartbeat is dripped (a
      lease whose renewals stall must be lost by its deadline, not by the stall's end);
    - ``retry_after_long``: every call is ``503`` with ``Retry-After: 3600``: a client
      waits at most its maximum back-off between attempts, whatever the hint;
    - ``recover`` (a region lost, issue 40): acquire grants ``TOKEN``; a heartbeat without
      a ``lease_token`` is ``410`` (``unknown``: the new primary never heard of the
      session), with ``TOKEN`` it is ``200`` (re-admitted by the token); release ``200``;
    - ``revoked`` (an operator freed the seat): the first acquire grants ``GRANT``'s session
      with ``TOKEN``, later ones ``REGRANTED``; a heartbeat on the first session is ``410``
      (``revoked``), with its token or not (the server refuses a revoked session's token:
      each heartbeat that carries one is counted as ``token``), on ``REGRANTED`` ``200``;
      leases of 3 s, heartbeats every second; release ``200``;
    - ``term_ended``: acquire grants once (the first call), then every call is ``403``
      ``license_expired`` (a heartbeat ended the seat, a re-acquire is refused): final
      until the operator renews, so a client says it once and asks again only at a slow
      back-off (minutes);
    - ``suspended``: acquire grants once, then an acquire is ``403`` ``license_suspended``
      while heartbeats go on ``200`` (a suspended license keeps its held seats).
    - ``signed`` (a healthy server): acquire grants, heartbeats renew (leases of 3 s,
      heartbeats every second), release answers ``released``; every answer signed;
    - ``foreign_key``: the same answers signed by FOREIGN_KEY, which its /keys serves: a
      valid signature by a key that is not the vendor's (a proxy's own server);
    - ``session_null``: a signed grant whose ``session_id`` is null;
    - ``heartbeat_no_counts``: a grant with ``seats_used`` 1 of ``seats_total`` 2, then
      renewals that carry no counts (leases of 3 s, heartbeats every second);
    - ``drip_release``: acquire and heartbeat answer at once, a release is dripped;
    - ``redirect``: every call is ``307`` to the ``signed`` scenario: a client never
      follows (a redirect is not the service's answer).
    - ``keys503once``: as ``signed``, but the first ``/keys`` after a reset is a ``503``:
      a client retries the check (the grant is good) and never releases the seat for it
      (a release there, then a retry answered from the server's store, would hand back a
      seat the server no longer holds);
    - ``rotated_release``: as ``signed``, but a release is signed under ROTATED_KID (KEY
      again), which the first ``/keys`` does not list; every later ``/keys`` (with it) is
      dripped: the release ends by the release timeout, the fetch included;
    - ``no_expiry``: a signed grant without ``lease_expires_at``; ``float_lease``: with
      ``lease_seconds`` 60.5; ``empty_session``: with ``session_id`` ``""``: each an
      ``invalid_response`` (the first two released at once: they name a session);
    - ``null_counts``: a signed grant whose ``seats_used`` and ``seats_total`` are null
      (as absent: a seat).
    Every 2xx of these scenarios carries a token signed with KEY for the request (but
    ``foreign_key``'s). None for any other scenario."""
    body = json.loads(request.get_data() or b"{}") if request.get_data() else {}
    if not isinstance(body, dict):
        body = {}
    foreign = scenario == "foreign_key"

    def ok(status: int, answer: dict, headers: dict | None = None) -> Response:
        return _json(status, signed(function, body, answer, foreign), headers)

    def released() -> dict:
        return {"released": True, "seats_used": 0}

    if scenario in ("drip", "drip_heartbeat", "drip_release"):
        if function == "release":
            answer = released()
        elif function == "heartbeat":
            answer = RENEWAL
        else:
            answer = GRANT
        status = 201 if function == "acquire" else 200
        answer = signed(function, body, answer)
        dripped = {"drip": ("acquire", "heartbeat", "release"), "drip_heartbeat": ("heartbeat",),
                   "drip_release": ("release",)}[scenario]  # fmt: skip
        if function in dripped:
            return _drip(status, answer)
        return _json(status, answer)
    if scenario == "retry_after_long":
        return _json(503, {"error": UNAVAILABLE}, {"Retry-After": "3600"})
    short = {"lease_seconds": 3, "heartbeat_interval_seconds": 1}
    shapes = {
        "no_expiry": {"lease_expires_at": None},
        "float_lease": {"lease_seconds": 60.5},
        "empty_session": {"session_id": ""},
        "null_counts": {"seats_used": None, "seats_total": None},
    }
    if scenario in ("signed", "foreign_key", "session_null", "heartbeat_no_counts",
                    "keys503once", "rotated_release", *shapes):  # fmt: skip
        _count(scenario, function)
        if function == "acquire":
            grant = {**GRANT, **short}
            if scenario == "session_null":
                return _json(201, {**signed(function, body, grant), "session_id": None})
            if scenario in shapes:
                answer = {**signed(function, body, grant), **shapes[scenario]}
                if scenario == "no_expiry":
                    del answer["lease_expires_at"]
                return _json(201, answer)
            return ok(201, grant)
        if function == "heartbeat":
            return ok(200, {**RENEWAL, **short, "session_id": body.get("session_id")})
        if scenario == "rotated_release":
            return _json(200, signed(function, body, released(), kid=ROTATED_KID))
        return ok(200, released())
    if scenario == "redirect":
        target = request.host_url + "signed/" + function
        return _json(307, {}, {"Location": target})
    if scenario == "recover":
        if function == "acquire":
            return ok(201, GRANT)
        if function == "heartbeat":
            if body.get("lease_token"):
                return ok(200, RENEWAL)
            return _json(410, {"error": SESSION_UNKNOWN})
        return ok(200, released())
    if scenario == "revoked":
        calls = _count(scenario, function)
        if function == "heartbeat" and "lease_token" in body:
            _count(scenario, "token")
        if function == "acquire":
            session = GRANT["session_id"] if calls == 1 else REGRANTED
            return ok(201, {**GRANT, **short, "session_id": session})
        if function == "heartbeat":
            if body.get("session_id") == GRANT["session_id"]:
                return _json(410, {"error": SESSION_REVOKED})
            return ok(200, {**RENEWAL, **short, "session_id": body.get("session_id")})
        return ok(200, released())
    if scenario in ("term_ended", "suspended"):
        calls = _count(scenario, function)
        if function == "release":
            return ok(200, released())
        if function == "acquire" and calls == 1:
            return ok(201, {**GRANT, **short})
        if scenario == "term_ended":
            return _json(403, {"error": LICENSE_EXPIRED})
        if function == "heartbeat":
            return ok(200, {**RENEWAL, **short})
        suspended = {"code": "license_suspended", "message": "The license is suspended."}
        return _json(403, {"error": suspended})
    return None


def _count(scenario: str, function: str) -> int:
    """Count a call of ``function`` in ``scenario``; the count so far, this one included."""
    with _COUNT_LOCK:
        _COUNTS[(scenario, function)] = calls = _COUNTS.get((scenario, function), 0) + 1
    return calls


_COUNTS: dict[tuple[str, str], int] = {}  # calls per (scenario, function), since reset()
_COUNT_LOCK = __import__("threading").Lock()


def reset() -> None:
    """Forget the calls counted (``term_ended``, ``suspended``, ``revoked`` grant their first
    acquire)."""
    with _COUNT_LOCK:
        _COUNTS.clear()


def app(environ, start_response):
    request = Request(environ)
    _, scenario, function = [*request.path.split("/"), "", ""][:3]
    if scenario == "weights":
        return weights(request, function)(environ, start_response)
    if function == "_reset":
        reset()
        return _json(200, {"reset": True})(environ, start_response)
    if function == "_calls":
        with _COUNT_LOCK:
            counts = {f: n for (s, f), n in _COUNTS.items() if s == scenario}
        return _json(200, counts)(environ, start_response)
    if function == "keys" and scenario in ("keys503once", "rotated_release"):
        fetches = _count(scenario, "keys")
        if scenario == "keys503once" and fetches == 1:
            return _json(503, {"error": UNAVAILABLE})(environ, start_response)
        if scenario == "rotated_release" and fetches > 1:
            return _drip(200, jwks(rotated=True))(environ, start_response)
        return _json(200, jwks())(environ, start_response)
    if function == "keys" and scenario not in SCENARIOS:
        return _json(200, jwks(foreign=scenario == "foreign_key"))(environ, start_response)
    answer = behaviour(scenario, request, function)
    if answer is not None:
        return answer(environ, start_response)
    if scenario not in SCENARIOS:
        return Response("no such scenario", status=404)(environ, start_response)
    status, body, keys = SCENARIOS[scenario]
    if function in ("acquire", "heartbeat", "release"):
        _count(scenario, function)  # a refused grant's seat is released: counted
    if function == "keys":
        answer = Response(keys, status=200, mimetype="application/json")
    else:
        answer = Response(body, status=status, mimetype="application/json")
    return answer(environ, start_response)


@contextmanager
def bad_server() -> Iterator[str]:
    """The fake server's URL while it runs."""
    with serving(app, quiet=True) as url:
        yield url
