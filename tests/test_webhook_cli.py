"""``seatlease webhook create|list|delete|rotate-secret|test|deliveries`` (issue 51): in
direct mode (DATABASE_URL + REDIS_URL, in-process through ``seatlease_cli.main``) and
against the admin function served on loopback (``--admin-url``), on real PostgreSQL and
redis-server, with a real receiver on loopback; deliveries verified with
``standardwebhooks``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import serving
from sqlalchemy import text
from standardwebhooks import Webhook
from test_webhook_admin import (  # the receiver and the webhook settings
    REPO,
    Receiver,
    endpoint_rows,
    receiving,
    webhook_settings,
)

import seatlease_cli as cli
from seatlease.records import db
from seatlease_cli import EXIT_NOT_FOUND, EXIT_USAGE

pytestmark = pytest.mark.usefixtures("webhook_env")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiving()


@pytest.fixture
def webhook_env(stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from webhook_settings(monkeypatch)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> Any:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("seatlease: ")
    return lines[0]


def tenants(capsys, *names: str) -> None:
    for name in names:
        assert run(capsys, "tenant", "create", name)[0] == 0
        made = run(
            capsys, "license", "create", "--tenant", name, "--license", "cad", "--seats", "2"
        )
        assert made[0] == 0, made[2]


def test_create_prints_the_id_and_the_secret_once_as_the_last_line(
    capsys, receiver: Receiver
) -> None:
    tenants(capsys, "acme")
    code, out, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url,
                         "--event", "lease.acquired", "--event", "webhook.test",
                         "--license", "cad")  # fmt: skip
    assert code == 0, err
    secret = out.splitlines()[-1]
    assert secret.startswith("whsec_")
    [row] = endpoint_rows()
    assert row["id"] in out and receiver.url in out
    assert "shown only once" in out

    code, out, err = run(capsys, "webhook", "list", "--tenant", "acme")
    assert code == 0, err
    assert row["id"] in out and "lease.acquired,webhook.test" in out and "cad" in out
    assert secret not in out
    listed = run_json(capsys, "webhook", "list", "--tenant", "acme")
    assert [e["id"] for e in listed["endpoints"]] == [row["id"]]
    assert secret not in json.dumps(listed)

    made = run_json(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url)
    assert made["secret"].startswith("whsec_") and made["secret"] != secret
    assert made["endpoint"]["event_types"] == [] and made["endpoint"]["license_ids"] == []
    code, out, _ = run(capsys, "webhook", "list", "--tenant", "acme")
    assert made["endpoint"]["id"] in out and "all" in out


def test_a_private_address_is_refused_with_exit_2_and_nothing_is_stored(
    capsys, receiver: Receiver
) -> None:
    tenants(capsys, "acme")
    for url in ("http://10.1.2.3/hook", "https://169.254.169.254/", "https://[::ffff:10.0.0.1]/"):
        code, out, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url", url)
        assert code == EXIT_USAGE, (url, out, err)
        line = one_line_error(err)
        assert "url" in line.lower() and out == ""
    code, _, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url,
                       "--event", "lease.exploded")  # fmt: skip
    assert code == EXIT_USAGE and "lease.exploded" in one_line_error(err)
    code, _, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url,
                       "--license", "nope")  # fmt: skip
    assert code == EXIT_NOT_FOUND and "nope" in one_line_error(err)
    code, _, err = run(capsys, "webhook", "create", "--tenant", "acm", "--url", receiver.url)
    assert code == EXIT_NOT_FOUND and "acm" in one_line_error(err)
    assert endpoint_rows() == []
    assert receiver.requests == []


def test_another_tenants_endpoint_is_exit_3(capsys, receiver: Receiver) -> None:
    tenants(capsys, "acme", "beta")
    theirs = run_json(capsys, "webhook", "create", "--tenant", "beta", "--url", receiver.url)
    their_id = theirs["endpoint"]["id"]
    for command in ("delete", "rotate-secret", "test", "deliveries"):
        code, out, err = run(capsys, "webhook", command, "--tenant", "acme", "--endpoint", their_id)
        assert code == EXIT_NOT_FOUND, (command, out, err)
        assert their_id in one_line_error(err) and theirs["secret"] not in err + out
    assert [
        e["id"] for e in run_json(capsys, "webhook", "list", "--tenant", "beta")["endpoints"]
    ] == [their_id]
    assert receiver.requests == []


def test_test_rotate_deliveries_and_delete(capsys, receiver: Receiver) -> None:
    tenants(capsys, "acme")
    made = run_json(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url)
    endpoint_id, secret = made["endpoint"]["id"], made["secret"]
    one = ("--tenant", "acme", "--endpoint", endpoint_id)

    code, out, err = run(capsys, "webhook", "test", *one)
    assert code == 0, err
    assert "HTTP 200" in out and "delivered" in out
    [payload] = receiver.verified(secret)
    assert payload["type"] == "webhook.test"

    receiver.statuses = [503]
    code, out, err = run(capsys, "webhook", "test", *one)
    assert code == 1 and "HTTP 503" in out and "pending" in out  # retried later: not ok yet

    attempts = run_json(capsys, "webhook", "deliveries", *one)
    assert [(a["type"], a["status"], a["state"]) for a in attempts] == [
        ("webhook.test", 503, "pending"),
        ("webhook.test", 200, "delivered"),
    ]
    for attempt in attempts:  # each attempt: time, status, latency, error
        assert attempt["at"].endswith("Z") and attempt["latency_ms"] >= 0
        assert "error" in attempt
    assert attempts[1]["event_id"] == payload["id"]
    assert secret not in json.dumps(attempts)
    code, out, _ = run(capsys, "webhook", "deliveries", "--tenant", "acme")
    assert code == 0 and out.count("webhook.test") == 2 and "503" in out and "200" in out
    assert len(run_json(capsys, "webhook", "deliveries", "--tenant", "acme", "--limit", "1")) == 1

    code, out, err = run(capsys, "webhook", "rotate-secret", *one)
    assert code == 0, err
    new = out.splitlines()[-1]
    assert new.startswith("whsec_") and new != secret and "old one keeps signing" in out
    code, out, _ = run(capsys, "webhook", "list", "--tenant", "acme")
    assert new not in out and secret not in out

    code, out, err = run(capsys, "webhook", "delete", *one)
    assert code == 0 and endpoint_id in out, err
    assert endpoint_rows() == []
    code, _, err = run(capsys, "webhook", "delete", *one)
    assert code == EXIT_NOT_FOUND and endpoint_id in one_line_error(err)


def test_over_http_the_same_exit_codes(capsys, receiver: Receiver) -> None:
    """``--admin-url``: the admin function served on loopback answers 400/404, which the
    CLI turns into the same exit codes as in direct mode."""
    import functions_framework

    tenants(capsys, "acme")
    app = functions_framework.create_app("admin", str(REPO / "functions" / "admin" / "main.py"))
    with serving(app, quiet=True) as base:
        url = ("--admin-url", f"{base}/")
        code, out, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url",
                             "http://10.1.2.3/hook", *url)  # fmt: skip
        assert code == EXIT_USAGE and "10.1.2.3" in one_line_error(err)
        code, out, err = run(capsys, "webhook", "create", "--tenant", "acme", "--url",
                             receiver.url, *url)  # fmt: skip
        assert code == 0 and out.splitlines()[-1].startswith("whsec_"), err
        code, out, err = run(capsys, "webhook", "test", "--tenant", "acme", "--endpoint",
                             "whe_nope", *url)  # fmt: skip
        assert code == EXIT_NOT_FOUND, err


def test_rekey_rotates_webhook_key_and_receivers_notice_nothing(
    capsys, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WEBHOOK_KEY's rotation (docs/operations.md): endpoints made under OLD (one with a
    rotated secret: two sealed secrets), then ``NEW,OLD`` and ``webhook rekey``, then NEW
    alone: every secret opens and signs as before. A second rekey changes nothing; an
    endpoint sealed under a key nobody has is listed, exit 1, and left as it was."""
    from seatlease.webhooks import crypto, store

    tenants(capsys, "acme")
    old, new = crypto.new_key(), crypto.new_key()
    monkeypatch.setenv("WEBHOOK_KEY", old)
    made = [run_json(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url)
            for _ in range(2)]  # fmt: skip
    rotated = run_json(capsys, "webhook", "rotate-secret", "--tenant", "acme", "--endpoint",
                       made[1]["endpoint"]["id"])  # fmt: skip

    monkeypatch.setenv("WEBHOOK_KEY", f"{new},{old}")
    code, out, err = run(capsys, "webhook", "rekey")
    assert code == 0, err
    assert f"under key {crypto.box().key_id}: 3 sealed again, 0 already" in out
    assert run_json(capsys, "webhook", "rekey") | {"key_id": None} == {
        "key_id": None, "resealed": 0, "current": 3, "forgotten": 0, "unreadable": []}  # fmt: skip

    monkeypatch.setenv("WEBHOOK_KEY", new)
    # each endpoint's secrets sign as before (the rotated one's old secret too, in its
    # overlap), verified by the Standard Webhooks library
    for body, secrets in ((made[0], [made[0]["secret"]]),
                          (made[1], [rotated["secret"], made[1]["secret"]])):  # fmt: skip
        one = ("--tenant", "acme", "--endpoint", body["endpoint"]["id"])
        code, out, err = run(capsys, "webhook", "test", *one)
        assert code == 0 and "HTTP 200" in out, err
        headers, sent = receiver.requests[-1]
        for secret in secrets:
            assert Webhook(secret).verify(sent, headers)["type"] == "webhook.test"

    # an endpoint sealed under a key nobody holds: listed, exit 1, untouched
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    lost = run_json(capsys, "webhook", "create", "--tenant", "acme", "--url", receiver.url)
    monkeypatch.setenv("WEBHOOK_KEY", new)
    before = {r["id"]: r["secret_enc"] for r in endpoint_rows()}
    code, out, err = run(capsys, "webhook", "rekey")
    assert code == 1 and f"{lost['endpoint']['id']}: its secrets open under no key" in out
    assert {r["id"]: r["secret_enc"] for r in endpoint_rows()} == before
    assert store.reseal_secrets()["unreadable"] == [lost["endpoint"]["id"]]

    # its tenant rotates it (the documented repair): the new secret is under NEW, the lost
    # one stays beside it for its overlap. Each secret on its own: the readable one counts
    # as current; the endpoint is still listed until the unreadable one's overlap ends,
    # and then it is forgotten.
    lost_one = ("--tenant", "acme", "--endpoint", lost["endpoint"]["id"])
    assert run(capsys, "webhook", "rotate-secret", *lost_one)[0] == 0
    report = store.reseal_secrets()
    assert report["unreadable"] == [lost["endpoint"]["id"]] and report["resealed"] == 0
    with db.get_engine().begin() as conn:
        past = "now() - interval '1 second'"
        conn.execute(text(f"UPDATE webhook_endpoints SET old_secret_until = {past} WHERE id = :i"),
                     {"i": lost["endpoint"]["id"]})  # fmt: skip
    report = run_json(capsys, "webhook", "rekey")
    assert report["unreadable"] == [] and report["forgotten"] == 1
    lost_row = next(r for r in endpoint_rows() if r["id"] == lost["endpoint"]["id"])
    assert lost_row["old_secret_enc"] is None and lost_row["old_secret_until"] is None
