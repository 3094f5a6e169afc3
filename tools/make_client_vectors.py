"""Write shared/clients/testdata/vectors.json: the token test vectors every client (Python,
Node, Go) must agree on, signed by the server's own code (``seatlease.api.tokens.Signer`` with
a ``seatlease.api.signingkeys.SigningKey``).

Each case is one answer as a client would receive it: the function, the request as sent
(with its ``nonce``), the answer (with its token), the JWKS the client fetches, whether
the vendor's keys are pinned, the tenant expected, the leeway, and the expected outcome:
``ok`` or the error ``code`` every client raises (``token_bad_signature``, ...).

Keys are derived from fixed seeds and Ed25519 signatures are deterministic, so the file
is reproducible: ``--check`` fails when it differs from what this script writes (the
Python test runs it). Times are fixed: good tokens run until 2100, expired ones ended in
2020; a case that needs "expired, but within the leeway" sets a leeway of decades.

    python tools/make_client_vectors.py [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from seatlease.api import signingkeys, tokens
from seatlease.api.signingkeys import KeyVersion, SigningKey

OUT = Path(__file__).resolve().parent.parent / "shared" / "clients" / "testdata" / "vectors.json"
FORMAT = "seatlease-client-vectors/1"
ISSUER = "https://seatlease.example"
TENANT, LICENSE, CLIENT = "acme", "cad", "laptop-7"
SESSION = "Q4sJrKA-xW-lEXiNQQeNgNh_"
NONCE = "n0nce-Of-This-Request_1"
ISSUED_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DEADLINE_MS = 4_102_444_800_250  # 2100-01-01T00:00:00.250Z: exp is rounded down
DEADLINE = "2100-01-01T00:00:00.250Z"
EXPIRED_ISSUED_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z
DECADES = 1_000_000_000  # a leeway of ~31 years: "expired, but within the leeway"
# Machine ids as the systems give them (Linux machine-id, macOS IOPlatformUUID, Windows
# MachineGuid, one with the whitespace a file ends with) and their fingerprints.
MACHINE_IDS = [
    "4c4c4544004a3510804fb4c04f4e4d32",
    "8E3F1C2A-5B6D-4E7F-9A0B-1C2D3E4F5A6B",
    "{d3f1a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b}",
    "4c4c4544004a3510804fb4c04f4e4d32\n",
]
LAPTOP, DESKTOP = MACHINE_IDS[0], MACHINE_IDS[1]


def fingerprint(machine_id: str) -> str:
    """What every client sends as acquire's ``fingerprint`` (docs/client.md): the
    lowercase hex SHA-256 of "seatlease-machine/1:" + the id, trimmed and lowercased."""
    return hashlib.sha256(f"seatlease-machine/1:{machine_id.strip().lower()}".encode()).hexdigest()


def private_key(label: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(label.encode()).digest())


def jwk(kid: str, key: Ed25519PrivateKey) -> dict[str, str]:
    raw = signingkeys.raw_public(key)
    return signingkeys.public_jwk(KeyVersion(kid, int(kid), 0.0, 0.0, raw))


VENDOR = {
    "1": private_key("seatlease vectors: vendor key 1"),
    "2": private_key("seatlease vectors: vendor key 2"),
}
ATTACKER = private_key("seatlease vectors: attacker key")
JWKS = {"keys": [jwk(kid, key) for kid, key in VENDOR.items()]}
PINNED = [entry["x"] for entry in JWKS["keys"]]


def signer(kid: str = "1", key: Ed25519PrivateKey | None = None) -> tokens.Signer:
    return tokens.Signer(SigningKey(kid, key or VENDOR[kid]), ISSUER)


def lease_token(
    *,
    kid: str = "1",
    key: Ed25519PrivateKey | None = None,
    tenant_id: str = TENANT,
    license_id: str = LICENSE,
    client_id: str | None = CLIENT,
    issued_ms: int = ISSUED_MS,
    expires_ms: int = DEADLINE_MS,
    nonce: str | None = NONCE,
    **extra: Any,
) -> str:
    return signer(kid, key).lease(
        tenant_id=tenant_id,
        license_id=license_id,
        session_id=SESSION,
        client_id=client_id,
        issued_at_ms=issued_ms,
        expires_at_ms=expires_ms,
        nonce=nonce,
        **extra,
    )["lease_token"]


def release_token(*, released: bool = True, issued_ms: int = ISSUED_MS) -> str:
    return signer().release(
        tenant_id=TENANT,
        license_id=LICENSE,
        session_id=SESSION,
        released=released,
        issued_at_ms=issued_ms,
        nonce=NONCE,
    )["release_token"]


def b64(data: bytes) -> str:
    return signingkeys.b64url(data)


def segments(token: str) -> list[Any]:
    head, body, signature = token.split(".")
    return [
        json.loads(signingkeys.b64url_decode(head)),
        json.loads(signingkeys.b64url_decode(body)),
        signature,
    ]


def assemble(header: dict[str, Any], claims: dict[str, Any], signature: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return b64(json.dumps(value, separators=(",", ":")).encode())

    return f"{part(header)}.{part(claims)}.{signature}"


def unsigned(alg: str, secret: bytes | None) -> str:
    """A lease token with header ``alg`` (none, HS256), signed with ``secret`` by HMAC."""
    header, claims, _ = segments(lease_token())
    header["alg"] = alg
    signing_input = assemble(header, claims, "").rstrip(".")
    signature = b64(hmac.new(secret, signing_input.encode(), "sha256").digest()) if secret else ""
    return f"{signing_input}.{signature}"


def public_pem() -> bytes:
    return (
        VENDOR["1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def acquire_case(name: str, expect: str, token: str | None, **changes: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "session_id": SESSION,
        "license_id": LICENSE,
        "client_id": CLIENT,
        "lease_expires_at": DEADLINE,
        "lease_seconds": 600,
        "heartbeat_interval_seconds": 200,
        "seats_used": 1,
        "seats_total": 2,
        "overage": False,
    }
    if token is not None:
        answer["lease_token"] = token
    answer.update(changes.pop("answer", {}))
    case: dict[str, Any] = {
        "name": name,
        "function": "acquire",
        "status": 201,
        "request": {"license_id": LICENSE, "client_id": CLIENT, "nonce": NONCE},
        "answer": answer,
        "expect": expect,
    }
    case.update(changes)
    return case


def tampered(token: str, **claims: Any) -> str:
    header, payload, signature = segments(token)
    return assemble(header, {**payload, **claims}, signature)


def flipped_signature(token: str) -> str:
    head, body, signature = token.split(".")
    raw = bytearray(signingkeys.b64url_decode(signature))
    raw[0] ^= 0x01
    return f"{head}.{body}.{b64(bytes(raw))}"


# A license with a term and entitlements: the token's ent, lexp and maxv, and the
# answer's fields they must agree with (docs/design.md, "Terms, grace, entitlements").
TERMS_CLAIMS = {"ent": ["pro", "render.gpu"], "lexp": 4_102_444_800 + 7 * 86400, "maxv": "2026.4"}
TERMS_ANSWER = {
    "entitlements": ["pro", "render.gpu"],
    "license_expires_at": "2100-01-01T00:00:00.000Z",
    "license_grace_ends_at": "2100-01-08T00:00:00.000Z",
    "in_grace": False,
    "max_version": "2026.4",
}


def terms_cases(heartbeat_request: dict, heartbeat_answer: dict) -> list[dict[str, Any]]:
    """The term claims: agreeing with the answer, or not (token_mismatch), or altered
    (token_bad_signature)."""
    token = lease_token(**TERMS_CLAIMS)
    return [
        acquire_case("terms_good", "ok", token, answer=TERMS_ANSWER),
        acquire_case("terms_in_grace_good", "ok", token, answer={**TERMS_ANSWER, "in_grace": True}),
        {
            "name": "terms_heartbeat_good",
            "function": "heartbeat",
            "status": 200,
            "request": heartbeat_request,
            "answer": {
                **heartbeat_answer,
                **TERMS_ANSWER,
                "lease_token": lease_token(client_id=None, **TERMS_CLAIMS),
            },
            "expect": "ok",
        },
        acquire_case(
            "terms_other_entitlements",
            "token_mismatch",
            token,
            answer={**TERMS_ANSWER, "entitlements": ["pro", "render.gpu", "cloud"]},
        ),
        acquire_case(
            "terms_other_license_end",
            "token_mismatch",
            token,
            answer={**TERMS_ANSWER, "license_grace_ends_at": "2100-02-01T00:00:00.000Z"},
        ),
        acquire_case(
            "terms_other_max_version",
            "token_mismatch",
            token,
            answer={**TERMS_ANSWER, "max_version": "2027"},
        ),
        acquire_case(
            "terms_tampered_entitlements",
            "token_bad_signature",
            tampered(token, ent=["pro", "render.gpu", "cloud"]),
            answer={**TERMS_ANSWER, "entitlements": ["pro", "render.gpu", "cloud"]},
        ),
    ]


def weight_cases(heartbeat_request: dict, heartbeat_answer: dict) -> list[dict[str, Any]]:
    """A weighted lease (it counts as 4 seats): the token's ``seats`` claim agreeing with
    the answer's ``seats``, or not (token_mismatch; an answer without ``seats`` means 1),
    or altered (token_bad_signature). ``seats_claim``: the weight the client reads from
    the verified token (absent from a case: 1)."""
    token = lease_token(seats=4)
    weighted = {"seats": 4, "seats_used": 4, "seats_total": 8}
    request = {"license_id": LICENSE, "client_id": CLIENT, "nonce": NONCE, "seats": 4}
    return [
        acquire_case(
            "weighted_good", "ok", token, answer=weighted, request=request, seats_claim=4
        ),
        {
            "name": "weighted_heartbeat_good",
            "function": "heartbeat",
            "status": 200,
            "request": heartbeat_request,
            "answer": {
                **heartbeat_answer,
                **weighted,
                "lease_token": lease_token(client_id=None, seats=4),
            },
            "expect": "ok",
            "seats_claim": 4,
        },
        acquire_case(
            "weighted_other_seats", "token_mismatch", token,
            answer={**weighted, "seats": 2}, request=request,
        ),
        acquire_case("weighted_answer_without_seats", "token_mismatch", token, request=request),
        acquire_case(
            "weighted_tampered_seats", "token_bad_signature", tampered(token, seats=8),
            answer={**weighted, "seats": 8}, request=request,
        ),
    ]  # fmt: skip


def cases() -> list[dict[str, Any]]:
    good = lease_token()
    heartbeat_request = {"license_id": LICENSE, "session_id": SESSION, "nonce": NONCE}
    heartbeat_answer = {
        "session_id": SESSION,
        "lease_expires_at": DEADLINE,
        "lease_seconds": 600,
        "heartbeat_interval_seconds": 200,
        "seats_used": 1,
        "seats_total": 2,
    }
    attacker_jwks = {"keys": [*JWKS["keys"], jwk("9", ATTACKER)]}
    missing_sid = segments(good)[1]
    del missing_sid["sid"]
    header = segments(good)[0]
    return [
        acquire_case("acquire_good", "ok", good),
        {
            "name": "heartbeat_good",
            "function": "heartbeat",
            "status": 200,
            "request": heartbeat_request,
            "answer": {**heartbeat_answer, "lease_token": lease_token(client_id=None)},
            "expect": "ok",
        },
        {
            "name": "release_good_within_leeway",
            "function": "release",
            "status": 200,
            "request": heartbeat_request,
            "answer": {"released": True, "seats_used": 0, "release_token": release_token()},
            "leeway": DECADES,
            "expect": "ok",
        },
        acquire_case("acquire_good_second_key", "ok", lease_token(kid="2")),
        acquire_case("borrowed_good", "ok", lease_token(borrowed=True), answer={"borrowed": True}),
        *machine_cases(),
        acquire_case(
            "expired_within_leeway",
            "ok",
            lease_token(issued_ms=ISSUED_MS, expires_ms=ISSUED_MS + 600_250),
            answer={"lease_expires_at": "2026-01-01T00:10:00.250Z"},
            leeway=DECADES,
        ),
        acquire_case("no_token", "token_missing", None),
        acquire_case("not_a_jwt", "token_malformed", "not-a-jwt"),
        acquire_case("alg_none", "token_malformed", unsigned("none", None)),
        acquire_case(
            "hs256_public_key_as_secret", "token_malformed", unsigned("HS256", public_pem())
        ),
        acquire_case(
            "hs256_raw_public_key_as_secret",
            "token_malformed",
            unsigned("HS256", signingkeys.raw_public(VENDOR["1"])),
        ),
        acquire_case(
            "no_kid",
            "token_malformed",
            assemble(
                {k: v for k, v in header.items() if k != "kid"},
                segments(good)[1],
                good.split(".")[2],
            ),
        ),
        acquire_case("unknown_kid", "token_unknown_kid", lease_token(kid="7", key=VENDOR["1"])),
        acquire_case("forged_same_kid", "token_bad_signature", lease_token(kid="1", key=ATTACKER)),
        acquire_case(
            "forged_with_own_jwks_pinned",
            "token_untrusted_key",
            lease_token(kid="9", key=ATTACKER),
            jwks=attacker_jwks,
        ),
        acquire_case(
            "forged_with_own_jwks_unpinned_passes",
            "ok",
            lease_token(kid="9", key=ATTACKER),
            jwks=attacker_jwks,
            pinned=False,
        ),
        acquire_case(
            "tampered_claims", "token_bad_signature", tampered(good, aud="acme/everything")
        ),
        acquire_case("tampered_signature", "token_bad_signature", flipped_signature(good)),
        acquire_case("wrong_aud_license", "token_wrong_audience", lease_token(license_id="cam")),
        acquire_case("wrong_aud_tenant", "token_wrong_audience", lease_token(tenant_id="globex")),
        acquire_case(
            "other_tenant_unchecked_without_tenant_id",
            "ok",
            lease_token(tenant_id="globex"),
            tenant_id=None,
        ),
        acquire_case(
            "expired",
            "token_expired",
            lease_token(issued_ms=EXPIRED_ISSUED_MS, expires_ms=EXPIRED_ISSUED_MS + 600_250),
            answer={"lease_expires_at": "2020-01-01T00:10:00.250Z"},
        ),
        acquire_case(
            "not_yet_valid",
            "token_expired",
            lease_token(issued_ms=DEADLINE_MS - 600_000),
        ),
        acquire_case("replayed_nonce", "token_replayed", lease_token(nonce="an-earlier-request")),
        acquire_case("no_nonce", "token_replayed", lease_token(nonce=None)),
        acquire_case("release_token_as_lease", "token_mismatch", release_token()),
        acquire_case(
            "other_session",
            "token_mismatch",
            good,
            answer={"session_id": "another-session-id-0000"},
        ),
        acquire_case("other_client", "token_mismatch", lease_token(client_id="desktop-1")),
        acquire_case(
            "other_deadline",
            "token_mismatch",
            good,
            answer={"lease_expires_at": "2100-01-01T00:00:10.250Z"},
        ),
        {
            "name": "release_other_outcome",
            "function": "release",
            "status": 200,
            "request": heartbeat_request,
            "answer": {"released": False, "seats_used": 0, "release_token": release_token()},
            "leeway": DECADES,
            "expect": "token_mismatch",
        },
        acquire_case(
            "missing_sid_claim", "token_malformed", signer()._sign(tokens.LEASE_TYP, missing_sid)
        ),
        *terms_cases(heartbeat_request, heartbeat_answer),
        *weight_cases(heartbeat_request, heartbeat_answer),
    ]


def machine_cases() -> list[dict[str, Any]]:
    """A borrowed seat bound to the machine it was borrowed on. ``machine_id``: the id of
    the machine the client runs on (it checks a borrowed token against its fingerprint,
    as when loading a saved borrowed seat); absent: a live answer, no machine check."""
    bound = {"license_id": LICENSE, "client_id": CLIENT, "nonce": NONCE, "borrow_seconds": 600}
    bound["fingerprint"] = fingerprint(LAPTOP)
    cnf = {"cnf": {"machine": fingerprint(LAPTOP)}}
    borrowed = {"borrowed": True}
    return [
        acquire_case(
            "borrowed_on_its_machine", "ok", lease_token(borrowed=True, **cnf),
            answer=borrowed, request=bound, machine_id=LAPTOP,
        ),
        acquire_case(
            "borrowed_on_its_machine_id_as_read_from_a_file", "ok",
            lease_token(borrowed=True, **cnf), answer=borrowed, request=bound,
            machine_id=MACHINE_IDS[3],
        ),
        acquire_case(
            "borrowed_copied_to_another_machine", "token_wrong_machine",
            lease_token(borrowed=True, **cnf), answer=borrowed, request=bound,
            machine_id=DESKTOP,
        ),
        acquire_case(
            "borrowed_without_a_machine_loaded_on_one", "token_wrong_machine",
            lease_token(borrowed=True), answer=borrowed, machine_id=LAPTOP,
        ),
        acquire_case(
            "bound_request_token_without_its_machine", "token_mismatch",
            lease_token(borrowed=True), answer=borrowed, request=bound,
        ),
        acquire_case(
            "bound_request_token_for_another_machine", "token_mismatch",
            lease_token(borrowed=True, cnf={"machine": fingerprint(DESKTOP)}),
            answer=borrowed, request=bound,
        ),
        acquire_case(
            "live_lease_with_a_machine", "ok", lease_token(**cnf),
            request={k: v for k, v in bound.items() if k != "borrow_seconds"},
            machine_id=DESKTOP,
        ),
    ]  # fmt: skip


def document() -> str:
    doc = {
        "format": FORMAT,
        "about": (
            "Token test vectors for every seatlease client, written by "
            "tools/make_client_vectors.py from the server's signing code. Defaults for "
            "each case: jwks (the JWKS the client fetches), pinned (the vendor keys "
            "pinned: the JWKs' x), tenant_id, leeway (seconds); a case may override "
            "them (pinned false: nothing pinned; tenant_id null: any tenant). expect: "
            "ok, or the error code the client raises. machine_id (some cases): the id of "
            "the machine the client runs on, whose fingerprint a borrowed token's "
            "cnf.machine must be (as when a saved borrowed seat is loaded). machines: "
            "machine ids and their fingerprints, the lowercase hex SHA-256 of "
            "'seatlease-machine/1:' + the id trimmed and lowercased (UTF-8); the id is "
            "Linux /etc/machine-id (else /var/lib/dbus/machine-id), macOS IOPlatformUUID, "
            "Windows MachineGuid. seats_claim (some ok cases): the lease's weight the "
            "client reads from the verified token's seats claim; absent: 1 (a token "
            "without the claim is a lease of 1 seat)."
        ),
        "jwks": JWKS,
        "pinned": PINNED,
        "tenant_id": TENANT,
        "leeway": 60,
        "machines": [{"machine_id": m, "fingerprint": fingerprint(m)} for m in MACHINE_IDS],
        "cases": cases(),
    }
    return json.dumps(doc, indent=1) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args()
    text = document()
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python tools/make_client_vectors.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
