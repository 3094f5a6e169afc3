"""What the cold-start wait for the backends costs when they answer at once.

A deployed function (``K_SERVICE`` set) waits in its import until its first backend
answers (``seatlease.api.startup.wait_for_backends``), and functions-framework opens its port
only after the import: the time from the process's start to an open port is what Cloud
Run's TCP startup probe waits for, so that is what is measured here, for the acquire
function served by functions-framework's CLI against a private redis-server, with
``K_SERVICE`` (the wait: one Redis connection and PING) and without it (no wait),
alternated run by run so that drift in the machine's load hits both. Then one call to
each fresh instance: with the wait its Redis connection is already open.

Run: ``python3 bench/startup_wait.py [--runs N]`` (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from seatlease_cli.procs import free_port, port_open, start_redis

ROOT = Path(__file__).resolve().parent.parent


def _serve(port: int, env: dict[str, str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "functions_framework", "--target", "acquire"]
    cmd += ["--source", str(ROOT / "functions" / "acquire" / "main.py")]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _first_call_ms(port: int) -> float:
    """A call that reaches Redis before it fails: an unknown API key (401) is looked up
    in Redis (and then the database, which is an empty SQLite file here)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/",
        json.dumps({"license_id": "cad", "client_id": "c"}).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer sl_unknown"},
        method="POST",
    )
    started = time.perf_counter()
    try:
        urllib.request.urlopen(req, timeout=30).read()
    except urllib.error.HTTPError as err:
        err.read()
    return (time.perf_counter() - started) * 1000


def run_once(deployed: bool, env: dict[str, str]) -> tuple[float, float]:
    port = free_port()
    case_env = {**env}
    if deployed:
        case_env["K_SERVICE"] = "acquire"
    started = time.perf_counter()
    proc = _serve(port, case_env)
    try:
        while not port_open(port):
            if proc.poll() is not None:
                raise RuntimeError("functions-framework exited")
            time.sleep(0.005)
        listen_ms = (time.perf_counter() - started) * 1000
        return listen_ms, _first_call_ms(port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    redis = start_redis()
    workdir = tempfile.mkdtemp(prefix="seatlease-startup-")
    env = {k: v for k, v in os.environ.items() if k != "K_SERVICE"}
    env.update(
        REDIS_URL=redis.url,
        DATABASE_URL=f"sqlite:///{workdir}/seatlease.db",
        LEASE_TOKENS="off",
        STARTUP_WAIT_SECONDS="120",
        LOG_LEVEL="WARNING",
    )
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        run_once(False, env)  # warm the file cache
        for _ in range(args.runs):
            for deployed in (False, True):
                results[deployed].append(run_once(deployed, env))
    finally:
        redis.stop()
    print(f"acquire served by functions-framework, {args.runs} runs each, medians:")
    print(f"{'case':<34}{'port open (ms)':>16}{'first call (ms)':>17}")
    for deployed, label in (
        (False, "no wait (K_SERVICE unset)"),
        (True, "wait for Redis (K_SERVICE set)"),
    ):
        listen = statistics.median(r[0] for r in results[deployed])
        call = statistics.median(r[1] for r in results[deployed])
        print(f"{label:<34}{listen:>16.1f}{call:>17.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
