"""The ``portal`` function's API: a tenant admin key sees and frees its own tenant's seats
and manages its seat keys, and nothing else. Through functions_framework's test client on
real Redis and PostgreSQL (the page in a real browser: tests/test_portal_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from http_support import (
    Tenant,
    acquire,
    call,
    error_of,
    heartbeat,
    new_license,
    new_tenant,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seatlease.api import auth
from seatlease.apikeys import hash_key
from seatlease.errors import RateLimited
from seatlease.portal import actions as portal
from seatlease.records import event_log, store
from seatlease.seats import keys, ratelimit
from seatlease.seats.redisconn import get_redis


def admin_of(tenant: Tenant) -> Tenant:
    made = store.create_api_key(tenant.tenant_id, label="it", scope="admin")
    return Tenant(tenant.tenant_id, made.key, made.prefix)


def ask(key: Tenant, action: str, **fields: Any):
    return call("portal", {"action": action, **fields}, tenant=key)


@pytest.fixture
def beta(acme: Tenant) -> Tenant:
    """A second tenant with a license of the same id as acme's, one of its own, and a
    live lease on each."""
    other = new_tenant("beta")
    new_license(other, "cad", seats=2)
    new_license(other, "beta-only", seats=2)
    assert acquire(other, "cad", "beta-ws").status_code == 201
    assert acquire(other, "beta-only", "beta-ws").status_code == 201
    return other


def test_status_shows_the_tenants_licenses_and_leases_only(acme: Tenant, beta: Tenant) -> None:
    new_license(acme, "cad", seats=3)
    meta = {"user": "ann", "host": "pc-7", "site": "lyon"}
    session = acquire(acme, "cad", "laptop-1", metadata=meta).get_json()["session_id"]
    admin = admin_of(acme)

    answer = ask(admin, "status")
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert body["tenant_id"] == "acme"
    assert [lic["license_id"] for lic in body["licenses"]] == ["cad"]
    cad = body["licenses"][0]
    assert (cad["seats_used"], cad["seats"], cad["tenant_id"]) == (1, 3, "acme")
    [lease] = cad["leases"]
    assert lease["session_id"] == session and lease["client_id"] == "laptop-1"
    assert (lease["user"], lease["host"], lease["metadata"]) == ("ann", "pc-7", meta)
    assert lease["borrowed"] is False and lease["acquired_at"].endswith("Z")
    assert "beta-ws" not in answer.get_data(as_text=True)


def test_status_gives_each_lease_its_seats(acme: Tenant) -> None:
    """The portal's lease list reads each lease's ``seats`` (a render node's lease of 4)
    and the license's weighted ``seats_used``; the page draws a Seats column from them
    (portal.js; tests/test_portal_browser.py)."""
    new_license(acme, "cad", seats=8)
    assert acquire(acme, "cad", "render-1", seats=4).get_json()["seats"] == 4
    acquire(acme, "cad", "laptop-1")
    [cad] = ask(admin_of(acme), "status").get_json()["licenses"]
    assert cad["seats_used"] == 5
    assert {lease["client_id"]: lease["seats"] for lease in cad["leases"]} == {
        "render-1": 4,
        "laptop-1": 1,
    }


def test_status_says_which_lease_is_idle_and_which_shares_a_seat(acme: Tenant) -> None:
    """Issue 50: the portal's lease list reads each lease's ``idle_reclaim_at`` (warned by
    the idle rule), ``shared`` and ``shared_sessions``, and the license's idle and sharing
    settings; the page says "idle, reclaimed at ... unless used" and "shared by N
    sessions" from them (portal.js; tests/test_portal_browser.py)."""
    new_license(acme, "cad", seats=2, idle_timeout_seconds=600, idle_reclaim="always")
    new_license(acme, "cam", seats=1, share="user", share_limit=4)
    idle = acquire(acme, "cad", "ws-1").get_json()["session_id"]
    acquire(acme, "cad", "ws-2")
    beat = heartbeat(acme, "cad", idle, idle_seconds=601)
    assert beat.status_code == 200 and beat.get_json()["idle_reclaim_at"]
    for client in ("pc-1", "pc-2"):
        assert acquire(acme, "cam", client, metadata={"user": "ann"}).status_code == 201
    body = ask(admin_of(acme), "status").get_json()
    cad, cam = body["licenses"]
    assert (cad["idle_timeout_seconds"], cad["idle_reclaim"], cad["share"]) == (
        600, "always", "none")  # fmt: skip
    assert (cam["share"], cam["share_limit"], cam["idle_timeout_seconds"]) == ("user", 4, 0)
    states = {x["client_id"]: x["idle_reclaim_at"] for x in cad["leases"]}
    assert states == {"ws-1": beat.get_json()["idle_reclaim_at"], "ws-2": None}
    assert cam["seats_used"] == 1
    shared = {x["client_id"]: (x["shared"], x["shared_sessions"]) for x in cam["leases"]}
    assert shared == {"pc-1": ("ann", 2), "pc-2": ("ann", 2)}


def test_scopes_are_separate_both_ways(acme: Tenant) -> None:
    new_license(acme, "cad")
    admin = admin_of(acme)
    error = error_of(ask(acme, "status"), 403, "forbidden")  # a seat key at the portal
    assert "admin key" in error["message"]
    error_of(acquire(admin, "cad", "ws-1"), 403, "forbidden")  # an admin key taking a seat
    error_of(call("portal", {"action": "status"}), 401, "unauthenticated")


def _same_answer(one, other, *ids: str) -> None:
    """Two refusals that differ only in the ids the caller sent itself."""
    assert one.status_code == other.status_code == 404
    texts = [r.get_data(as_text=True) for r in (one, other)]
    for found, made_up in zip(ids[::2], ids[1::2], strict=True):
        texts[1] = texts[1].replace(made_up, found)
    assert texts[0] == texts[1]


def test_another_tenants_objects_are_404_like_ones_that_do_not_exist(
    acme: Tenant, beta: Tenant
) -> None:
    new_license(acme, "cad")
    admin = admin_of(acme)
    beta_admin = admin_of(beta)
    beta_status = ask(beta_admin, "status").get_json()["licenses"]
    beta_cad = next(lic for lic in beta_status if lic["license_id"] == "cad")["leases"][0]
    beta_only = next(lic for lic in beta_status if lic["license_id"] == "beta-only")["leases"][0]

    # status of another tenant's license
    _same_answer(
        ask(admin, "status", license_id="beta-only"),
        ask(admin, "status", license_id="no-such-lic"),
        "beta-only",
        "no-such-lic",
    )
    # revoke: another tenant's license, and another tenant's session on a license of the
    # same id as one of ours
    _same_answer(
        ask(admin, "revoke", license_id="beta-only", session_id=beta_only["session_id"]),
        ask(admin, "revoke", license_id="no-such-lic", session_id=beta_only["session_id"]),
        "beta-only",
        "no-such-lic",
    )
    _same_answer(
        ask(admin, "revoke", license_id="cad", session_id=beta_cad["session_id"]),
        ask(admin, "revoke", license_id="cad", session_id="NoSuchSession123"),
        beta_cad["session_id"],
        "NoSuchSession123",
    )
    # usage of another tenant's license
    _same_answer(
        ask(admin, "usage", license_id="beta-only"),
        ask(admin, "usage", license_id="no-such-lic"),
        "beta-only",
        "no-such-lic",
    )
    # keys: another tenant's seat key, and our own tenant's admin key, are not ours to revoke
    _same_answer(
        ask(admin, "keys.revoke", prefix=beta.prefix),
        ask(admin, "keys.revoke", prefix="sl_00000000"),
        beta.prefix,
        "sl_00000000",
    )
    error_of(ask(admin, "keys.revoke", prefix=admin.prefix), 404, "not_found")
    listed = ask(admin, "keys.list").get_json()["api_keys"]
    assert [k["prefix"] for k in listed] == [acme.prefix]  # seat keys of acme only
    # Nothing of beta's changed.
    assert heartbeat(beta, "beta-only", beta_only["session_id"]).status_code == 200
    assert heartbeat(beta, "cad", beta_cad["session_id"]).status_code == 200
    assert acquire(beta, "cad", "beta-ws-2").status_code == 201  # beta's key still works


def test_revoke_frees_the_seat_and_is_in_the_audit_trail(acme: Tenant) -> None:
    new_license(acme, "cad", seats=1)
    session = acquire(acme, "cad", "laptop-1").get_json()["session_id"]
    admin = admin_of(acme)
    freed = ask(admin, "revoke", license_id="cad", session_id=session)
    assert freed.status_code == 200, freed.get_json()
    assert freed.get_json()["revoked"] is True and freed.get_json()["client_id"] == "laptop-1"
    assert ask(admin, "status").get_json()["licenses"][0]["leases"] == []
    error_of(heartbeat(acme, "cad", session), 410, "session_expired")
    assert acquire(acme, "cad", "laptop-2").status_code == 201  # the seat is free
    error_of(ask(admin, "revoke", license_id="cad", session_id=session), 404, "session_not_found")

    trail = store.list_portal_actions("acme")
    assert [(r["action"], r["status"], r["session_id"]) for r in trail[-3:]] == [
        ("revoke", 200, session),
        ("status", 200, None),
        ("revoke", 404, session),
    ]
    assert {r["key_prefix"] for r in trail} == {admin.prefix}


def test_every_action_is_recorded_with_the_keys_prefix(acme: Tenant) -> None:
    new_license(acme, "cad")
    admin = admin_of(acme)
    made = ask(admin, "keys.create", label="farm").get_json()
    steps = [
        ("status", {}),
        ("usage", {"days": 30}),
        ("keys.list", {}),
        ("keys.revoke", {"prefix": made["prefix"]}),
    ]
    for action, fields in steps:
        assert ask(admin, action, **fields).status_code == 200
    trail = store.list_portal_actions("acme")
    assert [r["action"] for r in trail] == ["keys.create", "status", "usage", "keys.list",
                                            "keys.revoke"]  # fmt: skip
    assert [r["status"] for r in trail] == [201, 200, 200, 200, 200]
    assert all(r["key_prefix"] == admin.prefix for r in trail)
    assert trail[0]["target_prefix"] == trail[-1]["target_prefix"] == made["prefix"]
    assert "sl_" not in str(trail).replace(admin.prefix, "").replace(made["prefix"], "")


def _event(event_id: str, kind: str, session: str, at: datetime, used: int) -> dict:
    return {
        "event_id": event_id,
        "type": kind,
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": session,
        "client_id": f"client-{session}",
        "occurred_at": at,
        "seats_used": used,
        "seats_total": 4,
        "metadata": {},
    }


def test_usage_covers_a_bounded_window_with_timelines(acme: Tenant) -> None:
    new_license(acme, "cad", seats=4)
    admin = admin_of(acme)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    event_log.insert_events(
        [
            _event("e1", "lease.acquired", "s1", start + timedelta(minutes=5), 1),
            _event("e2", "lease.acquired", "s2", start + timedelta(minutes=10), 2),
            _event("e3", "lease.released", "s1", start + timedelta(minutes=70), 1),
        ]
    )
    week = ask(admin, "usage", period="hour").get_json()
    assert (week["days"], week["period"], week["tenant_id"]) == (7, "hour", "acme")
    since, until = (week[k] for k in ("since", "until"))
    assert until > since and until.endswith(":00:00Z")
    assert [t["license_id"] for t in week["timelines"]] == ["cad"]
    line = week["timelines"][0]
    assert line["seats"] == 4
    peaks = {at: used for at, used, *_rest in line["points"]}
    assert max(peaks.values()) == 2
    assert peaks[start.isoformat().replace("+00:00", "Z")] == 2
    month = ask(admin, "usage", days=30, period="day").get_json()
    assert (month["days"], month["period"]) == (30, "day")
    assert month["until"].endswith("T00:00:00Z")
    # how many seats it needed, for this tenant's licenses only (issue 41)
    sizing = week["sizing"]
    assert set(sizing) == {lic["license_id"] for lic in store.list_licenses("acme")}
    assert sizing["cad"]["recommended_seats"]["p100"] == 2
    assert sizing["cad"]["verdict"] == "oversized" and sizing["cad"]["seats"] == 4
    assert sizing["cad"]["sentence"].startswith("No client was turned away")


def test_usage_draws_exact_steps_for_a_short_history(acme: Tenant) -> None:
    """Issue 34, item 9: without a period, a window of at most 1,500 changes is answered
    as exact steps (one per change, up to now), as the CLI's --by auto; more, by hour."""
    new_license(acme, "cad", seats=4)
    admin = admin_of(acme)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    event_log.insert_events(
        [
            _event("e1", "lease.acquired", "s1", start + timedelta(minutes=5), 1),
            _event("e2", "lease.acquired", "s2", start + timedelta(minutes=10), 2),
            _event("e3", "lease.released", "s1", start + timedelta(minutes=70), 1),
        ]
    )
    for days in (7, 30):
        body = ask(admin, "usage", days=days).get_json()
        assert (body["days"], body["period"]) == (days, "exact")
        (line,) = body["timelines"]
        iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
        assert line["steps"] == [
            {"at": body["since"], "seats": 0},
            {"at": iso(start + timedelta(minutes=5)), "seats": 1},
            {"at": iso(start + timedelta(minutes=10)), "seats": 2},
            {"at": iso(start + timedelta(minutes=70)), "seats": 1},
        ]
        assert line["end"] <= iso(datetime.now(UTC)) and line["end_level"] == 1
    assert ask(admin, "usage", period="exact").get_json()["period"] == "exact"
    busy = start + timedelta(minutes=80)
    kinds = ("lease.acquired", "lease.released")
    busy_events = [
        _event(f"b{n}", kinds[n % 2], f"b{n // 2}", busy + timedelta(seconds=n), 3 - n % 2)
        for n in range(1498)
    ]
    event_log.insert_events(busy_events)
    assert ask(admin, "usage").get_json()["period"] == "hour"  # 1,501 changes


def test_seat_keys_are_created_shown_once_and_revoked(acme: Tenant) -> None:
    new_license(acme, "cad")
    admin = admin_of(acme)
    made = ask(admin, "keys.create", label="build farm")
    assert made.status_code == 201
    body = made.get_json()
    assert body["scope"] == "seat" and body["key"].startswith(body["prefix"] + "_")
    new_key = Tenant("acme", body["key"], body["prefix"])
    assert acquire(new_key, "cad", "farm-1").status_code == 201
    listed = ask(admin, "keys.list").get_json()["api_keys"]
    assert [k["label"] for k in listed] == ["", "build farm"]
    assert body["key"] not in str(listed) and all(k["scope"] == "seat" for k in listed)

    gone = ask(admin, "keys.revoke", prefix=body["prefix"])
    assert gone.status_code == 200 and gone.get_json()["revoked"] is True
    error_of(acquire(new_key, "cad", "farm-2"), 401, "unauthenticated")
    listed = ask(admin, "keys.list").get_json()["api_keys"]
    assert [k["active"] for k in listed] == [True, False]


def test_a_revoked_admin_key_is_refused_within_the_cache_ttl(acme: Tenant, monkeypatch) -> None:
    """The vendor revokes the key (``seatlease apikey revoke``: database + the shared Redis
    entry); this process, like any running portal instance, still holds its in-process
    copy, which must lapse within LOCAL_TTL. LOCAL_TTL is shortened to 1 s so the test
    waits it out instead of 15 s; the mechanism is the same."""
    monkeypatch.setattr(auth, "LOCAL_TTL", 1.0)
    admin = admin_of(acme)
    assert ask(admin, "status").status_code == 200  # cached in this process
    key_hash = store.revoke_api_key(admin.prefix)
    get_redis().delete(keys.api_key_cache_key(key_hash))  # what the revoking process does
    revoked_at = time.monotonic()
    while ask(admin, "status").status_code == 200:
        assert time.monotonic() - revoked_at < auth.LOCAL_TTL + 0.5, "still accepted"
        time.sleep(0.05)
    error_of(ask(admin, "status"), 401, "unauthenticated")
    assert time.monotonic() - revoked_at <= auth.LOCAL_TTL + 0.5


BAD_INPUT = [
    ({"action": "launch"}, "action"),
    ({}, "action"),
    ({"action": "status", "license_id": "no spaces"}, "license_id"),
    ({"action": "status", "tenant_id": "beta"}, "tenant_id"),  # unknown field: no tenant pick
    ({"action": "revoke", "license_id": "cad"}, "session_id"),
    ({"action": "revoke", "license_id": 7, "session_id": "s"}, "license_id"),
    ({"action": "usage", "days": 0}, "days"),
    ({"action": "usage", "days": 91}, "days"),
    ({"action": "usage", "days": "7"}, "days"),
    ({"action": "usage", "period": "week"}, "period"),
    ({"action": "keys.list", "scope": "admin"}, "scope"),
    ({"action": "keys.create", "label": "x" * 300}, "label"),
    ({"action": "keys.create", "scope": "admin"}, "scope"),
    ({"action": "keys.revoke", "prefix": "sl_XYZ"}, "prefix"),
    ({"action": "keys.revoke"}, "prefix"),
]


@pytest.mark.parametrize(("body", "field"), BAD_INPUT)
def test_bad_input_on_every_action_is_400_naming_the_field(acme: Tenant, body, field) -> None:
    admin = admin_of(acme)
    error = error_of(call("portal", body, tenant=admin), 400, "invalid_request")
    assert field in [d["field"] for d in error["details"]], error
    assert field in error["message"]


def test_bad_bodies_and_methods(acme: Tenant) -> None:
    admin = admin_of(acme)
    error_of(call("portal", data="{", tenant=admin), 400, "invalid_request")
    error_of(call("portal", data="[1]", tenant=admin), 400, "invalid_request")
    error_of(call("portal", {"action": "status"}, tenant=admin, content_type="text/plain"),
             415, "unsupported_media_type")  # fmt: skip
    refused = call("portal", method="PUT", tenant=admin)
    error_of(refused, 405, "method_not_allowed")
    assert refused.headers["Allow"] == "GET, HEAD, POST"


def test_calls_are_limited_per_key(acme: Tenant, monkeypatch) -> None:
    monkeypatch.setenv(portal.RATE_LIMIT_ENV, "3")
    admin, other = admin_of(acme), admin_of(acme)
    for _ in range(3):
        assert ask(admin, "keys.list").status_code == 200
    error = error_of(ask(admin, "keys.list"), 429, "rate_limited")
    assert 1 <= error["retry_after_seconds"] <= portal.RATE_PERIOD_SECONDS
    assert ask(other, "keys.list").status_code == 200  # per key, not per tenant
    refused = ask(admin, "status")
    assert refused.headers["Retry-After"] == str(refused.get_json()["error"]["retry_after_seconds"])


def test_the_limit_holds_under_concurrent_calls(redis_url: str) -> None:
    """40 threads, 5 calls each, limit 60 in one window: exactly 60 pass (the counter is
    one INCR, atomic in Redis), whatever the interleaving. The window is pinned (``now``)
    so that a window edge during the run cannot let a second window's calls through."""
    redis = get_redis()
    now = time.time()
    passed: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(40)

    def caller() -> None:
        start.wait()
        for _ in range(5):
            try:
                ratelimit.hit(redis, "test", "sl_concurrent", 60, 60, now=now)
            except RateLimited:
                continue
            with lock:
                passed.append(1)

    threads = [threading.Thread(target=caller) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(passed) == 60
    # The next window starts from zero; the counter expires on its own.
    assert ratelimit.hit(redis, "test", "sl_concurrent", 60, 60, now=now + 60) == 1
    window_key = keys.rate_limit_key("test", "sl_concurrent", int(now) // 60)
    assert 60 < redis.ttl(window_key) <= 120


def test_get_serves_the_page_with_a_strict_policy(acme: Tenant) -> None:
    served = call("portal", method="GET", content_type=None)
    assert served.status_code == 200
    assert served.mimetype == "text/html"
    html = served.get_data(as_text=True)
    policy = served.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    [script] = re.findall(r'<script type="module">(.*?)</script>', html, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", html, re.S)
    for text, directive in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy
    # No inline handlers, no HTML parsing of values, nothing from elsewhere.
    assert not re.search(r"\son[a-z]+\s*=", html)
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    head = call("portal", method="HEAD", content_type=None)
    assert head.status_code == 200 and head.get_data() == b""


def test_the_audit_row_never_holds_a_key(acme: Tenant) -> None:
    admin = admin_of(acme)
    made = ask(admin, "keys.create").get_json()
    row = store.list_portal_actions("acme")[-1]
    assert made["key"] not in str(row) and admin.key not in str(row)
    assert hash_key(made["key"]) not in str(row)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)
FIELDS = ("license_id", "session_id", "days", "period", "label", "prefix", "tenant_id")
ANY_ACTION = st.sampled_from([*portal.ACTIONS, "apikey.create", ""]) | st.text(max_size=12)
ANY_FIELDS = st.dictionaries(
    st.sampled_from(FIELDS), JSON_VALUES | st.text(max_size=140), max_size=4
)


@pytest.fixture
def fuzz_admin(acme: Tenant, monkeypatch) -> Tenant:
    """One admin key (and a license) for all of a hypothesis test's examples."""
    monkeypatch.setenv(portal.RATE_LIMIT_ENV, "1000000")
    new_license(acme, "cad")
    return admin_of(acme)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(action=ANY_ACTION, fields=ANY_FIELDS)
def test_no_body_gets_a_server_error(fuzz_admin: Tenant, action, fields) -> None:
    """Whatever the body, the answer is the contract's: a success, a 400 naming a field,
    or a 404; never a 5xx."""
    answer = call("portal", {"action": action, **fields}, tenant=fuzz_admin)
    assert answer.status_code in (200, 201, 400, 404), answer.get_data(as_text=True)
    if answer.status_code == 400:
        assert answer.get_json()["error"]["details"][0]["field"]
