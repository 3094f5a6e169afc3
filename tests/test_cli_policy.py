"""``seatlease license create|update|show`` with the policy flags, and ``status`` showing
the wait queue, against the real PostgreSQL and redis-server of the fixtures."""

from __future__ import annotations

import json

import pytest

import seatlease_cli as cli
from seatlease.api import runtime
from seatlease.records import store
from seatlease.seats.engine import SeatRequest


@pytest.fixture
def stack(stack):
    """conftest's, with the tenant these tests share."""
    store.create_tenant("acme")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_policy_flags_create_update_show_and_clear(stack, capsys):
    code, out, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "5",
        "--max-per-user", "2", "--group", "eng=ann,bob", "--group", "ops=olga",
        "--reserve", "eng=2", "--reserve", "ops=1", "--deny-user", "mallory", "--queue",
    )  # fmt: skip
    assert code == 0, err
    assert "max 2 per user; group eng=ann,bob (reserve 2); group ops=olga (reserve 1); " in out
    assert "deny mallory; queue on (ticket 60 s, hold 30 s)" in out
    policy = store.get_license("acme", "cad")["policy"]
    assert policy["groups"] == {"eng": ["ann", "bob"], "ops": ["olga"]}
    # update changes the given fields and keeps the rest
    code, out, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad",
        "--reserve", "eng=1", "--queue-hold-seconds", "10", "--json",
    )  # fmt: skip
    assert code == 0, err
    changed = json.loads(out)["license"]["policy"]
    assert changed["reserve"] == {"eng": 1, "ops": 1} and changed["queue_hold_seconds"] == 10
    assert changed["max_per_user"] == 2 and changed["deny_users"] == ["mallory"]
    code, out, _ = run(capsys, "license", "show", "--tenant", "acme", "--license", "cad")
    assert code == 0 and "hold 10 s" in out
    code, out, _ = run(capsys, "license", "update", "--tenant", "acme", "--license", "cad",
                       "--clear-policy")  # fmt: skip
    assert code == 0 and store.get_license("acme", "cad")["policy"] is None
    code, out, _ = run(capsys, "license", "show", "--tenant", "acme", "--license", "cad")
    assert "policy" in out and "none" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--reserve", "eng=9", "--group", "eng=ann"], "reserve"),  # over the 5 seats
        (["--reserve", "ops=1"], "unknown group"),
        (["--max-per-user", "-1"], "max_per_user"),
    ],
)
def test_bad_policy_flags_exit_2_and_store_nothing(stack, capsys, argv, words):
    code, _, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "5",
        *argv,
    )  # fmt: skip
    assert code == 2 and words in err and "Traceback" not in err
    assert store.get_license("acme", "cad") is None


def test_malformed_named_flags_are_usage_errors(stack, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["license", "create", "--tenant", "acme", "--license", "cad", "--seats", "2",
                  "--reserve", "eng"])  # fmt: skip
    assert exited.value.code == 2
    assert "expected NAME=N" in capsys.readouterr().err


def test_status_shows_the_queue(stack, capsys):
    store.create_license("acme", "cad", seats=1, policy={"queue": True})
    runtime.refresh_license_cache("acme", "cad")
    engine = runtime.seat_engine()
    engine.acquire(SeatRequest("acme", "cad", "holder", user="hal"))
    engine.acquire(SeatRequest("acme", "cad", "waiter", user="wendy", host="pc-9", queue=True))
    code, out, _ = run(capsys, "status", "--tenant", "acme")
    assert code == 0
    assert "queue: 1 waiting" in out
    assert "waiter" in out and "wendy" in out and "pc-9" in out
