"""The C client (shared/clients/c, libseatlease) against the served functions: its own
ctest suites built with AddressSanitizer and UndefinedBehaviorSanitizer (and
LeakSanitizer, on with ASan) and -Werror: every shared token vector, the bad-answer cases
and the behaviour scenarios (a long Retry-After, a region's loss, an operator's revoke, an
ended term, a suspension) against tests/client_bad_server.py, the live suite against
tests/client_harness.py's server on real Redis and PostgreSQL (with borrowed-seat files
shared with the Python client), the C++ wrapper (a Seat outliving its temporary Client),
and a program built against the 0.1 header; the threaded tests again under
ThreadSanitizer; the hold example under valgrind: no leak, no error; and the library
installed into a prefix, found there by pkg-config and by find_package(seatlease CONFIG),
its internal symbols hidden, its dependencies' minimum versions checked at configure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from client_bad_server import KEY_X, bad_server
from http_support import post_json

REPO = Path(__file__).resolve().parent.parent
C_DIR = REPO / "shared" / "clients" / "c"
ASAN_BUILD = C_DIR / "build-asan"
TSAN_BUILD = C_DIR / "build-tsan"
INSTALL_BUILD = C_DIR / "build-install"
BORROW_MACHINE = "c-and-python-test-machine"

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
    "a_wait_is_cancelled_from_another_thread",
    "a_full_queue_is_queue_full",
    "entitlements_and_version_are_asked",
    "borrowed_seat_files_are_the_python_clients",
    # issue 50: the idle rule end to end
    "an_idle_lease_is_warned_reclaimed_and_taken_again_on_a_touch",
    "a_busy_lease_is_never_warned",
]
BEHAVIOUR_TESTS = [
    "a_retry_after_never_outlasts_the_max_backoff",
    "a_heartbeat_of_an_unknown_session_is_recovered_by_its_token",
    "a_seat_an_operator_freed_is_lost_as_revoked_without_its_token",
    "an_ended_term_ends_the_seat_and_is_said_once",
    "a_suspended_license_keeps_its_held_seats",
    "a_client_freed_before_its_leases_goes_with_the_last",
    "a_triggered_cancel_ends_a_call_before_it_starts",
    "option_structs_of_other_sizes",
    # issue 48
    "a_client_is_verified_by_default",
    "a_refused_grant_is_never_a_seat_and_is_released_at_once",
    "a_grant_without_a_session_is_an_invalid_response",
    "seat_counts_keep_their_last_known_values",
    "a_404_is_license_not_found_only_by_its_code",
    "a_redirect_is_an_error_naming_its_location",
    "a_dripped_answer_ends_by_the_timeout",
    "a_stalled_heartbeat_loses_the_seat_by_its_deadline",
    "one_connection_reused_per_client",
    "the_proxy_and_ca_options_reach_libcurl",
    # issue 48, round 2 (the review): a failed key fetch never releases a good grant; a
    # release's key refetch ends by the release timeout, whatever another thread fetches
    "a_failed_key_fetch_is_retried_and_never_releases_the_grant",
    "a_release_refetching_the_keys_ends_by_the_release_timeout",
    "a_release_never_waits_on_another_threads_key_fetch",
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
    "cpp_a_seat_outlives_its_temporary_client",
    "cpp_terms_weights_and_seat_counts",
    "cpp_a_cancel_ends_a_wait",
    "a_program_built_against_0_1_runs_on_this_library",
    # issue 48, round 2: a grant's shape (released when it names a session), null counts,
    # pinned keys of small order
    "a_grant_of_a_wrong_shape_is_refused_and_released_at_once",
    "null_seat_counts_are_absent",
    "grants_and_renewals_are_checked_for_their_shape",
    "a_pinned_key_of_small_order_is_refused",
]
# issue 50: the idle rule's client side, against the suite's own recording server
IDLE_TESTS = [
    "heartbeats_carry_idle_seconds_after_a_touch_and_busy_in_a_scope",
    "an_idle_warning_is_called_once_and_a_touch_cancels_it_at_once",
    "a_410_idle_is_lost_as_idle_and_asked_for_again_once_in_use",
    "touches_on_every_key_while_warned_send_a_heartbeat_a_second_at_most",
    "answers_carry_the_warning_and_the_shared_sessions",
]
# The live tests that run threads against each other (heartbeats, waits, cancels, frees),
# run again under ThreadSanitizer.
THREADED_LIVE_TESTS = [
    "lease_life_past_three_leases_a_redis_flush_and_a_revoke",
    "waiting_gets_the_seat_released_meanwhile",
    "release_from_the_on_lost_callback",
    "queued_waiters_get_the_seat_in_the_order_they_joined",
    "a_wait_is_cancelled_from_another_thread",
]


def run(args: list[str], env=None, timeout: float = 600, cwd: Path = C_DIR):
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def configure_and_build(build: Path, *options: str) -> Path:
    """libseatlease configured with options into build and built (incrementally)."""
    configure = run(["cmake", "-S", ".", "-B", str(build), *options])
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = run(["cmake", "--build", str(build), "-j2"])
    assert built.returncode == 0, built.stdout[-6000:] + built.stderr[-6000:]
    return build


@pytest.fixture(scope="module")
def c_toolchain() -> None:
    for tool in ("cmake", "cc", "c++", "pkg-config", "valgrind", "nm", "readelf"):
        assert shutil.which(tool), f"{tool} is missing: make test installs it (README)"
    for module in ("libcurl", "libsodium", "libcjson"):
        found = run(["pkg-config", "--exists", module])
        assert found.returncode == 0, f"{module} (-dev) is missing: make test installs it"


@pytest.fixture(scope="module")
def asan_build(c_toolchain) -> Path:
    """libseatlease and its tests with ASan, UBSan and -Werror."""
    return configure_and_build(
        ASAN_BUILD, "-DCMAKE_BUILD_TYPE=Debug", "-DSEATLEASE_SANITIZE=ON", "-DSEATLEASE_WERROR=ON"
    )


def pinned_keys(url: str) -> list[str]:
    """The deployment's public keys' ``x`` (a vendor pins its own)."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/keys", timeout=10) as answer:
        return [key["x"] for key in json.load(answer)["keys"]]


def python_client(stack, machine_id: str | None = BORROW_MACHINE):
    from seatlease_client import SeatClient

    return SeatClient(
        stack.url,
        stack.api_key,
        pinned_keys=pinned_keys(stack.url),
        tenant_id="acme",
        machine_id=machine_id,
        handle_sigterm=False,
    )


def make_licenses(url: str) -> None:
    """The C++ wrapper's licenses, and the one of the borrowed files."""
    for body in (
        {"license_id": "cpp-seat", "seats": 1, "lease_seconds": 30},
        {"license_id": "cpp-temp", "seats": 1, "lease_seconds": 30},
        {
            "license_id": "cpp-terms",
            "seats": 2,
            "lease_seconds": 30,
            "expires_in_seconds": 3600,
            "grace_seconds": 60,
            "entitlements": ["pro", "render"],
            "max_version": "2026.4",
        },
        {"license_id": "c-borrow-files", "seats": 5, "max_borrow_seconds": 86400},
    ):
        post_json(f"{url}/_test/license", body)


def test_the_c_library_passes_its_suites_under_asan_and_ubsan(
    asan_build, client_functions, tmp_path
):
    from seatlease_client._machine import this_machine

    make_licenses(client_functions.url)
    # A seat borrowed by the Python client, for the C suite to load; the C suite leaves one
    # of its own for the Python client, loaded below.
    python = python_client(client_functions)
    from_python, for_python = tmp_path / "from-python.json", tmp_path / "for-python.json"
    python.borrow("c-borrow-files", client_id="py-laptop", seconds=3600, path=from_python)
    with bad_server() as bad_url:
        env = {
            **client_functions.env(),
            "SEATLEASE_BAD_URL": bad_url,
            "SEATLEASE_BAD_PINNED_KEY": KEY_X,
            "SEATLEASE_TEST_PINNED_KEYS": ",".join(pinned_keys(client_functions.url)),
            "SEATLEASE_TEST_MACHINE_ID": BORROW_MACHINE,
            "SEATLEASE_TEST_THIS_MACHINE": this_machine(),
            "SEATLEASE_BORROWED_FROM_PYTHON": str(from_python),
            "SEATLEASE_BORROWED_FOR_PYTHON": str(for_python),
            "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        }
        result = run(["ctest", "--test-dir", str(asan_build), "-V"], env=env, timeout=400)
    output = result.stdout + result.stderr
    (asan_build / "ctest-output.log").write_text(output)  # the whole of it, to read after
    assert result.returncode == 0, output[-10000:]
    assert "ERROR: AddressSanitizer" not in output and "runtime error:" not in output
    assert "LeakSanitizer" not in output, output[-6000:]
    assert "--- SKIP" not in output and "--- FAIL" not in output, output[-6000:]
    # CI runs every suite: ctest reports none skipped (a skipping suite exits 77, its
    # SKIP_RETURN_CODE, and would show as "Skipped" here)
    assert "Skipped" not in output and "Not Run" not in output, output[-6000:]
    assert re.search(r"100% tests passed, 0 tests failed out of 6\b", output), output[-3000:]
    passed = re.findall(r"--- PASS: (\S+)", output)
    assert len([name for name in passed if name.startswith("every_vector/")]) >= 31
    assert len([name for name in passed if name.startswith("every_bad_answer_is_a_typed")]) >= 21
    for name in LIVE_TESTS + BEHAVIOUR_TESTS + OTHER_TESTS + IDLE_TESTS:
        assert name in passed, (name, output[-4000:])
    summaries = re.findall(r"seatlease-c (\w+): (\d+) passed, (\d+) failed, (\d+) skipped", output)
    suites = {"vectors", "bad_answers", "live", "idle", "cpp", "abi"}
    assert {suite for suite, *_ in summaries} == suites
    assert all(failed == skipped == "0" for _, _, failed, skipped in summaries), summaries
    # The seat the C client borrowed loads in the Python client (and returns from there).
    seat = python.load_borrowed(for_python)
    assert (seat.license_id, seat.client_id, seat.seats) == ("c-borrow-files", "c-laptop", 1)
    assert 3000 < seat.seconds_left <= 3600 and not seat.expired
    assert seat.return_early()["released"] is True and not for_python.exists()
    python.load_borrowed(from_python).return_early()
    _, live = post_json(f"{client_functions.url}/_test/live?license_id=c-borrow-files", {})
    assert live == []


def test_the_threaded_c_tests_pass_under_threadsanitizer(c_toolchain, client_functions):
    """The heartbeat thread, waits, cancels from another thread, a client freed while its
    leases go on other threads, the deferred free: no data race."""
    build = configure_and_build(
        TSAN_BUILD, "-DCMAKE_BUILD_TYPE=Debug", "-DSEATLEASE_TSAN=ON", "-DSEATLEASE_WERROR=ON"
    )
    env = {**client_functions.env(), "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1"}
    with bad_server() as bad_url:
        env["SEATLEASE_BAD_URL"] = bad_url
        env["SEATLEASE_BAD_PINNED_KEY"] = KEY_X
        behaviours = run([str(build / "test_bad_answers"), *BEHAVIOUR_TESTS], env=env, timeout=300)
        live = run([str(build / "test_live"), *THREADED_LIVE_TESTS], env=env, timeout=300)
    idle = run([str(build / "test_idle")], env=env, timeout=300)
    for result, names in (
        (behaviours, BEHAVIOUR_TESTS),
        (live, THREADED_LIVE_TESTS),
        (idle, IDLE_TESTS),
    ):
        output = result.stdout + result.stderr
        assert result.returncode == 0 and "ThreadSanitizer" not in output, output[-8000:]
        assert re.findall(r"--- PASS: (\S+)", output) == names, output[-4000:]


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
    env = {**os.environ, "HOLD_WRAPPER": valgrind}
    env["SEATLEASE_PINNED_KEYS"] = ",".join(pinned_keys(client_functions.url))
    example = subprocess.Popen(
        ["./hold", client_functions.url, client_functions.api_key, "c-hold-vg", "pc-vg"],
        cwd=C_DIR,
        env=env,
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


# -- installed, found as usual -------------------------------------------------------------

CONSUMER = r"""
#include <stdio.h>
#include <string.h>
#include <seatlease.h>

/* the product's own sl_ name: the static library's internal one must not collide */
int sl_log(void) { return 7; }

int main(int argc, char **argv) {
    if (argc != 3 || seatlease_global_init() != SEATLEASE_OK) return 2;
    if (seatlease_version_number() < SEATLEASE_VERSION_NUMBER || sl_log() != 7) return 3;
    seatlease_client *client = NULL;
    seatlease_answer *answer = NULL;
    seatlease_options options;
    seatlease_options_init(&options);
    const char *pinned[] = {argv[2]}; /* the vendor's key, pinned */
    options.pinned_keys = pinned;
    options.pinned_key_count = 1;
    int ok = seatlease_client_new(argv[1], "sl_test", &options, &client, NULL) == SEATLEASE_OK &&
             seatlease_acquire(client, "lic", "pc-1", NULL, &answer, NULL) == SEATLEASE_OK;
    printf("%s %s\n", seatlease_version(), ok ? seatlease_answer_session_id(answer) : "-");
    seatlease_answer_free(answer);
    seatlease_client_free(client);
    seatlease_global_cleanup();
    return ok ? 0 : 1;
}
"""

CONSUMER_PROJECT = """
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(seatlease 0.2 CONFIG REQUIRED COMPONENTS static)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE seatlease::seatlease)
add_executable(consumer_static consumer.c)
target_link_libraries(consumer_static PRIVATE seatlease::seatlease_static)
"""


@pytest.fixture(scope="module")
def installed(c_toolchain, tmp_path_factory) -> Path:
    """libseatlease built (Release, no tests) and installed into a fresh prefix."""
    build = configure_and_build(
        INSTALL_BUILD,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DSEATLEASE_TESTS=OFF",
        "-DSEATLEASE_WERROR=ON",
    )
    prefix = tmp_path_factory.mktemp("prefix")
    done = run(["cmake", "--install", str(build), "--prefix", str(prefix)])
    assert done.returncode == 0, done.stdout + done.stderr
    return prefix


def libdir(prefix: Path) -> Path:
    [pc] = prefix.glob("**/pkgconfig/seatlease.pc")
    return pc.parent.parent


def test_an_installed_libseatlease_is_found_by_pkg_config_and_find_package(installed, tmp_path):
    lib = libdir(installed)
    assert (installed / "include" / "seatlease.h").is_file()
    assert (installed / "include" / "seatlease.hpp").is_file()
    assert (lib / "libseatlease.so.0").exists() and (lib / "libseatlease_static.a").is_file()
    assert (lib / "cmake" / "seatlease" / "seatleaseConfig.cmake").is_file()
    (tmp_path / "consumer.c").write_text(CONSUMER)
    (tmp_path / "CMakeLists.txt").write_text(CONSUMER_PROJECT)
    pkg_env = {**os.environ, "PKG_CONFIG_PATH": str(lib / "pkgconfig")}
    version = (REPO / "shared" / "clients" / "VERSION").read_text().strip()
    assert version == "0.3.0"
    assert run(["pkg-config", "--modversion", "seatlease"], env=pkg_env).stdout.strip() == version
    programs = []
    for pc, extra in (("seatlease", [f"-Wl,-rpath,{lib}"]), ("seatlease-static", [])):
        flags = run(["pkg-config", "--cflags", "--libs", pc], env=pkg_env)
        assert flags.returncode == 0, flags.stderr
        program = tmp_path / f"by-pkg-config-{pc}"
        compiled = run(
            ["cc", "-std=c11", "-Wall", "-Werror", "consumer.c", "-o", str(program),
             *flags.stdout.split(), *extra],
            cwd=tmp_path,
        )  # fmt: skip
        assert compiled.returncode == 0, compiled.stderr
        programs.append(program)
    build = tmp_path / "build"
    configure = run(
        ["cmake", "-S", str(tmp_path), "-B", str(build), f"-DCMAKE_PREFIX_PATH={installed}"],
        cwd=tmp_path,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = run(["cmake", "--build", str(build)], cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    programs += [build / "consumer", build / "consumer_static"]
    # the shared ones are linked to the installed library, the static ones carry it
    for program in programs:
        linked = run(["ldd", str(program)]).stdout
        assert ("libseatlease.so.0" in linked) == ("static" not in program.name), linked
        if "static" not in program.name:
            assert str(lib) in linked, linked
    with bad_server() as bad_url:
        for program in programs:
            ran = run([str(program), f"{bad_url}/weights", KEY_X], cwd=tmp_path)
            assert ran.returncode == 0, (program, ran.stdout, ran.stderr)
            assert ran.stdout == f"{version} c2Vzc2lvbi0wMDAwMDAwMDAx\n", ran.stdout


def test_the_installed_libraries_show_only_the_api(installed):
    """The shared library exports seatlease_* only; in the static one the internal sl_*
    functions are local symbols (readelf: LOCAL), never a product's name clash."""
    lib = libdir(installed)
    exported = run(["nm", "-D", "--defined-only", str(lib / "libseatlease.so.0")]).stdout
    names = [line.split()[-1] for line in exported.splitlines() if line.strip()]
    assert names and all(name.startswith("seatlease_") for name in names), names
    static = lib / "libseatlease_static.a"
    globals_ = run(["nm", "-g", "--defined-only", str(static)]).stdout
    global_names = [line.split()[-1] for line in globals_.splitlines() if len(line.split()) == 3]
    assert "seatlease_client_new" in global_names
    assert all(name.startswith("seatlease_") for name in global_names), global_names
    symbols = run(["readelf", "-sW", str(static)]).stdout
    internal = [line.split() for line in symbols.splitlines() if re.search(r"\bsl_\w+$", line)]
    assert len(internal) > 20 and all(fields[4] == "LOCAL" for fields in internal), internal


def test_configure_refuses_a_libcurl_older_than_7_85(c_toolchain, tmp_path):
    """The documented minimum versions are checked when CMake configures (the code uses
    libcurl 7.85's CURLOPT_PROTOCOLS_STR): an older libcurl is named there."""
    folder = run(["pkg-config", "--variable=pcfiledir", "libcurl"]).stdout.strip()
    old = re.sub(r"(?m)^Version:.*$", "Version: 7.84.0", (Path(folder) / "libcurl.pc").read_text())
    (tmp_path / "libcurl.pc").write_text(old)
    env = {**os.environ, "PKG_CONFIG_PATH": str(tmp_path)}
    configure = run(["cmake", "-S", ".", "-B", str(tmp_path / "build")], env=env)
    output = configure.stdout + configure.stderr
    assert configure.returncode != 0, output
    assert "libcurl" in output and "7.85.0" in output, output


def test_the_install_prefix_carries_the_license(installed):
    """Apache-2.0 section 4(a): the license's text goes with every copy of the library."""
    license_file = installed / "share" / "doc" / "seatlease" / "LICENSE"
    assert license_file.is_file()
    assert license_file.read_text() == (C_DIR / "LICENSE").read_text()
    assert "Apache License" in license_file.read_text()


def test_a_plain_configure_builds_release_and_a_lone_copy_configures(c_toolchain, tmp_path):
    """CMAKE_BUILD_TYPE unset: Release (optimised), the version from
    shared/clients/VERSION; a copy of the C folder alone (no ../VERSION) takes the
    header's SEATLEASE_VERSION, which CMake checks against VERSION when both are there."""
    version = (REPO / "shared" / "clients" / "VERSION").read_text().strip()
    build = tmp_path / "build"
    configure = run(["cmake", "-S", ".", "-B", str(build), "-DSEATLEASE_TESTS=OFF"])
    assert configure.returncode == 0, configure.stdout + configure.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert "CMAKE_BUILD_TYPE:STRING=Release" in cache, cache[:2000]
    assert f"CMAKE_PROJECT_VERSION:STATIC={version}" in cache
    lone = tmp_path / "vendored" / "seatlease-c"
    shutil.copytree(C_DIR, lone, ignore=shutil.ignore_patterns("build", "build-*"))
    configure = run(["cmake", "-S", str(lone), "-B", str(lone / "build"), "-DSEATLEASE_TESTS=OFF",
                     "-DCMAKE_BUILD_TYPE=Debug"])  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    cache = (lone / "build" / "CMakeCache.txt").read_text()
    assert "CMAKE_BUILD_TYPE:STRING=Debug" in cache  # a build type asked is kept
    assert f"CMAKE_PROJECT_VERSION:STATIC={version}" in cache
    # a VERSION beside it that disagrees with the header is refused at configure
    (lone.parent / "VERSION").write_text("9.9.9\n")
    configure = run(["cmake", "-S", str(lone), "-B", str(tmp_path / "disagrees")])
    assert configure.returncode != 0 and "9.9.9" in configure.stdout + configure.stderr


def test_ctest_reports_a_suite_without_its_server_as_skipped(asan_build):
    """Without SEATLEASE_BAD_URL and SEATLEASE_TEST_URL the server suites skip their
    tests: ctest says Skipped (SKIP_RETURN_CODE 77), never Passed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEATLEASE_")}
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    result = run(
        ["ctest", "--test-dir", str(asan_build), "-R", "^(test_live|test_abi_0_1|test_vectors)$"],
        env=env, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"test_live \.+\*+Skipped", output), output
    assert re.search(r"test_abi_0_1 \.+\*+Skipped", output), output
    assert re.search(r"test_vectors \.+ +Passed", output), output


def test_one_connection_serves_a_clients_calls_and_heartbeats(asan_build):
    """A lease's grant, the JWKS, its heartbeats, a plain heartbeat and the release: one
    TCP connection accepted by the server (kept alive), not one per request. (werkzeug's
    development server closes every connection: the bad server's scenarios are served
    here by a small HTTP/1.1 keep-alive server that counts the connections it accepts.)"""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from client_bad_server import app
    from werkzeug.test import Client

    accepted: list[object] = []
    wsgi = Client(app)

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            accepted.append(self.client_address)
            super().setup()

        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            reply = wsgi.open(self.path, method=self.command, data=body,
                              headers={"Content-Type": "application/json"})  # fmt: skip
            data = reply.get_data()
            self.send_response(reply.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, "SEATLEASE_BAD_URL": f"http://127.0.0.1:{server.server_port}",
               "SEATLEASE_BAD_PINNED_KEY": KEY_X}  # fmt: skip
        result = run(
            [str(asan_build / "test_bad_answers"), "one_connection_reused_per_client"],
            env=env, timeout=120,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "--- PASS: one_connection_reused_per_client" in output, output
    assert len(accepted) == 1, accepted
