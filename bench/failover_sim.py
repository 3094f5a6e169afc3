"""A region's loss, replayed at 100,000 live leases (issue 40; docs/design.md, "A region
lost"): real redis-servers and the real seat scripts, a simulated population of clients.

The primary P holds ``--leases`` live leases on licenses of ``SEATS`` seats (80 % in use),
leases of ``LEASE`` s, each client heartbeating every third of it with the clients' jitter
(75-100 % of the interval), holders leaving (a mean hold of ``HOLD`` s) and newcomers
arriving to keep the use steady. Both servers run on a shifted clock (tests/procs.py), so
simulated time passes in seconds of real work.

The loss: at ``T - lag`` P's data is saved (what an asynchronous replica has); P goes on
for ``lag`` seconds (grants, renewals, releases the replica never sees), then dies. After
``OUTAGE`` s (the switchover) the replica R comes up from the saved data and the clients
go on against it:

- **with recovery** (this release): ``seatlease failover begin`` on R; a holder whose
  heartbeat R answers ``unknown`` sends its lease token once (the engine's ``readmit``,
  one call that re-creates and renews it, as the heartbeat function does after verifying
  it); a newcomer refused ``recovering``
  retries after its ``Retry-After``;
- **without** (the release before): no recovery, no token: R's ``unknown`` ends the seat,
  whose holder asks again like a newcomer; and R grants the seats it thinks are free.

Every simulated second, the truth is what the clients believe: a client holds a seat from
its grant until it releases or is told the seat is gone, and no longer than the last
deadline it was given. Reported per lag (0, 1, 2 and 5 s by default), for both runs:

- **seats granted twice**: the most, at any second, of the clients believing they hold a
  seat beyond their license's seats, summed over the licenses (goal 0);
- **holders dropped**: holders of a valid seat at the loss whose seat did not come back
  (goal 0);
- **longest wait**: the longest a newcomer waited because of the recovery (first
  ``recovering`` answer to its grant), and **grants delayed**: the share of newcomers'
  attempts after the loss answered ``recovering``.

Run: ``python3 bench/failover_sim.py`` (about 10 minutes on 2 cores; ``--leases 10000``
for a quick look). Prints one table; docs/benchmarks.md records a run.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from procs import ShiftedClock, build_clockshift  # noqa: E402

from seatlease.errors import NoSeatsAvailable, Recovering, SessionExpired  # noqa: E402
from seatlease.licenses import LicenseConfig  # noqa: E402
from seatlease.seats import failover  # noqa: E402
from seatlease.seats.engine import SeatEngine, SeatRequest  # noqa: E402
from seatlease.seats.protocol.calls import heartbeat_call  # noqa: E402
from seatlease.seats.protocol.replies import decode  # noqa: E402
from seatlease.seats.redisconn import connect  # noqa: E402
from seatlease.seats.values import TokenGrant  # noqa: E402
from seatlease_cli.procs import Proc, free_port, port_open, redis_args, spawn, wait_until  # noqa: E402

TENANT = "sim"
SEATS = 100
LEASE = 360  # s; heartbeats every LEASE / 3 (the clients' rule)
HOLD = 1800  # a holder's mean stay, s
USE = 0.95  # seats in use in the steady state: often full
WARMUP = 240  # s before the loss: heartbeats spread over a whole interval
AFTER = 300  # s after the switchover: past every license's window (LEASE / 3 + 5 s)
OUTAGE = 20  # s between P's death and R's start (the switchover)
STEP = 1.0  # simulated seconds per step


@dataclass
class Client:
    license_id: str
    client_id: str
    session_id: str | None = None
    deadline_ms: int = 0  # the last deadline it was given (its token's exp)
    next_beat: float = 0.0  # simulated seconds
    leaves_at: float = 0.0
    waiting_since: float | None = None  # a newcomer refused `recovering`: since when
    held_at_loss: bool = False


@dataclass
class Outcome:
    double_granted: int = 0
    dropped: int = 0
    longest_wait: float = 0.0
    attempts_after: int = 0
    delayed: int = 0
    recovered: int = 0
    grants_after: int = 0
    calls: int = 0
    notes: list[str] = field(default_factory=list)


class Server:
    """A redis-server on a shifted clock (every server of a run shares one clock file)."""

    def __init__(self, workdir: Path, shim: Path, clock: ShiftedClock, rdb: Path | None) -> None:
        self.port = free_port()
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir()
        if rdb is not None:
            shutil.copy(rdb, self.dir / "dump.rdb")
        env = {"LD_PRELOAD": str(shim), "CLOCKSHIFT_FILE": str(clock.path)}
        import os

        args = redis_args(self.port, str(self.dir), "--dbfilename", "dump.rdb")
        self.proc = Proc([spawn(args, self.dir / "redis.log", env={**os.environ, **env})])
        wait_until(lambda: port_open(self.port), 30, f"redis-server {self.port}")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        # (a large dump takes a moment to load: wait until it answers)
        client = connect(self.url, socket_timeout=120)
        wait_until(lambda: _loaded(client), 120, "the dump loaded")
        client.close()


def _loaded(client: Any) -> bool:
    try:
        return client.info("persistence").get("loading") == 0
    except Exception:
        return False


def config(_tenant: str, _license: str) -> LicenseConfig:
    return LicenseConfig(seats=SEATS, lease_seconds=LEASE, max_lease_seconds=LEASE)


class Simulation:
    def __init__(self, leases: int, lag: float, recovery: bool, workdir: Path, seed: int):
        self.rng = random.Random(seed)
        self.lag, self.recovery, self.workdir = lag, recovery, workdir
        self.licenses = [f"lic-{i:05d}" for i in range(math.ceil(leases / (SEATS * USE)))]
        self.target = leases
        self.clock = ShiftedClock(workdir / f"clock-{lag}-{recovery}")
        self.shim = build_clockshift(workdir)
        self.primary = Server(workdir, self.shim, self.clock, None)
        self.engine = SeatEngine(connect(self.primary.url, socket_timeout=120), config)
        self.engine.scripts.library.load()  # (its calls are queued in pipelines)
        self.clients: dict[str, Client] = {}  # client_id -> a holder or a newcomer
        self.seq = 0
        self.t0 = self.engine.server_time_ms() / 1000
        self.out = Outcome()

    def now(self) -> float:
        return self.engine.server_time_ms() / 1000 - self.t0

    def newcomer(self, license_id: str) -> Client:
        self.seq += 1
        client = Client(license_id, f"c{self.seq}")
        self.clients[client.client_id] = client
        return client

    # -- calls ------------------------------------------------------------------------

    def acquire(self, client: Client, t: float, after_loss: bool) -> None:
        self.out.calls += 1
        began = failover.began_ms(self.engine.redis) if self.recovery else None
        try:
            lease = self.engine.acquire(
                SeatRequest(TENANT, client.license_id, client.client_id, failover_began_ms=began)
            )
        except Recovering as waiting:
            self.out.delayed += 1
            self.out.attempts_after += 1
            if client.waiting_since is None:
                client.waiting_since = t
            client.next_beat = t + waiting.retry_after_seconds
            return
        except NoSeatsAvailable:
            if after_loss:
                self.out.attempts_after += 1
            self.clients.pop(client.client_id, None)  # gives up, like a denied user
            return
        if after_loss:
            self.out.attempts_after += 1
            self.out.grants_after += 1
        if client.waiting_since is not None:
            self.out.longest_wait = max(self.out.longest_wait, t - client.waiting_since)
            client.waiting_since = None
        client.session_id, client.deadline_ms = lease.session_id, lease.expires_at_ms
        client.next_beat = t + LEASE / 3 * self.rng.uniform(0.75, 1.0)
        client.leaves_at = t + self.rng.expovariate(1 / HOLD)

    def heartbeats(self, due: list[Client], t: float) -> None:
        """Pipelined (the bulk of the calls); an unknown session goes on one by one."""
        pipe = self.engine.redis.pipeline(transaction=False)
        for client in due:
            keys, args = heartbeat_call(
                TENANT, client.license_id, client.session_id or "", request_id=f"h{self.seq}"
            )
            self.seq += 1
            self.engine.scripts.heartbeat(keys=keys, args=args, client=pipe)
        self.out.calls += len(due)
        for client, reply in zip(due, pipe.execute(), strict=True):
            if reply[0] == "missing":  # (a cold config: the engine fills it)
                self.beat_one(client, t)
            elif reply[0] == "ok":
                client.deadline_ms = decode(reply).expires_at_ms
                client.next_beat = t + LEASE / 3 * self.rng.uniform(0.75, 1.0)
            else:
                self.gone(client, t, str(reply[0]))

    def beat_one(self, client: Client, t: float) -> None:
        try:
            renewal = self.engine.heartbeat(TENANT, client.license_id, client.session_id or "")
        except SessionExpired as gone:
            self.gone(client, t, gone.reason)
            return
        client.deadline_ms = renewal.expires_at_ms
        client.next_beat = t + LEASE / 3 * self.rng.uniform(0.75, 1.0)

    def gone(self, client: Client, t: float, reason: str) -> None:
        """The seat's heartbeat answered it is gone: with recovery, an unknown session
        sends its token once (what the clients do); else the seat is lost."""
        now_ms = self.engine.server_time_ms()
        if reason == "unknown" and self.recovery and client.deadline_ms > now_ms:
            grant = TokenGrant(
                client.session_id or "",
                client.client_id,
                client.deadline_ms // 1000 * 1000,  # the token's exp: whole seconds
                issued_at_ms=(client.deadline_ms - LEASE * 1000) // 1000 * 1000,
            )
            began = failover.began_ms(self.engine.redis)
            try:  # the heartbeat's retry with the token: re-created and renewed at once
                lease = self.engine.readmit(
                    SeatRequest(TENANT, client.license_id, client.client_id, recover=grant,
                                lease_seconds=LEASE, failover_began_ms=began)
                )  # fmt: skip
                if lease.recovered:
                    self.out.recovered += 1
                client.deadline_ms = lease.expires_at_ms
                client.next_beat = t + LEASE / 3 * self.rng.uniform(0.75, 1.0)
                return
            except SessionExpired:
                pass
        if client.held_at_loss and client.deadline_ms > now_ms:
            self.out.dropped += 1
        client.session_id, client.deadline_ms = None, 0
        client.next_beat = t  # asks for a seat again at once, as a newcomer

    def release(self, client: Client) -> None:
        self.out.calls += 1
        self.engine.release(TENANT, client.license_id, client.session_id or "")
        self.clients.pop(client.client_id, None)

    # -- the run ------------------------------------------------------------------------

    def fill(self) -> None:
        """Holders up to the target, their first heartbeats spread over an interval."""
        per = self.target // len(self.licenses)
        for license_id in self.licenses:
            self.engine.cache_config(TENANT, license_id, config(TENANT, license_id))
        batch: list[Client] = []
        for license_id in self.licenses:
            for _ in range(per):
                batch.append(self.newcomer(license_id))
        for start in range(0, len(batch), 2000):
            pipe = self.engine.redis.pipeline(transaction=False)
            chunk = batch[start : start + 2000]
            from seatlease.seats.protocol.calls import acquire_call

            for client in chunk:
                keys, args = acquire_call(
                    TENANT, client.license_id, client.client_id, request_id=client.client_id
                )
                self.engine.scripts.acquire(keys=keys, args=args, client=pipe)
            for client, reply in zip(chunk, pipe.execute(), strict=True):
                assert reply[0] == "acquired", reply
                answer = decode(reply)
                client.session_id, client.deadline_ms = answer.session_id, answer.expires_at_ms
                client.next_beat = self.rng.uniform(0, LEASE / 3)
                client.leaves_at = self.rng.expovariate(1 / HOLD)

    def step(self, t: float, after_loss: bool) -> None:
        rate = self.target / HOLD  # newcomers a second: the holders' departures
        for _ in range(_poisson(self.rng, rate * STEP)):
            self.acquire(self.newcomer(self.rng.choice(self.licenses)), t, after_loss)
        due, leaving, asking = [], [], []
        for client in list(self.clients.values()):
            if client.session_id is None:
                if client.next_beat <= t:
                    asking.append(client)
            elif client.leaves_at <= t:
                leaving.append(client)
            elif client.next_beat <= t:
                due.append(client)
        for client in leaving:
            self.release(client)
        if due:
            self.heartbeats(due, t)
        for client in asking:
            self.acquire(client, t, after_loss)

    def check(self) -> None:
        """The clients' truth: believers beyond their license's seats, summed."""
        now_ms = self.engine.server_time_ms()
        believers: dict[str, int] = {}
        for client in self.clients.values():
            if client.session_id is not None and client.deadline_ms > now_ms:
                believers[client.license_id] = believers.get(client.license_id, 0) + 1
        over = sum(max(0, n - SEATS) for n in believers.values())
        self.out.double_granted = max(self.out.double_granted, over)

    def advance_to(self, t_end: float, after_loss: bool) -> None:
        while self.now() < t_end:
            t = self.now()
            self.step(t, after_loss)
            self.check()
            self.clock.advance(STEP)

    def run(self) -> Outcome:
        self.fill()
        self.advance_to(WARMUP, False)
        # what an asynchronous replica has: P's data `lag` seconds before the loss
        self.engine.redis.save()
        snapshot = self.workdir / f"snapshot-{self.lag}-{self.recovery}.rdb"
        shutil.copy(self.primary.dir / "dump.rdb", snapshot)
        self.advance_to(WARMUP + self.lag, False)
        for client in self.clients.values():
            client.held_at_loss = client.session_id is not None
        self.primary.proc.kill()
        self.engine.redis.close()
        self.clock.advance(OUTAGE)  # nothing answers meanwhile
        replica = Server(self.workdir, self.shim, self.clock, snapshot)
        self.engine = SeatEngine(connect(replica.url, socket_timeout=120), config)
        self.engine.scripts.library.load()  # (its calls are queued in pipelines)
        if self.recovery:
            failover.begin(self.engine.redis)
        loss_end = self.now()
        self.advance_to(loss_end + AFTER, True)
        replica.proc.kill()
        self.out.notes.append(f"{len(self.clients):,} clients at the end")
        return self.out


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method (mean is small: a few dozen)."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--leases", type=int, default=100_000)
    parser.add_argument("--lags", default="0,1,2,5", help="replication lags, seconds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    import tempfile

    rows = []
    for lag in [float(x) for x in args.lags.split(",")]:
        for recovery in (True, False):
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="seatlease-failover-") as folder:
                out = Simulation(args.leases, lag, recovery, Path(folder), args.seed).run()
            rows.append((lag, recovery, out, time.monotonic() - started))
            print(
                f"lag {lag:g} s, {'with' if recovery else 'without'} recovery: "
                f"{out.double_granted} seats granted twice, {out.dropped} holders dropped, "
                f"{out.recovered} leases re-admitted, longest wait {out.longest_wait:.0f} s, "
                f"grants delayed {_share(out.delayed, out.attempts_after)} "
                f"({out.calls:,} calls, {time.monotonic() - started:.0f} s)",
                flush=True,
            )
    print(f"\n{args.leases:,} live leases, licenses of {SEATS} seats at {USE:.0%}, leases of "
          f"{LEASE} s, holders staying {HOLD} s on average, switchover {OUTAGE} s")  # fmt: skip
    print("| lag | run | seats granted twice | holders dropped | re-admitted | longest wait "
          "| grants delayed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for lag, recovery, out, _secs in rows:
        print(
            f"| {lag:g} s | {'with recovery' if recovery else 'without (before)'} | "
            f"{out.double_granted} | {out.dropped} | {out.recovered} | {out.longest_wait:.0f} s "
            f"| {_share(out.delayed, out.attempts_after)} |"
        )
    return 0


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "0 %"


if __name__ == "__main__":
    sys.exit(main())
