"""``seatlease demo``: the zombie-seat story, played against the running local stack.

Three clients share a two-seat license of the demo's own (``demo-crash``, 8 s leases), so
the story never competes with the seat a person holds on ``demo-app`` in the README's
tour. Two take the seats; the third is denied with Retry-After. One holder "crashes"
(stops heartbeating, never releases). The third client waits; the crashed lease expires,
the reaper reclaims it, and the waiting client gets the seat. Then the audit trail of the
story is shown, as ``seatlease report usage`` reads it.

Everything goes through the stack's HTTP functions (the vendor client for the seats, the
admin function for the rest), never through a database or Redis of its own choosing.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from seatlease_cli.backend import HttpBackend, local_stack_state
from seatlease_cli.exits import EXIT_USAGE, CommandError
from seatlease_cli.output import human_duration, table
from seatlease_client import NoSeatsAvailable, SeatClient

# What the story leaves in the audit trail (and a denial per "denied" line it printed);
# the demo waits until it is all there.
EXPECTED = {"acquired": 3, "released": 2, "reclaimed": 1}
AUDIT_WAIT_SECONDS = 60
WAIT_SECONDS = 120  # carol's patience


def load_state() -> dict[str, Any]:
    """The running local stack of this folder or a parent folder, or a one-line error
    saying to start it."""
    state = local_stack_state(others=False)  # a stale state file: "not running"
    if state is None:
        raise CommandError(
            "no local stack in this folder or its parents (no .seatlease/local.json): start "
            "one with `make run` (or `seatlease local`) in the project's folder, then run "
            "`seatlease demo` from a second terminal in that folder (or one below it)",
            EXIT_USAGE,
        )
    return state


def free_story_seats(admin: HttpBackend, tenant: str, lic: str) -> tuple[int, str]:
    """Revoke what an interrupted earlier run left on the story's license; returns how
    many leases that was and the Redis server time after it (where the story starts)."""
    body = admin.call("status", tenant_id=tenant, license_id=lic)
    leftovers = [lease for entry in body["licenses"] for lease in entry["leases"]]
    for lease in leftovers:
        try:
            admin.call("revoke", tenant_id=tenant, license_id=lic, session_id=lease["session_id"])
        except CommandError:
            pass  # expired or released meanwhile: free anyway
    if leftovers:
        body = admin.call("status", tenant_id=tenant, license_id=lic)
    return len(leftovers), str(body["at"])


def play(state: dict[str, Any], say: Callable[[str], None] = print, pause: float = 1.0) -> dict:
    """Run the story; returns what happened (for tests)."""
    # Verified like a vendor's product: pinned to the keys the local stack signs with (its
    # own JWKS, read over loopback from the stack this command started).
    with urllib.request.urlopen(f"{state['base_url']}/keys", timeout=10) as served:  # noqa: S310
        pinned = [key["x"] for key in json.load(served)["keys"]]
    client = SeatClient(state["base_url"], state["api_key"], backoff=0.2, pinned_keys=pinned)
    admin = HttpBackend(f"{state['base_url']}/admin")
    tenant, lic = state["tenant_id"], state["story_license_id"]
    t0 = time.monotonic()

    def step(text: str) -> None:
        say(f"[{time.monotonic() - t0:5.1f}s] {text}")

    freed, started = free_story_seats(admin, tenant, lic)
    if freed:
        step(f"revoked {freed} lease(s) an earlier, interrupted demo left on {lic}")
    run = f"{int(time.time())}"  # fresh client ids on every run
    alice = client.lease(lic, client_id=f"alice-{run}", metadata={"user": "alice", "host": "ws-1"})
    lease_a = alice.__enter__()
    step(f"alice acquires a seat on {lic}: session {lease_a.session_id[:8]}..., "
         f"{lease_a.seats_used}/{lease_a.seats_total} seats used, "
         f"heartbeat every {lease_a.heartbeat_interval_seconds} s")  # fmt: skip
    bob = client.acquire(lic, f"bob-{run}", metadata={"user": "bob", "host": "ws-2"})
    step(f"bob acquires a seat: session {bob['session_id'][:8]}..., "
         f"{bob['seats_used']}/{bob['seats_total']} seats used")  # fmt: skip
    time.sleep(pause)
    carol = {"client_id": f"carol-{run}", "metadata": {"user": "carol", "host": "ws-3"}}
    # Every denial the story has is printed, so the audit trail's count (the summary's
    # "denied N") is the number of lines that say so.
    denials: list[NoSeatsAvailable] = []
    try:
        client.acquire(lic, carol["client_id"], metadata=carol["metadata"])
    except NoSeatsAvailable as exc:
        denials.append(exc)
        step(f"carol is denied: 409 {exc.code}, {exc.seats_used}/{exc.seats_total} seats "
             f"used, Retry-After {exc.retry_after_seconds} s")  # fmt: skip
    step("bob's machine crashes: no more heartbeats, no release")
    step("carol waits as Retry-After says, then asks again ...")
    step("... meanwhile bob's lease runs out and is reclaimed, by the reaper or by the next "
         "acquire, whichever comes first")  # fmt: skip
    waited = time.monotonic()
    carol_seat, lease_c = _wait_for_seat(client, lic, carol, denials, step, waited)
    try:
        step(f"carol gets bob's seat after {time.monotonic() - waited:.1f} s: "
             f"session {lease_c.session_id[:8]}...")  # fmt: skip
        time.sleep(pause)
        carol_seat.__exit__(None, None, None)
        step("carol releases her seat")
    finally:
        alice.__exit__(None, None, None)
    step("alice releases her seat")
    report = _audit_report(admin, tenant, lic, started, say, len(denials), state.get("events"))
    return {
        "denied": denials[0] if denials else None,
        "denials": len(denials),
        "alice": lease_a.session_id,
        "bob": bob["session_id"],
        "carol": lease_c.session_id,
        "since": started,
        "report": report,
    }


def _wait_for_seat(
    client: SeatClient,
    lic: str,
    who: dict[str, Any],
    denials: list[NoSeatsAvailable],
    step: Callable[[str], None],
    since: float,
) -> tuple[Any, Any]:
    """What ``client.lease(..., wait=True)`` does, with each denial told: wait as
    Retry-After says, ask again. Returns the entered lease context and its lease."""

    def pause(denied: NoSeatsAvailable) -> None:
        time.sleep(min(float(denied.retry_after_seconds), client.max_wait_poll))

    if denials:  # asked already: wait as that answer said before asking again
        pause(denials[-1])
    while True:
        seat = client.lease(lic, **who)
        try:
            return seat, seat.__enter__()
        except NoSeatsAvailable as exc:
            if time.monotonic() - since > WAIT_SECONDS:
                raise
            step(f"carol asks again and is denied again: {exc.seats_used}/{exc.seats_total} "
                 f"seats used, Retry-After {exc.retry_after_seconds} s")  # fmt: skip
            denials.append(exc)
            pause(exc)


def _audit_report(
    admin: HttpBackend,
    tenant: str,
    lic: str,
    since: str,
    say: Callable[[str], None],
    denials: int,
    events: str | None = None,
) -> dict[str, Any]:
    """Wait for the story's events to reach the audit table (reaper -> Pub/Sub -> audit
    function -> database), then print them as the usage report sees them. A denial is
    not a lease: the reaper flushes the license's denial counter as one ``lease.denied``
    event with a count. What the audit trail lacks after ``AUDIT_WAIT_SECONDS`` is said in
    one line, and the report's ``missing`` names it (the command then exits non-zero)."""
    path = "reaper -> audit" if events == "in-process" else "reaper -> Pub/Sub -> audit"
    say(f"waiting for the audit trail ({path} -> database) ...")
    fields = {"tenant_id": tenant, "license_id": lic, "since": since}
    expected = {**EXPECTED, "denials": denials}
    deadline = time.monotonic() + AUDIT_WAIT_SECONDS
    while True:
        report = admin.call("report.usage", **fields)
        outcome = next(iter(report["outcomes"]), {})
        if all(outcome.get(k, 0) >= n for k, n in expected.items()):
            break
        if time.monotonic() >= deadline:
            missing = {k: n - outcome.get(k, 0) for k, n in expected.items()
                       if outcome.get(k, 0) < n}  # fmt: skip
            report["missing"] = missing
            lacking = ", ".join(f"{n} {k}" for k, n in missing.items())
            why = ("is the stack's reaper running? see its log" if events == "in-process"
                   else "is the Pub/Sub emulator running? see the stack's log")  # fmt: skip
            say(f"could not show the whole audit trail: after {AUDIT_WAIT_SECONDS} s it "
                f"still lacks {lacking} ({why}); so far:")  # fmt: skip
            break
        time.sleep(1)
    rows = [
        {
            "client": row["client_id"],
            "leases": row["leases"],
            "held": human_duration(row["total_seconds"]),
            "reclaimed": row["reclaimed"],
        }
        for row in report["durations"]
    ]
    say(table(rows, ["client", "leases", "held", "reclaimed"]))
    say(
        ", ".join(f"{k} {outcome.get(k, 0)}" for k in ("acquired", "released", "reclaimed"))
        + f", denied {outcome.get('denials', 0)} (seatlease report usage --tenant {tenant} "
        f"--license {lic} --since {since})"
    )
    return report
