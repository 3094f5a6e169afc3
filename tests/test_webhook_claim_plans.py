"""A delivery round's statements do work bounded by what the round takes, not by the
queue (issue 51: one slow endpoint never delays another). On the real PostgreSQL
database, beside a slow endpoint holding ``MAX_PENDING`` due deliveries (the most a
caller can make wait) and a burst of its own with one ``next_attempt_at``, every
statement of a round (a look, the outcomes, a refill, a "send test") is run again under
``EXPLAIN (ANALYZE, FORMAT JSON)`` and no plan node may read more than ``BOUND`` rows.

Plans are PostgreSQL's choice, and they change with the table's statistics: a burst
arrives faster than autovacuum analyses, so the rounds are checked with the statistics
of a table that was empty when last analysed, of one whose every row was delivered
(the bench's second burst: PostgreSQL then rated every index alike and sorted an
endpoint's every row to find its first four), and after ``ANALYZE``. (Before these
statements were written to be bounded, a round read every due row of every endpoint:
the slow endpoint's backlog slowed the fast one's claims.)"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, event, text

from seatlease.records import db
from seatlease.records import store as records
from seatlease.webhooks import crypto, deliver, store
from seatlease.webhooks.send import Outcome

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
BURST = 2_000
BOUND = 200  # rows any one plan node may read (a round takes at most 64)


@pytest.fixture(params=["empty", "all_delivered", "analysed"])
def backlog(request, database_url, monkeypatch):
    """acme's fast endpoint (lease.acquired only) with a burst of ``BURST`` due
    deliveries, and its slow endpoint (every type) with ``MAX_PENDING`` due."""
    monkeypatch.setenv("WEBHOOK_KEY", crypto.new_key())
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    statistics = request.param
    with db.get_engine().begin() as conn:
        conn.execute(text("TRUNCATE webhook_attempts, webhook_deliveries, webhook_endpoints"))
    records.create_tenant("acme")
    if statistics == "all_delivered":  # an earlier burst to another endpoint, delivered
        records.create_tenant("globex")
        store.create_endpoint("globex", "http://127.0.0.1:9/earlier")
        earlier = [_event(f"old{n:06d}", "lease.acquired", "globex") for n in range(5 * BURST)]
        assert store.enqueue(earlier, now=T0) == len(earlier)
        with db.get_engine().begin() as conn:
            conn.execute(text("UPDATE webhook_deliveries SET state = 'delivered'"))
    _analyse()  # the statistics of that table, before the endpoints and their backlog
    fast, _ = store.create_endpoint("acme", "http://127.0.0.1:9/fast", ["lease.acquired"])
    slow, _ = store.create_endpoint("acme", "http://127.0.0.1:9/slow")
    released = store.MAX_PENDING - BURST
    events = [_event(f"r{n:06d}", "lease.released") for n in range(released)]
    events += [_event(f"a{n:06d}", "lease.acquired") for n in range(BURST)]
    assert store.enqueue(events, now=T0) == store.MAX_PENDING + BURST
    if statistics == "analysed":
        _analyse()
    return fast["id"], slow["id"]


def _analyse() -> None:
    engine = create_engine(os.environ["DATABASE_URL"], isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM (ANALYZE) webhook_deliveries"))
    finally:
        engine.dispose()


def _event(event_id: str, type: str, tenant: str = "acme") -> dict:
    return {"event_id": event_id, "type": type, "tenant_id": tenant, "license_id": "cad",
            "session_id": "s1", "occurred_at": "2026-11-29T08:00:00.000Z",
            "seats_used": 1, "seats_total": 5}  # fmt: skip


def test_a_rounds_statements_read_what_it_takes_not_the_queue(backlog):
    fast, slow = backlog
    engine = db.get_engine()
    now = T0 + timedelta(seconds=5)
    statements: list[tuple[str, object, str]] = []
    settings = {"sort": "on"}  # as the round set it, for the replay

    def capture(_conn, _cursor, statement, parameters, _context, _many):
        plain = statement.strip()
        if plain.startswith("SET LOCAL enable_sort"):
            settings["sort"] = plain.rsplit("=", 1)[1].strip()
        elif not plain.upper().startswith(("BEGIN", "COMMIT", "ROLLBACK", "SELECT 1")):
            statements.append((statement, parameters, settings["sort"]))

    def transaction_ended(_conn) -> None:  # SET LOCAL ends with its transaction
        settings["sort"] = "on"

    event.listen(engine, "before_cursor_execute", capture)
    event.listen(engine, "commit", transaction_ended)
    event.listen(engine, "rollback", transaction_ended)
    try:
        counts: Counter[str] = Counter()
        with deliver.transaction() as conn:  # a look: every endpoint
            claimed = deliver._claim(conn, now, deliver.MAX_IN_FLIGHT, 40)
        assert {c.endpoint_id for c in claimed} == {fast, slow}
        assert len(claimed) == 2 * deliver.PER_ENDPOINT_CONCURRENCY
        outcomes = [(c, Outcome(now, "delivered", 200, 3, None)) for c in claimed[:-1]]
        outcomes.append((claimed[-1], Outcome(now, "pending", 503, 3, "HTTP 503")))
        with deliver.transaction() as conn:  # the outcomes, then a refill of the fast one
            deliver._record(conn, outcomes, 30.0, counts)
            refill = deliver._claim(conn, now, 8, 40, among={fast})
        assert counts["delivered"] == len(claimed) - 1 and counts["retrying"] == 1
        assert refill and {c.endpoint_id for c in refill} == {fast}
        with deliver.transaction() as conn:  # a tenant's "send test": one endpoint alone
            assert deliver._claim(conn, now, 8, 40, only=slow)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
        event.remove(engine, "commit", transaction_ended)
        event.remove(engine, "rollback", transaction_ended)

    assert len(statements) >= 8
    for statement, parameters, sort in statements:
        read = _most_rows_read(engine, statement, parameters, sort)
        assert read <= BOUND, f"{read} rows read by a node of:\n{statement}"


def _most_rows_read(engine, statement: str, parameters, sort: str) -> int:
    """Run ``statement`` again under EXPLAIN ANALYZE (rolled back, with the round's
    ``enable_sort``); the most rows any node of its plan read: its rows out and what its
    filters removed, over its loops."""
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute(f"SET LOCAL enable_sort = {'off' if sort == 'off' else 'on'}")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
        (plan,) = cursor.fetchone()
        conn.rollback()
    if isinstance(plan, str):
        plan = json.loads(plan)
    most = 0
    nodes = [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        read = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        read += node.get("Rows Removed by Index Recheck", 0)
        most = max(most, read * max(node.get("Actual Loops", 1), 1))
        nodes += node.get("Plans", [])
    return most
