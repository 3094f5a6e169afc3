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
is sampled with py-spy (if installed) and the time is split by where it goes.

A third function, ``floor`` (``bench/floor/main.py``), does only what no seat call can
skip: parse the JSON body, one EVALSHA through redis-py, a small JSON answer. Each round
measures it too: ``floor/bare`` is the most any acquire could reach in this server model,
and ``acquire/floor`` is what our own work costs on top of the round trip.

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

from seatlease.api import signingkeys
from seatlease.records import db, store
from seatlease.seats.keys import LicenseKeys
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
end
local n = 0
function request()
  n = n + 1
  local body = string.format(
    '{"license_id":"%(license)s","client_id":"%(prefix)s-%%d-%%d","metadata":{"host":"ws-%%d"}}',
    tid, n, n %% 1000)
  return wrk.format(nil, "/", nil, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.status + e.connect + e.read + e.write + e.timeout))
end
"""


def body(prefix: str, thread: int, n: int) -> bytes:
    return json.dumps(
        {"license_id": LICENSE, "client_id": f"{prefix}-{thread}-{n}", "metadata": {"host": "ws"}},
        separators=(",", ":"),
    ).encode()


def wrk_load(port: int, key: str, conns: int, seconds: float, prefix: str, work: Path) -> Result:
    script = work / f"{prefix}.lua"
    script.write_text(WRK_SCRIPT % {"key": key, "license": LICENSE, "prefix": prefix})
    out = subprocess.run(
        ["wrk", "-t", str(min(2, conns)), "-c", str(conns), "-d", f"{seconds:g}s",
         "--timeout", "10s", "-s", str(script), f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    ).stdout  # fmt: skip
    found = re.search(r"^RESULT (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.MULTILINE)
    if not found:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    requests, micros, p50, p99, bad = (int(x) for x in found.groups())
    return Result(requests, micros / 1e6, p50 / 1000, p99 / 1000, bad)


def python_load(port: int, key: str, conns: int, seconds: float, prefix: str) -> Result:
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
                conn.request("POST", "/", body(prefix, thread, n), headers)
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


@dataclass
class Bench:
    key: str
    tool: str
    seconds: float
    work: Path
    runs: int = 0
    answered: collections.Counter[str] = field(default_factory=collections.Counter)  # 2xx
    # requests a load had sent but not seen answered when it stopped (one per connection
    # at most): the server still completes them
    in_flight: collections.Counter[str] = field(default_factory=collections.Counter)

    def load(self, server: Server, conns: int, seconds: float | None = None) -> Result:
        self.runs += 1
        prefix = f"{server.name}{self.runs}"
        seconds = seconds or self.seconds
        if self.tool == "wrk":
            result = wrk_load(server.port, self.key, conns, seconds, prefix, self.work)
        else:
            result = python_load(server.port, self.key, conns, seconds, prefix)
        self.answered[server.name] += result.requests - result.bad
        self.in_flight[server.name] += conns
        return result

    def measure(self, server: Server, conns: int) -> tuple[Result, float]:
        """One load; returns its result and the worker's CPU use (cores)."""
        pid = server.worker_pid()
        cpu_before, wall_before = cpu_seconds(pid), time.perf_counter()
        result = self.load(server, conns)
        cpu = (cpu_seconds(pid) - cpu_before) / (time.perf_counter() - wall_before)
        result.cpu_ms = cpu / result.rps * 1000 if result.requests else 0.0
        return result, cpu


def show(label: str, result: Result, cpu: float) -> None:
    print(
        f"  {label:<8}{result.rps:>8,.0f} req/s  p50 {result.p50_ms:6.2f} ms  "
        f"p99 {result.p99_ms:6.2f} ms  {result.requests:>7,} requests, {result.bad} not 2xx"
        f"  (worker CPU {cpu:.2f} core, {cpu / result.rps * 1000:.2f} ms/request)"
    )


def signed(port: int, key: str) -> bool:
    """Whether the server's acquire answer carries a lease token (one request)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    conn.request("POST", "/", body("probe", port, 0), headers)
    answer = json.loads(conn.getresponse().read())
    conn.close()
    return "lease_token" in answer


def run_config(
    bench: Bench, threads: int, rounds: int, env: dict[str, str], logs: Path
) -> tuple[list[tuple[Result, Result, Result]], list[Result], list[Server]]:
    """(bare, acquire, unsigned) results per round, floor results per round, and the
    servers (bare, acquire, unsigned, floor), still running."""
    source = ROOT / "functions" / "acquire" / "main.py"
    bare = start_server("bare", ROOT / "bench" / "bare" / "main.py", threads, env, logs)
    floor = start_server("floor", ROOT / "bench" / "floor" / "main.py", threads, env, logs)
    acquire = start_server("acquire", source, threads, env, logs)
    unsigned = start_server("unsigned", source, threads, env, logs)
    if not signed(acquire.port, bench.key) or signed(unsigned.port, bench.key):
        raise RuntimeError("acquire must answer a lease_token and unsigned none")
    bench.answered["probe"] += 2
    triples, floors = [], []
    print(f"\n{threads} thread(s), 1 worker, {threads} connection(s), {bench.seconds:g} s per load")
    for server in (bare, acquire, unsigned, floor):  # imports, caches, gunicorn threads
        warm = bench.load(server, threads, seconds=2)
        if warm.bad:
            raise RuntimeError(
                f"{server.name}: {warm.bad} of {warm.requests} warm-up requests failed"
            )
    for round_no in range(1, rounds + 1):
        bare_result, bare_cpu = bench.measure(bare, threads)
        acquire_result, acquire_cpu = bench.measure(acquire, threads)
        unsigned_result, unsigned_cpu = bench.measure(unsigned, threads)
        floor_result, floor_cpu = bench.measure(floor, threads)
        print(
            f" round {round_no}: acquire/bare = {acquire_result.rps / bare_result.rps:.2f}, "
            f"signed/unsigned = {acquire_result.rps / unsigned_result.rps:.2f}, "
            f"floor/bare = {floor_result.rps / bare_result.rps:.2f}"
        )
        show("bare", bare_result, bare_cpu)
        show("acquire", acquire_result, acquire_cpu)
        show("unsigned", unsigned_result, unsigned_cpu)
        show("floor", floor_result, floor_cpu)
        triples.append((bare_result, acquire_result, unsigned_result))
        floors.append(floor_result)
    return triples, floors, [bare, acquire, unsigned, floor]


def summarize_floor(
    threads: int,
    triples: list[tuple[Result, Result, Result]],
    floors: list[Result],
    target: float | None,
) -> None:
    """The floor's share of bare (the best any seat call can do here) beside the target,
    and acquire's share of the floor (what our own work costs on top of it)."""
    floor_ratio = statistics.median(
        f.rps / b.rps for (b, _a, _u), f in zip(triples, floors, strict=True)
    )
    acquire_ratio = statistics.median(
        a.rps / f.rps for (_b, a, _u), f in zip(triples, floors, strict=True)
    )
    cpu = {
        name: statistics.median(r.cpu_ms for r in results)
        for name, results in (
            ("bare", [b for b, _a, _u in triples]),
            ("floor", floors),
            ("acquire", [a for _b, a, _u in triples]),
        )
    }
    beside = f" (the target is {target:.2f})" if target is not None else ""
    print(
        f" {threads} thread(s), median of {len(floors)} rounds: floor/bare {floor_ratio:.2f}"
        f"{beside}, acquire/floor {acquire_ratio:.2f}; worker CPU per request bare "
        f"{cpu['bare']:.3f} ms, floor {cpu['floor']:.3f} ms, acquire {cpu['acquire']:.3f} ms"
    )


def summarize_signing(
    threads: int, triples: list[tuple[Result, Result, Result]], target: float | None
) -> bool:
    ratio = statistics.median(a.rps / u.rps for _b, a, u in triples)
    signed_rps = statistics.median(a.rps for _b, a, _u in triples)
    unsigned_rps = statistics.median(u.rps for _b, _a, u in triples)
    extra = statistics.median(
        1000 / a.rps - 1000 / u.rps for _b, a, u in triples
    )  # wall time per request
    # The worker's CPU per request moves much less with the machine's load than req/s.
    signed_cpu = statistics.median(a.cpu_ms for _b, a, _u in triples)
    unsigned_cpu = statistics.median(u.cpu_ms for _b, _a, u in triples)
    verdict = "info"
    if target is not None:
        verdict = "PASS" if ratio >= target else f"FAIL (target {target:.2f})"
    print(
        f" {threads} thread(s), median of {len(triples)} rounds: signed {signed_rps:,.0f} "
        f"req/s, unsigned {unsigned_rps:,.0f} req/s, ratio {ratio:.2f} "
        f"({extra:+.3f} ms per request): {verdict}; worker CPU per request signed "
        f"{signed_cpu:.3f} ms, unsigned {unsigned_cpu:.3f} ms "
        f"(unsigned/signed {unsigned_cpu / signed_cpu:.2f})"
    )
    return target is None or ratio >= target


def summarize(threads: int, pairs: list[tuple[Result, Result]], target: float | None) -> bool:
    ratio = statistics.median(a.rps / b.rps for b, a in pairs)
    bare_rps = statistics.median(b.rps for b, _a in pairs)
    acquire_rps = statistics.median(a.rps for _b, a in pairs)
    verdict = "info"
    if target is not None:
        verdict = "PASS" if ratio >= target else f"FAIL (target {target:.2f})"

    def latency(results: list[Result]) -> str:
        p50 = statistics.median(r.p50_ms for r in results)
        p99 = statistics.median(r.p99_ms for r in results)
        return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"

    print(
        f" {threads} thread(s), median of {len(pairs)} rounds: "
        f"bare {bare_rps:,.0f} req/s ({latency([b for b, _a in pairs])}), "
        f"acquire {acquire_rps:,.0f} req/s ({latency([a for _b, a in pairs])}), "
        f"ratio {ratio:.2f}: {verdict}"
    )
    return target is None or ratio >= target


# -- profile (py-spy) ------------------------------------------------------------------

AREAS = [  # first match wins, checked from the innermost frame outwards
    ("JSON log line (shared/seatlease/logs.py)", ("shared/seatlease/logs.py",)),
    ("redis-py: send EVALSHA, read reply", ("(redis/",)),
    (
        "pydantic validation (shared/seatlease/fields.py)",
        ("pydantic", "shared/seatlease/fields.py"),
    ),
    ("API key auth (shared/seatlease/api/auth.py)", ("shared/seatlease/api/auth.py",)),
    (
        "seat engine (shared/seatlease/seats/engine.py, keys.py)",
        ("shared/seatlease/seats/engine.py", "shared/seatlease/seats/keys.py"),
    ),
    ("HTTP mapping (shared/seatlease/api/http.py)", ("shared/seatlease/api/http.py",)),
    ("functions_framework wrapper", ("functions_framework",)),
    ("Flask/Werkzeug request and response", ("flask", "werkzeug")),
    ("gunicorn (HTTP parsing, threads, sockets)", ("gunicorn",)),
]


def area_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for area, needles in AREAS:
            if any(needle in frame for needle in needles):
                return area
    return "other (interpreter, stdlib)"


SPY_RATE = 250  # samples per second


def spy_on(tool: str, server: Server, bench: Bench, conns: int, seconds: float) -> tuple:
    """py-spy on the worker while it is under load, sampling only the thread that holds
    the GIL: with one worker process that is the time that bounds throughput."""
    raw = Path(tempfile.gettempdir()) / f"seatlease-http-{server.name}.pyspy.txt"  # kept
    spy = subprocess.Popen(
        [tool, "record", "--pid", str(server.worker_pid()), "--duration", f"{seconds:g}",
         "--rate", str(SPY_RATE), "--format", "raw", "--output", str(raw), "--gil"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(1)
    result = bench.load(server, conns, seconds=seconds - 2)
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


def py_spy(bare: Server, acquire: Server, bench: Bench, conns: int, seconds: float) -> None:
    """Where the worker's time goes: GIL-holding milliseconds per request by area, bare
    and acquire side by side, and acquire's hottest frames."""
    tool = shutil.which("py-spy")
    if tool is None:
        print("\npy-spy not installed (pip install py-spy): no profile")
        return
    try:
        runs = {s.name: spy_on(tool, s, bench, conns, seconds) for s in (bare, acquire)}
    except RuntimeError as exc:
        print(f"\n{exc}")
        return
    per_request = {
        name: {area: count * 1000 / SPY_RATE / result.requests for area, count in areas.items()}
        for name, (result, areas, _leaves, _raw) in runs.items()
    }
    rates = ", ".join(f"{name} {run[0].rps:,.0f} req/s" for name, run in runs.items())
    print(
        f"\npy-spy --gil, {conns} thread(s), {seconds:g} s each ({rates} while sampled): "
        "ms per request with the GIL held, by area"
    )
    print(f"  {'bare':>7}{'acquire':>9}{'extra':>8}  area")
    names = sorted(set(per_request["bare"]) | set(per_request["acquire"]),
                   key=lambda a: -per_request["acquire"].get(a, 0.0))  # fmt: skip
    for area in names:
        b, a = per_request["bare"].get(area, 0.0), per_request["acquire"].get(area, 0.0)
        print(f"  {b:>7.3f}{a:>9.3f}{a - b:>+8.3f}  {area}")
    b_total, a_total = sum(per_request["bare"].values()), sum(per_request["acquire"].values())
    print(f"  {b_total:>7.3f}{a_total:>9.3f}{a_total - b_total:>+8.3f}  total")
    _result, _areas, leaves, raw = runs["acquire"]
    total = sum(leaves.values())
    print("  acquire's hottest frames (self time):")
    for frame, count in leaves.most_common(12):
        print(f"    {100 * count / total:5.1f}%  {frame[:110]}")
    print(f"  raw stacks: {raw} and {runs['bare'][3]}")


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
    parser.add_argument("--rounds", type=int, default=3, help="bare/acquire pairs per setting")
    parser.add_argument("--target", type=float, default=0.60, help="for the first setting")
    parser.add_argument(
        "--signing-target", type=float, default=0.90, help="signed/unsigned, every setting"
    )
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--profile", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    tool = args.client if args.client != "auto" else ("wrk" if shutil.which("wrk") else "python")
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
        bench = Bench(key, tool, args.seconds, work)
        print(
            f"Python {platform.python_version()}, load generator: {tool}, Redis {redis.url}, "
            f"SQLite {database_url}"
        )
        settings = [int(t) for t in args.threads.split(",")]
        # With one thread the time the GIL is held is the worker's CPU time; with more,
        # part of the CPU goes to thread switching that py-spy --gil does not see.
        profile_threads = 1 if 1 in settings else settings[0]
        want_profile = args.profile == "yes"
        for n, threads in enumerate(settings):
            triples, floors, started = run_config(bench, threads, args.rounds, env, work)
            servers += started
            bare, acquire = started[0], started[1]
            passed = summarize(threads, [(b, a) for b, a, _u in triples],
                               args.target if n == 0 else None)  # fmt: skip
            summarize_floor(threads, triples, floors, args.target if n == 0 else None)
            ok = ok and passed
            ok = summarize_signing(threads, triples, args.signing_target) and ok
            want_profile = want_profile or (args.profile == "auto" and not passed)
            if want_profile and threads == profile_threads:
                py_spy(bare, acquire, bench, threads, seconds=12)
            for server in started:
                server.stop()
        client = connect(redis.url)
        live = client.zcard(LicenseKeys.of(TENANT, LICENSE).leases)
        client.close()
        # both acquire servers (signed and unsigned) make leases, and so did the probes
        answered = sum(bench.answered[n] for n in ("acquire", "unsigned", "probe"))
        in_flight = bench.in_flight["acquire"] + bench.in_flight["unsigned"]
        # every 2xx must be a new lease (201), plus at most one unanswered request per
        # connection per load
        new_leases = answered <= live <= answered + in_flight
        print(
            f"\n{answered:,} acquires answered 2xx (+ at most {in_flight} in flight when loads "
            f"stopped), {live:,} live leases: "
            + ("every acquire made a new lease (201)" if new_leases else "MISMATCH")
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
