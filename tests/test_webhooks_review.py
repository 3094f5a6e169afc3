"""Hostile review of issue 51's webhooks: each test is a broken promise of the issue,
written as it should hold and marked xfail(strict) until fixed. Real receivers (threads of
this process) and the real PostgreSQL database, as tests/test_webhook_delivery.py."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text
from webhook_receiver import Receiver, receiving

from seatlease.admin import webhooks as admin_webhooks
from seatlease.errors import InvalidRequest
from seatlease.records import db
from seatlease.records import store as records
from seatlease.webhooks import crypto, deliver, store, urls
from seatlease.webhooks.store import DELIVERED


@pytest.fixture
def receiver(database_url, monkeypatch):
    """The private database without webhooks, tenants acme and globex, loopback allowed
    (the local stack), a WEBHOOK_KEY, and a receiver."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    monkeypatch.setenv("WEBHOOK_RETRY_FIRST_SECONDS", "30")
    with db.get_engine().begin() as conn:
        conn.execute(
            text(
                "TRUNCATE webhook_attempts, webhook_deliveries, webhook_endpoints RESTART IDENTITY"
            )
        )
    records.create_tenant("acme")
    records.create_tenant("globex")
    with receiving() as served:
        yield served


def event(event_id: str, tenant: str = "acme") -> dict:
    return {
        "event_id": event_id,
        "type": "lease.acquired",
        "tenant_id": tenant,
        "license_id": "cad",
        "session_id": "s1",
        "client_id": "c1",
        "occurred_at": "2026-11-29T08:00:00.000Z",
        "seats_used": 1,
        "seats_total": 5,
        "metadata": {},
    }


# -- 1. SSRF: an IPv6 site-local address passes as public ------------------------------


def test_a_name_resolving_to_an_ipv6_site_local_address_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        urls.check_url("https://hook.example.com/", local=False,
                       resolve=lambda _host, _port: ["fec0::1"])  # fmt: skip


# -- 2. one tenant's slow endpoints hold every other tenant's deliveries -----------------


def test_a_tenants_slow_endpoints_do_not_delay_another_tenants_delivery(receiver: Receiver):
    slow_seconds = 4.0
    for i in range(store.MAX_ENDPOINTS):
        receiver.delays[f"/slow{i}"] = slow_seconds
        store.create_endpoint("acme", receiver.url(f"/slow{i}"))
    store.create_endpoint("globex", receiver.url("/fast"))
    store.enqueue([event(f"evt-acme-{n}") for n in range(4)])  # 80 slow deliveries

    run = threading.Thread(
        target=deliver.deliver_due,
        kwargs={"budget_seconds": 8.0, "timeout_seconds": slow_seconds + 2},
        daemon=True,
    )
    run.start()
    deadline = time.monotonic() + 5
    # (acme fills what a run gives one tenant: PER_TENANT_IN_RUN of its slots)
    while sum(receiver.active.values()) < deliver.PER_TENANT_IN_RUN:
        assert time.monotonic() < deadline, "the slow sends never filled the tenant's share"
        time.sleep(0.02)

    queued_at = time.monotonic()
    assert store.enqueue([event("evt-globex", tenant="globex")]) == 1
    (fast,) = receiver.wait_for("/fast", 1, seconds=15)
    run.join(20)
    waited = fast.came - queued_at
    assert waited < 1.5, f"globex's delivery waited {waited:.1f} s behind acme's slow endpoints"
    assert store.deliveries("globex")[0]["state"] == DELIVERED


# -- 3. a tenant's "send test" sends every tenant's backlog, and waits for it -----------


def test_a_tenants_test_send_neither_sends_nor_waits_for_another_tenants_deliveries(
    receiver: Receiver,
):
    receiver.delays["/slow"] = 4.0
    store.create_endpoint("acme", receiver.url("/slow"))
    store.enqueue([event("evt-acme-slow")])  # due now: the retry run's to send
    globex_endpoint, _secret = store.create_endpoint("globex", receiver.url("/fast"))

    started = time.monotonic()
    status, answer = admin_webhooks.HANDLERS[admin_webhooks.WebhookTest](
        admin_webhooks.WebhookTest(
            action="webhook_test", tenant_id="globex", endpoint_id=globex_endpoint["id"]
        )
    )
    took = time.monotonic() - started
    assert (status, answer["state"]) == (200, DELIVERED)
    sent_for_acme = len(receiver.at("/slow"))
    assert (sent_for_acme, round(took, 1) < 2.0) == (0, True), (
        f"globex's test sent {sent_for_acme} of acme's deliveries and answered in {took:.1f} s"
    )


# -- 4. a URL accepted at creation that no send can ever carry ---------------------------


def test_a_url_with_a_non_ascii_path_is_refused_or_delivered(receiver: Receiver):
    url = receiver.url("/h\u00e9")
    try:
        endpoint, _secret = store.create_endpoint("acme", url)
    except InvalidRequest:
        return  # refused at creation: as good as delivered
    store.enqueue([event("evt-accent")])
    deliver.deliver_due()
    (attempt,) = store.deliveries("acme", endpoint["id"])
    assert attempt["state"] == DELIVERED, attempt["error"]
