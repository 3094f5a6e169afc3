"""seatlease_client (Python) against the real functions on real Redis and PostgreSQL: a
license's term and entitlements on the lease (``entitlements``, ``license_expires_at``,
``in_grace``, ``max_version``), the four typed refusals, and a held lease lost with the
reason ``license_expired`` when the license ends its leases. The Node and Go clients run
the same story in their live suites (tests/test_client_node.py, tests/test_client_go.py)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from seatlease.api import runtime
from seatlease.records import store
from seatlease_client import (
    LicenseExpired,
    LicenseNotStarted,
    LicenseSuspended,
    NotEntitled,
    SeatClient,
    VersionNotEntitled,
)


def make_license(license_id: str, **fields) -> None:
    store.create_license("acme", license_id, **fields)
    runtime.refresh_license_cache("acme", license_id)


def test_term_entitlements_typed_errors_and_the_end(client_functions):
    now = datetime.now(UTC)
    make_license(
        "py-term", seats=2, lease_seconds=60,
        expires_at=now + timedelta(seconds=1.5), grace_seconds=1,
        entitlements=["pro", "render"], max_version="2026.4",
    )  # fmt: skip
    make_license("py-later", seats=1, starts_at=now + timedelta(hours=1))
    client = SeatClient(
        client_functions.url, client_functions.api_key, tenant_id="acme",
        backoff=0.05, handle_sigterm=False, pinned_keys=client_functions.pinned_keys(),
    )  # fmt: skip
    lost = threading.Event()
    reasons: list[str] = []

    def on_lost(_lease, reason: str) -> None:
        reasons.append(reason)
        lost.set()

    with client.lease(
        "py-term", client_id="ws-1", entitlements=["pro"], version="2026.4", on_lost=on_lost
    ) as lease:
        assert lease.entitlements == ["pro", "render"] and lease.max_version == "2026.4"
        assert lease.license_expires_at is not None and not lease.in_grace
        with pytest.raises(NotEntitled) as missing:
            client.acquire("py-term", "ws-2", entitlements=["pro", "cloud"])
        assert missing.value.missing_entitlements == ["cloud"]
        assert isinstance(missing.value, LicenseSuspended)  # code for a refused license
        with pytest.raises(VersionNotEntitled) as above:
            client.acquire("py-term", "ws-2", version="2026.10")
        assert above.value.max_version == "2026.4"
        with pytest.raises(LicenseNotStarted) as later:
            client.acquire("py-later", "ws-2")
        assert later.value.starts_at
        time.sleep(max(0.0, lease.license_expires_at.timestamp() - time.time()) + 0.2)
        assert client.acquire("py-term", "ws-3")["in_grace"] is True
        time.sleep(1.2)
        with pytest.raises(LicenseExpired) as ended:
            client.acquire("py-term", "ws-4")
        assert ended.value.expired_at
        assert lost.wait(5), "the lease is lost at the license's end"
        assert reasons[0] == "license_expired" and lease.lost


def test_the_async_client_sends_what_the_product_needs(client_functions):
    import asyncio

    from seatlease_client import AsyncSeatClient

    make_license("py-async", seats=1, entitlements=["pro"], max_version="2026.4")
    client = AsyncSeatClient(
        client_functions.url, client_functions.api_key, backoff=0.05, handle_sigterm=False,
        pinned_keys=client_functions.pinned_keys(),
    )  # fmt: skip

    async def story() -> None:
        with pytest.raises(NotEntitled):
            async with client.lease("py-async", client_id="a-1", entitlements=["cloud"]):
                pass
        with pytest.raises(VersionNotEntitled):
            async with client.lease("py-async", client_id="a-1", version="2027"):
                pass
        async with client.lease(
            "py-async", client_id="a-1", entitlements=["pro"], version="2026.4"
        ) as lease:
            assert lease.entitlements == ["pro"] and lease.max_version == "2026.4"

    asyncio.run(story())
