"""Captures the replies a release's seat scripts store (the idempotency store) for a wide
set of outcomes, with the answer each first call gave, into stored_replies_v1.json: the
replies tests/test_replies_by_name.py writes into a fresh Redis to check that a later
release answers each repeat word for word (a rolling deploy's two releases share Redis).

Run against the release whose stored form is to be kept, from a checkout of it:
    PYTHONPATH=<checkout>/shared .venv/bin/python tests/data/capture_stored_replies.py OUT
(stored_replies_v1.json was captured at commit 3c4bfca, before replies were named).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from seatlease.api.errormap import to_api_error
from seatlease.licenses import LicenseConfig
from seatlease.seats import failover, redisconn
from seatlease.seats.engine import SeatEngine
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.values import SeatRequest, TokenGrant
from seatlease_cli.procs import start_redis

FINGERPRINT = "ab" * 32
OTHER_MACHINE = "cd" * 32


def outcome(run: Any) -> dict[str, Any]:
    """What a call answered: a value's fields, or an error's type, attributes and HTTP
    answer (status, code, body, headers)."""
    try:
        value = run()
    except Exception as exc:  # every refusal is recorded as it is
        api = to_api_error(exc)
        return {
            "error": type(exc).__name__,
            "message": str(exc),
            "attrs": json.loads(json.dumps(vars(exc), default=str)),
            "http": {"status": api.status, "body": api.body, "headers": api.headers},
        }
    fields = json.loads(json.dumps(dataclasses.asdict(value)))
    return {"value": type(value).__name__, "fields": fields}


def main(out: str) -> None:
    server = start_redis()
    try:
        client = redisconn.connect(server.url)
        configs: dict[tuple[str, str], LicenseConfig] = {}
        engine = SeatEngine(client, lambda t, lic: configs.get((t, lic)))
        cases: list[dict[str, Any]] = []
        later = datetime.now(UTC) + timedelta(days=30)

        def lic(name: str, **kwargs: Any) -> str:
            configs[("acme", name)] = LicenseConfig(**kwargs)
            return name

        def stored(license_id: str, field: str) -> tuple[int, str]:
            keys = LicenseKeys.of("acme", license_id)
            for index, key in enumerate(keys.replies):
                text = client.hget(key, field)
                if text is not None:
                    return index, text
            raise AssertionError(f"no stored reply for {license_id} {field}")

        def acquire(case: str, license_id: str, client_id: str, **kwargs: Any) -> Any:
            request_id = f"{case[:40]}-r"
            request = SeatRequest("acme", license_id, client_id, request_id=request_id, **kwargs)
            result = outcome(lambda: engine.acquire(request))
            field = LicenseKeys.reply_field("acquire", client_id, request_id)
            hash_index, text = stored(license_id, field)
            fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
            if request.recover is not None:
                fields["recover"] = dataclasses.asdict(request.recover)
            cases.append(
                {"case": case, "call": "acquire", "request": json.loads(json.dumps(fields)),
                 "field": field, "hash": hash_index, "stored": text, "first": result}
            )  # fmt: skip
            return result

        def heartbeat(case: str, license_id: str, session_id: str) -> Any:
            request_id = f"{case[:40]}-r"
            result = outcome(lambda: engine.heartbeat("acme", license_id, session_id, request_id))
            field = LicenseKeys.reply_field("heartbeat", session_id, request_id)
            hash_index, text = stored(license_id, field)
            request = {"tenant_id": "acme", "license_id": license_id, "session_id": session_id,
                       "request_id": request_id}  # fmt: skip
            cases.append(
                {"case": case, "call": "heartbeat", "request": request, "field": field,
                 "hash": hash_index, "stored": text, "first": result}
            )  # fmt: skip
            return result

        def release(case: str, license_id: str, session_id: str, revoke: bool = False) -> Any:
            request_id = f"{case[:40]}-r"
            result = outcome(
                lambda: engine.release(
                    "acme", license_id, session_id, revoke=revoke, request_id=request_id
                )
            )
            event = "lease.revoked" if revoke else "lease.released"
            field = LicenseKeys.reply_field(event, session_id, request_id)
            hash_index, text = stored(license_id, field)
            request = {"tenant_id": "acme", "license_id": license_id, "session_id": session_id,
                       "request_id": request_id, "revoke": revoke}  # fmt: skip
            cases.append(
                {"case": case, "call": "release", "request": request, "field": field,
                 "hash": hash_index, "stored": text, "first": result}
            )  # fmt: skip
            return result

        def sid(result: dict[str, Any]) -> str:
            return result["fields"]["session_id"]

        # plain grants and renewals, weights
        plain = lic("plain", seats=5)
        granted = acquire("granted", plain, "c1")
        acquire("renewed", plain, "c1")
        weighted = acquire("granted_weighted", plain, "c2", seats=3)
        acquire("renewed_weighted", plain, "c2", seats=3)
        acquire("seats_mismatch", plain, "c1", seats=2)
        acquire("denied_plain", plain, "c3", seats=2)
        acquire("granted_one", lic("one", seats=1), "d1", seats=1)
        acquire("denied_plain_one", "one", "d2")
        heartbeat("ok_plain", plain, sid(granted))
        heartbeat("ok_weighted", plain, sid(weighted))
        release("released", plain, sid(granted))
        release("gone", plain, "unknown-session-xyz")
        release("revoked", plain, sid(weighted), revoke=True)

        # terms: an end, grace, entitlements, a version range
        terms = lic(
            "terms", seats=5, expires_at=later, grace_seconds=3600,
            entitlements=("cad", "sim"), max_version="2.0",
        )  # fmt: skip
        t1 = acquire("granted_terms", terms, "t1", entitlements=("cad",), version="1.5")
        t2 = acquire("granted_terms_weighted", terms, "t2", seats=2)
        acquire("renewed_terms", terms, "t1", entitlements=("cad",), version="1.5")
        heartbeat("ok_terms", terms, sid(t1))
        heartbeat("ok_terms_weighted", terms, sid(t2))
        soon = lic("soon", seats=5, lease_seconds=360,
                   expires_at=datetime.now(UTC) + timedelta(seconds=60))  # fmt: skip
        acquire("granted_cut_by_term", soon, "s1")

        # borrowing, a machine, linger
        borrow = lic("borrow", seats=3, max_borrow_seconds=3600, linger_seconds=60)
        b1 = acquire("borrowed", borrow, "b1", borrow_seconds=600, fingerprint=FINGERPRINT)
        acquire("renewed_borrowed", borrow, "b1", borrow_seconds=600, fingerprint=FINGERPRINT)
        acquire("machine_mismatch", borrow, "b1", borrow_seconds=600, fingerprint=OTHER_MACHINE)
        heartbeat("ok_borrowed", borrow, sid(b1))
        b2 = acquire("borrowed_weighted", borrow, "b2", borrow_seconds=600, seats=2,
                     fingerprint=FINGERPRINT)  # fmt: skip
        heartbeat("ok_borrowed_weighted", borrow, sid(b2))
        lingering = acquire("granted_to_linger", lic("linger", seats=2, linger_seconds=60), "l1")
        release("released_lingering", "linger", sid(lingering))
        heartbeat("unknown_lingering", "linger", sid(lingering))
        acquire("taken_back", "linger", "l1")

        # every tail at once: terms, a weight, a machine, a user
        every = lic(
            "every", seats=6, max_borrow_seconds=3600, expires_at=later, entitlements=("cad",),
            policy=LicensePolicy(max_per_user=3).redis_form(),
        )  # fmt: skip
        all1 = acquire("borrowed_every_tail", every, "a1", borrow_seconds=600, seats=2,
                       fingerprint=FINGERPRINT, user="Zoe")  # fmt: skip
        heartbeat("ok_every_tail", every, sid(all1))
        acquire("renewed_every_tail", every, "a1", borrow_seconds=600, seats=2,
                fingerprint=FINGERPRINT, user="Zoe")  # fmt: skip

        # a license policy: users, groups, the wait queue
        policy = LicensePolicy(max_per_user=1, reserve={"eng": 1}, groups={"eng": ["erin"]})
        pol = lic("policy", seats=2, policy=policy.redis_form())
        alice = acquire("granted_user", pol, "p1", user="alice")
        acquire("renewed_user", pol, "p1", user="alice")
        heartbeat("ok_user", pol, sid(alice))
        acquire("user_limit", pol, "p2", user="alice")
        acquire("denied_reserved", pol, "p3", user="bob")
        queue = LicensePolicy(queue=True, queue_max=1)
        qlic = lic("queue", seats=1, policy=queue.redis_form())
        acquire("granted_before_queue", qlic, "q1", user="ann")
        acquire("queued", qlic, "q2", queue=True)
        lic("queue2", seats=2, policy=queue.redis_form())
        acquire("granted_before_queue_weighted", "queue2", "w0", seats=2)
        acquire("queue_full", qlic, "q3", queue=True)
        acquire("queued_weighted_wait", "queue2", "w1", queue=True, seats=2)

        # a term that ends under a held lease, and one whose start moved later
        ending = lic("ending", seats=2, lease_seconds=60,
                     expires_at=datetime.now(UTC) + timedelta(seconds=2))  # fmt: skip
        e1 = acquire("granted_ending", ending, "e1")
        short = lic("short", seats=2, lease_seconds=1)
        x1 = acquire("granted_short", short, "x1")
        moved = lic("moved", seats=2, lease_seconds=60)
        m1 = acquire("granted_moved", moved, "m1")
        lic("moved", seats=2, lease_seconds=60, starts_at=later)
        engine.cache_config("acme", moved, configs[("acme", moved)])
        heartbeat("not_started", moved, sid(m1))
        time.sleep(2.2)
        heartbeat("license_expired", ending, sid(e1))
        heartbeat("expired", short, sid(x1))

        # a failover's recovery window on a license that grants in it, and a lost lease
        # brought back by its token
        fo = lic("failover", seats=3, lease_seconds=360, on_failover="grant")
        began = failover.begin(client)
        acquire("granted_in_recovery", fo, "f1", failover_began_ms=began)
        now = engine.server_time_ms()
        grant = TokenGrant("L" * 24, "lost", now + 300_000, seats=2, issued_at_ms=now - 60_000)
        acquire("recovered", fo, "lost", seats=2, recover=grant, failover_began_ms=began)

        with open(out, "w") as f:
            json.dump({"form": 1, "captured_at_commit": "3c4bfca", "cases": cases}, f, indent=1)
            f.write("\n")
        print(f"{len(cases)} stored replies")
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1])
