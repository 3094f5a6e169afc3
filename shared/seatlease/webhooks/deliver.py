"""Send the deliveries that are due: ``deliver_due``.

How a run goes. It claims due deliveries in the database, sends them on a pool of
threads, records each outcome, and claims again as sends finish, until nothing is due
and nothing is in flight, or its ``budget_seconds`` are spent. Then the sends in flight
finish, each within its timeout; while the run waits on one endpoint's, it goes on
refilling the others (for one timeout at most), and the run ends within its budget and
two timeouts.

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
  endpoints are. An endpoint (or tenant) whose slots this run fills is left out of the
  run's claims until one of them ends, and an endpoint whose slots are full (any
  instance's sends) is not locked: a slow endpoint's waiting deliveries cost a fast
  one's claims nothing.
- **Sends** (``send``): the URL checked again at each send, no redirect followed,
  ``TIMEOUT_SECONDS`` (10; env ``WEBHOOK_TIMEOUT_SECONDS``) for the whole attempt,
  signed with the endpoint's secrets (``v1``) and the deployment's key (``v1a``).
- **Outcomes.** A 2xx is ``delivered``. A timeout, a refused or failed connection, a 5xx,
  408 or 429 is retried with exponential backoff and jitter: the first step is
  ``WEBHOOK_RETRY_FIRST_SECONDS`` (default 30; the local stack sets 1), doubling up to
  ``MAX_STEP_SECONDS``, each step drawn within +-25 %, at least a ``Retry-After`` the
  receiver asks (up to an hour); retries go on for ``RETRY_WINDOW`` (3 days) from the
  delivery's creation, the last one at its end; then the delivery is ``failed`` and its
  endpoint ``failing`` with the reason (a later 2xx makes it ``ok`` again). Any other
  answer (a 4xx, a 3xx: no redirect is followed) is ``final`` for that delivery. Each
  attempt is recorded: at, status, latency, error. On PostgreSQL a round's outcomes are
  one ``UPDATE`` and one ``INSERT`` whatever their number (``records.json_rows``).
"""

from __future__ import annotations

import os
import random
import secrets
import time
from collections import Counter
from collections.abc import Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Connection,
    Engine,
    and_,
    any_,
    bindparam,
    cast,
    func,
    insert,
    select,
    text,
    update,
)

from seatlease import clock
from seatlease.errors import BackendUnavailable, NotConfigured
from seatlease.logs import log
from seatlease.records import json_rows
from seatlease.records.db import transaction
from seatlease.records.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from seatlease.webhooks import crypto, urls
from seatlease.webhooks.send import MAX_ERROR_CHARS, Claimed, Outcome, send
from seatlease.webhooks.store import DELIVERED, FAILED, FINAL, PENDING, signing_secrets

PER_ENDPOINT_CONCURRENCY = 4
MAX_IN_FLIGHT = 64  # sends of one run at once (its threads)
# One tenant's sends in one run at once: a quarter of the run, so one tenant's slow or
# dead endpoints (20 of them, 4 sends each) never fill a run another tenant waits on
PER_TENANT_IN_RUN = MAX_IN_FLIGHT // 4
TIMEOUT_SECONDS = 10.0
DEFAULT_FIRST_STEP_SECONDS = 30.0
MAX_STEP_SECONDS = 6 * 3600.0
RETRY_WINDOW = timedelta(days=3)
CLAIM_MARGIN_SECONDS = 30.0
CLAIM_INTERVAL_SECONDS = 0.5  # while sends are in flight, look for new due ones this often
DEFAULT_BUDGET_SECONDS = 45.0

d = webhook_deliveries
e = webhook_endpoints


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
    in_budget_sends: set[int] = set()  # the run waits for these whatever it does
    next_look = 0.0
    try:
        while True:
            room = MAX_IN_FLIGHT - len(in_flight)
            in_budget = time.monotonic() - started < budget_seconds
            # A look considers every endpoint; between looks a round refills only the
            # endpoints whose sends just ended (their next due ones): a round's work then
            # grows with what it sends, not with the other endpoints and their backlogs.
            look = in_budget and (not in_flight or time.monotonic() >= next_look)
            waited_on = [item for item in in_flight.values() if item.id in in_budget_sends]
            refill = _refill(finished, waited_on, in_budget,
                             time.monotonic() - started < budget_seconds + timeout)  # fmt: skip
            if finished or (room and look):
                # What finished and the next claims in one transaction: one commit a round.
                with transaction(engine) as conn:
                    _record(conn, finished, first, counts)
                    hold = timeout + CLAIM_MARGIN_SECONDS
                    tenants = Counter(item.tenant_id for item in in_flight.values())
                    full = _full(in_flight.values())
                    among = None if look else refill - full
                    claimed = (
                        _claim(conn, current(), room, hold, tenants, endpoint_id, full, among)
                        if room and (look or among)
                        else []
                    )
                finished = []
                counts["claimed"] += len(claimed)
                for item in claimed:
                    in_flight[pool.submit(send, item, timeout, local, key, current)] = item
                if in_budget:
                    in_budget_sends.update(item.id for item in claimed)
                if look:
                    next_look = time.monotonic() + CLAIM_INTERVAL_SECONDS
            if not in_flight:
                break
            done, _ = wait(in_flight, timeout=CLAIM_INTERVAL_SECONDS, return_when=FIRST_COMPLETED)
            finished = [(in_flight.pop(future), future.result()) for future in done]
            in_budget_sends.difference_update(item.id for item, _ in finished)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    report = {name: counts[name] for name in ("claimed", "delivered", "retrying", "final")}
    report.update(failed=counts["failed"], lost_claims=counts["lost_claims"])
    return report


def _refill(
    finished: list[tuple[Claimed, Outcome]],
    waited_on: Collection[Claimed],
    in_budget: bool,
    in_tail: bool,
) -> set[str]:
    """The endpoints a round may claim more for between looks: those whose sends just
    ended. Once the budget is spent the run still waits for the sends it claimed within
    it (each ends within the timeout); while it waits on another endpoint's, it keeps
    refilling an endpoint (for one timeout at most), so a slow send never leaves a fast
    endpoint idle at a run's end. A run therefore ends within its budget and two
    timeouts."""
    ended = {item.endpoint_id for item, _ in finished}
    if in_budget:
        return ended
    if not in_tail:
        return set()
    waiting_on = {item.endpoint_id for item in waited_on}
    return {endpoint for endpoint in ended if waiting_on - {endpoint}}


def _full(sending: Collection[Claimed]) -> set[str]:
    """The endpoints whose slots this run's own sends fill: no claim can take them."""
    per_endpoint = Counter(item.endpoint_id for item in sending)
    return {name for name, count in per_endpoint.items() if count >= PER_ENDPOINT_CONCURRENCY}


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
    full: Collection[str] = (),
    among: Collection[str] | None = None,
) -> list[Claimed]:
    """``tenants``: the run's sends in flight per tenant (each at most
    ``PER_TENANT_IN_RUN``); ``only``: one endpoint's deliveries alone; ``full``: the
    endpoints this run's sends fill (left out); ``among``: these endpoints only (a
    refill), else all."""
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
    ).where(
        # Probed per endpoint (a LIMIT 1 subquery is not turned into a join): an index
        # lookup each, where an EXISTS became a scan of every endpoint's due rows.
        select(d.c.id)
        .where(d.c.endpoint_id == e.c.id, due)
        .order_by(d.c.next_attempt_at, d.c.id)
        .limit(1)
        .scalar_subquery()
        .isnot(None),
        # Full endpoints are not even locked. (Counted again below, after the locks:
        # this count's snapshot may miss a claim committed while it ran.)
        _sending(e.c.id, now).scalar_subquery() < PER_ENDPOINT_CONCURRENCY,
    )
    if only is not None:
        query = query.where(e.c.id == only)
    if among is not None:
        query = query.where(e.c.id.in_(sorted(among)))
    if full:
        query = query.where(e.c.id.notin_(sorted(full)))
    no_room = sorted(name for name, count in tenants.items() if count >= PER_TENANT_IN_RUN)
    if no_room:
        query = query.where(e.c.tenant_id.notin_(no_room))
    if postgres:
        query = query.with_for_update(skip_locked=True, key_share=True, of=e)
        # The claims read an endpoint's due rows in the due index's order, never by a
        # sort: with statistics taken when nothing was pending (a burst comes faster
        # than autovacuum), PostgreSQL rated any index alike and sorted all of an
        # endpoint's rows to find its first four. For the rest of this transaction only:
        # the claim is its last work (``deliver_due``'s round, ``claim_due``).
        conn.execute(text("SET LOCAL enable_sort = off"))
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


def _sending_now(now: datetime) -> Any:
    """A delivery in flight (any instance's send): claimed, its claim not run out."""
    return and_(d.c.claim.isnot(None), d.c.claimed_until > now)


def _sending(endpoint_id: Any, now: datetime) -> Any:
    """The count of an endpoint's sends in flight."""
    return select(func.count()).where(d.c.endpoint_id == endpoint_id, _sending_now(now))


def _in_flight(conn: Connection, endpoint_ids: list[str], now: datetime) -> dict[str, int]:
    if not endpoint_ids:
        return {}
    rows = conn.execute(
        select(d.c.endpoint_id, func.count())
        .where(d.c.endpoint_id.in_(endpoint_ids), _sending_now(now))
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
    if not finished:
        return
    planned = [(item, outcome, _next_state(item, outcome, first)) for item, outcome in finished]
    kept = _update_claimed(conn, [(item, values) for item, _, values in planned])
    attempts: list[dict[str, Any]] = []
    recovered: set[str] = set()
    for item, outcome, values in planned:
        if item.id not in kept:  # the claim ran out and another run took it, or deleted
            counts["lost_claims"] += 1
            continue
        attempts.append({"delivery_id": item.id, "endpoint_id": item.endpoint_id,
                         "at": outcome.at, "status": outcome.status,
                         "latency_ms": outcome.latency_ms, "error": outcome.error})  # fmt: skip
        state = values["state"]
        counts[{PENDING: "retrying"}.get(state, state)] += 1
        if state == FAILED:
            _mark_failing(conn, item, outcome, values["attempts"])
        elif state == DELIVERED and item.endpoint_failing:
            recovered.add(item.endpoint_id)
    _insert_attempts(conn, attempts)
    if recovered:
        conn.execute(
            update(e)
            .where(e.c.id.in_(sorted(recovered)), e.c.state == "failing")
            .values(state="ok", failing_reason=None, failing_since=None)
        )


_OUTCOME_COLUMNS = ("id", "claim", "attempts", "state", "last_status", "last_error",
                    "next_attempt_at")  # fmt: skip
_ATTEMPT_COLUMNS = ("delivery_id", "endpoint_id", "at", "status", "latency_ms", "error")


def _update_claimed(conn: Connection, planned: list[tuple[Claimed, dict[str, Any]]]) -> set[int]:
    """Each delivery's next state, where its claim still holds; the ids updated. On
    PostgreSQL one statement for all (statements, not rows, cost here)."""
    rows = [{"id": item.id, "claim": item.claim, **values} for item, values in planned]
    if conn.dialect.name == "postgresql":
        source = json_rows.recordset(d, _OUTCOME_COLUMNS)
        statement = (
            update(d)
            .where(
                # The ids again, as an array: PostgreSQL then looks each row up by its
                # key. (It guesses 100 rows for any JSON recordset and, on a table
                # whose statistics say small, joined by reading the whole table.)
                d.c.id == any_(cast(bindparam("ids"), ARRAY(BigInteger))),
                d.c.id == source.c.id,
                d.c.claim == source.c.claim,
            )
            .values(
                {name: source.c[name] for name in _OUTCOME_COLUMNS[2:]}
                | {"claim": None, "claimed_until": None}
            )
            .returning(d.c.id)
        )
        params = {json_rows.PARAMETER: json_rows.as_json(rows), "ids": [row["id"] for row in rows]}
        return set(conn.execute(statement, params).scalars())
    kept = set()
    for row in rows:
        values = {name: row[name] for name in _OUTCOME_COLUMNS[2:]}
        done = conn.execute(
            update(d)
            .where(d.c.id == row["id"], d.c.claim == row["claim"])
            .values(values | {"claim": None, "claimed_until": None})
        )
        if done.rowcount == 1:
            kept.add(row["id"])
    return kept


def _insert_attempts(conn: Connection, attempts: list[dict[str, Any]]) -> None:
    if not attempts:
        return
    if conn.dialect.name == "postgresql":
        source = json_rows.recordset(webhook_attempts, _ATTEMPT_COLUMNS)
        statement = insert(webhook_attempts).from_select(_ATTEMPT_COLUMNS, select(*source.c))
        conn.execute(statement, {json_rows.PARAMETER: json_rows.as_json(attempts)})
    else:
        conn.execute(insert(webhook_attempts), attempts)


def _next_state(item: Claimed, outcome: Outcome, first: float) -> dict[str, Any]:
    attempts = item.attempts + 1
    values: dict[str, Any] = {
        "attempts": attempts,
        "state": PENDING,
        "last_status": outcome.status,
        "last_error": outcome.error,
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
