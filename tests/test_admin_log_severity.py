"""The admin function's own log line (issue 52): a change is a NOTICE, a caller's 4xx (a
bad request, a license not found, a conflict) is INFO, not a WARNING that fills the CI
log, and a 5xx (a backend down) stays an ERROR."""

from __future__ import annotations

import pytest
from http_support import call, log_lines

from seatlease.seats import redisconn


def admin_line(capsys, body: dict) -> tuple[int, dict]:
    capsys.readouterr()
    response = call("admin", body)
    lines = [line for line in log_lines(capsys.readouterr().out) if line.get("message", "")
             .startswith("admin ")]  # fmt: skip
    assert len(lines) == 1, lines
    return response.status_code, lines[0]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"action": "no-such-action"}, 400),
        ({"action": "status", "tenant_id": "acme", "license_id": "nope"}, 404),
        ({"action": "tenant.create", "tenant_id": "acme"}, 409),
    ],
)
def test_a_callers_4xx_is_info(acme_cad, capsys, body, status) -> None:
    answered, line = admin_line(capsys, body)
    assert answered == status
    assert line["severity"] == "INFO", line
    assert line["message"].startswith(f"admin {status}")


def test_a_change_is_a_notice_and_a_5xx_an_error(acme_cad, capsys, monkeypatch) -> None:
    answered, line = admin_line(capsys, {"action": "tenant.create", "tenant_id": "globex"})
    assert (answered, line["severity"]) == (201, "NOTICE"), line
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    redisconn.reset()
    answered, line = admin_line(capsys, {"action": "status", "tenant_id": "acme"})
    assert answered == 503
    assert line["severity"] == "ERROR", line
    redisconn.reset()
