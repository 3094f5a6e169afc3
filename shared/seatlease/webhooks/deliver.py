"""Send the deliveries that are due: ``deliver_due``.

How a run goes. It claims due deliveries in the database, sends them on a pool of
threads, records each outcome, and claims again as sends finish, until nothing is due
and nothing is in flight, or its ``budget_seconds`` are spent (then the sends in flight
finish, each within its timeout, and the run ends).

- **Claims.** On PostgreSQL the run locks the endpoints with due deliveries (``FOR NO
  KEY UPDATE SKIP LOCKED``: another instance claiming skips them, an enqueue is not
  held) and their due rows (``FOR UPDATE SKIP LOCKED``); on SQLite (the local stack,
  one process) one ``UPDATE`` claims. A claimed delivery gets a ``claim`` token and
  ``claimed_until`` (its send's timeout plus ``CLAIM_MARGIN_SECONDS``), and its
  ``next_attempt_at`` moves there: should the instance die mid-send, the delivery is
  due again then (at least once; the receiver dedupes by ``webhook-id``). An outcome is
  recorded only under its claim.
- **One endpoint never holds another.** At most ``PER_ENDPOINT_CONCURRENCY`` sends per
  endpoint are in flight (counted in the database: across instances), out of
  ``MAX_IN_FLIGHT`` for the run; endpoints are claimed in random order. A slow or dead
  endpoint holds at most its own slots, for at most the timeout each; one tenant's sends
  take at most ``PER_TENANT_IN_RUN`` of a run's slots, so another tenant's delivery is
  claimed at the run's next look (half a second), however slow the first one's
  endpoints are.
- **Sends.** The URL is checked again (``urls.resolve_for_send``) and the connection goes
  to that checked address, with the URL's host as ``Host``, TLS SNI and the name the
  certificate must match; no redirect is followed. ``TIMEOUT_SECONDS`` (10; env
  ``WEBHOOK_TIMEOUT_SECONDS``) bounds the whole attempt, connection to answer. Signed
  with the endpoint's secrets (``v1``) and the deployment's signing key (``v1a``, when
  it has one).
- **Outcomes.** A 2xx is ``delivered``. A timeout, a refused or failed connection, a 5xx,
  408 or 429 is retried with exponential backoff and jitter: the first step is
  ``WEBHOOK_RETRY_FIRST_SECONDS`` (default 30; the local stack sets 1), doubling up to
  ``MAX_STEP_SECONDS``, each step drawn within +-25 %, at least a ``Retry-After`` the
  receiver asks (up to an hour); retries go on for ``RETRY_WINDOW`` (3 days) from the
  delivery's creation, the last one at its end; then the delivery is ``failed`` and its
  endpoint ``failing`` with the reason (a later 2xx makes it ``ok`` again). Any other
  answer (a 4xx, a 3xx: no redirect is followed) is ``final`` for that delivery. Each
  attempt is recorded: at, status, latency, error.
"""

from __future__ import annotations

import http.client
import os
import random
import secrets
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, Engine, and_, exists, func, insert, select, update

from seatlease import clock
from seatlease.errors import BackendUnavailable, InvalidRequest, NotConfigured
from seatlease.logs import log
from seatlease.records.db import transaction
from seatlease.records.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from seatlease.webhooks import crypto, signing, urls
from seatlease.webhooks.store import DELIVERED, FAILED, FINAL, PENDING, signing_secrets

PER_ENDPOINT_CONCURRENCY = 4
MAX_IN_FLIGHT = 64  # sends of one run at once (its threads)
# One tenant's sends in one run at once: a quarter of the run, so one tenant's slow or
# dead endpoints (20 of them, 4 sends each) never fill a run another tenant waits on
PER_TENANT_IN_RUN = MAX_IN_FLIGHT // 4
TIMEOUT_SECONDS = 10.0
DEFAULT_FIRST_STEP_SECONDS = 30.0
MAX_STEP_SECONDS = 6 * 3600.0
MAX_RETRY_AFTER_SECONDS = 3600.0
RETRY_WINDOW = timedelta(days=3)
CLAIM_MARGIN_SECONDS = 30.0
CLAIM_INTERVAL_SECONDS = 0.5  # while sends are in flight, look for new due ones this often
DEFAULT_BUDGET_SECONDS = 45.0
MAX_ERROR_CHARS = 500
ANSWER_EXCERPT_BYTES = 200  # of a refusing answer's body, for the tenant's delivery log
USER_AGENT = "seatlease-webhooks/1"

d = webhook_deliveries
e = webhook_endpoints


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claimed delivery and what its send needs. ``secrets`` is never shown."""

    id: int
    claim: str
    endpoint_id: str
    tenant_id: str
    url: str
    event_id: str
    payload: str
    attempts: int
    created_at: datetime
    secrets: tuple[str, ...] = ()
    problem: str | None = None  # the secrets do not open: recorded as a failed attempt
    endpoint_failing: bool = False  # when claimed: a 2xx then makes it ok again

    def __repr__(self) -> str:
        return f"Claimed(id={self.id}, endpoint_id={self.endpoint_id!r})"


@dataclass(frozen=True, slots=True)
class Outcome:
    at: datetime
    kind: str  # DELIVERED, FINAL or PENDING (to retry)
    status: int | None
    latency_ms: int
    error: str | None
    retry_after: float | None = None


def first_step_seconds() -> float:
    """The retry schedule's first step: ``WEBHOOK_RETRY_FIRST_SECONDS`` or 30."""
    return _env_seconds("WEBHOOK_RETRY_FIRST_SECONDS", DEFAULT_FIRST_STEP_SECONDS)


def backoff_seconds(attempts: int, first: float, rng: random.Random | None = None) -> float:
    """The wait after the ``attempts``-th failed attempt: ``first`` doubled per attempt
    up to ``MAX_STEP_SECONDS``, drawn within +-25 % (so that many deliveries failed
    together, by one outage, do not come back together)."""
    base = min(first * 2 ** min(max(attempts - 1, 0), 40), MAX_STEP_SECONDS)
    return base * (rng or random).uniform(0.75, 1.25)


def deliver_due(
    now: datetime | None = None,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    *,
    timeout_seconds: float | None = None,
    engine: Engine | None = None,
    endpoint_id: str | None = None,
) -> dict[str, int]:
    """Send what is due (see the module's docstring); the run's counts. ``now``: the
    run's start on its clock (default the real time; time then runs on from it).
    ``endpoint_id``: that endpoint's deliveries alone (a tenant's "send test")."""
    started = time.monotonic()
    start = clock.utc(now) if now is not None else clock.now()

    def current() -> datetime:
        return start + timedelta(seconds=time.monotonic() - started)

    timeout = timeout_seconds if timeout_seconds is not None else _timeout()
    first = first_step_seconds()
    local, key = urls.local_stack(), _signing_key()
    counts: Counter[str] = Counter()
    in_flight: dict[Future[Outcome], Claimed] = {}
    pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="webhook-send")
    finished: list[tuple[Claimed, Outcome]] = []
    next_claim = 0.0
    try:
        while True:
            room = MAX_IN_FLIGHT - len(in_flight)
            in_budget = time.monotonic() - started < budget_seconds
            wanted = in_budget and (finished or not in_flight or time.monotonic() >= next_claim)
            if finished or (room and wanted):
                # What finished and the next claims in one transaction: one commit a round.
                with transaction(engine) as conn:
                    _record(conn, finished, first, counts)
                    hold = timeout + CLAIM_MARGIN_SECONDS
                    tenants = Counter(item.tenant_id for item in in_flight.values())
                    claimed = (
                        _claim(conn, current(), room, hold, tenants, endpoint_id)
                        if room and wanted
                        else []
                    )
                finished = []
                counts["claimed"] += len(claimed)
                for item in claimed:
                    in_flight[pool.submit(send, item, timeout, local, key, current)] = item
                next_claim = time.monotonic() + CLAIM_INTERVAL_SECONDS
            if not in_flight:
                break
            done, _ = wait(in_flight, timeout=CLAIM_INTERVAL_SECONDS, return_when=FIRST_COMPLETED)
            finished = [(in_flight.pop(future), future.result()) for future in done]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    report = {name: counts[name] for name in ("claimed", "delivered", "retrying", "final")}
    report.update(failed=counts["failed"], lost_claims=counts["lost_claims"])
    return report


# -- claims --------------------------------------------------------------------------


def claim_due(
    now: datetime, room: int, hold_seconds: float, engine: Engine | None = None
) -> list[Claimed]:
    """Claim up to ``room`` due deliveries, at most ``PER_ENDPOINT_CONCURRENCY`` in flight
    per endpoint, for ``hold_seconds``."""
    with transaction(engine) as conn:
        return _claim(conn, now, room, hold_seconds)


def _claim(
    conn: Connection,
    now: datetime,
    room: int,
    hold_seconds: float,
    tenants: Counter[str] | None = None,
    only: str | None = None,
) -> list[Claimed]:
    """``tenants``: the run's sends in flight per tenant (each at most
    ``PER_TENANT_IN_RUN``); ``only``: one endpoint's deliveries alone."""
    until = now + timedelta(seconds=hold_seconds)
    tenants = Counter(tenants or ())
    postgres = conn.dialect.name == "postgresql"
    due = and_(d.c.state == PENDING, d.c.next_attempt_at <= now)
    query = select(
        e.c.id,
        e.c.tenant_id,
        e.c.url,
        e.c.secret_enc,
        e.c.old_secret_enc,
        e.c.old_secret_until,
        e.c.state,
    ).where(exists().where(d.c.endpoint_id == e.c.id, due))
    if only is not None:
        query = query.where(e.c.id == only)
    if postgres:
        query = query.with_for_update(skip_locked=True, key_share=True)
    endpoints = [dict(row) for row in conn.execute(query).mappings()]
    random.shuffle(endpoints)  # no endpoint always first
    busy = _in_flight(conn, [endpoint["id"] for endpoint in endpoints], now)
    claimed: list[Claimed] = []
    for endpoint in endpoints:
        take = min(
            PER_ENDPOINT_CONCURRENCY - busy.get(endpoint["id"], 0),
            PER_TENANT_IN_RUN - tenants[endpoint["tenant_id"]],
            room - len(claimed),
        )
        if take > 0:
            rows = _claim_rows(conn, endpoint, take, now, until, postgres)
            tenants[endpoint["tenant_id"]] += len(rows)
            claimed += rows
        if len(claimed) >= room:
            break
    return claimed


def _in_flight(conn: Connection, endpoint_ids: list[str], now: datetime) -> dict[str, int]:
    if not endpoint_ids:
        return {}
    rows = conn.execute(
        select(d.c.endpoint_id, func.count())
        .where(d.c.endpoint_id.in_(endpoint_ids), d.c.claim.isnot(None), d.c.claimed_until > now)
        .group_by(d.c.endpoint_id)
    )
    return {endpoint_id: count for endpoint_id, count in rows}


def _claim_rows(
    conn: Connection,
    endpoint: dict[str, Any],
    take: int,
    now: datetime,
    until: datetime,
    postgres: bool,
) -> list[Claimed]:
    token = secrets.token_hex(12)
    pick = (
        select(d.c.id)
        .where(d.c.endpoint_id == endpoint["id"], d.c.state == PENDING, d.c.next_attempt_at <= now)
        .order_by(d.c.next_attempt_at, d.c.id)
        .limit(take)
    )
    if postgres:
        pick = pick.with_for_update(skip_locked=True)
    rows = conn.execute(
        update(d)
        .where(d.c.id.in_(pick.scalar_subquery()))
        .values(claim=token, claimed_until=until, next_attempt_at=until)
        .returning(d.c.id, d.c.event_id, d.c.payload, d.c.attempts, d.c.created_at)
    ).all()
    if not rows:
        return []
    try:
        keys, problem = tuple(signing_secrets(endpoint, now)), None
    except crypto.SecretUnreadable as exc:
        # One endpoint's sealed secret does not open (WEBHOOK_KEY changed, or the row was
        # altered): the others still go out; this one is retried until an operator acts.
        # Why is the operator's to read, not the tenant's. (A missing key raises.)
        log("ERROR", "webhooks: an endpoint's secret does not open; its deliveries wait",
            endpoint_id=endpoint["id"], error=str(exc))  # fmt: skip
        keys, problem = (), "not sent: the endpoint's secret cannot be read; the operator is told"
    return [
        Claimed(
            row.id,
            token,
            endpoint["id"],
            endpoint["tenant_id"],
            endpoint["url"],
            row.event_id,
            row.payload,
            row.attempts,
            clock.utc(row.created_at),
            keys,
            problem,
            endpoint["state"] == "failing",
        )
        for row in sorted(rows)
    ]


# -- one send ------------------------------------------------------------------------


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a checked address, with the URL's name for SNI and the certificate."""

    def __init__(self, address: str, name: str, port: int, timeout: float) -> None:
        super().__init__(address, port, timeout=timeout, context=ssl.create_default_context())
        self._name = name

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self._name)  # type: ignore[attr-defined]


def send(
    item: Claimed,
    timeout: float,
    local: bool,
    key: Any,
    now: Callable[[], datetime] = clock.now,
) -> Outcome:
    """One attempt of one delivery; never raises."""
    at, started = now(), time.monotonic()

    def outcome(kind: str, status: int | None, error: str | None, **extra: Any) -> Outcome:
        latency = round((time.monotonic() - started) * 1000)
        return Outcome(at, kind, status, latency, error and error[:MAX_ERROR_CHARS], **extra)

    if item.problem:
        return outcome(PENDING, None, item.problem)
    try:
        address, name, port = urls.resolve_for_send(item.url, local)
    except InvalidRequest as exc:  # no address now, or one refused: retried (DNS changes)
        return outcome(PENDING, None, f"not sent: {exc.message}")
    parts = urlsplit(item.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = item.payload.encode("utf-8")
    try:
        headers = signing.signed_headers(item.event_id, body, list(item.secrets), key,
                                         int(time.time()))  # fmt: skip
    except ValueError as exc:  # an event id no header can carry: no attempt will do better
        return outcome(FINAL, None, f"not sent: {exc}")
    headers.update(
        {
            "Host": _host_header(name, port, parts.scheme),
            "User-Agent": USER_AGENT,
            "Content-Type": "application/json",
        }
    )
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = _PinnedHTTPS(address, name, port, timeout)
    else:
        conn = http.client.HTTPConnection(address, port, timeout=timeout)
    cut = threading.Event()
    watchdog = threading.Timer(timeout, _cut, (conn, cut))  # the whole attempt's bound
    watchdog.start()
    try:
        conn.request("POST", path, body, headers)
        answer = conn.getresponse()
        status = answer.status
        excerpt = b"" if 200 <= status < 300 else answer.read(ANSWER_EXCERPT_BYTES)
        retry_after = _retry_after(answer.getheader("Retry-After"))
    except Exception as exc:  # the connection or the answer failed: retried
        return outcome(PENDING, None, _failure(exc, cut.is_set(), timeout))
    finally:
        watchdog.cancel()
        conn.close()
    if 200 <= status < 300:
        return outcome(DELIVERED, status, None)
    error = f"HTTP {status}" + (f": {_printable(excerpt)}" if excerpt.strip() else "")
    if status in (408, 429) or status >= 500:
        return outcome(PENDING, status, error, retry_after=retry_after)
    if 300 <= status < 400:
        error += " (redirects are not followed)"
    return outcome(FINAL, status, error)


def _cut(conn: http.client.HTTPConnection, cut: threading.Event) -> None:
    cut.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


def _failure(exc: Exception, cut: bool, timeout: float) -> str:
    if cut or isinstance(exc, TimeoutError):
        return f"timeout: no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: {exc.verify_message or 'certificate verify failed'}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, http.client.HTTPException):
        return f"bad HTTP answer: {type(exc).__name__} {_printable(str(exc).encode())}".strip()
    return f"connection failed: {type(exc).__name__}: {exc}"


def _host_header(name: str, port: int, scheme: str) -> str:
    host = f"[{name}]" if ":" in name else name
    return host if port == urls.DEFAULT_PORTS.get(scheme) else f"{host}:{port}"


def _printable(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return "".join(c if c.isprintable() else " " for c in text).strip()[:ANSWER_EXCERPT_BYTES]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - clock.now()).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))


# -- outcomes ------------------------------------------------------------------------


def record(
    finished: list[tuple[Claimed, Outcome]],
    first: float,
    counts: Counter[str],
    engine: Engine | None = None,
) -> None:
    """Each outcome under its claim and its attempt (one transaction), and the endpoints'
    state: ``failing`` when a delivery ran out of its window, ``ok`` again on a 2xx."""
    with transaction(engine) as conn:
        _record(conn, finished, first, counts)


def _record(
    conn: Connection, finished: list[tuple[Claimed, Outcome]], first: float, counts: Counter[str]
) -> None:
    attempts: list[dict[str, Any]] = []
    recovered: set[str] = set()
    for item, outcome in finished:
        values = _next_state(item, outcome, first)
        done = conn.execute(
            update(d).where(d.c.id == item.id, d.c.claim == item.claim).values(**values)
        )
        if done.rowcount != 1:  # the claim ran out and another run took it, or deleted
            counts["lost_claims"] += 1
            continue
        attempts.append({"delivery_id": item.id, "endpoint_id": item.endpoint_id,
                         "at": outcome.at, "status": outcome.status,
                         "latency_ms": outcome.latency_ms, "error": outcome.error})  # fmt: skip
        state = values.get("state", PENDING)
        counts[{PENDING: "retrying"}.get(state, state)] += 1
        if state == FAILED:
            _mark_failing(conn, item, outcome, values["attempts"])
        elif state == DELIVERED and item.endpoint_failing:
            recovered.add(item.endpoint_id)
    if attempts:  # one statement for all (statements, not rows, cost here)
        conn.execute(insert(webhook_attempts).values(attempts))
    if recovered:
        conn.execute(
            update(e)
            .where(e.c.id.in_(sorted(recovered)), e.c.state == "failing")
            .values(state="ok", failing_reason=None, failing_since=None)
        )


def _next_state(item: Claimed, outcome: Outcome, first: float) -> dict[str, Any]:
    attempts = item.attempts + 1
    values: dict[str, Any] = {
        "attempts": attempts,
        "last_status": outcome.status,
        "last_error": outcome.error,
        "claim": None,
        "claimed_until": None,
        "next_attempt_at": outcome.at,
    }
    if outcome.kind in (DELIVERED, FINAL):
        return {**values, "state": outcome.kind}
    give_up_at = item.created_at + RETRY_WINDOW
    if outcome.at >= give_up_at:
        return {**values, "state": FAILED}
    wait_seconds = max(backoff_seconds(attempts, first), outcome.retry_after or 0.0)
    values["next_attempt_at"] = min(outcome.at + timedelta(seconds=wait_seconds), give_up_at)
    return values


def _mark_failing(conn: Connection, item: Claimed, outcome: Outcome, attempts: int) -> None:
    last = outcome.error or f"HTTP {outcome.status}"
    reason = (
        f"event {item.event_id}: {attempts} attempts over {RETRY_WINDOW.days} days failed, "
        f"the last at {clock.iso_utc(outcome.at)}: {last}"
    )[:MAX_ERROR_CHARS]
    conn.execute(
        update(e)
        .where(e.c.id == item.endpoint_id)
        .values(
            state="failing",
            failing_reason=reason,
            failing_since=func.coalesce(e.c.failing_since, outcome.at),
        )
    )
    log(
        "WARNING",
        "webhook endpoint failing",
        tenant_id=item.tenant_id,
        endpoint_id=item.endpoint_id,
        reason=reason,
    )


# -- settings ------------------------------------------------------------------------


def _signing_key() -> Any:
    """The deployment's Ed25519 signing key for ``v1a``; None when it has none (then only
    ``v1``) or its source cannot be read now (said once per run)."""
    from seatlease.api.tokens import keyring

    try:
        return keyring().signing_key().private
    except NotConfigured:
        return None
    except BackendUnavailable as exc:
        log(
            "WARNING", "webhooks: signing key unavailable; deliveries carry v1 only", error=str(exc)
        )
        return None


def _timeout() -> float:
    return _env_seconds("WEBHOOK_TIMEOUT_SECONDS", TIMEOUT_SECONDS)


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:  # a typo must not stop deliveries
        return default
    return value if value > 0 else default
