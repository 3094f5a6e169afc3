"""The served functions for the Node and Go clients' tests (tests/test_client_node.py,
tests/test_client_go.py): acquire, heartbeat, release and keys on a free loopback port,
on the test session's real Redis and PostgreSQL, behind a small WSGI gate that the
clients' test programs drive over HTTP (they run as subprocesses and cannot reach the
fixtures). Every function request is logged with its ``request_id`` and status.

Control routes (no API key; the test server only):

``POST /_test/license`` ``{"license_id", "seats", "lease_seconds", "max_borrow_seconds", "policy"}``
    creates a license of the test tenant (as an admin does: database, then cache);
    ``policy`` is a license policy (``max_per_user``, ``deny_users``, ``queue``, ...);
    a term: ``starts_in_seconds`` and ``expires_in_seconds`` (from now), ``grace_seconds``,
    ``on_expiry``, ``entitlements``, ``max_version``; the idle rule:
    ``idle_timeout_seconds`` (0: off, else 60 ..= 604800) and ``idle_reclaim``
    (``when_needed`` | ``always``); the sharing rule: ``share`` (``none`` | ``user`` |
    ``host`` | ``user_host``) and ``share_limit`` (sessions a shared seat, 0: no limit).
    Each is a LicenseConfig field (seatlease.licenses); absent: the license's default.
``POST /_test/flush``
    flushes Redis: every seat is forgotten (a heartbeat answers 410 ``unknown``; a
    client's retry with the lease token re-admits the session, as after a region's loss).
``POST /_test/stall`` ``{"path": "/acquire", "seconds": 1.5}``
    the next request to ``path`` runs, and its answer is held that long (a stalled server).
``POST /_test/fail`` ``{"path": "/acquire", "status": 503, "retry_after": 1}``
    the next request to ``path`` is answered with that status (and that ``Retry-After``
    header, when given), not run.
``POST /_test/outage`` ``{"seconds": 3}``
    every function request is answered ``503`` (no ``Retry-After``) for that long.
``POST /_test/revoke`` ``{"license_id", "session_id"}``
    revokes a lease as an operator does (``seatlease revoke``): its next heartbeat answers 410.
``POST /_test/suspend`` ``{"license_id", "suspended": true}``
    suspends (or, with false, resumes) a license as an operator does: acquires and
    heartbeats answer ``403 license_suspended``.
``GET /_test/log``
    ``[{"path", "request_id", "status"}]`` of every function request so far.
``GET /_test/live?license_id=L``
    the license's live leases ``[{"session_id", "client_id"}]``.
``GET /_test/weights?license_id=L``
    the weight of each live lease of the license: ``{client_id: seats}``.
``GET /_test/queue?license_id=L``
    the license's wait queue, head first: ``[{"client_id", "user", "host"}]``.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from http_support import serving
from werkzeug.wrappers import Request, Response

from seatlease import admin
from seatlease.api import auth, runtime, tenantlicenses, tenantlimits, tokens
from seatlease.records import store
from seatlease.seats import redisconn
from seatlease.seats.redisconn import get_redis
from seatlease_cli import devserver

TENANT = "acme"
FUNCTIONS = ["acquire", "heartbeat", "release", "keys"]


class ControlGate:
    """WSGI: ``/_test/*`` control routes, every other path to the real functions."""

    def __init__(self, functions: Any) -> None:
        self.functions = functions
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.stalls: dict[str, float] = {}
        self.failures: dict[str, tuple[int, str | None]] = {}
        self.outage_until = 0.0  # time.monotonic()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        if request.path.startswith("/_test/"):
            return self.control(request)(environ, start_response)
        raw = request.get_data()
        environ["wsgi.input"] = io.BytesIO(raw)
        with self.lock:
            stall = self.stalls.pop(request.path, 0.0)
            fail, retry_after = self.failures.pop(request.path, (0, None))
            if time.monotonic() < self.outage_until:
                fail, retry_after = 503, None
        try:
            request_id = json.loads(raw or b"{}").get("request_id")
        except (ValueError, AttributeError):
            request_id = None
        if fail:
            answer = Response(
                json.dumps({"error": {"code": "internal", "message": "The test made it fail."}}),
                status=fail,
                mimetype="application/json",
                headers={"Retry-After": retry_after} if retry_after else None,
            )
        else:
            answer = Response.from_app(self.functions, environ)
        with self.lock:
            self.log.append(
                {"path": request.path, "request_id": request_id, "status": answer.status_code}
            )
        if stall:
            time.sleep(stall)  # the work is done; the answer arrives late (or never)
        return answer(environ, start_response)

    def control(self, request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        action = request.path.removeprefix("/_test/")
        result: Any = {"ok": True}
        if action == "license":
            now = datetime.now(UTC)
            terms = {
                name: body.get(name)
                for name in (
                    "grace_seconds",
                    "on_expiry",
                    "entitlements",
                    "max_version",
                    # issue 50: the idle and sharing rules (None: the license's default)
                    "idle_timeout_seconds",
                    "idle_reclaim",
                    "share",
                    "share_limit",
                )
            }
            for name in ("starts", "expires"):  # "<name>_in_seconds": from now
                if f"{name}_in_seconds" in body:
                    terms[f"{name}_at"] = now + timedelta(seconds=body[f"{name}_in_seconds"])
            store.create_license(
                TENANT,
                body["license_id"],
                seats=body.get("seats", 2),
                lease_seconds=body.get("lease_seconds", 2),
                max_borrow_seconds=body.get("max_borrow_seconds", 0),
                policy=body.get("policy"),
                **terms,
            )
            runtime.refresh_license_cache(TENANT, body["license_id"])
        elif action == "flush":
            get_redis().flushall()
        elif action == "stall":
            with self.lock:
                self.stalls[body["path"]] = float(body["seconds"])
        elif action == "fail":
            with self.lock:
                retry_after = body.get("retry_after")
                self.failures[body["path"]] = (
                    int(body["status"]),
                    None if retry_after is None else str(retry_after),
                )
        elif action == "outage":
            with self.lock:
                self.outage_until = time.monotonic() + float(body["seconds"])
        elif action == "revoke":
            revoke = admin.parse(
                {
                    "action": "revoke",
                    "tenant_id": TENANT,
                    "license_id": body["license_id"],
                    "session_id": body["session_id"],
                }
            )
            result = admin.execute(revoke)[1]
        elif action == "suspend":
            change = "license.suspend" if body.get("suspended", True) else "license.resume"
            suspend = admin.parse(
                {"action": change, "tenant_id": TENANT, "license_id": body["license_id"]}
            )
            result = admin.execute(suspend)[1]
        elif action == "log":
            with self.lock:
                result = list(self.log)
        elif action == "live":
            leases = runtime.seat_engine().live_leases(TENANT, request.args["license_id"])
            result = [{"session_id": s["session_id"], "client_id": s["client_id"]} for s in leases]
        elif action == "weights":
            leases = runtime.seat_engine().live_leases(TENANT, request.args["license_id"])
            # each live lease's weight (a lease from before weights has none: 1)
            result = {s["client_id"]: s.get("seats", 1) for s in leases}
        elif action == "queue":
            status = admin.parse(
                {"action": "status", "tenant_id": TENANT, "license_id": request.args["license_id"]}
            )
            [view] = admin.execute(status)[1]["licenses"]
            result = [
                {name: ticket[name] for name in ("client_id", "user", "host")}
                for ticket in view["queue"]
            ]
        else:
            return Response('{"error": "no such control"}', status=404)
        return Response(json.dumps(result), mimetype="application/json")


@dataclass
class ClientStack:
    url: str
    api_key: str
    gate: ControlGate

    def env(self) -> dict[str, str]:
        """The environment of a client test program: this stack's URL, key and tenant, and
        the keys its tokens are signed with (the ``x`` of each, comma separated: what a
        vendor pins), and the bad server's key (tests/client_bad_server.py)."""
        from client_bad_server import KEY_X

        return {
            **os.environ,
            "SEATLEASE_TEST_URL": self.url,
            "SEATLEASE_TEST_API_KEY": self.api_key,
            "SEATLEASE_TEST_TENANT": TENANT,
            "SEATLEASE_TEST_PINNED_KEYS": ",".join(self.pinned_keys()),
            "SEATLEASE_BAD_PINNED_KEY": KEY_X,
        }

    def pinned_keys(self) -> list[str]:
        """The ``x`` of every key this stack's JWKS serves (the vendor's keys to pin)."""
        return [key["x"] for key in tokens.keyring().jwks()["keys"]]


def serve_on(url: str) -> None:
    """The functions served here switch to the Redis at ``url`` (a region's failover, a
    restarted server): every cache of what the last one said is dropped."""
    os.environ["REDIS_URL"] = url
    redisconn.reset()
    runtime.forget_failover()
    tenantlicenses.forget_all()
    tenantlimits.forget_all()
    auth.forget_all()


@contextmanager
def client_stack() -> Iterator[ClientStack]:
    """The gate and functions served; needs the ``redis_url`` and ``database_url``
    fixtures to have set the environment."""
    store.create_tenant(TENANT)
    key = store.create_api_key(TENANT).key
    gate = ControlGate(devserver.create_app(FUNCTIONS))
    with serving(gate, quiet=True) as url:
        yield ClientStack(url, key, gate)
