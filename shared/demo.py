"""``seatlease demo``: the zombie-seat story, played against the running local stack.

Three clients share a two-seat license. Two take the seats; the third is denied with
Retry-After. One holder "crashes" (stops heartbeating, never releases). The third client
waits; the crashed lease expires, the reaper reclaims it, and the waiting client gets the
seat. Then the audit rows of the whole story are shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.client import NoSeatsAvailable, SeatClient
from shared.clock import utc
from shared.localstack import STATE_FILE


def load_state(path: Path = STATE_FILE) -> dict[str, str]:
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: start the local stack first (`make run` or `seatlease local`)"
        )
    return json.loads(path.read_text())


def play(state: dict[str, str], say: Callable[[str], None] = print, pause: float = 1.0) -> dict:
    """Run the story; returns what happened (for tests)."""
    client = SeatClient(state["base_url"], state["api_key"], backoff=0.2)
    lic = state["license_id"]
    t0 = time.monotonic()

    def step(text: str) -> None:
        say(f"[{time.monotonic() - t0:5.1f}s] {text}")

    started = datetime.now(UTC)
    run = f"{int(time.time())}"  # fresh client ids on every run
    alice = client.lease(lic, client_id=f"alice-{run}", metadata={"user": "alice", "host": "ws-1"})
    lease_a = alice.__enter__()
    step(f"alice acquires a seat: session {lease_a.session_id[:8]}..., "
         f"{lease_a.seats_used}/{lease_a.seats_total} seats used, "
         f"heartbeat every {lease_a.heartbeat_interval_seconds} s")  # fmt: skip
    bob = client.acquire(lic, f"bob-{run}", metadata={"user": "bob", "host": "ws-2"})
    step(f"bob acquires a seat: session {bob['session_id'][:8]}..., "
         f"{bob['seats_used']}/{bob['seats_total']} seats used")  # fmt: skip
    time.sleep(pause)
    denied: NoSeatsAvailable | None = None
    try:
        client.acquire(lic, f"carol-{run}", metadata={"user": "carol", "host": "ws-3"})
    except NoSeatsAvailable as exc:
        denied = exc
        step(f"carol is denied: 409 {exc.code}, {exc.seats_used}/{exc.seats_total} seats "
             f"used, Retry-After {exc.retry_after_seconds} s")  # fmt: skip
    step("bob's machine crashes: no more heartbeats, no release")
    step("carol waits for a seat (the client honours Retry-After) ...")
    step("... meanwhile bob's lease runs out and is reclaimed, by the reaper or by the next "
         "acquire, whichever comes first")  # fmt: skip
    waited = time.monotonic()
    with client.lease(lic, client_id=f"carol-{run}", wait=True, timeout=120,
                      metadata={"user": "carol", "host": "ws-3"}) as lease_c:  # fmt: skip
        step(f"carol gets bob's seat after {time.monotonic() - waited:.1f} s: "
             f"session {lease_c.session_id[:8]}...")  # fmt: skip
        time.sleep(pause)
    step("carol releases her seat")
    alice.__exit__(None, None, None)
    step("alice releases her seat")
    sessions = {bob["session_id"], lease_a.session_id, lease_c.session_id}
    rows = _audit_rows(lic, sessions, started, say)
    return {"denied": denied, "bob": bob["session_id"], "carol": lease_c.session_id, "rows": rows}


def _audit_rows(
    lic: str, sessions: set[str], started: datetime, say: Callable[[str], None]
) -> list[dict]:
    """Wait for the story's events to reach the audit table, then print them: the three
    sessions' events and the denials counted since the story began (a denial is not a
    lease: the reaper flushes the per-license counter as one ``lease.denied`` row)."""
    from shared import store
    from shared.cli.output import table
    from shared.localstack import DEMO_TENANT

    say("waiting for the audit trail (reaper -> Pub/Sub -> audit -> database) ...")
    wanted = {"lease.acquired": 3, "lease.released": 2, "lease.reclaimed": 1, "lease.denied": 1}
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = [
            r
            for r in store.list_events(DEMO_TENANT, lic)
            if r["session_id"] in sessions
            or (r["type"] == "lease.denied" and utc(r["occurred_at"]) >= started)
        ]
        counts = {t: sum(r["type"] == t for r in rows) for t in wanted}
        if all(counts[t] >= n for t, n in wanted.items()):
            break
        time.sleep(1)
    shown = [
        {
            "occurred_at": r["occurred_at"],
            "type": r["type"],
            "client": r["client_id"] or "",
            "user": (r["metadata"] or {}).get("user"),
            "seats": f"{r['seats_used']}/{r['seats_total']}"
            if r["seats_used"] is not None
            else f"{r['count']} denied",
        }
        for r in rows
    ]
    say(table(shown, ["occurred_at", "type", "client", "user", "seats"]))
    return rows
