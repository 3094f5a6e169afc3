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
calls that would answer 503 (``seatlease.api.startup``, handed to ``Readiness`` as its
``wait``).

"Deployed" is Cloud Run (Cloud Functions gen2 runs on it), which sets ``K_SERVICE``.
Off it, the runtime's development defaults apply: Redis on 127.0.0.1:6379 and SQLite
under ``.seatlease/`` (``seatlease.seats.redisconn``, ``seatlease.records.db``). A deployed function
never falls back on them: a Redis on its own loopback does not exist, and a SQLite file
per instance would be a second, diverging source of truth.
"""

from __future__ import annotations

import os
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

    def __init__(
        self,
        function: str,
        needs: tuple[str, ...],
        wait: Callable[[str, tuple[str, ...]], object] | None = None,
    ) -> None:
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
        elif _deployed() and wait is not None:
            wait(function, needs)  # the cold start waits for its backends (api/startup.py)

    def check(self) -> None:
        if self.missing:
            self.missing = missing(self.needs)
            if self.missing:
                raise NotConfigured(f"missing {', '.join(self.missing)}")
