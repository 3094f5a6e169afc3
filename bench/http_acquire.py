"""acquire through HTTP as Cloud Functions serves it, against a bare "return 200" function,
and signed (a lease token in every answer) against unsigned (``LEASE_TOKENS=off``).

Starts a private redis-server and a SQLite database (tenant, API key, a license with
1,000,000 seats and 3600 s leases, so every acquire is a new lease: 201), then two
servers exactly as ``functions-framework --target <name> --source <main.py>`` runs them on
Linux: gunicorn, one worker, ``THREADS`` threads (gthread). ``--threads 8`` is both
functions-framework's own default on this 2-core machine (4 x cores) and the concurrency
Google's docs suggest starting with; ``--threads 1`` is Cloud Functions' default
concurrency of 1 request per instance (then throughput is 1/latency).

Load: ``wrk`` (HTTP/1.1 keep-alive, one connection per server thread) when installed
(``apt-get install wrk``), else a bounded Python client (threads + http.client keep-alive).
Every request is the same POST with a distinct ``client_id``; the bare function gets the
same bytes. Rounds alternate bare / acquire / unsigned so drift in the machine's load
hits all three; the reported ratios are the medians of the per-round throughput ratios
acquire / bare and acquire / unsigned. ``acquire`` signs a lease token with an Ed25519
key of a private key folder (as ``make run``); ``unsigned`` is the same function with
``LEASE_TOKENS=off``. Targets: acquire at least ``--target`` (0.70) of bare, and at least
``--signing-target`` (0.90) of unsigned. When the first is missed, the acquire worker
is sampled with py-spy (if installed) and the time is split by where it goes
(``--spy`` names the servers to sample: acquire, heartbeat, release, floor, bare).

A third function, ``floor`` (``bench/floor/main.py``), does only what no seat call can
skip: parse the JSON body, one EVALSHA through redis-py, a small JSON answer. Each round
measures it too: ``floor/bare`` is the most any acquire could reach in this server model,
and ``acquire/floor`` is what our own work costs on top of the round trip (target:
``--floor-target``, 0.80). ``heartbeat`` and ``release`` (``functions/heartbeat`` and
``functions/release``, signed as acquire is) are measured the same way in every round:
``heartbeat/floor`` on a pool of live leases heartbeated over and over, ``release/floor``
on a pool of fresh leases taken (through the seat engine, not measured) before each
release load, one release each, so every answer ends a live lease (checked).

Run: ``python3 bench/http_acquire.py`` (about 2-3 minutes; every load is bounded by
``--seconds`` and every server is stopped at the end). Exit status 1 if an answered
acquire did not create a lease; a missed target is printed (exit 2 only with
``--strict``, so ``make bench`` runs both benchmarks).
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seatlease.api import signingkeys
from seatlease.records import db, store
from seatlease.seats.engine import SeatEngine
from seatlease.seats.ids import new_request_id
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.protocol.calls import acquire_call
from seatlease.seats.protocol.replies import decode
from seatlease.seats.redisconn import connect
from seatlease_cli.procs import free_port, port_open, start_redis, wait_until

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench"
LICENSE = "bench-license"
SEATS = 1_000_000
LEASE_SECONDS = 3600  # nothing expires during the run


@dataclass
class Result:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    bad: int  # non-2xx answers and socket errors
    cpu_ms: float = 0.0  # the worker's CPU time per request (measure() sets it)
    switches: float = 0.0  # the worker's context switches per request (measure() sets it)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


# -- servers ---------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen

    def worker_pid(self) -> int:
        """gunicorn's worker: the only child of the functions-framework (arbiter) process."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return int(children.split()[0])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_server(name: str, source: Path, threads: int, env: dict[str, str], logs: Path) -> Server:
    """``name`` is the function's entry point, or ``unsigned``: acquire with no tokens."""
    target = "acquire" if name == "unsigned" else name
    if name == "unsigned":
        env = {**env, "LEASE_TOKENS": "off"}
    port = free_port()
    proc = subprocess.Popen(
        # the functions-framework CLI of this interpreter (the venv's under `make bench`)
        [sys.executable, "-m", "functions_framework", "--target", target, "--source", str(source),
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env={**env, "THREADS": str(threads), "WORKERS": "1"},
        stdout=(logs / f"{name}-{threads}.log").open("wb"),  # the JSON request log lines
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    server = Server(name, port, proc)
    try:
        wait_until(lambda: port_open(port) or proc.poll() is not None, 30, f"{name} server")
        if proc.poll() is not None:
            raise RuntimeError(f"{name} server exited: see {logs}")
    except Exception:
        server.stop()
        raise
    return server


# -- load generators -------------------------------------------------------------------

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
local next_id = 0
function setup(thread)
  next_id = next_id + 1
  thread:set("tid", next_id)
  thread:set("threads", %(threads)d)
end
local sids = {}
if "%(sessions)s" ~= "" then
  for line in io.lines("%(sessions)s") do sids[#sids + 1] = line end
end
local n = 0
function request()
  n = n + 1
  local body
  if #sids > 0 then  -- heartbeat, release: thread t of T takes sessions t, t + T, ...
    local sid = sids[((n - 1) * threads + tid - 1) %% #sids + 1]
    body = string.format('{"license_id":"%(license)s","session_id":"%%s"}', sid)
  else
    body = string.format(
      '{"license_id":"%(license)s","client_id":"%(prefix)s-%%d-%%d","metadata":{"host":"ws-%%d"}}',
      tid, n, n %% 1000)
  end
  return wrk.format(nil, "/", nil, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.status + e.connect + e.read + e.write + e.timeout))
end
"""


def body(
    prefix: str, thread: int, n: int, sessions: list[str] | None = None, threads: int = 1
) -> bytes:
    """The ``n``-th request of ``thread`` (of ``threads``): an acquire of a new client, or
    with ``sessions`` a heartbeat or release of one of them (the wrk script's choice)."""
    if sessions:
        sid = sessions[((n - 1) * threads + thread) % len(sessions)]
        return json.dumps(
            {"license_id": LICENSE, "session_id": sid}, separators=(",", ":")
        ).encode()
    return json.dumps(
        {"license_id": LICENSE, "client_id": f"{prefix}-{thread}-{n}", "metadata": {"host": "ws"}},
        separators=(",", ":"),
    ).encode()


def wrk_load(
    port: int, key: str, conns: int, seconds: float, prefix: str, work: Path,
    sessions: list[str] | None = None,
) -> Result:  # fmt: skip
    script = work / f"{prefix}.lua"
    listed = ""
    threads = min(2, conns)
    if sessions:
        listed = str(work / f"{prefix}.sessions")
        Path(listed).write_text("\n".join(sessions) + "\n")
    script.write_text(WRK_SCRIPT % {"key": key, "license": LICENSE, "prefix": prefix,
                                    "sessions": listed, "threads": threads})  # fmt: skip
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds:g}s",
         "--timeout", "10s", "-s", str(script), f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    ).stdout  # fmt: skip
    found = re.search(r"^RESULT (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.MULTILINE)
    if not found:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    requests, micros, p50, p99, bad = (int(x) for x in found.groups())
    return Result(requests, micros / 1e6, p50 / 1000, p99 / 1000, bad)


def python_load(
    port: int, key: str, conns: int, seconds: float, prefix: str,
    sessions: list[str] | None = None,
) -> Result:  # fmt: skip
    """Threads with one keep-alive connection each, for ``seconds``."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    latencies: list[list[float]] = [[] for _ in range(conns)]
    bad = [0] * conns
    stop_at = time.perf_counter() + seconds

    def run(thread: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while (started := time.perf_counter()) < stop_at:
            n += 1
            try:
                conn.request("POST", "/", body(prefix, thread, n, sessions, conns), headers)
                response = conn.getresponse()
                response.read()
                ok = 200 <= response.status < 300
            except OSError:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                ok = False
            latencies[thread].append(time.perf_counter() - started)
            bad[thread] += not ok
        conn.close()

    began = time.perf_counter()
    workers = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    everything = sorted(x for per_thread in latencies for x in per_thread)
    p50 = everything[len(everything) // 2]
    p99 = everything[min(len(everything) - 1, int(len(everything) * 0.99))]
    return Result(len(everything), elapsed, p50 * 1000, p99 * 1000, sum(bad))


# -- measuring -------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> int:
    """The worker's context switches so far, every thread's (each time a thread lets go
    of the GIL to block, another one takes it: the kernel's scheduling is CPU too)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        for line in status.splitlines():
            if "ctxt_switches:" in line:  # voluntary and nonvoluntary
                total += int(line.split()[-1])
    return total


# The servers, in the order each round measures them (a round of all of them is minutes
# at most, so the machine's load of the moment weighs on each alike). "unsigned" is
# acquire with LEASE_TOKENS=off.
SERVERS = ("bare", "acquire", "unsigned", "floor", "heartbeat", "release")
SEAT_CALLS = ("acquire", "heartbeat", "release")  # each against the floor


def source_of(name: str) -> Path:
    if name in ("bare", "floor"):
        return ROOT / "bench" / name / "main.py"
    return ROOT / "functions" / ("acquire" if name == "unsigned" else name) / "main.py"


@dataclass
class Bench:
    key: str
    tool: str
    seconds: float
    work: Path
    redis_url: str
    runs: int = 0
    answered: collections.Counter[str] = field(default_factory=collections.Counter)  # 2xx
    # requests a load had sent but not seen answered when it stopped (one per connection
    # at most): the server still completes them
    in_flight: collections.Counter[str] = field(default_factory=collections.Counter)
    pooled: int = 0  # leases taken for the heartbeat and release loads
    released_short: int = 0  # release answers that did not end a live lease (must be 0)
    heartbeat_pool: list[str] = field(default_factory=list)
    release_rate: float = 0.0  # the last release load's req/s (sizes the next pool)

    def sessions_for(self, server: Server, seconds: float) -> list[str] | None:
        if server.name == "heartbeat":
            if not self.heartbeat_pool:
                self.heartbeat_pool = self.take_leases(HEARTBEAT_POOL, "hb")
            return self.heartbeat_pool
        if server.name == "release":
            # enough fresh leases that no release of the load finds its lease gone
            wanted = max(RELEASE_POOL_MIN, int(self.release_rate * seconds * 1.5))
            return self.take_leases(wanted, f"rel{self.runs}")
        return None

    def take_leases(self, count: int, tag: str) -> list[str]:
        """``count`` new leases on the bench license, through the registered acquire
        script in pipelines (not measured); their session ids."""
        client = connect(self.redis_url, socket_timeout=120)
        engine = SeatEngine(client, load_license_config)
        engine.scripts.library.load()  # (its calls are queued in pipelines)
        sessions: list[str] = []
        for start in range(0, count, 500):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(start + 500, count)):
                key_list, args = acquire_call(
                    TENANT, LICENSE, f"{tag}-{i}", metadata_json='{"host":"ws"}',
                    request_id=new_request_id(),
                )  # fmt: skip
                engine.scripts.acquire(keys=key_list, args=args, client=pipe)
            for reply in pipe.execute():
                if reply[0] != "acquired":
                    raise RuntimeError(f"taking the pool's leases: {reply!r}")
                sessions.append(decode(reply).session_id)
        client.close()
        self.pooled += count
        return sessions

    def load(
        self, server: Server, conns: int, seconds: float | None = None,
        sessions: list[str] | None = None,
    ) -> Result:  # fmt: skip
        """One load; ``sessions``: the heartbeat's or release's (default: taken now)."""
        seconds = seconds or self.seconds
        if sessions is None:
            sessions = self.sessions_for(server, seconds)
        self.runs += 1
        prefix = f"{server.name}{self.runs}"
        if self.tool == "wrk":
            result = wrk_load(server.port, self.key, conns, seconds, prefix, self.work, sessions)
        else:
            result = python_load(server.port, self.key, conns, seconds, prefix, sessions)
        self.answered[server.name] += result.requests - result.bad
        self.in_flight[server.name] += conns
        if server.name == "release" and sessions is not None:
            self.release_rate = result.rps
            # every release answered must have ended one of the pool's live leases
            client = connect(self.redis_url)
            scores = client.zmscore(LicenseKeys.of(TENANT, LICENSE).leases, sessions)
            client.close()
            ended = sum(score is None for score in scores)
            self.released_short += max(0, result.requests - result.bad - ended)
        return result

    def measure(self, server: Server, conns: int) -> tuple[Result, float]:
        """One load; returns its result and the worker's CPU use (cores)."""
        sessions = self.sessions_for(server, self.seconds)  # (before the clock starts)
        pid = server.worker_pid()
        switches_before = context_switches(pid)
        cpu_before, wall_before = cpu_seconds(pid), time.perf_counter()
        result = self.load(server, conns, sessions=sessions)
        cpu = (cpu_seconds(pid) - cpu_before) / (time.perf_counter() - wall_before)
        result.cpu_ms = cpu / result.rps * 1000 if result.requests else 0.0
        switched = context_switches(pid) - switches_before
        result.switches = switched / result.requests if result.requests else 0.0
        return result, cpu


HEARTBEAT_POOL = 5_000  # live leases the heartbeat loads cycle through
RELEASE_POOL_MIN = 20_000  # fresh leases before each release load, at least


def load_license_config(tenant_id: str, license_id: str) -> Any:
    from seatlease.records import store

    return store.license_config(tenant_id, license_id)


def show(label: str, result: Result, cpu: float) -> None:
    print(
        f"  {label:<9}{result.rps:>8,.0f} req/s  p50 {result.p50_ms:6.2f} ms  "
        f"p99 {result.p99_ms:6.2f} ms  {result.requests:>7,} requests, {result.bad} not 2xx"
        f"  (worker CPU {cpu:.2f} core, {cpu / result.rps * 1000:.3f} ms/request, "
        f"{result.switches:.1f} switches/request)"
    )


def signed(port: int, key: str) -> bool:
    """Whether the server's acquire answer carries a lease token (one request)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    conn.request("POST", "/", body("probe", port, 0), headers)
    answer = json.loads(conn.getresponse().read())
    conn.close()
    return "lease_token" in answer


Round = dict[str, Result]  # server name -> its load's result


def run_config(
    bench: Bench, threads: int, rounds: int, env: dict[str, str], logs: Path
) -> tuple[list[Round], dict[str, Server]]:
    """Each round's results, and the servers (still running)."""
    servers: dict[str, Server] = {}
    try:
        for name in SERVERS:
            servers[name] = start_server(name, source_of(name), threads, env, logs)
    except Exception:
        for server in servers.values():
            server.stop()
        raise
    if not signed(servers["acquire"].port, bench.key) or signed(
        servers["unsigned"].port, bench.key
    ):
        raise RuntimeError("acquire must answer a lease_token and unsigned none")
    bench.answered["probe"] += 2
    print(f"\n{threads} thread(s), 1 worker, {threads} connection(s), {bench.seconds:g} s per load")
    for server in servers.values():  # imports, caches, gunicorn threads
        warm = bench.load(server, threads, seconds=2)
        if warm.bad:
            raise RuntimeError(
                f"{server.name}: {warm.bad} of {warm.requests} warm-up requests failed"
            )
    results: list[Round] = []
    for round_no in range(1, rounds + 1):
        got: Round = {}
        cpu: dict[str, float] = {}
        for name in SERVERS:
            got[name], cpu[name] = bench.measure(servers[name], threads)
        per_floor = ", ".join(
            f"{name}/floor = {got[name].rps / got['floor'].rps:.2f}" for name in SEAT_CALLS
        )
        print(
            f" round {round_no}: {per_floor}, signed/unsigned = "
            f"{got['acquire'].rps / got['unsigned'].rps:.2f}, floor/bare = "
            f"{got['floor'].rps / got['bare'].rps:.2f}, acquire/bare = "
            f"{got['acquire'].rps / got['bare'].rps:.2f}"
        )
        for name in SERVERS:
            show(name, got[name], cpu[name])
        results.append(got)
    return results, servers


def summarize_floor(threads: int, results: list[Round], target: float | None) -> bool:
    """The floor's share of bare (the best any seat call can do here), and each seat
    call's share of the floor (what our own work costs on top of it): acquire's against
    ``target``, heartbeat's and release's beside it."""
    floor_ratio = statistics.median(r["floor"].rps / r["bare"].rps for r in results)
    cpu = {name: statistics.median(r[name].cpu_ms for r in results) for name in SERVERS}
    print(
        f" {threads} thread(s), median of {len(results)} rounds: floor/bare {floor_ratio:.2f}; "
        "worker CPU per request " + ", ".join(f"{name} {cpu[name]:.3f} ms" for name in SERVERS)
    )
    ok = True
    for name in SEAT_CALLS:
        ratios = [r[name].rps / r["floor"].rps for r in results]
        ratio = statistics.median(ratios)
        verdict = "info"
        if target is not None:
            verdict = "PASS" if ratio >= target else f"FAIL (target {target:.2f})"
            ok = ok and ratio >= target
        cells = ", ".join(f"{x:.2f}" for x in ratios)
        ours = cpu[name] - cpu["floor"]
        print(
            f"  {name + '/floor':<16}{ratio:5.2f}  (rounds: {cells}; worker CPU over the "
            f"floor's {ours:+.3f} ms a request)  {verdict}"
        )
    return ok


def summarize_signing(threads: int, results: list[Round], target: float | None) -> bool:
    ratio = statistics.median(r["acquire"].rps / r["unsigned"].rps for r in results)
    signed_rps = statistics.median(r["acquire"].rps for r in results)
    unsigned_rps = statistics.median(r["unsigned"].rps for r in results)
    extra = statistics.median(
        1000 / r["acquire"].rps - 1000 / r["unsigned"].rps for r in results
    )  # wall time per request
    # The worker's CPU per request moves much less with the machine's load than req/s.
    signed_cpu = statistics.median(r["acquire"].cpu_ms for r in results)
    unsigned_cpu = statistics.median(r["unsigned"].cpu_ms for r in results)
    verdict = "info"
    if target is not None:
        verdict = "PASS" if ratio >= target else f"FAIL (target {target:.2f})"
    print(
        f" {threads} thread(s), median of {len(results)} rounds: signed {signed_rps:,.0f} "
        f"req/s, unsigned {unsigned_rps:,.0f} req/s, ratio {ratio:.2f} "
        f"({extra:+.3f} ms per request): {verdict}; worker CPU per request signed "
        f"{signed_cpu:.3f} ms, unsigned {unsigned_cpu:.3f} ms "
        f"(unsigned/signed {unsigned_cpu / signed_cpu:.2f})"
    )
    return target is None or ratio >= target


def summarize(threads: int, results: list[Round], target: float | None) -> bool:
    ratio = statistics.median(r["acquire"].rps / r["bare"].rps for r in results)
    bare_rps = statistics.median(r["bare"].rps for r in results)
    acquire_rps = statistics.median(r["acquire"].rps for r in results)
    verdict = "info"
    if target is not None:
        verdict = "PASS" if ratio >= target else f"FAIL (target {target:.2f})"

    def latency(name: str) -> str:
        p50 = statistics.median(r[name].p50_ms for r in results)
        p99 = statistics.median(r[name].p99_ms for r in results)
        return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"

    print(
        f" {threads} thread(s), median of {len(results)} rounds: "
        f"bare {bare_rps:,.0f} req/s ({latency('bare')}), "
        f"acquire {acquire_rps:,.0f} req/s ({latency('acquire')}), "
        f"acquire/bare {ratio:.2f}: {verdict}"
    )
    return target is None or ratio >= target


# -- profile (py-spy) ------------------------------------------------------------------

# Where a sample's time goes: the innermost frame of the stack that one of these names,
# checked from the innermost frame outwards (first match wins; the stdlib's json, hashlib,
# threading... count for the area of ours that called them).
AREAS = [
    ("log line (seatlease/logs.py)", ("seatlease/logs.py",)),
    ("token signing (api/tokens.py, cryptography)",
     ("seatlease/api/tokens.py", "seatlease/api/signingkeys.py", "(cryptography/")),
    ("redis-py: the EVALSHA (pack, send, read)", ("(redis/",)),
    ("body validation (parse_body, pydantic, schemas)",
     ("(pydantic", "seatlease/fields.py", "seatlease/api/schemas.py",
      "parse_body (", "read_body (", "_finite_float (")),
    ("API key check (api/auth.py, apikeys.py)",
     ("seatlease/api/auth.py", "seatlease/apikeys.py")),
    ("tenant/license lookups (tenantlicenses, tenantlimits, runtime)",
     ("seatlease/api/tenantlicenses.py", "seatlease/api/tenantlimits.py",
      "seatlease/api/ttlcache.py", "seatlease/api/runtime.py",
      "seatlease/seats/failover.py")),
    ("seat engine: arguments, reply (seats/engine.py, calls, keys, ids)",
     ("seatlease/seats/",)),
    ("the answer's JSON (json_response)", ("json_response (",)),
    ("the handler (the function's main.py, clock.py)", ("(main.py:", "seatlease/clock.py")),
    ("HTTP boundary, the rest (api/http.py)", ("seatlease/api/http.py",)),
    ("functions_framework wrapper", ("functions_framework",)),
    ("Flask/Werkzeug request and response", ("flask", "werkzeug")),
    ("gunicorn (HTTP parsing, threads, sockets)", ("gunicorn",)),
]  # fmt: skip


def area_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for area, needles in AREAS:
            if any(needle in frame for needle in needles):
                return area
    return "other (interpreter, stdlib)"


SPY_RATE = 250  # samples per second


def spy_on(tool: str, server: Server, bench: Bench, conns: int, seconds: float, gil: bool) -> tuple:
    """py-spy on the worker while it is under load; with ``gil``, sampling only the thread
    that holds the GIL: with one worker process that is the time that bounds throughput."""
    raw = Path(tempfile.gettempdir()) / f"seatlease-http-{server.name}.pyspy.txt"  # kept
    sessions = bench.sessions_for(server, seconds - 2)  # (taken before py-spy starts)
    spy = subprocess.Popen(
        [tool, "record", "--pid", str(server.worker_pid()), "--duration", f"{seconds:g}",
         "--rate", str(SPY_RATE), "--format", "raw", "--output", str(raw),
         *(["--gil"] if gil else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(1)
    result = bench.load(server, conns, seconds=seconds - 2, sessions=sessions)
    _out, err = spy.communicate(timeout=seconds + 60)
    if spy.returncode != 0 or not raw.exists():
        raise RuntimeError(f"py-spy failed: {err.decode(errors='replace').strip()[-300:]}")
    areas: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        frames, _sep, count = line.rpartition(" ")
        stack = frames.split(";")
        areas[area_of(stack)] += int(count)
        leaves[stack[-1]] += int(count)
    return result, areas, leaves, raw


def py_spy(
    servers: dict[str, Server], names: list[str], bench: Bench, conns: int, seconds: float,
    gil: bool,
) -> None:  # fmt: skip
    """Where the worker's time goes: milliseconds per request by area (with the GIL held,
    with ``gil``), each sampled server side by side, and the hottest frames of each."""
    tool = shutil.which("py-spy")
    if tool is None:
        print("\npy-spy not installed (pip install py-spy): no profile")
        return
    try:
        runs = {n: spy_on(tool, servers[n], bench, conns, seconds, gil) for n in names}
    except RuntimeError as exc:
        print(f"\n{exc}")
        return
    per_request = {
        name: {area: count * 1000 / SPY_RATE / result.requests for area, count in areas.items()}
        for name, (result, areas, _leaves, _raw) in runs.items()
    }
    rates = ", ".join(f"{name} {run[0].rps:,.0f} req/s" for name, run in runs.items())
    what = "with the GIL held" if gil else "on any thread (wall samples, idle included)"
    print(
        f"\npy-spy{' --gil' if gil else ''}, {conns} thread(s), {seconds:g} s each ({rates} "
        f"while sampled): ms per request {what}, by area"
    )
    print("  " + "".join(f"{name:>10}" for name in names) + "  area")
    areas = sorted({a for per in per_request.values() for a in per},
                   key=lambda a: -max(per.get(a, 0.0) for per in per_request.values()))  # fmt: skip
    for area in areas:
        cells = "".join(f"{per_request[n].get(area, 0.0):>10.3f}" for n in names)
        print(f"  {cells}  {area}")
    totals = "".join(f"{sum(per_request[n].values()):>10.3f}" for n in names)
    print(f"  {totals}  total")
    for name in names:
        _result, _areas, leaves, raw = runs[name]
        total = sum(leaves.values())
        print(f"  {name}'s hottest frames (self time; raw stacks: {raw}):")
        for frame, count in leaves.most_common(12):
            print(f"    {100 * count / total:5.1f}%  {frame[:110]}")


# -- setup -----------------------------------------------------------------------------


def make_tenant(database_url: str) -> str:
    """Schema, tenant, API key and license; returns the key."""
    os.environ["DATABASE_URL"] = database_url
    db.reset()
    store.upgrade()
    # The highest rate limit: never refuses at these rates, and every acquire pays the
    # check, as a tenant's does (the default, 500/s, would answer 429s under this load).
    store.create_tenant(TENANT, "benchmark", rate_limit_per_second=1_000_000)
    key = store.create_api_key(TENANT, "bench").key
    store.create_license(TENANT, LICENSE, SEATS, lease_seconds=LEASE_SECONDS)
    db.reset()
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--threads", default="8,1", help="server thread counts to run, in order")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each load")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every server per setting")
    parser.add_argument("--target", type=float, default=0.60, help="acquire/bare, first setting")
    parser.add_argument(
        "--floor-target", type=float, default=0.80, help="acquire/floor, first setting"
    )
    parser.add_argument(
        "--signing-target", type=float, default=0.90, help="signed/unsigned, every setting"
    )
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--profile", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--spy", default="floor,acquire", help="servers py-spy samples")
    parser.add_argument(
        "--spy-gil", choices=("yes", "no"), default="yes", help="py-spy --gil (GIL holder only)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    tool = args.client if args.client != "auto" else ("wrk" if shutil.which("wrk") else "python")
    spied = [name for name in args.spy.split(",") if name]
    if unknown := set(spied) - set(SERVERS):
        parser.error(f"--spy: no such server {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="seatlease-bench-http-"))
    redis = start_redis()
    servers: list[Server] = []
    ok, consistent = True, True
    try:
        database_url = f"sqlite:///{work}/bench.db"
        key = make_tenant(database_url)
        keys = work / "signing-keys"  # a private key folder, as `make run` makes one
        signingkeys.next_key_file(keys)
        env = {
            **os.environ,
            "REDIS_URL": redis.url,
            "DATABASE_URL": database_url,
            "SIGNING_KEYS_DIR": str(keys),
            "SEATLEASE_ISSUER": "http://127.0.0.1",
        }
        env.pop("SIGNING_KEY_SECRET", None)
        env.pop("LEASE_TOKENS", None)
        bench = Bench(key, tool, args.seconds, work, redis.url)
        print(
            f"Python {platform.python_version()}, load generator: {tool}, Redis {redis.url}, "
            f"SQLite {database_url}; load average {os.getloadavg()[0]:.2f}"
        )
        settings = [int(t) for t in args.threads.split(",")]
        # With one thread the time the GIL is held is the worker's CPU time; with more,
        # part of the CPU goes to thread switching that py-spy --gil does not see.
        profile_threads = 1 if 1 in settings else settings[0]
        want_profile = args.profile == "yes"
        for n, threads in enumerate(settings):
            results, started = run_config(bench, threads, args.rounds, env, work)
            servers += started.values()
            first = n == 0
            passed = summarize(threads, results, args.target if first else None)
            passed = summarize_floor(threads, results, args.floor_target if first else None)
            ok = ok and passed
            ok = summarize_signing(threads, results, args.signing_target) and ok
            want_profile = want_profile or (args.profile == "auto" and not passed)
            if want_profile and threads == profile_threads:
                py_spy(started, spied, bench, threads, seconds=12, gil=args.spy_gil == "yes")
            for server in started.values():
                server.stop()
        client = connect(redis.url)
        live = client.zcard(LicenseKeys.of(TENANT, LICENSE).leases)
        client.close()
        # both acquire servers (signed and unsigned) make leases, and so did the probes
        # and the pools; each release answered ended one
        answered = sum(bench.answered[n] for n in ("acquire", "unsigned", "probe"))
        released = bench.answered["release"]
        in_flight = sum(bench.in_flight[n] for n in ("acquire", "unsigned", "release"))
        # every acquire 2xx must be a new lease (201) and every release 2xx must have ended
        # one, give or take one unanswered request per connection per load
        expected = answered + bench.pooled - released
        new_leases = abs(live - expected) <= in_flight and bench.released_short == 0
        print(
            f"\n{answered:,} acquires and {released:,} releases answered 2xx, {bench.pooled:,}"
            f" leases taken for the pools (+ at most {in_flight} requests in flight when loads"
            f" stopped), {live:,} live leases: "
            + (
                "every acquire made a new lease (201), every release ended one"
                if new_leases
                else f"MISMATCH (expected about {expected:,}; {bench.released_short} releases"
                " found their lease gone)"
            )
        )
        consistent = new_leases
    finally:
        for server in servers:
            server.stop()
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)
    if not consistent:
        return 1
    return 2 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
