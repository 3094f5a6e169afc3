"""Endpoint secrets: made here, shown once, stored only encrypted.

A secret is ``whsec_`` + base64 of 24 random bytes (the Standard Webhooks form: what
``standardwebhooks.Webhook(secret)`` takes). The database holds it sealed with AES-256-GCM
(pyca/cryptography) under the deployment's key, the environment's ``WEBHOOK_KEY``: base64
of 32 bytes (in the cloud Terraform passes it from Secret Manager; the local stack makes
one into its state folder with ``new_key()``). Stored form::

    v1.<key id>.<base64url of 12-byte nonce + ciphertext + 16-byte tag>

``key id``: 8 hex digits of the key's SHA-256, so that a secret sealed under another key
says so instead of looking tampered with. ``context`` (e.g. the endpoint's id) is bound
in as associated data: a sealed secret copied onto another endpoint does not open.

**Rotating the key.** ``WEBHOOK_KEY`` may hold several keys, comma-separated: the first
seals, and a stored secret opens with whichever key its id names. To rotate: set
``NEW,OLD`` (every instance then reads both), run ``seatlease webhook rekey`` (every
endpoint's secrets sealed again under NEW: ``store.reseal_secrets``), then set ``NEW``
alone. No endpoint's secret changes, so no receiver notices.

Neither a secret nor the key is ever logged, put in an error message or shown by a repr.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from seatlease.errors import NotConfigured

KEY_ENV = "WEBHOOK_KEY"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the form's prefix, not a secret)
SECRET_BYTES = 24
KEY_BYTES = 32
NONCE_BYTES = 12
FORMAT = "v1"


class WebhookKeyMissing(NotConfigured, RuntimeError):
    """``WEBHOOK_KEY`` is unset or not base64 of 32 bytes: an operator must set it."""


class SecretUnreadable(NotConfigured):
    """A stored secret does not open: sealed under another key (``WEBHOOK_KEY`` changed),
    for another context, or altered. An operator must act (the HTTP boundary answers 503
    not_configured and logs the message); the message says which as far as can be told,
    never the secret."""


def new_secret() -> str:
    """A fresh endpoint secret: ``whsec_`` + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def new_key() -> str:
    """A fresh ``WEBHOOK_KEY`` value (base64 of 32 random bytes), for the local stack."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii")


class SecretBox:
    """Seals and opens secrets under one key. Holds the key; shows only its id."""

    __slots__ = ("_aead", "key_id")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise WebhookKeyMissing(f"{KEY_ENV} must be {KEY_BYTES} bytes (base64)")
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(key).hexdigest()[:8]

    def __repr__(self) -> str:
        return f"SecretBox(key_id={self.key_id!r})"

    def seal(self, secret: str, *, context: str = "") -> str:
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode("utf-8"), context.encode("utf-8"))
        text = base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")
        return f"{FORMAT}.{self.key_id}.{text}"

    def open(self, stored: str, *, context: str = "") -> str:
        parts = stored.split(".") if isinstance(stored, str) else []
        if len(parts) != 3 or parts[0] != FORMAT:
            raise SecretUnreadable("the stored webhook secret is not in a known form")
        if parts[1] != self.key_id:
            raise SecretUnreadable(
                f"the stored webhook secret was sealed under another {KEY_ENV} "
                f"(key id {parts[1][:8]!r}, this one {self.key_id!r})"
            )
        try:
            raw = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except (binascii.Error, ValueError):
            raise SecretUnreadable("the stored webhook secret is not base64") from None
        if len(raw) < NONCE_BYTES + 16:
            raise SecretUnreadable("the stored webhook secret is cut short")
        try:
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode())
        except InvalidTag:
            raise SecretUnreadable(
                "the stored webhook secret does not open: altered, or stored for another endpoint"
            ) from None
        return plain.decode("utf-8")


def key_from_text(text: str) -> bytes:
    """The 32 key bytes of a ``WEBHOOK_KEY`` value (standard or URL-safe base64, padded or
    not); the error names the variable, never the value."""
    cleaned = text.strip()
    try:
        key = base64.b64decode(
            cleaned.replace("-", "+").replace("_", "/") + "=" * (-len(cleaned) % 4),
            validate=True,
        )
    except (binascii.Error, ValueError):
        raise WebhookKeyMissing(f"{KEY_ENV} is not base64") from None
    if len(key) != KEY_BYTES:
        raise WebhookKeyMissing(f"{KEY_ENV} must be base64 of {KEY_BYTES} bytes, not {len(key)}")
    return key


class SecretRing:
    """The deployment's keys: the first seals, each opens what its id names."""

    __slots__ = ("boxes",)

    def __init__(self, boxes: list[SecretBox]) -> None:
        self.boxes = {b.key_id: b for b in boxes}  # in order: the first seals

    @property
    def key_id(self) -> str:
        """The sealing key's id."""
        return next(iter(self.boxes))

    def __repr__(self) -> str:
        return f"SecretRing(key_ids={list(self.boxes)!r})"

    def seal(self, secret: str, *, context: str = "") -> str:
        return self.boxes[self.key_id].seal(secret, context=context)

    def open(self, stored: str, *, context: str = "") -> str:
        named = self.sealed_by(stored)
        if named is not None and named not in self.boxes:
            raise SecretUnreadable(
                f"the stored webhook secret was sealed under another {KEY_ENV} "
                f"(key id {named[:8]!r}; this one's: {', '.join(map(repr, self.boxes))})"
            )
        # not in a known form: the sealing box says why
        return self.boxes[named or self.key_id].open(stored, context=context)

    def sealed_by(self, stored: str) -> str | None:
        """The id of the key ``stored`` names (None: not in a known form)."""
        parts = stored.split(".") if isinstance(stored, str) else []
        return parts[1] if len(parts) == 3 and parts[0] == FORMAT else None


def ring_from_text(text: str) -> SecretRing:
    """The keys of a ``WEBHOOK_KEY`` value: one, or several comma-separated (the first
    seals). Errors name the variable and the key's place, never a value."""
    texts = text.split(",")
    if not text.strip() or any(not part.strip() for part in texts):
        raise WebhookKeyMissing(f"{KEY_ENV} has an empty key: one key, or keys separated by commas")
    boxes = []
    for place, part in enumerate(texts, start=1):
        try:
            boxes.append(SecretBox(key_from_text(part)))
        except WebhookKeyMissing as exc:
            raise (exc if len(texts) == 1 else WebhookKeyMissing(f"{exc} (key {place})")) from None
        if boxes[-1].key_id in [b.key_id for b in boxes[:-1]]:
            raise WebhookKeyMissing(f"{KEY_ENV}'s key {place} repeats an earlier one")
    return SecretRing(boxes)


_rings: dict[str, SecretRing] = {}


def box() -> SecretRing:
    """The keys of the environment's ``WEBHOOK_KEY`` (looked at on each call: tests and the
    local stack set it after import; one ring kept per value)."""
    text = os.environ.get(KEY_ENV, "").strip()
    if not text:
        raise WebhookKeyMissing(
            f"webhook secrets need a key: set {KEY_ENV} (base64 of {KEY_BYTES} random bytes)"
        )
    digest = hashlib.sha256(text.encode()).hexdigest()  # the key text itself is not kept
    found = _rings.get(digest)
    if found is None:
        found = ring_from_text(text)
        _rings.clear()  # only the current value's ring is kept
        _rings[digest] = found
    return found


def encrypt_secret(secret: str, *, context: str = "") -> str:
    """``secret`` sealed under ``WEBHOOK_KEY``'s first key, for the database."""
    return box().seal(secret, context=context)


def decrypt_secret(stored: str, *, context: str = "") -> str:
    """The secret ``encrypt_secret`` sealed (same ``context``), or SecretUnreadable."""
    return box().open(stored, context=context)
