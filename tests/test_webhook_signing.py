"""A delivery's signature headers (seatlease.webhooks.signing) as receivers check them:
``v1`` by the ``standardwebhooks`` library itself (never the project's own code), with
each secret of a rotation, refused with a wrong secret, an altered body or a stale
timestamp; ``v1a`` with pyca/cryptography against the public key the ``keys`` function
serves (/keys), the deployment's own signing key."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_support import call
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from seatlease.api import signingkeys, tokens
from seatlease.api.errormap import to_api_error
from seatlease.webhooks import crypto
from seatlease.webhooks.payload import payload_of
from seatlease.webhooks.signing import signed_headers

EVENT = {
    "event_id": "9f2c4e1a0b3d5f67-1",
    "type": "lease.acquired",
    "tenant_id": "demo",
    "license_id": "cad",
    "session_id": "s1",
    "client_id": "ws-1",
    "occurred_at": "2026-11-29T07:42:56.123Z",
    "seats_used": 1,
    "seats_total": 5,
    "count": 1,
    "metadata": {"user": "ana", "note": "caf\u00e9 \u2615"},
}


def body_of(event: dict) -> bytes:
    return json.dumps(payload_of(event), separators=(",", ":"), ensure_ascii=False).encode()


def entries(headers: dict[str, str]) -> list[tuple[str, str]]:
    return [tuple(item.split(",", 1)) for item in headers["webhook-signature"].split(" ")]


def test_v1_is_verified_by_the_standardwebhooks_library() -> None:
    secret = crypto.new_secret()
    body, now = body_of(EVENT), int(time.time())
    headers = signed_headers(EVENT["event_id"], body, [secret], None, now)
    assert headers["webhook-id"] == EVENT["event_id"]
    assert headers["webhook-timestamp"] == str(now)
    assert [version for version, _ in entries(headers)] == ["v1"]
    assert Webhook(secret).verify(body, headers) == payload_of(EVENT)
    # Header names are case-insensitive on the wire: a receiver's framework may title them.
    titled = {name.title(): value for name, value in headers.items()}
    assert Webhook(secret).verify(body, titled)["id"] == EVENT["event_id"]


def test_during_a_rotation_either_secret_verifies_and_a_wrong_one_does_not() -> None:
    new, old, stranger = crypto.new_secret(), crypto.new_secret(), crypto.new_secret()
    body, now = body_of(EVENT), int(time.time())
    headers = signed_headers(EVENT["event_id"], body, [new, old], None, now)
    assert [version for version, _ in entries(headers)] == ["v1", "v1"]
    assert Webhook(new).verify(body, headers)["type"] == "lease.acquired"
    assert Webhook(old).verify(body, headers)["type"] == "lease.acquired"
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(stranger).verify(body, headers)
    # After the rotation's 24 h the old secret signs no more.
    after = signed_headers(EVENT["event_id"], body, [new], None, now)
    Webhook(new).verify(body, after)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, after)


def test_an_altered_body_id_or_timestamp_fails() -> None:
    secret = crypto.new_secret()
    body, now = body_of(EVENT), int(time.time())
    headers = signed_headers(EVENT["event_id"], body, [secret], None, now)
    forged = body.replace(b'"seats_used":1', b'"seats_used":2')
    assert forged != body
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(forged, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-id": "other-1"})
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-timestamp": str(now - 1)})


def test_a_stale_or_future_timestamp_fails_even_when_signed() -> None:
    secret = crypto.new_secret()
    body = body_of(EVENT)
    stale = signed_headers(EVENT["event_id"], body, [secret], None, int(time.time()) - 6 * 60)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(body, stale)
    future = signed_headers(EVENT["event_id"], body, [secret], None, int(time.time()) + 6 * 60)
    with pytest.raises(WebhookVerificationError, match="too new"):
        Webhook(secret).verify(body, future)
    # Within the library's 5 minutes of skew it passes.
    recent = signed_headers(EVENT["event_id"], body, [secret], None, int(time.time()) - 4 * 60)
    Webhook(secret).verify(body, recent)


def jwks_keys() -> list[Ed25519PublicKey]:
    """The public keys as a receiver gets them: the ``keys`` function's JWKS."""
    response = call("keys", method="GET", content_type=None)
    assert response.status_code == 200
    return [
        Ed25519PublicKey.from_public_bytes(signingkeys.b64url_decode(jwk["x"]))
        for jwk in response.get_json(force=True)["keys"]
    ]


def verify_v1a(headers: dict[str, str], body: bytes, keys: list[Ed25519PublicKey]) -> bool:
    """A receiver's v1a check, written from the specification: Ed25519 over
    ``{id}.{timestamp}.{body}`` with any published key."""
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    for version, signature in entries(headers):
        if version != "v1a":
            continue
        for key in keys:
            try:
                key.verify(base64.b64decode(signature), content)
                return True
            except InvalidSignature:
                continue
    return False


def test_v1a_is_verified_with_the_key_the_keys_function_publishes() -> None:
    keyring = tokens.keyring()  # the deployment's keys: SIGNING_KEYS_DIR (tests/conftest.py)
    secret, body, now = crypto.new_secret(), body_of(EVENT), int(time.time())
    headers = signed_headers(EVENT["event_id"], body, [secret], keyring.signing_key().private, now)
    assert [version for version, _ in entries(headers)] == ["v1", "v1a"]
    keys = jwks_keys()
    assert verify_v1a(headers, body, keys)
    # The library skips the v1a entry and still verifies the v1.
    Webhook(secret).verify(body, headers)
    # Altered body, id or timestamp: no published key verifies it.
    assert not verify_v1a(headers, body + b" ", keys)
    assert not verify_v1a({**headers, "webhook-id": "other-1"}, body, keys)
    assert not verify_v1a({**headers, "webhook-timestamp": str(now + 1)}, body, keys)


def test_v1a_from_a_key_the_deployment_does_not_publish_fails() -> None:
    stranger = signingkeys.load_private_pem(signingkeys.new_private_pem(), "a stranger's key")
    body, now = body_of(EVENT), int(time.time())
    headers = signed_headers(EVENT["event_id"], body, [], stranger, now)
    assert [version for version, _ in entries(headers)] == ["v1a"]
    assert not verify_v1a(headers, body, jwks_keys())
    own = Ed25519PublicKey.from_public_bytes(signingkeys.raw_public(stranger))
    assert verify_v1a(headers, body, [own])  # the check itself can pass


def test_nothing_to_sign_with_is_refused() -> None:
    with pytest.raises(ValueError, match="secret or a signing key"):
        signed_headers("e-1", b"{}", [], None, int(time.time()))
    with pytest.raises(ValueError, match="message id"):
        signed_headers("a b", b"{}", [crypto.new_secret()], None, int(time.time()))


# -- the endpoint secrets at rest (seatlease.webhooks.crypto) ---------------------------


@pytest.fixture
def webhook_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = crypto.new_key()
    monkeypatch.setenv("WEBHOOK_KEY", key)
    return key


def test_a_secret_is_whsec_and_24_random_bytes() -> None:
    made = {crypto.new_secret() for _ in range(50)}
    assert len(made) == 50
    for secret in made:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 24
    assert len(base64.b64decode(crypto.new_key(), validate=True)) == 32


def test_a_sealed_secret_opens_with_its_key_and_context(webhook_key: str) -> None:
    secret = crypto.new_secret()
    sealed = crypto.encrypt_secret(secret, context="whe_1")
    assert sealed.startswith("v1." + crypto.box().key_id + ".")
    assert crypto.decrypt_secret(sealed, context="whe_1") == secret
    assert crypto.encrypt_secret(secret, context="whe_1") != sealed  # a fresh nonce each time
    # The opened secret signs what a receiver verifies.
    body, now = body_of(EVENT), int(time.time())
    opened = crypto.decrypt_secret(sealed, context="whe_1")
    Webhook(secret).verify(body, signed_headers("e-1", body, [opened], None, now))


def test_an_altered_sealed_secret_is_refused(webhook_key: str) -> None:
    sealed = crypto.encrypt_secret(crypto.new_secret(), context="whe_1")
    head, text = sealed.rsplit(".", 1)
    raw = bytearray(signingkeys.b64url_decode(text))
    for index in (0, 20, len(raw) - 1):  # the nonce, the ciphertext, the tag
        altered = bytearray(raw)
        altered[index] ^= 0x01
        forged = head + "." + signingkeys.b64url(bytes(altered))
        with pytest.raises(crypto.SecretUnreadable, match="does not open"):
            crypto.decrypt_secret(forged, context="whe_1")
    with pytest.raises(crypto.SecretUnreadable, match="cut short"):
        crypto.decrypt_secret(head + "." + text[:20], context="whe_1")
    with pytest.raises(crypto.SecretUnreadable, match="not in a known form"):
        crypto.decrypt_secret("whsec_plaintext", context="whe_1")
    # Copied onto another endpoint, it does not open either.
    with pytest.raises(crypto.SecretUnreadable, match="does not open") as caught:
        crypto.decrypt_secret(sealed, context="whe_2")
    # An operator's problem: the HTTP boundary answers 503 and logs why, for the operator.
    error = to_api_error(caught.value)
    assert (error.status, error.code) == (503, "not_configured")
    assert "does not open" in error.log_fields["not_configured"]


def test_a_secret_sealed_under_another_key_is_refused(
    webhook_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed = crypto.encrypt_secret(crypto.new_secret())
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    with pytest.raises(crypto.SecretUnreadable, match="sealed under another WEBHOOK_KEY"):
        crypto.decrypt_secret(sealed)
    # Even with the key id forged to match, the other key cannot open it.
    other = crypto.box()
    forged = f"v1.{other.key_id}.{sealed.split('.')[2]}"
    with pytest.raises(crypto.SecretUnreadable, match="does not open"):
        other.open(forged)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "set WEBHOOK_KEY"),
        ("not base64 at all!", "WEBHOOK_KEY is not base64"),
        (base64.b64encode(b"x" * 16).decode(), "base64 of 32 bytes, not 16"),
    ],
)
def test_a_missing_or_bad_key_is_an_operators_error(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("WEBHOOK_KEY", value)
    with pytest.raises(crypto.WebhookKeyMissing, match=problem) as caught:
        crypto.encrypt_secret(crypto.new_secret())
    assert isinstance(caught.value, crypto.NotConfigured)
    if value:
        assert value not in str(caught.value)


def test_urlsafe_and_unpadded_keys_are_the_same_key(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = bytes(range(200, 232))  # holds + and / in standard base64
    standard = base64.b64encode(raw).decode()
    assert "+" in standard or "/" in standard
    monkeypatch.setenv("WEBHOOK_KEY", standard)
    sealed = crypto.encrypt_secret("whsec_x")
    monkeypatch.setenv("WEBHOOK_KEY", base64.urlsafe_b64encode(raw).decode().rstrip("="))
    assert crypto.decrypt_secret(sealed) == "whsec_x"


def test_neither_the_secret_nor_the_key_shows_in_reprs_errors_or_logs(
    webhook_key: str, monkeypatch: pytest.MonkeyPatch, capsys, caplog
) -> None:
    secret = crypto.new_secret()
    secret_body = secret.removeprefix("whsec_")
    key_bytes = base64.b64decode(webhook_key)
    shown: list[str] = []
    box = crypto.box()
    shown += [repr(box), str(box)]
    sealed = crypto.encrypt_secret(secret, context="whe_1")
    shown.append(sealed)
    for bad in (sealed[:-4] + "AAAA", sealed.replace("v1.", "v2."), sealed[:30]):
        with pytest.raises(crypto.SecretUnreadable) as caught:
            crypto.decrypt_secret(bad, context="whe_1")
        shown += [str(caught.value), repr(caught.value)]
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    with pytest.raises(crypto.SecretUnreadable) as caught:
        crypto.decrypt_secret(sealed, context="whe_1")
    shown += [str(caught.value), repr(caught.value), repr(crypto._rings)]
    captured = capsys.readouterr()
    shown += [captured.out, captured.err, caplog.text]
    everything = "\n".join(shown)
    assert secret_body not in everything
    assert webhook_key not in everything
    assert base64.urlsafe_b64encode(key_bytes).decode().rstrip("=") not in everything
    assert key_bytes.hex() not in everything


def test_a_key_ring_seals_with_its_first_key_and_opens_with_any(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old, new, stranger = crypto.new_key(), crypto.new_key(), crypto.new_key()
    monkeypatch.setenv("WEBHOOK_KEY", old)
    under_old = crypto.encrypt_secret("whsec_a", context="whe_1")
    monkeypatch.setenv("WEBHOOK_KEY", f"{new}, {old}")  # spaces around a key are allowed
    ring = crypto.box()
    under_new = crypto.encrypt_secret("whsec_b", context="whe_1")
    assert ring.sealed_by(under_new) == ring.key_id != ring.sealed_by(under_old)
    assert crypto.decrypt_secret(under_old, context="whe_1") == "whsec_a"
    assert crypto.decrypt_secret(under_new, context="whe_1") == "whsec_b"
    with pytest.raises(crypto.SecretUnreadable, match="does not open"):  # context still bound
        crypto.decrypt_secret(under_old, context="whe_2")
    monkeypatch.setenv("WEBHOOK_KEY", stranger)
    with pytest.raises(crypto.SecretUnreadable, match="sealed under another WEBHOOK_KEY"):
        crypto.decrypt_secret(under_new, context="whe_1")
    monkeypatch.setenv("WEBHOOK_KEY", new)  # the rotation's end: NEW alone
    assert crypto.decrypt_secret(under_new, context="whe_1") == "whsec_b"
    assert old not in repr(crypto.box()) and new not in repr(crypto.box())


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("KEY,", "empty key"),
        (",KEY", "empty key"),
        ("KEY,,KEY", "empty key"),
        ("KEY,not base64!", r"WEBHOOK_KEY is not base64 \(key 2\)"),
        ("KEY," + base64.b64encode(b"x" * 16).decode(), r"not 16 \(key 2\)"),
        ("KEY,KEY", "key 2 repeats an earlier one"),
    ],
)
def test_a_bad_key_in_a_ring_is_named_by_its_place(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    key = crypto.new_key()
    monkeypatch.setenv("WEBHOOK_KEY", value.replace("KEY", key))
    with pytest.raises(crypto.WebhookKeyMissing, match=problem) as caught:
        crypto.encrypt_secret("whsec_x")
    assert key not in str(caught.value)
