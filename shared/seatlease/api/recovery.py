"""A region lost, the seat kept (docs/design.md, "A region lost"): a heartbeat (or an
acquire) of a session this Redis does not know, carrying the lease's signed
``lease_token``, re-creates the lease from the token (``SeatEngine.readmit``), after
checking the token as a product would offline: the signature with one of the keys this
deployment publishes, ``typ``, ``iss``, the audience (this tenant and license), the
session and client it names, and that ``exp`` has not passed (readmit.lua checks it on
the Redis clock). A forged, expired or other license's token is refused as any unknown
session is: ``410 session_expired`` (reason ``unknown``), nothing changed.

Only this path verifies a token on the server, and only after Redis answered
``unknown``: a normal heartbeat never pays for it (nor sends it: the clients attach the
token to one retry after a 410 ``unknown``)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from seatlease.api.tokens import LEASE_TYP, audience, issuer, keyring
from seatlease.errors import SessionExpired
from seatlease.logs import log
from seatlease.seats.engine import SeatEngine
from seatlease.seats.values import TokenGrant


def _segment(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verified_grant(
    token: str, tenant_id: str, license_id: str, session_id: str | None, client_id: str | None
) -> TokenGrant | None:
    """What ``token`` grants, when it is a lease token this deployment signed for this
    tenant's license (and, when given, this session and client), else None. ``exp`` is
    left to the caller (Redis's clock decides it)."""
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
    if header.get("alg") != "EdDSA" or header.get("typ") != LEASE_TYP:
        return None
    published = {v.kid: v.public for v in keyring().plan().published if v.public}
    public = published.get(header.get("kid"))  # type: ignore[arg-type]
    if public is None:
        return None
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(
            signature, f"{header_text}.{payload_text}".encode("ascii")
        )
    except (InvalidSignature, ValueError, UnicodeEncodeError):
        return None
    sid, sub, exp = claims.get("sid"), claims.get("sub"), claims.get("exp")
    seats = claims.get("seats", 1)
    if (
        claims.get("iss") != issuer()
        or claims.get("aud") != audience(tenant_id, license_id)
        or not isinstance(sid, str)
        or not isinstance(sub, str)
        or not _whole(exp)
        or not _whole(seats)
        or seats < 1
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
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def readmit(
    engine: SeatEngine,
    tenant_id: str,
    license_id: str,
    token: str,
    *,
    session_id: str | None = None,
    client_id: str | None = None,
) -> TokenGrant:
    """Re-create the token's lease on this Redis (or find it live), or raise
    ``SessionExpired("unknown")`` as for any session it does not know: the token is not
    this deployment's, not this license's, session's or client's, has expired, or its
    seat does not come back (its client holds another, or the license is full)."""
    grant = verified_grant(token, tenant_id, license_id, session_id, client_id)
    if grant is None:
        log(
            "WARNING",
            "recovery: a lease token was refused",
            tenant_id=tenant_id,
            license_id=license_id,
            session_id=session_id,
        )
        raise SessionExpired("unknown")
    outcome = engine.readmit(tenant_id, license_id, grant)
    if outcome == "recovered":
        log(
            "NOTICE",
            "recovery: a lease re-admitted by its token",
            tenant_id=tenant_id,
            license_id=license_id,
            session_id=grant.session_id,
            client_id=grant.client_id,
            seats=grant.seats,
        )
    return grant
