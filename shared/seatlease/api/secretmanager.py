"""The signing-key secret in Secret Manager: one version per Ed25519 key, its payload the
PKCS#8 PEM private key, ``kid`` = the version number.

Why the API and not a secret volume: a volume lists the versions it mounts in the
function's deployment, so every rotation would need a Terraform apply and a new
revision; through the API the functions find a version ``seatlease keys rotate`` added
within a minute, and the ``keys`` function can serve each key from the secret's metadata
without ever reading a private key.

The public half of each version is published in the secret's annotations, written by
``seatlease keys rotate`` right after the version (``jwk-x-<n>``: the raw public key,
base64url; ``signs-from-<n>``: when it may start signing, seconds since the epoch). So:

- the ``keys`` function needs only ``roles/secretmanager.viewer`` (versions and
  annotations, no payloads);
- acquire, heartbeat and release also hold ``secretAccessor`` and read the payload of
  the one version that signs, and refuse it if it is not the published key;
- a version added by hand without annotations is never used, and disabling a version
  (``gcloud secrets versions disable``) takes its key out of the JWKS within a minute:
  that is how a leaked key is revoked.

The client is google-cloud-secret-manager over its REST transport, imported on first use
only (about 0.3 s: a cold start pays it once, and only the functions that sign or serve
the JWKS). ``SECRET_MANAGER_ENDPOINT`` points it elsewhere: a regional endpoint, or, as
``http://127.0.0.1:PORT``, the tests' local stand-in for the API (anonymous credentials;
Secret Manager has no emulator).
"""

from __future__ import annotations

import os
import re
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from seatlease.api.signingkeys import (
    KeyVersion,
    SigningNotConfigured,
    b64url,
    b64url_decode,
    load_private_pem,
    raw_public,
)

# A version added by hand with no signs-from annotation waits this long (and it is not
# used at all without its jwk-x annotation).
DEFAULT_ACTIVATION_SECONDS = 600
_SECRET_NAME = re.compile(r"^projects/[^/]+/secrets/[A-Za-z0-9_-]+$")
_VERSION_NAME = re.compile(r"/versions/([0-9]+)$")


def x_annotation(number: int) -> str:
    return f"jwk-x-{number}"


def signs_from_annotation(number: int) -> str:
    return f"signs-from-{number}"


def client() -> Any:
    """A SecretManagerServiceClient (REST transport)."""
    from google.cloud import secretmanager

    endpoint = os.environ.get("SECRET_MANAGER_ENDPOINT", "").strip()
    if not endpoint:
        return secretmanager.SecretManagerServiceClient(transport="rest")
    options: dict[str, Any] = {"client_options": {"api_endpoint": endpoint}, "transport": "rest"}
    if endpoint.startswith("http://"):  # plain HTTP can only be a local stand-in
        from google.auth.credentials import AnonymousCredentials

        options["credentials"] = AnonymousCredentials()
    return secretmanager.SecretManagerServiceClient(**options)


def check_secret_name(name: str) -> str:
    if not _SECRET_NAME.match(name):
        raise SigningNotConfigured(
            f"SIGNING_KEY_SECRET must be projects/PROJECT/secrets/SECRET, not {name!r}"
        )
    return name


def version_number(version_name: str) -> int:
    match = _VERSION_NAME.search(version_name)
    if match is None:
        raise ValueError(f"not a secret version name: {version_name!r}")
    return int(match.group(1))


def describe(versions: list[Any], annotations: dict[str, str]) -> list[KeyVersion]:
    """Enabled versions and the secret's annotations -> the keys (public halves only)."""
    found = []
    for version in versions:
        number = version_number(version.name)
        created = version.create_time.timestamp()
        x = annotations.get(x_annotation(number))
        try:
            public = b64url_decode(x) if x else None
            signs_from = float(annotations[signs_from_annotation(number)])
        except KeyError:
            signs_from = created + DEFAULT_ACTIVATION_SECONDS
        except ValueError:  # a hand-edited annotation: the version is not used
            public, signs_from = None, created
        if public is not None and len(public) != 32:
            public = None
        found.append(KeyVersion(str(number), number, created, signs_from, public))
    return found


class SecretKeys:
    """``SIGNING_KEY_SECRET``: the key source of the cloud functions."""

    def __init__(self, secret_name: str) -> None:
        self.secret = check_secret_name(secret_name)
        self.name = f"SIGNING_KEY_SECRET={secret_name}"
        self.refresh_seconds = 60.0
        self._client: Any = None

    @property
    def api(self) -> Any:
        if self._client is None:
            self._client = client()
        return self._client

    def versions(self) -> list[KeyVersion]:
        return read_keys(self.api, self.secret)

    def private_key(self, version: KeyVersion) -> Ed25519PrivateKey:
        response = self.api.access_secret_version(name=f"{self.secret}/versions/{version.number}")
        return load_private_pem(response.payload.data, f"secret version {version.number}")


# -- the operator's side (seatlease keys rotate / list) ----------------------------------


def add_key(api: Any, secret: str, private_pem: bytes, signs_from: float) -> tuple[int, bytes]:
    """Add a version holding ``private_pem``, then publish its public key and start time
    in the annotations (read-modify-write guarded by the secret's etag). Returns the
    version number and the raw public key."""
    check_secret_name(secret)
    public = raw_public(load_private_pem(private_pem, "the new key"))
    added = api.add_secret_version(request={"parent": secret, "payload": {"data": private_pem}})
    number = version_number(added.name)
    current = api.get_secret(name=secret)
    annotations = dict(current.annotations)
    annotations[x_annotation(number)] = b64url(public)
    annotations[signs_from_annotation(number)] = str(int(signs_from))
    api.update_secret(
        request={
            "secret": {"name": secret, "annotations": annotations, "etag": current.etag},
            "update_mask": {"paths": ["annotations"]},
        }
    )
    return number, public


def read_keys(api: Any, secret: str) -> list[KeyVersion]:
    """The enabled versions as keys, public halves only (two reads, no payload)."""
    listed = list(api.list_secret_versions(request={"parent": secret, "filter": "state:ENABLED"}))
    return describe(listed, dict(api.get_secret(name=secret).annotations))
