"""The headers that sign a delivery, by the Standard Webhooks specification.

``webhook-id`` (the event's id: a receiver dedupes by it), ``webhook-timestamp`` (seconds
since the epoch; receivers refuse one more than 5 minutes off their clock) and
``webhook-signature``: space-separated signatures of ``{id}.{timestamp}.{body}``, any one
of which a receiver may verify:

* ``v1,<base64>``: HMAC-SHA256 with each of the endpoint's secrets, the current one
  first, then the old one while a rotation's 24 hours last. Made by the
  ``standardwebhooks`` library, the one receivers verify with.
* ``v1a,<base64>``: Ed25519 with the deployment's current signing key (the one that signs
  the lease tokens, ``seatlease.api.signingkeys``), when one is given. A receiver with no
  shared secret verifies it with the public keys the ``keys`` function serves at
  ``/keys`` (the JWK's ``x``, base64url): the header names no key, so it tries each key
  served (one, two while a key rotation lasts). The library has no ``v1a``: this is
  written here, as the specification says, over pyca/cryptography.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from standardwebhooks import Webhook

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    """What every signature covers: ``{id}.{timestamp}.{body}``."""
    return f"{msg_id}.{timestamp}.".encode() + body


def signed_headers(
    msg_id: str,
    body: bytes,
    secrets: list[str],
    ed25519_private_key: Ed25519PrivateKey | None,
    timestamp: int,
) -> dict[str, str]:
    """The three ``webhook-*`` headers of one attempt. ``secrets``: the endpoint's
    ``whsec_`` secrets, current first; ``ed25519_private_key``: the deployment's signing
    key (``Keyring.signing_key().private``), or None for no ``v1a``. The body is the exact
    bytes sent (UTF-8 JSON)."""
    if not secrets and ed25519_private_key is None:
        raise ValueError("a delivery needs a secret or a signing key to be signed")
    if not msg_id or any(c in msg_id for c in " ,\r\n"):
        raise ValueError("the message id must be a non-empty token")
    text = body.decode("utf-8")  # the library signs text; a JSON body always is UTF-8
    at = datetime.fromtimestamp(timestamp, tz=UTC)
    signatures = [Webhook(secret).sign(msg_id, at, text) for secret in secrets]
    if ed25519_private_key is not None:
        raw = ed25519_private_key.sign(signed_content(msg_id, timestamp, body))
        signatures.append("v1a," + base64.b64encode(raw).decode("ascii"))
    return {
        ID_HEADER: msg_id,
        TIMESTAMP_HEADER: str(int(timestamp)),
        SIGNATURE_HEADER: " ".join(signatures),
    }
