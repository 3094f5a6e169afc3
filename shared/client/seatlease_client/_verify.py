"""Verification of the signed answers, with the standard library only (``_ed25519``).

Every acquire and heartbeat answer carries a ``lease_token`` and every release answer a
``release_token``: a JWT signed with Ed25519 (EdDSA) by the deployment. ``TokenVerifier``
accepts an answer only when its token

- is signed by a key the deployment's JWKS (``<base_url>/keys``) serves now, fetched
  once and cached, fetched again after ``jwks_ttl`` or on an unknown ``kid`` (at most
  once per ``min_refetch`` seconds, so a flood of forged tokens cannot flood the server);
- is signed by one of the vendor's pinned public keys, when the product pins any (a fake
  server can serve its own JWKS; it cannot sign with the vendor's key);
- is of the right kind (header ``typ``), for this ``aud`` (``<tenant>/<license>``), for
  this session (``sid``) and client (``sub``), not expired (``exp``, ``nbf`` and ``iat``
  with ``leeway`` seconds for clock differences), and carries the nonce sent with this
  very request (a recorded answer replayed later carries another);
- agrees with the answer's plain fields (session id, deadline, ``released``).

Anything else raises a ``TokenError`` subclass (``seatlease_client._errors``) and the
answer never counts: no seat, no renewal, no release.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Union

from seatlease_client import _ed25519
from seatlease_client._claims import _parse_time, claimed_seats  # noqa: F401 (re-exported)
from seatlease_client._errors import (
    BackendUnavailable,
    BadSignature,
    MalformedToken,
    TokenExpired,
    TokenMismatch,
    TokenMissing,
    TokenReplayed,
    TokenWrongMachine,
    UnknownKeyId,
    UntrustedKey,
    WrongAudience,
)

LEASE_TYP = "seatlease-lease+jwt"
RELEASE_TYP = "seatlease-release+jwt"
_TOKEN_FIELD = {"acquire": "lease_token", "heartbeat": "lease_token", "release": "release_token"}
_TYP = {"acquire": LEASE_TYP, "heartbeat": LEASE_TYP, "release": RELEASE_TYP}

# A pinned key: a JWK (dict), a PEM public key, or the JWK's "x" (base64url of 32 bytes).
PinnedKey = Union[dict, str, bytes]


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def _b64url(text: str) -> bytes:
    """base64url without padding, strictly (ValueError on anything else)."""
    if not isinstance(text, str) or not all(c.isalnum() or c in "-_" for c in text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None


# An Ed25519 SubjectPublicKeyInfo (RFC 8410) is this DER prefix and the 32 key bytes.
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


class _SmallOrder(ValueError):
    """A key of small order: anyone can forge its signatures."""


def _public_key(raw: bytes) -> bytes:
    """``raw`` if it is an Ed25519 public key (32 bytes encoding a curve point), not of
    small order (``_SmallOrder``)."""
    if len(raw) == 32 and _ed25519.has_small_order(raw):
        raise _SmallOrder(
            "a pinned key is an Ed25519 public key of small order (such as the identity "
            "point): anyone can forge its signatures; pin the vendor's key (the JWKS's x)"
        )
    if len(raw) != 32 or not _ed25519.is_public_key(raw):
        raise ValueError("not an Ed25519 public key (32 bytes)")
    return raw


def _from_jwk(jwk: Any) -> bytes | None:
    """An Ed25519 JWK's public key (32 raw bytes); None for any other kind of key
    (ignored)."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None
    x = jwk.get("x")
    if not isinstance(x, str):
        return None
    try:
        return _public_key(_b64url(x))
    except ValueError:
        return None


def pinned_raw(key: PinnedKey) -> bytes:
    """A pinned key as its 32 raw bytes; ValueError when it is not an Ed25519 public key
    or is one of small order (a key anyone can forge signatures for: never a vendor's)."""
    if isinstance(key, dict) and key.get("kty") == "OKP" and key.get("crv") == "Ed25519":
        try:  # a JWK of small order: said as such
            _public_key(_b64url(key.get("x")))
        except _SmallOrder:
            raise
        except ValueError:
            pass
    return _pinned_raw(key)


def _pinned_raw(key: PinnedKey) -> bytes:
    if isinstance(key, dict):
        public = _from_jwk(key)
        if public is None:
            raise ValueError("a pinned JWK must be an Ed25519 key (kty OKP, crv Ed25519)")
        return public
    text = key.decode() if isinstance(key, bytes) else key
    if not isinstance(text, str):
        raise ValueError("a pinned key is a JWK (dict), a PEM public key or the JWK's x")
    if "-----BEGIN" in text:
        body = "".join(
            line.strip() for line in text.strip().splitlines() if not line.startswith("-----")
        )
        try:
            der = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a pinned PEM key is not base64") from None
        if len(der) != 44 or not der.startswith(_SPKI_PREFIX):
            raise ValueError("a pinned PEM key must be an Ed25519 public key")
        return _public_key(der[len(_SPKI_PREFIX) :])
    try:
        return _public_key(_b64url(text.strip()))
    except _SmallOrder:
        raise
    except ValueError:
        raise ValueError(
            "a pinned key must be an Ed25519 public key: its JWK, its PEM, or the JWK's x "
            "(base64url of 32 bytes)"
        ) from None


def _split(token: str) -> tuple[dict[str, Any], bytes, bytes, bytes]:
    """A compact JWS: (header, payload bytes, signing input, signature); ValueError when
    it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not three parts")
    header = json.loads(_b64url(parts[0]))
    if not isinstance(header, dict):
        raise ValueError("the header is not an object")
    return header, _b64url(parts[1]), f"{parts[0]}.{parts[1]}".encode("ascii"), _b64url(parts[2])


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class TokenVerifier:
    """Checks the token of each answer; one per ``SeatClient``. Thread-safe.

    ``fetch_jwks()`` returns the JWKS document's bytes (the client's HTTP stack, so its
    proxies and timeouts apply). ``pinned_keys``: the vendor's public keys; when given,
    only tokens signed by one of them pass. ``tenant_id``: the expected tenant in ``aud``
    (else any tenant with the right license). ``claimed_seats(claims)`` reads the
    weight a token signs. ``leeway``: seconds of clock difference
    allowed on ``exp``, ``nbf`` and ``iat``. ``machine_fingerprint``: this machine's
    (``_machine``), for a borrowed seat loaded from its file: a borrowed token must name
    it in ``cnf.machine`` (``TokenWrongMachine`` otherwise).
    """

    def __init__(
        self,
        fetch_jwks: Callable[[], bytes],
        *,
        pinned_keys: Sequence[PinnedKey] | None = None,
        tenant_id: str | None = None,
        leeway: float = 60.0,
        jwks_ttl: float = 300.0,
        min_refetch: float = 10.0,
        machine_fingerprint: str | None = None,
    ) -> None:
        self._fetch = fetch_jwks
        self.machine_fingerprint = machine_fingerprint
        self.pinned = frozenset(pinned_raw(k) for k in pinned_keys or ())
        self.tenant_id, self.leeway = tenant_id, leeway
        self.jwks_ttl, self.min_refetch = jwks_ttl, min_refetch
        self._keys: dict[str, bytes] = {}
        self._fetched_at: float | None = None  # time.monotonic()
        # Guards the cache, never held across a fetch; re-entrant, so that a SIGTERM
        # handler releasing the seats in a thread that holds it does not deadlock.
        self._lock = threading.RLock()
        self._flight: threading.Event | None = None  # the fetch under way, if any
        self._flight_owner: int | None = None  # the thread doing it

    # -- the JWKS ----------------------------------------------------------------------

    def _download(self) -> dict[str, bytes]:
        """The JWKS's Ed25519 keys by kid, fetched now (network I/O: no lock held). A
        JWKS that is not a JSON key set is a failed fetch (``BackendUnavailable``:
        transient, retried), not a token error."""
        raw = self._fetch()
        try:
            document = json.loads(raw)
            listed = document["keys"]
            if not isinstance(listed, list):
                raise TypeError("keys is not a list")
        except (ValueError, TypeError, KeyError, RecursionError):
            raise BackendUnavailable(
                0, "jwks_invalid", "The deployment's JWKS is not a JSON key set."
            ) from None
        keys = {}
        for jwk in listed:
            public = _from_jwk(jwk)
            if public is not None and isinstance(jwk.get("kid"), str):
                keys[jwk["kid"]] = public
        return keys

    def jwks_document(self) -> dict[str, Any]:
        """The cached JWKS's Ed25519 keys as a JWKS document (saved with a borrowed
        seat: the keys that verified it)."""
        with self._lock:
            keys = dict(self._keys)
        return {
            "keys": [
                {"kty": "OKP", "crv": "Ed25519", "kid": kid,
                 "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode()}
                for kid, raw in sorted(keys.items())
            ]
        }  # fmt: skip

    def _locked(self, deadline: float | None) -> None:
        """Take the lock, waiting at most until ``deadline`` (a release on SIGTERM must
        never wait on it longer than its own time)."""
        wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=wait):
            raise BackendUnavailable(
                0, "network_error", "The deployment's JWKS was busy past this exchange's deadline."
            )

    def key_for(self, kid: str, status: int, deadline: float | None = None) -> bytes:
        """The key ``kid`` of the deployment's JWKS (fetched when stale or on an unknown
        kid), checked against the pinned keys. ``deadline`` (``time.monotonic()``) bounds
        every wait: the lock, a fetch under way in another thread, and this thread's own.

        The lock guards the cache only, never a fetch: one thread fetches at a time
        (single flight: the others wait for its ``Event``, each until its own deadline),
        and a thread that re-enters while its own fetch is under way (a SIGTERM handler
        releasing the seats) fetches for itself within its deadline instead of waiting
        for itself."""
        me = threading.get_ident()
        while True:
            self._locked(deadline)
            try:
                age = None if self._fetched_at is None else time.monotonic() - self._fetched_at
                stale = age is None or age > self.jwks_ttl
                fresh_look = kid not in self._keys and age is not None and age > self.min_refetch
                if not (stale or fresh_look):
                    key = self._keys.get(kid)
                    break
                flight = self._flight
                lead = flight is None or self._flight_owner == me
                if flight is None:
                    flight = self._flight = threading.Event()
                    self._flight_owner = me
                    ours = True
                else:
                    ours = False
            finally:
                self._lock.release()
            if not lead:  # another thread fetches: wait for it, within our own time
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not flight.wait(wait):
                    raise BackendUnavailable(
                        0, "network_error",
                        "The deployment's JWKS did not arrive within this exchange's time.",
                    )  # fmt: skip
                continue
            keys = None
            try:
                keys = self._download()
            finally:
                with self._lock:  # held for a moment only: never across I/O
                    if keys is not None:
                        self._keys, self._fetched_at = keys, time.monotonic()
                    if ours:
                        self._flight = self._flight_owner = None
                if ours:
                    flight.set()
            key = keys.get(kid)
            break
        if key is None:
            raise UnknownKeyId(
                status, "token_unknown_kid", f"No key {kid!r} in the deployment's JWKS."
            )
        if self.pinned and key not in self.pinned:
            raise UntrustedKey(
                status, "token_untrusted_key", f"Key {kid!r} is not one of the pinned keys."
            )
        return key

    # -- one answer --------------------------------------------------------------------

    def check(
        self,
        function: str,
        request: dict[str, Any],
        reply: Any,
        status: int,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """The verified claims of ``reply``'s token, else a ``TokenError`` (or a
        ``BackendUnavailable`` when the JWKS could not be fetched by ``deadline``, a
        ``time.monotonic()``: transient, not the token's fault)."""
        field = _TOKEN_FIELD[function]
        token = reply.get(field) if isinstance(reply, dict) else None
        if not isinstance(token, str):
            raise TokenMissing(status, "token_missing", f"The {function} answer has no {field}.")
        try:
            header, payload, signed, signature = _split(token)
        except (ValueError, UnicodeError):
            raise MalformedToken(status, "token_malformed", f"The {field} is not a JWT.") from None
        kid, typ = header.get("kid"), header.get("typ")
        if header.get("alg") != "EdDSA" or not isinstance(kid, str):
            raise MalformedToken(
                status, "token_malformed", f"The {field} is not an EdDSA JWT with a kid."
            )
        if typ != _TYP[function]:
            raise TokenMismatch(status, "token_mismatch", f"The {field} is a {typ!r} token.")
        key = self.key_for(kid, status, deadline)
        claims = self._decode(payload, signed, signature, key, field, status)
        self._check_claims(function, request, reply, claims, status)
        return claims

    def _decode(
        self, payload: bytes, signed: bytes, signature: bytes, key: bytes, field: str, status: int
    ) -> dict[str, Any]:
        """The claims of a token whose signature ``key`` made, checked in time (``exp``,
        ``nbf``, ``iat`` with ``leeway``) and for the claims every token carries."""
        if not _ed25519.verify(key, signed, signature):
            raise BadSignature(
                status, "token_bad_signature", f"The {field}'s signature does not verify."
            )
        try:
            claims = json.loads(payload)
        except (ValueError, UnicodeError):
            claims = None
        if not isinstance(claims, dict):
            raise MalformedToken(status, "token_malformed", f"The {field}'s claims are not JSON.")
        missing = [n for n in ("iss", "aud", "sid", "iat", "nbf", "exp") if n not in claims]
        if missing:
            raise MalformedToken(
                status, "token_malformed", f"The {field} lacks the claim(s) {', '.join(missing)}."
            )
        wrong = [n for n in ("iat", "nbf", "exp") if not _numeric(claims[n])]
        if wrong:
            raise MalformedToken(
                status, "token_malformed", f"The {field}'s {', '.join(wrong)} is not a number."
            )
        now = time.time()
        if claims["exp"] <= now - self.leeway:
            raise TokenExpired(status, "token_expired", f"The {field} has expired.")
        if claims["nbf"] > now + self.leeway or claims["iat"] > now + self.leeway:
            raise TokenExpired(
                status, "token_expired", f"The {field} is not valid yet (check the clock)."
            )
        return claims

    def _check_claims(
        self,
        function: str,
        request: dict[str, Any],
        reply: dict[str, Any],
        claims: dict[str, Any],
        status: int,
    ) -> None:
        license_id = request["license_id"]
        aud = claims["aud"]
        tenant, _, licensed = aud.rpartition("/") if isinstance(aud, str) else ("", "", "")
        if licensed != license_id or not tenant or self.tenant_id not in (None, tenant):
            raise WrongAudience(
                status, "token_wrong_audience", f"The token is for {aud!r}, not this license."
            )
        if claims.get("nonce") != request.get("nonce"):
            raise TokenReplayed(
                status, "token_replayed", "The token answers another request (nonce)."
            )
        session = reply.get("session_id") if function == "acquire" else request["session_id"]
        problems = []
        if claims["sid"] != session:
            problems.append("session")
        if function == "acquire" and claims.get("sub") != request["client_id"]:
            problems.append("client_id")
        if function in ("acquire", "heartbeat") and not self._same_deadline(reply, claims):
            problems.append("lease_expires_at")
        if function == "release" and claims.get("released") is not reply.get("released"):
            problems.append("released")
        if function in ("acquire", "heartbeat"):
            problems += self._term_problems(reply, claims)
        bound = (
            claims.get("cnf", {}).get("machine") if isinstance(claims.get("cnf"), dict) else None
        )
        if "fingerprint" in request and bound != request["fingerprint"]:
            problems.append("fingerprint")
        if problems:
            raise TokenMismatch(
                status, "token_mismatch",
                f"The token disagrees with the answer ({', '.join(problems)}).",
            )  # fmt: skip
        if (
            self.machine_fingerprint is not None
            and claims.get("borrowed") is True
            and bound != self.machine_fingerprint
        ):
            raise TokenWrongMachine(
                status, "token_wrong_machine",
                "This borrowed seat was taken for another machine (cnf.machine).",
            )  # fmt: skip

    @staticmethod
    def _term_problems(reply: dict[str, Any], claims: dict[str, Any]) -> list[str]:
        """The answer's term fields against the token's ``ent``, ``lexp`` and ``maxv``
        (a token without them: nothing to compare)."""
        problems = []
        if "ent" in claims and claims["ent"] != reply.get("entitlements"):
            problems.append("entitlements")
        if "lexp" in claims:
            try:
                ends = _parse_time(reply["license_grace_ends_at"]).timestamp()
            except (KeyError, TypeError, ValueError):
                ends = None
            lexp = claims["lexp"]
            if ends is None or not isinstance(lexp, int) or not 0 <= ends - lexp < 1.001:
                problems.append("license_grace_ends_at")
        if "maxv" in claims and claims["maxv"] != reply.get("max_version"):
            problems.append("max_version")
        # The weight: a token that signs one must agree with the answer's (absent: 1).
        if "seats" in claims and claims["seats"] != reply.get("seats", 1):
            problems.append("seats")
        return problems

    @staticmethod
    def _same_deadline(reply: dict[str, Any], claims: dict[str, Any]) -> bool:
        """``exp`` is the deadline rounded down to a second."""
        try:
            deadline = _parse_time(reply["lease_expires_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            return False
        exp = claims["exp"]
        return isinstance(exp, int) and 0 <= deadline - exp < 1.001
