"""The token test vectors every client must agree on (shared/clients/testdata/vectors.json):
the file is what tools/make_client_vectors.py writes from the server's signing code, and
the Python client's verifier gives each case its expected outcome. The Node and Go clients
run the same file (tests/test_client_node.py, tests/test_client_go.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seatlease_client import TokenError, claimed_seats
from seatlease_client._machine import fingerprint
from seatlease_client._verify import TokenVerifier

REPO = Path(__file__).resolve().parent.parent
VECTORS = json.loads((REPO / "shared" / "clients" / "testdata" / "vectors.json").read_text())
CASES = VECTORS["cases"]


def test_the_vectors_are_what_the_servers_signing_code_writes() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "tools" / "make_client_vectors.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def test_the_vectors_cover_every_kind_of_bad_token() -> None:
    expected = {case["expect"] for case in CASES}
    assert expected == {
        "ok",
        "token_missing",
        "token_malformed",
        "token_unknown_kid",
        "token_untrusted_key",
        "token_bad_signature",
        "token_wrong_audience",
        "token_expired",
        "token_replayed",
        "token_mismatch",
        "token_wrong_machine",
    }
    names = {case["name"] for case in CASES}
    assert {"alg_none", "hs256_public_key_as_secret", "forged_same_kid", "tampered_claims"} <= names
    assert {"weighted_good", "weighted_other_seats", "weighted_tampered_seats"} <= names


def verifier_for(case: dict[str, Any]) -> TokenVerifier:
    jwks = json.dumps(case.get("jwks", VECTORS["jwks"])).encode()
    pinned = VECTORS["pinned"] if case.get("pinned", True) else None
    machine = case.get("machine_id")
    return TokenVerifier(
        lambda: jwks,
        pinned_keys=pinned,
        tenant_id=case.get("tenant_id", VECTORS["tenant_id"]),
        leeway=case.get("leeway", VECTORS["leeway"]),
        machine_fingerprint=None if machine is None else fingerprint(machine),
    )


def test_the_python_client_computes_each_machines_fingerprint() -> None:
    assert len(VECTORS["machines"]) >= 4
    for machine in VECTORS["machines"]:
        assert fingerprint(machine["machine_id"]) == machine["fingerprint"]
        assert len(machine["fingerprint"]) == 64


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_python_client_agrees_with_each_vector(case: dict[str, Any]) -> None:
    verifier = verifier_for(case)
    check = (case["function"], case["request"], case["answer"], case["status"])
    if case["expect"] == "ok":
        claims = verifier.check(*check)
        assert claims["sid"] == case["answer"].get("session_id", case["request"].get("session_id"))
        assert claimed_seats(claims) == case.get("seats_claim", 1)
        return
    with pytest.raises(TokenError) as refused:
        verifier.check(*check)
    assert refused.value.code == case["expect"]
    assert refused.value.status == case["status"]
