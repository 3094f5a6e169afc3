"""Lease and release tokens from the real functions (real Redis and PostgreSQL), checked
with joserfc: a second JOSE library, independent of the PyJWT that signs them, reading
the keys only from the ``keys`` function's JWKS. Also: the JWKS function, the nonce's
input rules, rotation and retirement with a key folder, and the private key never
appearing in a log line or an error body."""

from __future__ import annotations

import base64
import json
import os
import time
import warnings
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_support import (
    Tenant,
    acquire,
    call,
    error_of,
    live_sessions,
    log_lines,
    new_license,
    redis_now,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwt as jose_jwt
from joserfc.errors import BadSignatureError, JoseError
from joserfc.jwk import KeySet

from seatlease import fields, licenses
from seatlease.api import signingkeys, tokens
from seatlease.api.signingkeys import KeyVersion, plan

ISSUER = "http://seatlease.test"  # tests/conftest.py


@pytest.fixture
def key_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A key folder of this test's own (one key), looked at on every request."""
    folder = tmp_path / "keys"
    signingkeys.next_key_file(folder)
    monkeypatch.setenv("SIGNING_KEYS_DIR", str(folder))
    monkeypatch.setenv("SIGNING_KEYS_REFRESH_SECONDS", "0")
    tokens.reset()
    yield folder
    tokens.reset()


def heartbeat(tenant: Tenant, license_id: str, session_id: str, **fields):
    body = {"license_id": license_id, "session_id": session_id, **fields}
    return call("heartbeat", body, tenant=tenant)


def release(tenant: Tenant, license_id: str, session_id: str, **fields):
    body = {"license_id": license_id, "session_id": session_id, **fields}
    return call("release", body, tenant=tenant)


def jwks() -> dict:
    response = call("keys", method="GET", content_type=None)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json(force=True)


def verify(token: str, keys: dict | None = None) -> jose_jwt.Token:
    """joserfc: the signature with the JWKS's key named by kid, EdDSA only."""
    with warnings.catch_warnings():  # joserfc prefers RFC 9864's "Ed25519" name
        warnings.simplefilter("ignore")
        return jose_jwt.decode(token, KeySet.import_key_set(keys or jwks()), algorithms=["EdDSA"])


def test_acquire_and_heartbeat_tokens_verify_with_an_independent_library(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2, lease_seconds=120)
    before = int(redis_now().timestamp())
    body = acquire(acme, lic, "ws-1@host", nonce="n-0001").get_json()
    after = int(redis_now().timestamp())
    token = verify(body["lease_token"])
    assert token.header == {"alg": "EdDSA", "kid": "1", "typ": "seatlease-lease+jwt"}
    claims = token.claims
    jose_jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": ISSUER},
        aud={"essential": True, "value": "acme/cad"},
        sub={"essential": True, "value": "ws-1@host"},
        exp={"essential": True},
        nbf={"essential": True},
        iat={"essential": True},
    ).validate(claims)
    assert claims["sid"] == body["session_id"] and claims["nonce"] == "n-0001"
    # iat/nbf when Redis granted it, exp the lease deadline: both on the Redis clock.
    assert before <= claims["iat"] == claims["nbf"] <= after
    deadline_ms = int(
        (time.mktime(time.strptime(body["lease_expires_at"][:19], "%Y-%m-%dT%H:%M:%S")) -
         time.timezone) * 1000) + int(body["lease_expires_at"][20:23])  # fmt: skip
    assert claims["exp"] == deadline_ms // 1000 == claims["iat"] + 120

    beat = heartbeat(acme, lic, body["session_id"], nonce="n-0002").get_json()
    renewed = verify(beat["lease_token"]).claims
    assert renewed["sid"] == body["session_id"] and renewed["nonce"] == "n-0002"
    assert renewed["aud"] == "acme/cad" and renewed["exp"] >= claims["exp"]
    assert renewed["sub"] == claims["sub"]  # the heartbeat's token names the client too
    assert renewed["exp"] == renewed["iat"] + 120  # iat: when Redis extended it
    # Without a nonce in the request there is none in the token.
    assert "nonce" not in verify(acquire(acme, lic, "ws-2").get_json()["lease_token"]).claims


def test_release_answers_are_signed_true_then_false(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    sid = acquire(acme, lic, "a").get_json()["session_id"]
    first = release(acme, lic, sid, nonce="r-1").get_json()
    token = verify(first["release_token"])
    assert token.header["typ"] == "seatlease-release+jwt"
    claims = token.claims
    assert (claims["sid"], claims["aud"], claims["released"], claims["nonce"]) == (
        sid, "acme/cad", True, "r-1")  # fmt: skip
    assert claims["exp"] == claims["iat"] + tokens.RELEASE_TOKEN_SECONDS
    assert abs(claims["iat"] - redis_now().timestamp()) < 5
    again = verify(release(acme, lic, sid).get_json()["release_token"]).claims
    assert again["released"] is False and "nonce" not in again


def test_a_tampered_token_fails_the_independent_library(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=2)
    token = acquire(acme, lic, "a").get_json()["lease_token"]
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["exp"] += 30 * 24 * 3600  # a month more
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(BadSignatureError):
        verify(f"{header}.{forged}.{signature}")


def test_the_keys_function_serves_a_cacheable_jwks(acme: Tenant) -> None:
    response = call("keys", method="GET", content_type=None)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/jwk-set+json"
    assert response.headers["Cache-Control"] == "public, max-age=300"
    body = response.get_json(force=True)
    [key] = body["keys"]
    assert set(key) == {"kty", "crv", "x", "kid", "alg", "use"}  # no "d": public only
    assert (key["kty"], key["crv"], key["alg"], key["use"], key["kid"]) == (
        "OKP", "Ed25519", "EdDSA", "sig", "1")  # fmt: skip
    etag = response.headers["ETag"]
    again = call("keys", method="GET", content_type=None, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.get_data() == b""
    assert call("keys", method="HEAD", content_type=None).status_code == 200
    refused = call("keys", {}, method="POST")
    error_of(refused, 405, "method_not_allowed")
    assert refused.headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    ("nonce", "problem"),
    [
        ("x" * 129, "at most 128 characters"),
        (12345, "valid string"),
        (None, None),  # null is "no nonce": accepted
        ("", "at least 1 character"),
        ("a\u0000b", "NUL"),
    ],
)
def test_nonce_must_be_text_of_at_most_128_characters(acme: Tenant, nonce, problem) -> None:
    lic = new_license(acme, "cad", seats=5)
    sid = acquire(acme, lic, "owner").get_json()["session_id"]
    answers = [
        acquire(acme, lic, "ws-1", nonce=nonce),
        heartbeat(acme, lic, sid, nonce=nonce),
        release(acme, lic, "never-issued", nonce=nonce),
    ]
    for response in answers:
        if problem is None:
            assert response.status_code in (200, 201), response.get_data(as_text=True)
            continue
        error = error_of(response, 400, "invalid_request")
        assert [d["field"] for d in error["details"]] == ["nonce"]
        assert problem in error["details"][0]["problem"], error
    assert error_of(acquire(acme, lic, "ws-9", nonce="x" * 129), 400, "invalid_request")
    assert len(live_sessions(acme, lic)) == (2 if problem is None else 1)


def test_128_characters_of_nonce_come_back_signed(acme: Tenant) -> None:
    lic = new_license(acme, "cad", seats=1)
    nonce = "é" * 128  # characters, not bytes
    body = acquire(acme, lic, "a", nonce=nonce).get_json()
    assert verify(body["lease_token"]).claims["nonce"] == nonce


# -- rotation ---------------------------------------------------------------------------


def test_a_token_signed_before_a_rotation_verifies_until_its_key_retires(
    acme: Tenant, key_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lic = new_license(acme, "cad", seats=3, lease_seconds=600)
    old = acquire(acme, lic, "before").get_json()["lease_token"]
    assert verify(old).header["kid"] == "1"

    signingkeys.next_key_file(key_dir)  # seatlease keys rotate --dir
    new = acquire(acme, lic, "after").get_json()["lease_token"]
    after_rotation = jwks()
    assert verify(new, after_rotation).header["kid"] == "2"  # the newest signs at once
    assert sorted(k["kid"] for k in after_rotation["keys"]) == ["1", "2"]
    assert verify(old, after_rotation).claims["sub"] == "before"  # still served

    # Key 2 took over long ago, longer than a token can live (plus the margin): key 1
    # leaves the JWKS, and what it signed no longer verifies.
    monkeypatch.setenv("TOKEN_MAX_LIFETIME_SECONDS", "60")
    tokens.reset()
    past = time.time() - 60 - signingkeys.RETIRE_MARGIN_SECONDS - 5
    os.utime(key_dir / "2.pem", (past, past))
    retired = jwks()
    assert [k["kid"] for k in retired["keys"]] == ["2"]
    with pytest.raises(JoseError):
        verify(old, retired)
    assert verify(new, retired).header["kid"] == "2"


def _version(number: int, signs_from: float, public: bytes | None = b"k" * 32) -> KeyVersion:
    return KeyVersion(str(number), number, signs_from - 600, signs_from, public)


def test_the_rule_publishes_ahead_signs_newest_ready_and_retires_after_the_lifetime() -> None:
    day = 86400.0
    versions = [_version(1, 0.0), _version(2, 10 * day), _version(3, 20 * day)]
    # Before key 2 may sign: key 1 signs, key 2 and 3 are already served.
    early = plan(versions, now=5 * day, max_token_seconds=7 * day, margin=600)
    assert early.signer.kid == "1"
    assert [v.kid for v in early.published] == ["1", "2", "3"]
    # Key 2 signs; key 1 is served until 7 days + margin after key 2 took over.
    mid = plan(versions, now=12 * day, max_token_seconds=7 * day, margin=600)
    assert mid.signer.kid == "2" and mid.retires_at == {"1": 17 * day + 600}
    assert [v.kid for v in plan(versions, 17 * day + 601, 7 * day, 600).published] == ["2", "3"]
    # An unpublished version (no public key) never signs and is never served.
    hidden = [*versions, _version(4, 0.0, public=None)]
    late = plan(hidden, now=40 * day, max_token_seconds=7 * day, margin=600)
    assert late.signer.kid == "3" and [v.kid for v in late.published] == ["3"]
    # The first key signs even before its start time: there is no other.
    assert plan([_version(1, 100.0)], now=0.0).signer.kid == "1"
    assert plan([], now=0.0).signer is None


def test_the_longest_token_is_the_longest_grant() -> None:
    longest = max(fields.MAX_LEASE_SECONDS, licenses.MAX_BORROW_SECONDS)
    assert signingkeys.DEFAULT_MAX_TOKEN_SECONDS == longest


# -- failures ---------------------------------------------------------------------------


def test_without_a_key_source_acquire_is_a_503_and_takes_no_seat(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator's omission, not a bug: 503 not_configured, its cause in the log line
    (tests/test_not_configured.py has the cold-start side)."""
    lic = new_license(acme, "cad", seats=1)
    monkeypatch.delenv("SIGNING_KEYS_DIR")
    tokens.reset()
    try:
        capsys.readouterr()
        error_of(acquire(acme, lic, "a"), 503, "not_configured")
        assert live_sessions(acme, lic) == []  # checked before the seat is taken
        lines = log_lines(capsys.readouterr().out)
        [line] = [e for e in lines if e.get("status") == 503]
        assert "SIGNING_KEYS_DIR" in line["not_configured"] and "stack_trace" not in line
    finally:
        tokens.reset()


def test_lease_tokens_off_answers_without_tokens(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    lic = new_license(acme, "cad", seats=1)
    monkeypatch.setenv("LEASE_TOKENS", "off")
    body = acquire(acme, lic, "a").get_json()
    assert "lease_token" not in body and body["session_id"]
    assert "release_token" not in release(acme, lic, body["session_id"]).get_json()


def _secret_forms(pem: bytes) -> list[str]:
    """The private key as text in every form a careless log line could carry it."""
    key = serialization.load_pem_private_key(pem, password=None)
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    body = "".join(pem.decode().splitlines()[1:-1])
    return [
        body, body[:40], body[-40:], raw.hex(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "PRIVATE KEY",
    ]  # fmt: skip


def test_the_private_key_is_in_no_log_line_and_no_error_body(
    acme: Tenant, key_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    lic = new_license(acme, "cad", seats=1)
    forms = _secret_forms((key_dir / "1.pem").read_bytes())
    capsys.readouterr()
    bodies = []
    first = acquire(acme, lic, "a", nonce="n")
    bodies += [first, heartbeat(acme, lic, first.get_json()["session_id"])]
    bodies += [acquire(acme, lic, "b"), release(acme, lic, first.get_json()["session_id"])]
    bodies.append(call("keys", method="GET", content_type=None))
    # Failures around the key: a broken key file next to it (503), then an unreadable one.
    (key_dir / "2.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n")
    bodies += [acquire(acme, lic, "c"), call("keys", method="GET", content_type=None)]
    (key_dir / "2.pem").unlink()
    (key_dir / "1.pem").chmod(0)
    tokens.reset()
    if os.geteuid() != 0:  # root reads it anyway
        bodies.append(acquire(acme, lic, "d"))
    (key_dir / "1.pem").chmod(0o600)
    out = capsys.readouterr()
    text = out.out + out.err + "".join(b.get_data(as_text=True) for b in bodies)
    assert any(b.status_code == 503 for b in bodies)  # the failures did happen
    assert "acquire 201" in out.out and "keys 200" in out.out
    for form in forms:
        assert form not in text, form


# -- the archive, the local stack, the CLI -----------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def test_no_private_key_reaches_a_built_function_archive(tmp_path: Path) -> None:
    """A checkout where `make run` made its key (.seatlease/signing-keys) and a test or
    script left key folders beside the sources: every archive is built from it and holds
    no private key, in any form."""
    import shutil
    import subprocess
    import sys
    import zipfile

    tree = tmp_path / "checkout"
    for rel in ("functions", "shared/seatlease", "tools"):
        shutil.copytree(REPO / rel, tree / rel, copy_function=shutil.copy,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for rel in (
        "pyproject.toml",
        "requirements-functions.txt",
        "requirements-functions-nopubsub.txt",
    ):
        shutil.copy(REPO / rel, tree / rel)
    planted = [
        signingkeys.next_key_file(tree / ".seatlease" / "signing-keys"),
        signingkeys.next_key_file(tree / "shared" / ".signing-keys"),
        signingkeys.next_key_file(tree / "tests" / "keys"),
    ]
    forms = [form for path in planted for form in _secret_forms(path.read_bytes())]
    names = sorted(p.name for p in (tree / "functions").iterdir() if p.is_dir())
    assert "keys" in names and "acquire" in names
    for name in names:
        proc = subprocess.run(
            [sys.executable, str(tree / "tools" / "build_function_source.py"), name,
             str(tmp_path / "out")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        with zipfile.ZipFile(proc.stdout.strip()) as archive:
            assert "main.py" in archive.namelist()
            for info in archive.infolist():
                text = archive.read(info).decode("utf-8", errors="replace")
                assert not [f for f in forms if f in text], (name, info.filename)
                assert not info.filename.endswith(".pem"), (name, info.filename)


def test_the_local_stack_makes_its_own_key_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seatlease_cli.localstack import LocalStack

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIGNING_KEYS_DIR")
    monkeypatch.delenv("SEATLEASE_ISSUER")
    stack = LocalStack(port=18080, say=lambda _line: None)
    stack._signing_keys()
    folder = tmp_path / ".seatlease" / "signing-keys"
    assert os.environ["SIGNING_KEYS_DIR"] == str(folder)
    assert os.environ["SEATLEASE_ISSUER"] == "http://127.0.0.1:18080"
    assert [p.name for p in folder.iterdir()] == ["1.pem"]
    assert (folder / "1.pem").stat().st_mode & 0o777 == 0o600
    stack._signing_keys()  # a restart keeps the key
    assert [p.name for p in folder.iterdir()] == ["1.pem"]


def test_keys_rotate_and_list_with_a_folder(tmp_path: Path, capsys) -> None:
    from seatlease_cli import main as cli

    folder = tmp_path / "keys"
    assert cli(["keys", "rotate", "--dir", str(folder)]) == 0
    assert cli(["keys", "rotate", "--dir", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    assert "new signing key 1" in out and '"kid": "2"' in out
    assert "PRIVATE" not in out
    assert cli(["keys", "list", "--dir", str(folder), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kid"], r["state"].split(",")[0]) for r in rows] == [
        ("1", "previous"), ("2", "signing")]  # fmt: skip
    assert cli(["keys", "rotate", "--dir", str(folder), "--activate-in", "5"]) == 2
    assert "Secret Manager" in capsys.readouterr().err


def test_keys_pin_prints_what_a_product_pins(tmp_path: Path, capsys, monkeypatch) -> None:
    """``keys pin``: the x of every key the JWKS serves, comma separated (the clients'
    pinned keys, the holds' SEATLEASE_PINNED_KEYS); the local stack's folder by default;
    no source at all is a usage error."""
    from seatlease.api import signingkeys
    from seatlease_cli import main as cli

    for name in ("SIGNING_KEYS_DIR", "SIGNING_KEY_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli(["keys", "pin"]) == 2  # no folder, no secret, no local stack
    assert "--dir" in capsys.readouterr().err
    folder = tmp_path / ".seatlease" / "signing-keys"
    assert cli(["keys", "rotate", "--dir", str(folder)]) == 0
    assert cli(["keys", "rotate", "--dir", str(folder)]) == 0
    capsys.readouterr()
    (tmp_path / ".seatlease" / "local.json").write_text("{}")  # a local stack's folder
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "docs")  # found from a subfolder, as git finds .git
    assert cli(["keys", "pin"]) == 0
    printed = capsys.readouterr().out.strip()
    served = [
        signingkeys.b64url(v.public)
        for v in signingkeys.DirectoryKeys(str(folder)).versions()
        if v.public
    ]
    assert printed.split(",") == served and len(served) == 2, printed
    assert cli(["keys", "pin", "--dir", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"pinned_keys": served}


# -- the encoding: PyJWT's bytes, without PyJWT ------------------------------------------

_REFERENCE_KEY = Ed25519PrivateKey.generate()

_CLAIM_TEXT = st.text(min_size=0, max_size=40)  # any Unicode: JSON escapes it as PyJWT does


_TIME = st.integers(0, 2**40)


@settings(max_examples=200, deadline=None)
@given(
    kid=st.from_regex(r"[1-9][0-9]{0,8}", fullmatch=True),
    typ=st.sampled_from([tokens.LEASE_TYP, tokens.RELEASE_TYP]),
    claims=st.fixed_dictionaries(
        {"iss": _CLAIM_TEXT, "aud": _CLAIM_TEXT, "sid": _CLAIM_TEXT, "iat": _TIME},
        optional={"sub": _CLAIM_TEXT, "nonce": _CLAIM_TEXT, "nbf": _TIME, "exp": _TIME,
                  "released": st.booleans(), "borrowed": st.booleans()},
    ),
)  # fmt: skip
def test_tokens_are_byte_for_byte_what_pyjwt_writes(kid: str, typ: str, claims: dict) -> None:
    """Ed25519 signatures are deterministic, so the same header, claims and key must give
    the same token: the encoding (header keys, JSON, base64url) is PyJWT's exactly."""
    import jwt  # the reference only: the runtime does not import PyJWT

    key = signingkeys.SigningKey(kid, _REFERENCE_KEY)
    ours = tokens.Signer(key, "http://seatlease.test")._sign(typ, claims)
    reference = jwt.encode(
        claims, _REFERENCE_KEY, algorithm="EdDSA", headers={"kid": kid, "typ": typ}
    )
    assert ours == reference
    decoded = jwt.decode(
        ours, _REFERENCE_KEY.public_key(), algorithms=["EdDSA"],
        options={"verify_aud": False, "verify_exp": False, "verify_nbf": False,
                 "verify_iat": False},
    )  # fmt: skip
    assert decoded == claims


def test_the_runtime_does_not_import_pyjwt() -> None:
    import subprocess
    import sys

    code = "import sys, seatlease.api.tokens; print('jwt' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- a token the server reads back (seatlease.api.recovery) ---------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    header=st.fixed_dictionaries({"alg": st.just("EdDSA") | _JSON, "typ": _JSON, "kid": _JSON}),
    claims=st.dictionaries(
        st.sampled_from(
            ["iss", "aud", "sub", "sid", "iat", "exp", "seats", "usr", "cnf", "borrowed", "nbf"]
        ),
        _JSON,
    ),
    signed=st.booleans(),
)
def test_any_token_the_server_reads_back_is_a_grant_or_none_never_an_error(
    header: dict, claims: dict, signed: bool
) -> None:
    """Any header and claims, signed by this deployment's key or not: ``verified_grant``
    answers a grant or None (a 4xx for the caller), never an exception (a 500): a ``kid``
    that is an object or an array once was one."""
    from seatlease.api.recovery import verified_grant

    signer = tokens.signer()
    assert signer.key is not None
    if signed:
        header = {**header, "kid": signer.key.kid, "typ": tokens.LEASE_TYP, "alg": "EdDSA"}

    def b64(value: object) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signing_input = b64(header) + b"." + b64(claims)
    signature = base64.urlsafe_b64encode(signer.key.private.sign(signing_input)).rstrip(b"=")
    token = (signing_input + b"." + signature).decode()
    grant = verified_grant(token, "acme", "cad", None, None)
    assert grant is None or grant.session_id == claims.get("sid")
