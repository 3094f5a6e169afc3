"""The per-user report (``seatlease report usage --by user``, action ``report.users``):
events made by the real seat engine (user on acquire, the wait queue), stored through
the audit insert on real PostgreSQL, then read per license and user."""

from __future__ import annotations

import json

from http_support import Tenant, new_license

from seatlease import admin, audit, keys, pubsub, runtime
from seatlease_cli import main


def store_outbox(tenant: str, license_id: str) -> int:
    eng = runtime.seat_engine()
    stream = keys.outbox_key(keys.shard_of(tenant, license_id))
    events = [
        e
        for e in pubsub.outbox_events(eng.redis, stream)  # the shard's: other tests' too
        if (e["tenant_id"], e["license_id"]) == (tenant, license_id)
    ]
    decoded = audit.decode_events(json.dumps(events).encode())  # the audit function's path
    assert decoded.rejected == []
    return audit.store(decoded.events)


def test_leases_and_time_queued_per_user(acme: Tenant, capsys) -> None:
    lic = new_license(acme, "cad", seats=1, policy={"queue": True})
    eng = runtime.seat_engine()
    ann = eng.acquire("acme", lic, "a1", user="ann", host="pc-1")
    place = eng.acquire("acme", lic, "b1", user="bob", queue=True)
    assert place.position == 1
    eng.release("acme", lic, ann.session_id)
    bob = eng.acquire("acme", lic, "b1", user="bob", queue=True, ticket=place.ticket)
    assert bob.created
    eng.release("acme", lic, bob.session_id)
    eng.acquire("acme", lic, "c1")  # no user given: counted under none
    # 3 acquired, 2 released, queue.joined and queue.granted
    assert store_outbox("acme", lic) == 7

    status, body = admin.execute(admin.parse({"action": "report.users", "tenant_id": "acme"}))
    assert status == 200
    rows = {row["user"]: row for row in body["users"]}
    assert set(rows) == {"ann", "bob", None}
    assert (rows["ann"]["leases"], rows["ann"]["open_leases"]) == (1, 0), body
    assert rows["ann"]["seat_seconds"] >= 0 and rows["ann"]["queue_served"] == 0
    assert (rows["bob"]["leases"], rows["bob"]["queue_served"], rows["bob"]["queue_left"]) == (
        1,
        1,
        0,
    )
    assert rows["bob"]["queued_seconds_max"] is not None
    assert rows[None]["open_leases"] == 1

    code = main(["report", "usage", "--tenant", "acme", "--by", "user"])
    out = capsys.readouterr().out
    assert code == 0 and "Leases and time queued per user" in out
    assert "ann" in out and "bob" in out and "QUEUE_SERVED" in out
    code = main(["report", "usage", "--tenant", "acme", "--by", "user", "--format", "csv"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].startswith("license_id,user,leases") and len(lines) == 4


def test_by_user_refuses_a_chart_and_an_unknown_license(acme: Tenant, capsys) -> None:
    code = main(["report", "usage", "--tenant", "acme", "--by", "user", "--chart", "x.png"])
    assert code == 2 and "not with --by user" in capsys.readouterr().err
    code = main(["report", "usage", "--tenant", "acme", "--license", "nope", "--by", "user"])
    assert code == 3


def test_an_ending_in_the_same_millisecond_as_its_start_is_paired(acme: Tenant) -> None:
    """Two Lua calls in one millisecond have no known order: the release's event id may
    sort before the acquire's. The lease is still closed, with a zero duration."""
    new_license(acme, "cad", seats=1)
    base = {"tenant_id": "acme", "license_id": "cad", "session_id": "s1", "client_id": "c1",
            "occurred_at": "2026-11-20T09:00:00.000Z", "seats_total": 1, "count": 1,
            "metadata": {"user": "ann"}}  # fmt: skip
    audit.store(
        audit.decode_events(
            json.dumps(
                [
                    {**base, "event_id": "b-1", "type": "lease.acquired", "seats_used": 1},
                    {**base, "event_id": "a-1", "type": "lease.released", "seats_used": 0},
                ]
            ).encode()
        ).events
    )
    [row] = admin.execute(admin.parse({"action": "report.users", "tenant_id": "acme"}))[1]["users"]
    assert (row["user"], row["leases"], row["open_leases"], row["seat_seconds"]) == (
        "ann",
        1,
        0,
        0.0,
    )
