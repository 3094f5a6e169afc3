"""A deployed function's cold start waits for its first backend (``wait_for_backends``),
so that Cloud Run sends a new instance no calls it would answer 503 while Direct VPC
egress is still connecting. ``Readiness`` (seatlease/config.py) calls it once it knows
the function is configured."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from seatlease.logs import log


def _first_backend(needs: Iterable[str]) -> tuple[str, Callable[[], object]] | None:
    """The backend a cold start waits for, and a call that raises until it answers:
    Redis for the functions that use it (the hot path), else the database (audit)."""
    if "redis" in needs:
        from seatlease.seats.redisconn import get_redis

        return "redis", lambda: get_redis().ping()
    if "database" in needs:
        from seatlease.records.db import get_engine

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
