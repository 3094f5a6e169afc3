"""The Java client (shared/clients/java) against the served functions: its own test runner
(``./run-tests``: javac offline, Gson from Debian) with every shared token vector, the
bad-answer cases against tests/client_bad_server.py, and the live suite against
tests/client_harness.py's server on real Redis and PostgreSQL (the Go and C clients'
tests)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from client_bad_server import bad_server

REPO = Path(__file__).resolve().parent.parent
JAVA_DIR = REPO / "shared" / "clients" / "java"
GSON = Path("/usr/share/java/gson.jar")

TESTS = [
    "every_vector",
    "every_machine_fingerprint",
    "leeway_by_the_verifiers_clock",
    "pinned_key_forms",
    "every_bad_answer_is_a_typed_error",
    "weights_are_sent_and_read",
    "lease_life_past_three_leases_a_redis_flush_and_a_revoke",
    "a_stalled_server_answers_the_retry_from_the_first_run",
    "a_retry_of_your_own_with_the_same_request_id_takes_one_seat",
    "typed_errors",
    "a_500_is_an_http_error_not_retried",
    "a_503_with_retry_after_is_retried_no_sooner_with_the_same_request_id",
    "waiting_gets_the_seat_released_meanwhile",
    "an_unreachable_url_is_backend_unavailable",
    "release_from_the_on_lost_callback",
    "an_outage_longer_than_the_lease_marks_it_lost_then_regains",
    "queued_waiters_get_the_seat_in_the_order_they_joined",
    "waiting_in_line_gives_up_at_the_timeout",
    "typed_errors_of_a_license_policy",
    "a_full_queue_is_queue_full",
    "a_borrowed_seat",
    "a_licenses_terms_and_a_machine_bound_seat",
    "pinned_keys_from_the_deployment_verify_and_others_are_refused",
    "a_suspended_license_is_license_suspended_until_it_is_resumed",
    "a_weighted_lease",
]


@pytest.fixture(scope="module")
def java_toolchain() -> None:
    for tool in ("javac", "java"):
        assert shutil.which(tool), f"{tool} is missing: make test installs it (README)"
    version = subprocess.run(["javac", "-version"], capture_output=True, text=True, check=True)
    major = int(re.search(r"javac (\d+)", version.stdout + version.stderr).group(1))  # type: ignore[union-attr]
    assert major >= 17, version.stdout
    assert GSON.exists(), "gson is missing: make test installs libgoogle-gson-java"
    built = subprocess.run(
        ["./build.sh"], cwd=JAVA_DIR, capture_output=True, text=True, timeout=300, check=False
    )
    assert built.returncode == 0, built.stderr


def test_the_java_client_passes_its_tests_against_the_served_functions(
    java_toolchain, client_functions
):
    with bad_server() as bad_url:
        env = {**client_functions.env(), "SEATLEASE_BAD_URL": bad_url}
        result = subprocess.run(
            ["./run-tests"],
            cwd=JAVA_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-10000:]
    assert "--- SKIP" not in output and "--- FAIL" not in output, output[-6000:]
    passed = re.findall(r"--- PASS: (\S+)", output)
    assert len([name for name in passed if name.startswith("every_vector/")]) >= 31
    assert len([name for name in passed if name.startswith("every_bad_answer_is_a_typed")]) >= 21
    for name in TESTS:
        assert name in passed, (name, output[-4000:])
    summary = re.search(r"seatlease-java: (\d+) passed, (\d+) failed, (\d+) skipped", output)
    assert summary and summary.groups() == (str(len(TESTS)), "0", "0"), output[-2000:]
