"""The API key format, in one place: how a key is made, checked and hashed.

A key is ``sl_<id>_<secret><checksum>``:

- ``sl_<id>`` (8 hex digits) is the key's public *prefix*: listed, and used to revoke it;
- ``<secret>`` is 32 base62 characters from ``secrets`` (190 bits);
- ``<checksum>`` is the CRC32 of everything before it, 6 base62 characters (as GitHub's
  tokens carry one).

The checksum lets a function refuse a mistyped or made-up key *before* any backend: a
stream of random keys costs neither a Redis round trip nor a database query (a CRC is not
a secret, so a key forged with a valid checksum still reaches the caches, whose negative
entries bound its cost). Only the key's SHA-256 is ever stored or cached.

Keys issued before the checksum (``sl_<id>_`` + 32 URL-safe characters) keep working only
while ``ACCEPT_LEGACY_API_KEYS=1`` is set; reissue them and turn it off (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import zlib

PREFIX_PATTERN = r"sl_[0-9a-f]{8}"
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SECRET_LENGTH = 32
_CHECKSUM_LENGTH = 6  # 62**6 > 2**32: any CRC32 fits
_KEY = re.compile(rf"^({PREFIX_PATTERN}_[0-9A-Za-z]{{{_SECRET_LENGTH}}})([0-9A-Za-z]{{6}})$")
_LEGACY_KEY = re.compile(rf"^{PREFIX_PATTERN}_[A-Za-z0-9_-]{{32}}$")
LEGACY_ENV = "ACCEPT_LEGACY_API_KEYS"


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode("ascii")), _CHECKSUM_LENGTH)


def generate() -> tuple[str, str]:
    """A new ``(key, prefix)``."""
    prefix = "sl_" + secrets.token_hex(4)
    secret = "".join(secrets.choice(_BASE62) for _ in range(_SECRET_LENGTH))
    body = f"{prefix}_{secret}"
    return body + _checksum(body), prefix


def well_formed(key: str) -> bool:
    """Could this deployment have issued ``key``? Checked with no I/O."""
    match = _KEY.match(key)
    if match:
        return secrets.compare_digest(_checksum(match.group(1)), match.group(2))
    return os.environ.get(LEGACY_ENV) == "1" and _LEGACY_KEY.match(key) is not None


def hash_key(key: str) -> str:
    """What the database and the caches hold instead of the key. Keys carry 190 random
    bits: a fast hash is enough (there is nothing to brute-force)."""
    return hashlib.sha256(key.encode()).hexdigest()
