"""Lease and release tokens: JWTs (RFC 7519) signed with EdDSA / Ed25519 (RFC 8037) by
pyca/cryptography, with the key ``seatlease.api.signingkeys`` says signs now.

A product verifies them with any JOSE library against the ``keys`` function's JWKS and
its own pinned public keys (docs/client.md). The claims:

lease token (acquire, heartbeat; header ``typ`` ``seatlease-lease+jwt``)
    ``iss`` the deployment (``SEATLEASE_ISSUER``, the functions' base URL), ``aud``
    ``<tenant>/<license>``, ``sub`` the client_id (acquire), ``sid`` the session,
    ``iat`` = ``nbf`` when Redis granted it and ``exp`` the lease deadline, both on the
    Redis server's clock, ``nonce`` echoed from the request when it sent one.
release token (release; ``typ`` ``seatlease-release+jwt``)
    ``iss``, ``aud``, ``sid``, ``released`` (true: this call ended a live lease),
    ``iat``/``nbf`` (Redis clock), ``exp`` = ``iat`` + 5 minutes, ``nonce``.

A lease on a license with a term, entitlements or a version range adds ``ent`` (the
license's entitlements, a list), ``lexp`` (when the license stops: expires_at + grace,
epoch seconds; absent for no end) and ``maxv`` (its max_version, when set): a product
verifies offline what it may do and until when. ``exp`` never passes ``lexp`` under
``end_leases``.

The ``typ`` header keeps one kind from passing for the other (RFC 8725 section 3.11).
Other claims can be added by keyword (``borrowed`` will be, for a borrowed lease);
verifiers ignore claims they do not know. Times are whole seconds: ``exp`` is rounded
down, so a token never outlives its lease.

Encoding is the JWS compact serialization (RFC 7515 section 7.1), written here rather
than by PyJWT: importing PyJWT loads every algorithm it supports (RSA, EC, HMAC and the
cryptography modules behind them) into a cold start that signs with one, and its
per-token checks cost as much as JSON and base64 together. The bytes are PyJWT's, byte
for byte (header keys sorted, compact JSON; Ed25519 signatures are deterministic), which
tests/test_tokens.py checks against PyJWT itself; verifiers (the client, the tests) use
PyJWT or any JOSE library.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from seatlease.api.signingkeys import (
    DEFAULT_MAX_TOKEN_SECONDS,
    DirectoryKeys,
    Keyring,
    KeySource,
    SigningKey,
    SigningNotConfigured,
)

ALGORITHM = "EdDSA"
LEASE_TYP = "seatlease-lease+jwt"
RELEASE_TYP = "seatlease-release+jwt"
RELEASE_TOKEN_SECONDS = 300


def audience(tenant_id: str, license_id: str) -> str:
    return f"{tenant_id}/{license_id}"


def issuer() -> str:
    value = os.environ.get("SEATLEASE_ISSUER", "").strip()
    if not value:
        raise SigningNotConfigured(
            "SEATLEASE_ISSUER is not set: the functions' base URL, the tokens' iss"
        )
    return value


@dataclass(frozen=True, slots=True)
class Signer:
    """Signs the tokens of one request; ``key`` None: ``LEASE_TOKENS=off``, no tokens.
    Each method returns the answer's token field (empty when tokens are off)."""

    key: SigningKey | None
    issuer: str

    def _sign(self, typ: str, claims: dict[str, Any]) -> str:
        assert self.key is not None
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = _header_segment(self.key.kid, typ) + b"." + payload
        return (signing_input + b"." + _b64(self.key.private.sign(signing_input))).decode("ascii")

    def lease(
        self,
        *,
        tenant_id: str,
        license_id: str,
        session_id: str,
        client_id: str | None,
        issued_at_ms: int,
        expires_at_ms: int,
        nonce: str | None,
        **extra: Any,
    ) -> dict[str, str]:
        if self.key is None:
            return {}
        issued = issued_at_ms // 1000
        claims: dict[str, Any] = {"iss": self.issuer, "aud": audience(tenant_id, license_id)}
        if client_id is not None:
            claims["sub"] = client_id
        claims.update(sid=session_id, iat=issued, nbf=issued, exp=expires_at_ms // 1000)
        if nonce is not None:
            claims["nonce"] = nonce
        claims.update(extra)
        return {"lease_token": self._sign(LEASE_TYP, claims)}

    def release(
        self,
        *,
        tenant_id: str,
        license_id: str,
        session_id: str,
        released: bool,
        issued_at_ms: int,
        nonce: str | None,
    ) -> dict[str, str]:
        if self.key is None:
            return {}
        issued = issued_at_ms // 1000
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience(tenant_id, license_id),
            "sid": session_id,
            "released": released,
            "iat": issued,
            "nbf": issued,
            "exp": issued + RELEASE_TOKEN_SECONDS,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        return {"release_token": self._sign(RELEASE_TYP, claims)}


def weight_field(seats: int) -> dict[str, int]:
    """``seats`` for an answer and a token's claims when the lease (or ticket) counts as
    more than one seat; none for one (absent means 1: answers and tokens as before
    weights)."""
    return {"seats": seats} if seats > 1 else {}


def user_claim(user: str | None) -> dict[str, str]:
    """``usr``: the user the license's policy judged the lease as (its deny list, per-user
    limit and reservations), on a license with a policy: a re-admission by the token is
    judged as that user's (seatlease.api.recovery). Absent without one."""
    return {"usr": user} if user else {}


def machine_claim(fingerprint: str | None) -> dict[str, dict[str, str]]:
    """``cnf`` for a token of a lease taken on a machine (its fingerprint): a client
    refuses a borrowed lease's token on another machine. None: no claim."""
    return {"cnf": {"machine": fingerprint}} if fingerprint else {}


def _b64(data: bytes) -> bytes:
    """base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=")


@functools.lru_cache(maxsize=64)
def _header_segment(kid: str, typ: str) -> bytes:
    """The encoded protected header: the same for every token of one key and kind."""
    header = {"alg": ALGORITHM, "kid": kid, "typ": typ}
    return _b64(json.dumps(header, separators=(",", ":"), sort_keys=True).encode())


def signer() -> Signer:
    """The signer for one request. Called before the seat operation, so that when no key
    can sign (not configured: 500; key source unreachable: 503) nothing has changed."""
    global _last
    if tokens_off():
        return _OFF
    key, iss = keyring().signing_key(), issuer()
    last = _last
    if last.key is not key or last.issuer != iss:  # a new key (or a test's issuer)
        last = _last = Signer(key, iss)
    return last


# -- the process's keyring, from the environment (signingkeys.py has the variables) ----

_keyring: Keyring | None = None
_keyring_lock = threading.Lock()
_OFF = Signer(None, "")
_last = _OFF  # the signer of the previous request: reused while its key signs


def tokens_off() -> bool:
    return os.environ.get("LEASE_TOKENS", "").strip().lower() == "off"


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SigningNotConfigured(f"{name} must be a number of seconds") from None


def source_from_env() -> KeySource:
    folder = os.environ.get("SIGNING_KEYS_DIR", "").strip()
    secret = os.environ.get("SIGNING_KEY_SECRET", "").strip()
    if folder and secret:
        raise SigningNotConfigured("set SIGNING_KEYS_DIR or SIGNING_KEY_SECRET, not both")
    source: KeySource
    if folder:
        source = DirectoryKeys(folder, _float_env("SIGNING_KEY_ACTIVATION_SECONDS", 0.0))
    elif secret:
        from seatlease.api.secretmanager import SecretKeys  # google-cloud-secret-manager: lazy

        source = SecretKeys(secret)
    else:
        raise SigningNotConfigured(
            "lease tokens need a signing key: set SIGNING_KEYS_DIR (a folder of PEM keys) "
            "or SIGNING_KEY_SECRET (projects/P/secrets/S)"
        )
    source.refresh_seconds = _float_env("SIGNING_KEYS_REFRESH_SECONDS", source.refresh_seconds)
    return source


def keyring() -> Keyring:
    """The process's keyring, built from the environment on first use."""
    global _keyring
    if _keyring is None:
        with _keyring_lock:
            if _keyring is None:
                _keyring = Keyring(
                    source_from_env(),
                    _float_env("TOKEN_MAX_LIFETIME_SECONDS", DEFAULT_MAX_TOKEN_SECONDS),
                )
    return _keyring


def reset() -> None:
    """Forget the keyring (tests change the environment)."""
    global _keyring
    _keyring = None
