"""LOG_LEVEL never silences what the monitoring counts (issue 33, item 4).

The client functions' request lines and the reaper's "reaper run" line are INFO; the
log-based metrics count them (the 5xx ratio's denominator, the "no successful reaper
run" alert). A deployed function (Cloud Run sets ``K_SERVICE``) therefore runs at INFO
at most: ``LOG_LEVEL=WARNING`` or ``ERROR`` is refused by Terraform
(tests/terraform/test_third_review.py) and, set by hand, ignored with one WARNING line.
Off Cloud Run (the local stack, the CLI) the level is still the operator's.
"""

from __future__ import annotations

import pytest
from http_support import Tenant, acquire, log_lines, new_license

from seatlease import logs


@pytest.mark.parametrize("level", ["WARNING", "ERROR", "CRITICAL"])
def test_a_deployed_function_writes_its_request_line_at_any_log_level(
    level: str, acme: Tenant, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("K_SERVICE", "acquire")
    monkeypatch.setenv("LOG_LEVEL", level)
    logs.configure()  # what the first log line of a cold start does
    [warning] = log_lines(capsys.readouterr().out)
    assert warning["severity"] == "WARNING" and f"LOG_LEVEL={level} ignored" in warning["message"]
    license_id = new_license(acme, f"cad-{level.lower()}")
    assert acquire(acme, license_id, "ws-1").status_code == 201
    lines = [line for line in log_lines(capsys.readouterr().out) if line.get("status")]
    assert [(line["severity"], line["function"], line["status"]) for line in lines] == [
        ("INFO", "acquire", 201)
    ]
    logs.log("INFO", "reaper run", function="reaper", status=200, reclaimed=0)
    [run] = log_lines(capsys.readouterr().out)
    assert run["message"] == "reaper run"


@pytest.mark.parametrize("level", ["DEBUG", "INFO"])
def test_a_deployed_function_keeps_debug_and_info(
    level: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("K_SERVICE", "acquire")
    monkeypatch.setenv("LOG_LEVEL", level)
    logs.configure()
    logs.log("DEBUG", "detail")
    assert [line["message"] for line in log_lines(capsys.readouterr().out)] == (
        ["detail"] if level == "DEBUG" else []
    )


def test_off_cloud_run_log_level_is_the_operators(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The local stack runs at WARNING by default: its stdout stays quiet."""
    monkeypatch.delenv("K_SERVICE", raising=False)
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    logs.configure()
    logs.log("INFO", "acquire 201 acquired", function="acquire", status=201)
    logs.log("WARNING", "kept")
    assert [line["message"] for line in log_lines(capsys.readouterr().out)] == ["kept"]
