"""What the service lost, a token brings back; what it ended stays ended (docs/design.md,
"A region lost").

A client sends its lease's signed ``lease_token`` with a heartbeat the server answered
``410`` ``unknown`` (and may send it with an acquire). The token is checked here as a
product would offline: the signature with one of the keys this deployment publishes,
``typ``, ``iss``, the audience (this tenant and license), the session and client it
names; a token that fails any of it is no token (a forged, other license's or malformed
one: the call goes on as without it). Then the seat engine decides, in the one call that
would grant a new seat (acquire.lua's re-admission): the lease comes back only when this
Redis lost it (never one the service ended), in a recovery window (a borrow: any time),
passing every rule a new grant passes.

Only these paths verify a token on the server: a normal heartbeat never pays for it (nor
sends it: the clients attach the token to one retry after a 410 ``unknown``)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from seatlease.api import runtime
from seatlease.api.tokens import LEASE_TYP, audience, issuer, keyring
from seatlease.errors import SessionExpired
from seatlease.logs import log
from seatlease.seats.values import Lease, QueuePlace, Renewal, SeatRequest, TokenGrant

if TYPE_CHECKING:
    from seatlease.api.schemas import HeartbeatRequest
    from seatlease.seats.engine import SeatEngine


def _segment(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verified_grant(
    token: str, tenant_id: str, license_id: str, session_id: str | None, client_id: str | None
) -> TokenGrant | None:
    """What ``token`` grants, when it is a lease token this deployment signed for this
    tenant's license (and, when given, this session and client), else None: whatever its
    bytes (any header or claim of the wrong type is no token). ``exp`` is left to the
    caller (Redis's clock decides it)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        header_text, payload_text, signature_text = token.split(".")
        header = json.loads(_segment(header_text))
        claims = json.loads(_segment(payload_text))
        signature = _segment(signature_text)
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    kid = header.get("kid")
    if header.get("alg") != "EdDSA" or header.get("typ") != LEASE_TYP or not isinstance(kid, str):
        return None
    published = {v.kid: v.public for v in keyring().plan().published if v.public}
    public = published.get(kid)
    if public is None:
        return None
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(
            signature, f"{header_text}.{payload_text}".encode("ascii")
        )
    except (InvalidSignature, ValueError, UnicodeEncodeError):
        return None
    sid, sub, exp, iat = claims.get("sid"), claims.get("sub"), claims.get("exp"), claims.get("iat")
    seats, user = claims.get("seats", 1), claims.get("usr")
    if (
        claims.get("iss") != issuer()
        or claims.get("aud") != audience(tenant_id, license_id)
        or not isinstance(sid, str)
        or not isinstance(sub, str)
        or not _whole(exp)
        or not _whole(iat)
        or not _whole(seats)
        or seats < 1
        or (user is not None and not isinstance(user, str))
        or (session_id is not None and sid != session_id)
        or (client_id is not None and sub != client_id)
    ):
        return None
    cnf = claims.get("cnf")
    machine = cnf.get("machine") if isinstance(cnf, dict) else None
    return TokenGrant(
        session_id=sid,
        client_id=sub,
        expires_at_ms=exp * 1000,
        seats=seats,
        borrowed=claims.get("borrowed") is True,
        machine=machine if isinstance(machine, str) else None,
        issued_at_ms=iat * 1000,
        user=user or None,
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refused(tenant_id: str, license_id: str, session_id: str | None) -> None:
    log(
        "WARNING",
        "recovery: a lease token was refused",
        tenant_id=tenant_id,
        license_id=license_id,
        session_id=session_id,
    )


def _recovered(lease: Lease) -> None:
    log(
        "NOTICE",
        "recovery: a lease re-admitted by its token",
        license_id=lease.license_id,
        session_id=lease.session_id,
        client_id=lease.client_id,
        seats=lease.seats,
    )


def acquire(engine: SeatEngine, request: SeatRequest, token: str | None) -> Lease | QueuePlace:
    """An acquire, readmit-then-acquire: with a ``lease_token`` of this client's, its lease
    comes back in this same call when this Redis lost it (``SeatRequest.recover``);
    without one, or with one that is no token of this client's (logged), the client asks
    for a seat as anyone does."""
    if token is None:
        return engine.acquire(request)
    grant = verified_grant(token, request.tenant_id, request.license_id, None, request.client_id)
    if grant is None:
        _refused(request.tenant_id, request.license_id, None)
        return engine.acquire(request)
    lease = engine.acquire(replace(request, recover=grant))
    if isinstance(lease, Lease) and lease.recovered:
        _recovered(lease)
    return lease


def heartbeat(
    engine: SeatEngine, tenant_id: str, body: HeartbeatRequest, rate_limit: int
) -> Renewal:
    """A heartbeat, heartbeat-then-readmit: a session this Redis does not know (a region
    lost, its data lost) comes back by its ``lease_token`` in one more call, answered as
    this heartbeat (``Renewal.recovered``); otherwise the heartbeat's own answer or
    refusal."""
    try:
        return engine.heartbeat(
            tenant_id,
            body.license_id,
            body.session_id,
            request_id=body.request_id,
            rate_limit=rate_limit,
            idle_seconds=body.idle_seconds,
            busy=bool(body.busy),
        )
    except SessionExpired as gone:
        if gone.reason != "unknown" or body.lease_token is None:
            raise
    return readmit(
        engine,
        tenant_id,
        body.license_id,
        body.session_id,
        body.lease_token,
        request_id=f"{body.request_id}-r" if body.request_id else None,
        rate_limit=rate_limit,
        failover_began_ms=runtime.failover_began_ms(),
    )


def readmit(
    engine: SeatEngine,
    tenant_id: str,
    license_id: str,
    session_id: str,
    token: str,
    *,
    request_id: str | None,
    rate_limit: int,
    failover_began_ms: int | None,
) -> Renewal:
    """A heartbeat answered ``unknown``, with its lease's token: the lease re-created and
    renewed in one call (``SeatEngine.readmit``), or ``SessionExpired`` (``unknown``, or
    ``revoked`` when the service remembers an operator revoked it): nothing changed."""
    grant = verified_grant(token, tenant_id, license_id, session_id, None)
    if grant is None:
        _refused(tenant_id, license_id, session_id)
        raise SessionExpired("unknown")
    lease = engine.readmit(
        SeatRequest(
            tenant_id=tenant_id,
            license_id=license_id,
            client_id=grant.client_id,
            # a lease of the length its token shows (the license's maximum at most); a
            # borrow comes back until its end
            lease_seconds=None if grant.borrowed else grant.lease_seconds,
            request_id=request_id,
            rate_limit=rate_limit,
            user=grant.user,
            seats=grant.seats,
            fingerprint=grant.machine,
            failover_began_ms=failover_began_ms,
            recover=grant,
        )
    )
    _recovered(lease)
    return Renewal(
        lease.session_id,
        lease.expires_at_ms,
        lease.lease_seconds,
        lease.borrowed,
        now_ms=lease.now_ms,
        client_id=lease.client_id,
        terms=lease.terms,
        seats=lease.seats,
        machine=lease.machine,
        user=lease.user,
        recovered=True,
    )
