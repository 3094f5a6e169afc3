"""The deployment's Ed25519 signing keys: where they come from, which one signs the lease
tokens (``seatlease.api.tokens``), and which public keys the JWKS (the ``keys`` function)
serves.

Where the keys come from is set by the environment and never guessed:

``SIGNING_KEYS_DIR``
    A folder of PEM files, one PKCS#8 Ed25519 private key per file named ``<n>.pem``;
    its ``kid`` is ``n`` and the highest ``n`` signs. ``make run``, the tests and any
    script use this; ``seatlease keys rotate --dir DIR`` writes the next file.
``SIGNING_KEY_SECRET``
    ``projects/P/secrets/S`` in Secret Manager (``seatlease.api.secretmanager``): one secret
    version per key, ``kid`` = the version number. The cloud functions use this.
``LEASE_TOKENS=off``
    No tokens at all: the answers carry none (the benchmark's unsigned baseline). A
    verifying client refuses such answers.

With none of them set, a function that must sign fails (500, logged): a deployment never
hands out unsigned grants by accident.

Rotation without downtime, one rule for both sources. Each key has ``signs_from``: the
moment it may start signing (in a folder: when the file was written; in Secret Manager:
set by ``seatlease keys rotate``, 10 minutes after the version is added by default, so
that every JWKS cache has seen the new key before any token carries it). The newest key
whose ``signs_from`` has passed signs. The JWKS serves that key, every newer one
(published ahead), and every older one until ``TOKEN_MAX_LIFETIME_SECONDS`` (the longest
a token can live: the longest lease, later the longest borrow) plus a margin after a newer
key took over: by then every token the old key signed has expired.

Each function instance keeps the keys in memory and looks at the source again every
``SIGNING_KEYS_REFRESH_SECONDS`` (5 s for a folder, 60 s for Secret Manager). One request
thread refreshes while the others go on with what is cached; a failed refresh keeps the
cached keys (logged) and is retried a few seconds later. Private keys never leave this
module's objects: never logged, never in an error message.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from seatlease.errors import BackendUnavailable, NotConfigured
from seatlease.logs import log

# The longest grant a token can carry: a 30-day borrow (licenses.MAX_BORROW_SECONDS, above
# the longest lease, fields.MAX_LEASE_SECONDS; a test keeps them in step), so an old key
# stays in the JWKS until every token it signed, borrowed or not, has expired.
DEFAULT_MAX_TOKEN_SECONDS = 30 * 24 * 3600
# Added to the lifetime before an old key leaves the JWKS: the signers' refresh interval
# (they may sign with it that much after it was superseded) and the clients' clock leeway.
RETIRE_MARGIN_SECONDS = 600
RETRY_AFTER_FAILED_REFRESH = 5.0
_PEM_NAME = re.compile(r"^([1-9][0-9]{0,8})\.pem$")


class SigningNotConfigured(NotConfigured, RuntimeError):
    """Neither SIGNING_KEYS_DIR nor SIGNING_KEY_SECRET (nor LEASE_TOKENS=off) is set, or
    the configured source holds no usable key: an operator must act, a retry cannot help."""


@dataclass(frozen=True, slots=True)
class KeyVersion:
    """One key as the source describes it (no private material): ``public`` is the raw
    32-byte Ed25519 public key as published, None when it is not published (such a key
    never signs and is never served)."""

    kid: str
    number: int
    created: float  # seconds since the epoch
    signs_from: float
    public: bytes | None


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    private: Ed25519PrivateKey

    def __repr__(self) -> str:  # never the key itself
        return f"SigningKey(kid={self.kid!r})"


@dataclass(frozen=True, slots=True)
class Plan:
    """Which key signs now and which keys the JWKS serves, with each served key's
    end (``retires_at``, None while it may still sign)."""

    signer: KeyVersion | None
    published: tuple[KeyVersion, ...]
    retires_at: dict[str, float]


class KeySource(Protocol):
    name: str
    refresh_seconds: float

    def versions(self) -> list[KeyVersion]: ...

    def private_key(self, version: KeyVersion) -> Ed25519PrivateKey: ...


# -- the rule ---------------------------------------------------------------------------


def plan(
    versions: Sequence[KeyVersion],
    now: float,
    max_token_seconds: float = DEFAULT_MAX_TOKEN_SECONDS,
    margin: float = RETIRE_MARGIN_SECONDS,
) -> Plan:
    """The newest published key whose ``signs_from`` has passed signs (when none has,
    e.g. the very first key is younger than its delay, the oldest published one does).
    Served: the signer, every newer published key, and every older one until
    ``max_token_seconds + margin`` after the first newer key began to sign."""
    candidates = sorted((v for v in versions if v.public is not None), key=lambda v: v.number)
    if not candidates:
        return Plan(None, (), {})
    ready = [v for v in candidates if v.signs_from <= now]
    signer = ready[-1] if ready else candidates[0]
    published, retires_at = [], {}
    for version in candidates:
        if version.number >= signer.number:
            published.append(version)
            continue
        took_over = min(v.signs_from for v in ready if v.number > version.number)
        end = took_over + max_token_seconds + margin
        if now < end:
            published.append(version)
            retires_at[version.kid] = end
    return Plan(signer, tuple(published), retires_at)


def public_jwk(version: KeyVersion) -> dict[str, str]:
    """The RFC 8037 JWK of a published key."""
    assert version.public is not None
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url(version.public),
        "kid": version.kid,
        "alg": "EdDSA",
        "use": "sig",
    }


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def new_private_pem() -> bytes:
    """A fresh Ed25519 private key as unencrypted PKCS#8 PEM (pyca/cryptography)."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM; the error names ``where``, never the content."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SigningNotConfigured(f"{where} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningNotConfigured(f"{where} is not an Ed25519 key")
    return key


# -- a folder of PEM files --------------------------------------------------------------


class DirectoryKeys:
    """``SIGNING_KEYS_DIR``: ``<n>.pem`` files; a key signs from when its file was
    written (plus ``activation_seconds``, 0 by default: the newest signs)."""

    def __init__(self, path: str | Path, activation_seconds: float = 0.0) -> None:
        self.path = Path(path)
        self.name = f"SIGNING_KEYS_DIR={self.path}"
        self.refresh_seconds = 5.0
        self.activation_seconds = activation_seconds
        self._loaded: dict[Path, tuple[tuple[int, int], Ed25519PrivateKey]] = {}

    def _load(self, path: Path, stat: os.stat_result) -> Ed25519PrivateKey:
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._loaded.get(path)
        if cached is None or cached[0] != stamp:
            cached = (stamp, load_private_pem(path.read_bytes(), f"signing key file {path.name}"))
            self._loaded[path] = cached
        return cached[1]

    def versions(self) -> list[KeyVersion]:
        if not self.path.is_dir():
            raise SigningNotConfigured(f"SIGNING_KEYS_DIR {self.path} is not a folder")
        found = []
        for path in self.path.iterdir():
            match = _PEM_NAME.match(path.name)
            if match is None:
                continue
            stat = path.stat()
            private = self._load(path, stat)
            number = int(match.group(1))
            found.append(
                KeyVersion(
                    kid=str(number),
                    number=number,
                    created=stat.st_mtime,
                    signs_from=stat.st_mtime + self.activation_seconds,
                    public=raw_public(private),
                )
            )
        if not found:
            raise SigningNotConfigured(
                f"SIGNING_KEYS_DIR {self.path} holds no <n>.pem key: "
                f"run `seatlease keys rotate --dir {self.path}`"
            )
        return found

    def private_key(self, version: KeyVersion) -> Ed25519PrivateKey:
        path = self.path / f"{version.number}.pem"
        return self._load(path, path.stat())


def next_key_file(folder: str | Path) -> Path:
    """``seatlease keys rotate --dir``: write the next ``<n>.pem`` (readable by its owner
    only, never overwriting a file) and return its path; the new key signs at once."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := _PEM_NAME.match(p.name))]
    path = folder / f"{max(numbers, default=0) + 1}.pem"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(new_private_pem())
    return path


# -- the per-instance cache -------------------------------------------------------------


class Keyring:
    """The keys of one source, cached for ``source.refresh_seconds``."""

    def __init__(
        self,
        source: KeySource,
        max_token_seconds: float = DEFAULT_MAX_TOKEN_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.max_token_seconds = max_token_seconds
        self.clock = clock
        self._versions: list[KeyVersion] | None = None
        self._next_refresh = 0.0  # time.monotonic()
        self._lock = threading.Lock()
        self._private: dict[tuple[str, bytes | None], Ed25519PrivateKey] = {}
        self._signing_kid: str | None = None
        # The hot path: the signing key, good until the next refresh or the next key's
        # start time, whichever is first (time.monotonic()).
        self._signing: SigningKey | None = None
        self._signing_until = 0.0

    def versions(self) -> list[KeyVersion]:
        cached = self._versions
        if cached is not None and time.monotonic() < self._next_refresh:
            return cached
        # One thread refreshes; while it does, the others go on with the cached keys.
        if not self._lock.acquire(blocking=cached is None):
            return cached  # type: ignore[return-value]  (not None: blocking otherwise)
        try:
            if self._versions is not None and time.monotonic() < self._next_refresh:
                return self._versions
            return self._refresh()
        finally:
            self._lock.release()

    def _refresh(self) -> list[KeyVersion]:
        try:
            versions = self.source.versions()
        except SigningNotConfigured:
            raise
        except Exception as exc:
            if self._versions is None:
                raise BackendUnavailable("signing keys") from exc
            log(
                "WARNING",
                "signing keys: refresh failed; the cached keys are used",
                source=self.source.name,
                error=type(exc).__name__,
            )
            self._next_refresh = time.monotonic() + RETRY_AFTER_FAILED_REFRESH
            return self._versions
        self._versions = versions
        self._next_refresh = time.monotonic() + self.source.refresh_seconds
        self._signing_until = 0.0
        return versions

    def plan(self) -> Plan:
        return plan(self.versions(), self.clock(), self.max_token_seconds)

    def signing_key(self) -> SigningKey:
        cached = self._signing
        if cached is not None and time.monotonic() < self._signing_until:
            return cached
        versions, now = self.versions(), self.clock()
        signer = plan(versions, now, self.max_token_seconds).signer
        if signer is None:
            raise SigningNotConfigured(f"{self.source.name}: no published key can sign")
        cache_key = (signer.kid, signer.public)
        private = self._private.get(cache_key)
        if private is None:
            private = self.source.private_key(signer)
            if raw_public(private) != signer.public:
                raise SigningNotConfigured(
                    f"{self.source.name}: key {signer.kid} is not the published public key"
                )
            self._private = {cache_key: private}  # only the signer's is kept
        if self._signing_kid != signer.kid:
            self._signing_kid = signer.kid
            log("INFO", "signing keys: lease tokens are signed with key " + signer.kid,
                kid=signer.kid, source=self.source.name)  # fmt: skip
        upcoming = [v.signs_from - now for v in versions if v.signs_from > now]
        key = self._signing = SigningKey(signer.kid, private)
        self._signing_until = min(self._next_refresh, time.monotonic() + min(upcoming, default=1e9))
        return key

    def jwks(self) -> dict[str, Any]:
        return {"keys": [public_jwk(v) for v in self.plan().published]}
