"""The cloud key path: ``SIGNING_KEY_SECRET`` through the real google-cloud-secret-manager
client (REST transport) against tests/secretmanager_fake.py, a stand-in for the Secret
Manager API on loopback (Secret Manager has no emulator). ``seatlease keys rotate`` and
``list`` write and read it; the real functions sign with it and the keys function serves
it, checked with joserfc."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator

import pytest
from http_support import Tenant, acquire, call, error_of, new_license
from joserfc import jwt as jose_jwt
from joserfc.jwk import KeySet
from secretmanager_fake import FakeSecretManager

from seatlease.api import secretmanager, signingkeys, tokens
from seatlease_cli import main as cli

SECRET = "projects/seatlease-test/secrets/seatlease-signing-key"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSecretManager]:
    server = FakeSecretManager().start()
    server.create_secret(SECRET)  # Terraform's part: the secret, never a version
    monkeypatch.setenv("SECRET_MANAGER_ENDPOINT", server.url)
    monkeypatch.delenv("SIGNING_KEYS_DIR", raising=False)
    monkeypatch.setenv("SIGNING_KEY_SECRET", SECRET)
    monkeypatch.setenv("SIGNING_KEYS_REFRESH_SECONDS", "0")
    tokens.reset()
    yield server
    tokens.reset()
    server.stop()


def rotate(*flags: str) -> None:
    assert cli(["keys", "rotate", "--secret", SECRET, *flags]) == 0


def kid_of(token: str, jwks: dict) -> str:
    with warnings.catch_warnings():  # joserfc prefers RFC 9864's "Ed25519" name
        warnings.simplefilter("ignore")
        return jose_jwt.decode(token, KeySet.import_key_set(jwks), algorithms=["EdDSA"]).header[
            "kid"
        ]


def served_jwks() -> dict:
    response = call("keys", method="GET", content_type=None)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json(force=True)


def test_rotate_publishes_ahead_and_the_functions_follow(
    fake: FakeSecretManager, acme: Tenant, capsys
) -> None:
    lic = new_license(acme, "cad", seats=5)
    rotate("--activate-in", "0")  # the first key: signs at once
    secret = fake.secrets[SECRET]
    assert [v.number for v in secret.versions] == [1]
    assert set(secret.annotations) == {"jwk-x-1", "signs-from-1"}
    first = acquire(acme, lic, "a").get_json()["lease_token"]
    assert kid_of(first, served_jwks()) == "1"

    rotate()  # default: published now, signs 600 s later
    capsys.readouterr()
    assert cli(["keys", "list", "--secret", SECRET, "--json"]) == 0
    listed = {row["kid"]: row["state"] for row in __import__("json").loads(capsys.readouterr().out)}
    assert listed["1"] == "signing" and listed["2"].startswith("next, signs from")
    jwks = served_jwks()
    assert sorted(k["kid"] for k in jwks["keys"]) == ["1", "2"]  # pre-published
    assert kid_of(acquire(acme, lic, "b").get_json()["lease_token"], jwks) == "1"

    secret.annotations["signs-from-2"] = str(int(time.time()) - 1)  # ...600 s later
    secret.generation += 1
    second = acquire(acme, lic, "c").get_json()["lease_token"]
    jwks = served_jwks()
    assert kid_of(second, jwks) == "2"
    assert kid_of(first, jwks) == "1"  # signed before the rotation: still verifies


def test_the_keys_function_never_reads_a_private_key(fake: FakeSecretManager, acme) -> None:
    rotate("--activate-in", "0")
    rotate("--activate-in", "0")
    tokens.reset()
    fake.calls.clear()
    assert sorted(k["kid"] for k in served_jwks()["keys"]) == ["1", "2"]
    assert fake.calls and not [c for c in fake.calls if c[1].endswith(":access")]
    # Signing reads exactly one payload: the signer's.
    lic = new_license(acme, "cad", seats=1)
    acquire(acme, lic, "a")
    assert [c[1] for c in fake.calls if c[1].endswith(":access")] == [
        f"/v1/{SECRET}/versions/2:access"
    ]


def test_a_version_without_published_key_is_never_used_and_disabling_revokes(
    fake: FakeSecretManager, acme: Tenant
) -> None:
    lic = new_license(acme, "cad", seats=5)
    rotate("--activate-in", "0")
    api = secretmanager.client()
    # Added by hand (gcloud secrets versions add): no annotations, so not published.
    api.add_secret_version(
        request={"parent": SECRET, "payload": {"data": signingkeys.new_private_pem()}}
    )
    assert [k["kid"] for k in served_jwks()["keys"]] == ["1"]
    assert kid_of(acquire(acme, lic, "a").get_json()["lease_token"], served_jwks()) == "1"
    rotate("--activate-in", "0")  # version 3, published
    assert sorted(k["kid"] for k in served_jwks()["keys"]) == ["1", "3"]
    # A leaked key is revoked by disabling its version: it leaves the JWKS at once.
    api.disable_secret_version(request={"name": f"{SECRET}/versions/1"})
    assert [k["kid"] for k in served_jwks()["keys"]] == ["3"]


def test_a_payload_that_is_not_the_published_key_is_refused(
    fake: FakeSecretManager, acme: Tenant
) -> None:
    lic = new_license(acme, "cad", seats=5)
    rotate("--activate-in", "0")
    fake.secrets[SECRET].versions[0].data = signingkeys.new_private_pem()  # swapped
    error_of(acquire(acme, lic, "a"), 503, "not_configured")


def test_without_any_key_version_signing_fails_and_a_stale_etag_is_refused(
    fake: FakeSecretManager, acme: Tenant
) -> None:
    lic = new_license(acme, "cad", seats=5)
    error_of(acquire(acme, lic, "a"), 503, "not_configured")
    api = secretmanager.client()
    secret = api.get_secret(name=SECRET)
    fake.secrets[SECRET].generation += 1  # someone else wrote the annotations meanwhile
    from google.api_core.exceptions import Conflict  # the API: 409 ABORTED

    with pytest.raises(Conflict):
        api.update_secret(
            request={
                "secret": {"name": SECRET, "annotations": {"x": "y"}, "etag": secret.etag},
                "update_mask": {"paths": ["annotations"]},
            }
        )


def test_the_secret_manager_client_is_not_imported_by_the_folder_path() -> None:
    import subprocess
    import sys

    program = (
        "import sys; from seatlease.api import tokens;"
        "tokens.signer(); print('google.cloud.secretmanager' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip().splitlines()[-1] == "False"  # after the "signing with key" log line
