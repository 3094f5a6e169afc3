"""The tenant portal's webhook actions (issue 51): a tenant admin key manages its own
tenant's endpoints only, through the ``portal`` function's test client on real PostgreSQL
and redis-server, with a real receiver on loopback; deliveries verified with
``standardwebhooks``. And the page: its Webhooks section (endpoints, recent deliveries,
"send test") and the actions its script calls."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import Tenant, call, error_of, new_license, new_tenant
from test_webhook_admin import (  # the receiver and the webhook settings
    Receiver,
    endpoint_rows,
    receiving,
    webhook_settings,
)

from seatlease import logs
from seatlease.portal import actions as portal
from seatlease.portal.page import page
from seatlease.records import store

pytestmark = pytest.mark.usefixtures("webhook_env")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiving()


@pytest.fixture
def webhook_env(stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from webhook_settings(monkeypatch)


WEBHOOK_ACTIONS = (
    "webhook_create",
    "webhook_list",
    "webhook_delete",
    "webhook_rotate_secret",
    "webhook_test",
    "webhook_deliveries",
)


def admin_of(tenant: Tenant) -> Tenant:
    made = store.create_api_key(tenant.tenant_id, label="it", scope="admin")
    return Tenant(tenant.tenant_id, made.key, made.prefix)


def ask(key: Tenant, action: str, **fields: Any):
    return call("portal", {"action": action, **fields}, tenant=key)


@pytest.fixture
def acme_admin(acme: Tenant) -> Tenant:
    new_license(acme, "cad")
    return admin_of(acme)


@pytest.fixture
def beta_admin(acme: Tenant) -> Tenant:
    beta = new_tenant("beta")
    new_license(beta, "cad")
    return admin_of(beta)


def test_a_tenant_admin_creates_lists_tests_rotates_and_deletes_its_endpoints(
    acme_admin: Tenant, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    made = ask(acme_admin, "webhook_create", url=receiver.url, event_types=["lease.acquired"],
               license_ids=["cad"])  # fmt: skip
    assert made.status_code == 201, made.get_json()
    secret = made.get_json()["secret"]
    endpoint = made.get_json()["endpoint"]
    assert secret.startswith("whsec_") and endpoint["tenant_id"] == "acme"
    assert made.headers["Cache-Control"] == "no-store"

    listed = ask(acme_admin, "webhook_list")
    assert listed.status_code == 200
    assert [e["id"] for e in listed.get_json()["endpoints"]] == [endpoint["id"]]
    assert secret not in listed.get_data(as_text=True)

    sent = ask(acme_admin, "webhook_test", endpoint_id=endpoint["id"])
    assert sent.status_code == 200, sent.get_json()
    assert sent.get_json()["state"] == "delivered"
    [payload] = receiver.verified(secret)
    assert (payload["type"], payload["tenant_id"]) == ("webhook.test", "acme")

    recent = ask(acme_admin, "webhook_deliveries", endpoint_id=endpoint["id"])
    [attempt] = recent.get_json()["attempts"]
    assert (attempt["event_id"], attempt["status"], attempt["state"]) == (
        payload["id"], 200, "delivered")  # fmt: skip
    assert ask(acme_admin, "webhook_deliveries").get_json()["attempts"] == [attempt]

    rotated = ask(acme_admin, "webhook_rotate_secret", endpoint_id=endpoint["id"])
    assert rotated.status_code == 200 and rotated.get_json()["secret"] != secret
    for answer in (ask(acme_admin, "webhook_list"), ask(acme_admin, "webhook_deliveries")):
        shown = answer.get_data(as_text=True)
        assert secret not in shown and rotated.get_json()["secret"] not in shown

    gone = ask(acme_admin, "webhook_delete", endpoint_id=endpoint["id"])
    assert gone.status_code == 200 and gone.get_json()["deleted"] is True
    assert ask(acme_admin, "webhook_list").get_json()["endpoints"] == []

    # each action is in the portal's audit trail, with the admin key's prefix and the
    # endpoint it made or named
    trail = [(r["action"], r["status"], r["key_prefix"], r["endpoint_id"])
             for r in store.list_portal_actions("acme")]  # fmt: skip
    named = endpoint["id"]
    assert trail == [
        ("webhook_create", 201, acme_admin.prefix, named),
        ("webhook_list", 200, acme_admin.prefix, None),
        ("webhook_test", 200, acme_admin.prefix, named),
        ("webhook_deliveries", 200, acme_admin.prefix, named),
        ("webhook_deliveries", 200, acme_admin.prefix, None),
        ("webhook_rotate_secret", 200, acme_admin.prefix, named),
        ("webhook_list", 200, acme_admin.prefix, None),
        ("webhook_deliveries", 200, acme_admin.prefix, None),
        ("webhook_delete", 200, acme_admin.prefix, named),
        ("webhook_list", 200, acme_admin.prefix, None),
    ]
    # a change's log line is NOTICE, a look's INFO; each names the endpoint
    severities = {
        (r.getMessage(), getattr(r, "fields", {}).get("endpoint_id")): logs._SEVERITY[r.levelno]
        for r in caplog.records
        if r.getMessage().startswith("portal ")
    }
    assert severities[("portal 201 webhook_create", None)] == "NOTICE"
    assert severities[("portal 200 webhook_delete", named)] == "NOTICE"
    assert severities[("portal 200 webhook_rotate_secret", named)] == "NOTICE"
    assert severities[("portal 200 webhook_test", named)] == "NOTICE"
    assert severities[("portal 200 webhook_list", None)] == "INFO"


def test_another_tenants_endpoint_is_404_like_one_that_does_not_exist(
    acme_admin: Tenant, beta_admin: Tenant, receiver: Receiver
) -> None:
    theirs = ask(beta_admin, "webhook_create", url=receiver.url).get_json()
    their_id = theirs["endpoint"]["id"]
    for action in ("webhook_delete", "webhook_rotate_secret", "webhook_test",
                   "webhook_deliveries"):  # fmt: skip
        mine = ask(acme_admin, action, endpoint_id=their_id)
        made_up = ask(acme_admin, action, endpoint_id="whe_0123456789abcdef01234567")
        error_of(mine, 404, "not_found")
        assert mine.get_data(as_text=True).replace(their_id, "X") == made_up.get_data(
            as_text=True
        ).replace("whe_0123456789abcdef01234567", "X")
        assert theirs["secret"] not in mine.get_data(as_text=True)
    assert ask(acme_admin, "webhook_list").get_json()["endpoints"] == []
    assert [e["id"] for e in ask(beta_admin, "webhook_list").get_json()["endpoints"]] == [their_id]
    assert receiver.requests == []  # acme's "send test" of beta's endpoint sent nothing
    # and acme cannot name another tenant: the portal's actions take no tenant_id
    error_of(ask(acme_admin, "webhook_list", tenant_id="beta"), 400, "invalid_request")
    error_of(ask(acme_admin, "webhook_create", url=receiver.url, tenant_id="beta"), 400,
             "invalid_request")  # fmt: skip
    assert [e["tenant_id"] for e in map(dict, endpoint_rows())] == ["beta"]


def test_bad_input_is_a_clear_400_and_nothing_is_stored_or_sent(
    acme_admin: Tenant, beta_admin: Tenant, receiver: Receiver
) -> None:
    error = error_of(ask(acme_admin, "webhook_create", url="http://10.1.2.3/hook"), 400,
                     "invalid_request")  # fmt: skip
    assert error["details"][0]["field"] == "url" and "private" in error["details"][0]["problem"]
    error = error_of(ask(acme_admin, "webhook_create", url=receiver.url,
                         event_types=["seat.stolen"]), 400, "invalid_request")  # fmt: skip
    assert "seat.stolen" in error["message"]
    error_of(ask(acme_admin, "webhook_create", url=receiver.url, event_types="lease.acquired"),
             400, "invalid_request")  # fmt: skip
    error_of(ask(acme_admin, "webhook_create", url=receiver.url, license_ids=["beta-only"]),
             404, "not_found")  # fmt: skip
    error_of(ask(acme_admin, "webhook_create"), 400, "invalid_request")
    error_of(ask(acme_admin, "webhook_test", endpoint_id=""), 400, "invalid_request")
    error_of(ask(acme_admin, "webhook_deliveries", limit=100_000), 400, "invalid_request")
    assert endpoint_rows() == [] and receiver.requests == []


def test_a_seat_key_and_no_key_cannot_manage_webhooks(acme: Tenant, receiver: Receiver) -> None:
    new_license(acme, "cad")
    error_of(ask(acme, "webhook_create", url=receiver.url), 403, "forbidden")
    error_of(call("portal", {"action": "webhook_list"}), 401, "unauthenticated")
    assert endpoint_rows() == []


def test_the_page_has_the_webhooks_section_and_calls_the_actions() -> None:
    """The page's Webhooks section (endpoints, recent deliveries, a "Send test" button, the
    new secret's box) and the actions its script calls are the portal's (a browser drives
    the rest of the page: tests/test_portal_browser.py)."""
    html, headers = page()
    text = html.decode()
    for element in ('id="webhooks"', 'id="webhook-deliveries"', 'id="new-webhook-form"',
                    'id="new-webhook-url"', 'id="new-webhook-secret-value"'):  # fmt: skip
        assert element in text, element
    assert "Send test" in text
    called = set(re.findall(r'call\("(webhook_\w+)"', text))
    assert called == set(WEBHOOK_ACTIONS) and called <= set(portal.ACTIONS)
    # every value from the server is set as text, never as HTML
    assert "innerHTML" not in text and "insertAdjacentHTML" not in text
    assert "script-src 'sha256-" in headers["Content-Security-Policy"]
