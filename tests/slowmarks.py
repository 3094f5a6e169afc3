"""Which tests are ``slow``: they start a toolchain, a browser, the Pub/Sub emulator or a
whole local stack, build packages, or need a PostgreSQL database. ``pytest -m "not slow"``
leaves them out, as a fast inner loop of the pure and Redis-only tests; CI runs
everything.

conftest.py marks them at collection from these declarations; tests/test_slow_marks.py
checks the declarations name tests that exist and that every test starting one of these
things is among them.
"""

from __future__ import annotations

# Whole modules, with what each starts.
SLOW_MODULES: dict[str, str] = {
    "test_client_c.py": "cmake builds of the C client and its ctest suites under sanitizers",
    "test_client_go.py": "go vet and go test -race of the Go client",
    "test_client_java.py": "mvn package of the Java client and its JUnit suite",
    "test_client_node.py": "npm ci, tsc and node --test of the Node client",
    "test_client_holds.py": "each client's hold, built by its toolchain",
    "test_client_wheel.py": "the client's wheel built and installed into a fresh venv",
    "test_function_archive.py": "the functions' source archives built and their locks installed",
    "test_portal_browser.py": "Chromium through chromedriver on a local stack",
    "test_localstack.py": "the local stack with the Pub/Sub emulator",
    "test_localstack_heal.py": "the local stack, a private PostgreSQL, processes killed",
    "test_idle_share_http.py": "the local stack with the Pub/Sub emulator, on PostgreSQL",
    "test_local_no_pubsub.py": "seatlease local as a process, used for over 20 s",
    "test_readme_tour.py": "the README tour played on a local stack",
    "test_tour_chart.py": "the tour's chart rendered after a hold on a local stack",
    "test_deploy_guide.py": "the deploy guide played by bash against served functions",
    "test_replay.py": "a Pub/Sub emulator of its own",
    "test_webhooks_local.py": "the local stack with the Pub/Sub emulator, on PostgreSQL",
}

# Single tests in modules whose other tests are fast, as "module::function".
SLOW_TESTS: dict[str, str] = {
    "test_reaper.py::test_pubsub_down_keeps_the_outbox_and_the_next_run_delivers": (
        "a Pub/Sub emulator of its own, stopped and started again"
    ),
    "test_closed_stays_closed.py::test_a_revoke_stays_final_across_a_restart_of_the_local_stack": (
        "the local stack, started twice"
    ),
    "test_cli_habits.py::test_a_second_local_stack_in_the_same_folder_is_refused": (
        "seatlease local as a process"
    ),
    "test_cli_habits.py::test_a_stale_record_is_replaced_saying_so": "seatlease local as a process",
    "terraform/test_fmt_and_checkov.py::test_terraform_fmt_check_recursive": "terraform fmt",
    "terraform/test_fmt_and_checkov.py::test_fmt_check_detects_bad_formatting": "terraform fmt",
    "terraform/test_fmt_and_checkov.py::test_checkov_passes_with_only_justified_skips": (
        "checkov, installed into a venv of its own on the first run"
    ),
    "terraform/test_stack_wiring.py::test_minimum_terraform_is_the_declared_one": (
        "the oldest allowed terraform, installed on the first run"
    ),
    "terraform/test_stack_wiring.py::"
    "test_terraform_validates_and_plans_the_env_with_its_example_tfvars": (
        "terraform init, validate and plan"
    ),
    "terraform/test_stack_wiring.py::test_terraform_rejects_a_broken_call": (
        "terraform validate of broken trees"
    ),
}

# Fixtures that start something slow: a test using one, directly or through another
# fixture, is slow wherever it is.
# The inner loop is the pure and Redis-only tests: a test that needs PostgreSQL (a private
# database made and migrated for it: the HTTP functions, the audit trail, the reports, the
# CLI) is left to the full run.
SLOW_FIXTURES: frozenset[str] = frozenset({"pubsub_emulator", "postgres_admin_url"})
