"""What a function needs from its environment, named so that a misconfigured deployment
says so at cold start instead of failing each request its own way.

``missing(needs)`` lists the settings a function lacks, as an operator would fix them
(``"SEATLEASE_ISSUER"``, ``"DATABASE_URL or CLOUD_SQL_INSTANCE"``). What each need asks:

``signing``  unless ``LEASE_TOKENS=off``: ``SEATLEASE_ISSUER`` (the tokens' ``iss``) and
             one key source, ``SIGNING_KEY_SECRET`` or ``SIGNING_KEYS_DIR``.
``signing_keys``  one key source (the keys function publishes the public keys only).
``redis``    ``REDIS_URL``, when deployed.
``database`` ``CLOUD_SQL_INSTANCE`` with ``DB_NAME``, ``DB_USER`` and ``DB_PASSWORD``
             (or ``DB_IAM_AUTH=1``), or ``DATABASE_URL``, when deployed.

Deployed, a configured function also waits at cold start, up to ``STARTUP_WAIT_SECONDS``
(default 120), until its first backend answers (``wait_for_backends``): with Direct VPC
egress a new instance may not reach Redis or Cloud SQL for a minute or more, and until the
import ends functions-framework does not listen, so Cloud Run's startup probe sends it no
calls that would answer 503.

"Deployed" is Cloud Run (Cloud Functions gen2 runs on it), which sets ``K_SERVICE``.
Off it, the runtime's development defaults apply: Redis on 127.0.0.1:6379 and SQLite
under ``.seatlease/`` (``seatlease.redisconn``, ``seatlease.db``). A deployed function
never falls back on them: a Redis on its own loopback does not exist, and a SQLite file
per instance would be a second, diverging source of truth.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from seatlease.errors import NotConfigured
from seatlease.logs import log


def _set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


def _deployed() -> bool:
    return _set("K_SERVICE")


def _key_source() -> list[str]:
    if _set("SIGNING_KEY_SECRET") or _set("SIGNING_KEYS_DIR"):
        return []
    return ["SIGNING_KEY_SECRET or SIGNING_KEYS_DIR"]


def _signing() -> list[str]:
    if os.environ.get("LEASE_TOKENS", "").strip().lower() == "off":
        return []
    return ([] if _set("SEATLEASE_ISSUER") else ["SEATLEASE_ISSUER"]) + _key_source()


def _redis() -> list[str]:
    return ["REDIS_URL"] if _deployed() and not _set("REDIS_URL") else []


def _database() -> list[str]:
    if not _deployed() or _set("DATABASE_URL"):
        return []
    if not _set("CLOUD_SQL_INSTANCE"):
        return ["DATABASE_URL or CLOUD_SQL_INSTANCE"]
    missing = [name for name in ("DB_NAME", "DB_USER") if not _set(name)]
    if os.environ.get("DB_IAM_AUTH") != "1" and not _set("DB_PASSWORD"):
        missing.append("DB_PASSWORD (or DB_IAM_AUTH=1)")
    return missing


NEEDS: dict[str, Callable[[], list[str]]] = {
    "signing": _signing,
    "signing_keys": _key_source,
    "redis": _redis,
    "database": _database,
}


def missing(needs: Iterable[str]) -> list[str]:
    """The settings ``needs`` asks for that the environment lacks (empty: configured)."""
    return [name for need in needs for name in NEEDS[need]()]


class Readiness:
    """Whether a function has the configuration it ``needs`` (``NEEDS`` above),
    checked at cold start: what is missing is logged once, as one CRITICAL line, and
    every call is then refused (503 ``not_configured``) until it is there. While
    something is missing each call looks again (an environment is fixed by a new
    revision in the cloud, but may be completed in place locally); once complete, a
    call costs one attribute test."""

    def __init__(self, function: str, needs: tuple[str, ...]) -> None:
        self.function, self.needs = function, needs
        self.missing = missing(needs)
        if self.missing:
            log(
                "CRITICAL",
                f"{function}: not configured, every call is refused until it is: "
                f"missing {', '.join(self.missing)}",
                function=function,
                missing=self.missing,
            )
        elif _deployed():
            wait_for_backends(function, needs)

    def check(self) -> None:
        if self.missing:
            self.missing = missing(self.needs)
            if self.missing:
                raise NotConfigured(f"missing {', '.join(self.missing)}")


def _first_backend(needs: Iterable[str]) -> tuple[str, Callable[[], object]] | None:
    """The backend a cold start waits for, and a call that raises until it answers:
    Redis for the functions that use it (the hot path), else the database (audit)."""
    if "redis" in needs:
        from seatlease.redisconn import get_redis

        return "redis", lambda: get_redis().ping()
    if "database" in needs:
        from seatlease.db import get_engine

        def select_1() -> object:
            with get_engine().connect() as conn:
                return conn.exec_driver_sql("SELECT 1").scalar()

        return "database", select_1
    return None


def wait_for_backends(function: str, needs: Iterable[str]) -> bool:
    """Block the cold start (the import of the function's main.py) until its first
    backend answers, for at most ``STARTUP_WAIT_SECONDS`` (default 120, 0: no wait) plus
    one attempt's own timeouts. True when it answered.

    Why: Cloud Run documents "connection establishment delays of a minute or more on
    instance startup when using Direct VPC egress" (run/docs/configuring/vpc-direct-vpc,
    Limitations). Cloud Run sends an instance calls once its default TCP startup probe
    connects (timeout and period 240 s, one failure allowed: run/docs/configuring/
    healthchecks), and functions-framework opens its port only after it has imported
    main.py. So while this waits, the instance gets no calls: the ones a scale-out brings
    wait for it (or go to the instances already serving) instead of answering 503. The
    bound keeps the whole start inside the probe's 240 s; a backend still down then (an
    outage, not a slow network) leaves the instance serving 503 ``backend_unavailable``
    as before, with one WARNING line. The connection it made stays in the client's pool
    for the first call."""
    backend = _first_backend(needs)
    try:
        budget = float(os.environ.get("STARTUP_WAIT_SECONDS", "120") or 0)
    except ValueError:  # a typo must not stop the instance from starting
        budget = 120.0
    if backend is None or budget <= 0:
        return True
    name, probe = backend
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        try:
            probe()
        except Exception as exc:  # any failure is "not yet": the bound decides
            waited = time.monotonic() - started
            if waited >= budget:
                log(
                    "WARNING",
                    f"{function}: {name} did not answer within {budget:g} s of the cold "
                    "start; serving anyway (calls needing it answer 503 until it does)",
                    function=function,
                    backend=name,
                    attempts=attempts,
                    waited_ms=round(waited * 1000),
                    error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
                )
                return False
            time.sleep(min(1.0, budget - waited))
            continue
        if attempts > 1:
            waited = time.monotonic() - started
            log(
                "INFO",
                f"{function}: {name} answered {waited:.1f} s into the cold start",
                function=function,
                backend=name,
                attempts=attempts,
                waited_ms=round(waited * 1000),
            )
        return True
