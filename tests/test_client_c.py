"""The C client (shared/clients/c, libseatlease) against the served functions: its own
ctest suites built with AddressSanitizer and UndefinedBehaviorSanitizer (and
LeakSanitizer, on with ASan) and -Werror: every shared token vector, the bad-answer cases
against tests/client_bad_server.py, the live suite against tests/client_harness.py's
server on real Redis and PostgreSQL, and the C++ wrapper; then the hold example under
valgrind: no leak, no error."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from client_bad_server import bad_server
from http_support import post_json

REPO = Path(__file__).resolve().parent.parent
C_DIR = REPO / "shared" / "clients" / "c"
ASAN_BUILD = C_DIR / "build-asan"

LIVE_TESTS = [
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
    "a_borrowed_seat",
    "a_licenses_terms_and_a_machine_bound_seat",
    "a_suspended_license_is_license_suspended_until_it_is_resumed",
    "a_weighted_lease",
]
OTHER_TESTS = [
    "every_vector",
    "every_machine_fingerprint",
    "leeway_by_the_verifiers_clock",
    "pinned_key_forms",
    "times_and_urls",
    "every_bad_answer_is_a_typed_error",
    "weights_are_sent_and_read",
    "misuse_is_an_argument_error",
    "cpp_errors_carry_the_code",
    "cpp_seat_released_in_its_destructor",
]


def run(args: list[str], env=None, timeout: float = 600, cwd: Path = C_DIR):
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def c_toolchain() -> None:
    for tool in ("cmake", "cc", "c++", "pkg-config", "valgrind"):
        assert shutil.which(tool), f"{tool} is missing: make test installs it (README)"
    for module in ("libcurl", "libsodium", "libcjson"):
        found = run(["pkg-config", "--exists", module])
        assert found.returncode == 0, f"{module} (-dev) is missing: make test installs it"


@pytest.fixture(scope="module")
def asan_build(c_toolchain) -> Path:
    """libseatlease and its tests with ASan, UBSan and -Werror (incrementally)."""
    configure = run(
        [
            "cmake",
            "-S",
            ".",
            "-B",
            str(ASAN_BUILD),
            "-DCMAKE_BUILD_TYPE=Debug",
            "-DSEATLEASE_SANITIZE=ON",
            "-DSEATLEASE_WERROR=ON",
        ]
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    build = run(["cmake", "--build", str(ASAN_BUILD), "-j2"])
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-6000:]
    return ASAN_BUILD


def test_the_c_library_passes_its_suites_under_asan_and_ubsan(asan_build, client_functions):
    # the C++ wrapper's test takes the one seat of this license and gives it back
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": "cpp-seat", "seats": 1, "lease_seconds": 30},
    )
    with bad_server() as bad_url:
        env = {
            **client_functions.env(),
            "SEATLEASE_BAD_URL": bad_url,
            "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        }
        result = run(["ctest", "--test-dir", str(asan_build), "-V"], env=env, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-10000:]
    assert "ERROR: AddressSanitizer" not in output and "runtime error:" not in output
    assert "LeakSanitizer" not in output, output[-6000:]
    assert "--- SKIP" not in output and "--- FAIL" not in output, output[-6000:]
    passed = re.findall(r"--- PASS: (\S+)", output)
    assert len([name for name in passed if name.startswith("every_vector/")]) >= 31
    assert len([name for name in passed if name.startswith("every_bad_answer_is_a_typed")]) >= 21
    for name in LIVE_TESTS + OTHER_TESTS:
        assert name in passed, (name, output[-4000:])
    summaries = re.findall(r"seatlease-c (\w+): (\d+) passed, (\d+) failed, (\d+) skipped", output)
    assert {suite for suite, *_ in summaries} == {"vectors", "bad_answers", "live", "cpp"}
    assert all(failed == skipped == "0" for _, _, failed, skipped in summaries), summaries


def test_the_c_hold_example_under_valgrind_leaks_nothing(c_toolchain, client_functions):
    post_json(
        f"{client_functions.url}/_test/license", {"license_id": "c-hold-vg", "lease_seconds": 3}
    )
    # ./hold builds what it needs (build/); valgrind runs the program it built
    built = run(["./hold"], env={**os.environ, "HOLD_WRAPPER": "true"})
    assert built.returncode == 0, built.stderr[-4000:]
    valgrind = (
        "valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=all "
        "--errors-for-leak-kinds=definite,indirect,possible --track-fds=no"
    )
    example = subprocess.Popen(
        ["./hold", client_functions.url, client_functions.api_key, "c-hold-vg", "pc-vg"],
        cwd=C_DIR,
        env={**os.environ, "HOLD_WRAPPER": valgrind},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert example.stdout is not None and example.stdin is not None
        line = json.loads(example.stdout.readline() or "{}")
        assert line.get("verified") is True and line.get("seats_used") == 1, line
        # a few heartbeats on the library's thread under valgrind (a lease of 3 s)
        time.sleep(2.5)
        example.stdin.close()
        code = example.wait(timeout=120)
        stderr = example.stderr.read() if example.stderr else ""
    finally:
        example.kill()
        example.wait()
    assert code == 0, stderr[-6000:]
    assert "ERROR SUMMARY: 0 errors" in stderr, stderr[-6000:]
    assert "All heap blocks were freed" in stderr or "definitely lost: 0 bytes" in stderr, stderr
    _, live = post_json(f"{client_functions.url}/_test/live?license_id=c-hold-vg", {})
    assert live == []
