"""Issue 31, item 7: what customers and their end users name (key labels, tenant names,
users, hosts) can never drive an operator's terminal. The API refuses control characters
in them (400 naming the field), and the CLI shows any that reach it by another way (a
lease's metadata, a row written before the rule) as text: ``\\x1b``, never ESC.

Real PostgreSQL and redis-server; the CLI runs in-process in direct mode and the
functions through functions-framework's test clients."""

from __future__ import annotations

import pytest
from http_support import Tenant, acquire, call, error_of, new_license

import seatlease_cli as cli
from seatlease import admin
from seatlease.api.runtime import seat_engine
from seatlease.errors import InvalidRequest
from seatlease.records import store
from seatlease.seats.engine import SeatRequest

ATTACK = "\x1b]0;title\x07\x1b[2J\x1b[31mFAKE"
CONTROLS = ["\x1b[2J", "a\x00b", "tab\there", "line\nbreak", "csi\x9b31m", "del\x7f", "\r"]
RAW = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) not in "\n\t"]


@pytest.mark.parametrize("text", CONTROLS)
@pytest.mark.parametrize("field", ["user", "host"])
def test_acquire_refuses_control_characters_in_user_and_host(
    acme: Tenant, field: str, text: str
) -> None:
    new_license(acme, "cad")
    error = error_of(acquire(acme, "cad", "ws-1", **{field: text}), 400, "invalid_request")
    assert [d["field"] for d in error["details"]] == [field]
    assert "control character" in error["message"] or "NUL" in error["message"]


@pytest.mark.parametrize("text", CONTROLS)
def test_admin_refuses_control_characters_in_labels_and_names(acme: Tenant, text: str) -> None:
    for action, field in (
        ({"action": "apikey.create", "tenant_id": "acme", "label": text}, "label"),
        ({"action": "tenant.create", "tenant_id": "globex", "name": text}, "name"),
        ({"action": "tenant.update", "tenant_id": "acme", "name": text}, "name"),
    ):
        with pytest.raises(InvalidRequest) as refused:
            admin.parse(action)
        assert [d["field"] for d in refused.value.fields["details"]] == [field]
    answer = call("admin", {"action": "apikey.create", "tenant_id": "acme", "label": text})
    error = error_of(answer, 400, "invalid_request")
    assert error["details"][0]["field"] == "label"
    assert len(store.list_api_keys("acme")) == 1  # only the fixture's


def test_printable_text_stays_allowed(acme: Tenant) -> None:
    new_license(acme, "cad")
    taken = acquire(acme, "cad", "ws-1", user="Zoë Åström", host="ws-017 (büro)")
    assert taken.status_code == 201
    parsed = admin.parse({"action": "apikey.create", "tenant_id": "acme", "label": "CI — Zoë"})
    assert parsed.label == "CI — Zoë"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_and_apikey_list_show_escapes_as_text(acme: Tenant, stack, capsys) -> None:
    """The issue's attack, stored the ways the API cannot stop: a lease's metadata (any
    JSON text) and a label written straight into the database (before the rule)."""
    new_license(acme, "cad")
    seat_engine().acquire(
        SeatRequest("acme", "cad", "ws-1", metadata={"user": ATTACK, "host": ATTACK + "\x9b2J"})
    )
    store.create_api_key("acme", ATTACK)
    for argv in (("status", "--tenant", "acme"), ("apikey", "list", "--tenant", "acme")):
        code, out, err = _run(capsys, *argv)
        assert code == 0, err
        assert not any(c in out + err for c in RAW), repr(out)
        assert "\\x1b]0;title\\x07\\x1b[2J\\x1b[31mFAKE" in out
    # An error message quoting what the caller typed is shown the same way.
    code, out, err = _run(capsys, "status", "--tenant", "acme", "--license", "x\x1b[2J")
    assert code != 0 and not any(c in out + err for c in RAW), repr(err)


def test_json_output_stays_exact(acme: Tenant, stack, capsys) -> None:
    import json

    store.create_api_key("acme", ATTACK)
    code, out, _ = _run(capsys, "apikey", "list", "--tenant", "acme", "--json")
    assert code == 0 and "\x1b" not in out
    assert ATTACK in [k["label"] for k in json.loads(out)["api_keys"]]
