"""seatlease_client verifying (its default: pinned keys) against the real functions
(acquire, heartbeat, release and the keys JWKS, over HTTP on real Redis and PostgreSQL),
with an attacker's proxy in front that forges, tampers with, replays or strips the
answers. Each kind of bad token is refused with its own ``TokenError`` and never counts
as a seat."""

from __future__ import annotations

import base64
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_support import serving
from werkzeug.wrappers import Request, Response

from seatlease.api import runtime, signingkeys, tokens
from seatlease.records import store
from seatlease_cli import devserver
from seatlease_client import (
    BadSignature,
    SeatClient,
    TokenExpired,
    TokenMismatch,
    TokenMissing,
    TokenReplayed,
    UnknownKeyId,
    UntrustedKey,
    WrongAudience,
)

TENANT = "acme"
Rewrite = Callable[[str, dict, dict], dict]


class Attacker:
    """WSGI proxy in front of the real functions: ``rewrite(path, request, answer)`` may
    change a JSON answer; ``jwks`` may replace the JWKS document; every request is
    counted per path."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.rewrite: Rewrite | None = None
        self.jwks: dict | None = None
        self.counts: dict[str, int] = {}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        path = request.path
        self.counts[path] = self.counts.get(path, 0) + 1
        if path == "/keys" and self.jwks is not None:
            return Response(json.dumps(self.jwks), mimetype="application/json")(
                environ, start_response
            )
        raw = request.get_data()
        environ["wsgi.input"] = io.BytesIO(raw)
        inner = Response.from_app(self.app, environ)
        if self.rewrite is None or inner.status_code >= 300 or path == "/keys":
            return inner(environ, start_response)
        answer = self.rewrite(path, json.loads(raw or b"{}"), json.loads(inner.get_data()))
        return Response(json.dumps(answer), status=inner.status_code, mimetype="application/json")(
            environ, start_response
        )


@pytest.fixture
def attacker(redis_url: str, database_url: str) -> Iterator[tuple[str, Attacker]]:
    proxy = Attacker(devserver.create_app(["acquire", "heartbeat", "release", "keys"]))
    with serving(proxy) as url:
        yield url, proxy


def license_(license_id: str = "lic", seats: int = 2, lease_seconds: int = 30) -> str:
    store.create_license(TENANT, license_id, seats=seats, lease_seconds=lease_seconds)
    runtime.refresh_license_cache(TENANT, license_id)
    return license_id


def deployment_keys() -> list[dict]:
    """The vendor's pinned keys: the public JWKs of the deployment's key folder."""
    return tokens.keyring().jwks()["keys"]


def client(url: str, key: str, **options: Any) -> SeatClient:
    options.setdefault("pinned_keys", deployment_keys())
    return SeatClient(url, key, retries=0, handle_sigterm=False, **options)


def live(license_id: str) -> list[str]:
    return [x["session_id"] for x in runtime.seat_engine().live_leases(TENANT, license_id)]


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def claims_of(token: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


def test_verified_lease_heartbeats_and_release(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_(lease_seconds=3)
    seats = client(url, api_key, tenant_id=TENANT)
    with seats.lease(lic, client_id="ws-1") as lease:
        first = lease.token
        assert claims_of(first)["sub"] == "ws-1" and claims_of(first)["aud"] == "acme/lic"
        deadline = time.monotonic() + 5
        while lease.token == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease.token != first and not lease.lost  # a verified heartbeat's token
        other = seats.acquire(lic, "ws-2")
        assert seats.heartbeat(lic, other["session_id"])["session_id"] == other["session_id"]
        assert seats.release(lic, other["session_id"])["released"] is True
    assert lease.released and live(lic) == []
    assert proxy.counts["/keys"] == 1  # fetched once, then cached


def test_a_forged_grant_from_a_server_with_its_own_key_is_untrusted(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_(seats=1)
    rogue = Ed25519PrivateKey.generate()
    x = base64.urlsafe_b64encode(
        rogue.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ).rstrip(b"=")
    proxy.jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x.decode(), "kid": "1"}]}

    def forge(path: str, request: dict, answer: dict) -> dict:
        claims = {**claims_of(answer["lease_token"]), "nonce": request.get("nonce")}
        headers = {"kid": "1", "typ": "seatlease-lease+jwt"}
        return {**answer, "lease_token": jwt.encode(claims, rogue, "EdDSA", headers=headers)}

    proxy.rewrite = forge
    seats = client(url, api_key)
    with pytest.raises(UntrustedKey) as refused:
        seats.acquire(lic, "ws-1")
    assert refused.value.code == "token_untrusted_key" and refused.value.status == 201
    assert live(lic) == []  # the refused grant's seat was given back at once (issue 48)
    # Unverified, the forgery would be believed: pinning is what stops a fake server.
    unverified = SeatClient(url, api_key, insecure_skip_verify=True, retries=0)
    assert unverified.acquire(lic, "ws-1")["session_id"]


def test_tampered_claims_break_the_signature(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_()

    def extend(path: str, request: dict, answer: dict) -> dict:
        header, _payload, signature = answer["lease_token"].split(".")
        claims = claims_of(answer["lease_token"])
        claims["exp"] += 30 * 86400
        return {**answer, "lease_token": f"{header}.{b64(claims)}.{signature}"}

    proxy.rewrite = extend
    seats = client(url, api_key)
    with pytest.raises(BadSignature):
        seats.acquire(lic, "ws-1")
    with pytest.raises(BadSignature):  # nor does it count inside a held lease
        seats.lease(lic, client_id="ws-2").__enter__()
    assert seats.held() == []


def test_a_grant_for_another_license_or_tenant_is_refused(attacker, api_key) -> None:
    url, proxy = attacker
    lic, cheap = license_("cad"), license_("viewer")
    seats = client(url, api_key)
    viewer = seats.acquire(cheap, "ws-1")

    proxy.rewrite = lambda path, request, answer: {**viewer, "nonce": request.get("nonce")}
    with pytest.raises(WrongAudience):
        seats.acquire(lic, "ws-1")
    proxy.rewrite = None
    with pytest.raises(WrongAudience):
        client(url, api_key, tenant_id="globex").acquire(lic, "ws-1")
    assert client(url, api_key, tenant_id=TENANT).acquire(lic, "ws-1")["session_id"]


def test_an_expired_grant_is_refused(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_(lease_seconds=1)
    seats = client(url, api_key, token_leeway=0)
    recorded = seats.acquire(lic, "ws-1")  # a real grant, 1 s long
    time.sleep(2.1)

    def replay_old(path: str, request: dict, answer: dict) -> dict:
        return recorded

    proxy.rewrite = replay_old
    with pytest.raises(TokenExpired):
        seats.acquire(lic, "ws-1")


def test_a_replayed_grant_carries_the_wrong_nonce(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_(seats=2)
    seats = client(url, api_key)
    recorded = seats.acquire(lic, "ws-1")
    seats.release(lic, recorded["session_id"])

    def replay(path: str, request: dict, answer: dict) -> dict:
        return recorded if path == "/acquire" else answer

    proxy.rewrite = replay
    with pytest.raises(TokenReplayed):
        seats.acquire(lic, "ws-1")
    # The release answers are signed too: a replayed "released" for this session fails.
    proxy.rewrite = None
    held = seats.acquire(lic, "ws-2")
    first = seats.release(lic, held["session_id"])
    proxy.rewrite = lambda path, request, answer: first if path == "/release" else answer
    with pytest.raises(TokenReplayed):
        seats.release(lic, held["session_id"])


def test_an_unknown_key_id_is_refused_after_one_fresh_look(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_()
    folder = Path(tokens.keyring().source.path)  # the deployment's own key, another kid
    private = serialization.load_pem_private_key((folder / "1.pem").read_bytes(), None)

    def rekey(path: str, request: dict, answer: dict) -> dict:
        claims = {**claims_of(answer["lease_token"])}
        headers = {"kid": "99", "typ": "seatlease-lease+jwt"}
        return {**answer, "lease_token": jwt.encode(claims, private, "EdDSA", headers=headers)}

    seats = client(url, api_key)
    seats.acquire(lic, "ws-0")  # the JWKS is cached now
    seats._verifier.min_refetch = 0  # the fresh look happens at once
    proxy.rewrite = rekey
    with pytest.raises(UnknownKeyId):
        seats.acquire(lic, "ws-1")
    assert proxy.counts["/keys"] == 2  # looked again before refusing


def test_a_missing_or_swapped_token_is_refused(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_()
    seats = client(url, api_key)
    proxy.rewrite = lambda path, request, answer: {
        k: v for k, v in answer.items() if k != "lease_token"
    }
    with pytest.raises(TokenMissing):
        seats.acquire(lic, "ws-1")
    proxy.rewrite = None
    held = seats.acquire(lic, "ws-2")
    # A lease token passed off as a release answer: the wrong kind (typ).
    proxy.rewrite = lambda path, request, answer: {**answer, "release_token": held["lease_token"]}
    with pytest.raises(TokenMismatch):
        seats.release(lic, held["session_id"])


def test_a_bad_heartbeat_answer_loses_the_seat_instead_of_renewing_it(attacker, api_key) -> None:
    url, proxy = attacker
    lic = license_(lease_seconds=3)
    lost: list[str] = []
    seats = client(url, api_key)
    with seats.lease(lic, client_id="ws-1", on_lost=lambda _l, reason: lost.append(reason)):
        proxy.rewrite = lambda path, request, answer: (
            {k: v for k, v in answer.items() if k != "lease_token"}
            if path != "/release"
            else answer
        )
        deadline = time.monotonic() + 5
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        proxy.rewrite = None
    assert lost[:1] == ["token_missing"]


def test_rotation_the_client_follows_new_keys_and_drops_retired_ones(
    attacker, api_key, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _proxy = attacker
    folder = tmp_path / "keys"
    signingkeys.next_key_file(folder)
    monkeypatch.setenv("SIGNING_KEYS_DIR", str(folder))
    monkeypatch.setenv("SIGNING_KEYS_REFRESH_SECONDS", "0")
    tokens.reset()
    try:
        lic = license_(lease_seconds=600)
        signingkeys.next_key_file(folder)  # the vendor pins both: shipped with the product
        pins = deployment_keys()
        (folder / "2.pem").rename(tmp_path / "2.pem")  # ...but key 2 is not in use yet
        seats = client(url, api_key, pinned_keys=pins)
        before = seats.acquire(lic, "ws-1")
        assert claims_of(before["lease_token"]) and seats._verifier._keys.keys() == {"1"}
        (tmp_path / "2.pem").rename(folder / "2.pem")  # rotation: key 2 signs now
        seats._verifier.min_refetch = 0
        after = seats.acquire(lic, "ws-2")  # an unknown kid: the JWKS is fetched again
        assert (
            json.loads(base64.urlsafe_b64decode(after["lease_token"].split(".")[0] + "=="))["kid"]
            == "2"
        )
        # Key 1 retires (key 2 took over longer ago than a token can live): a client
        # holding key 1's token no longer accepts it once it looks at the JWKS again.
        monkeypatch.setenv("TOKEN_MAX_LIFETIME_SECONDS", "60")
        tokens.reset()
        past = time.time() - 60 - signingkeys.RETIRE_MARGIN_SECONDS - 5
        os.utime(folder / "2.pem", (past, past))
        fresh = client(url, api_key, pinned_keys=pins)
        fresh._verifier.key_for("2", 200)
        with pytest.raises(UnknownKeyId):
            fresh._verifier.key_for("1", 200)
    finally:
        tokens.reset()
