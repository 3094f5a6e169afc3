"""The plain seat calls before and after idle and shared seats (issue 50), interleaved in
one redis-server: acquire (a new lease), heartbeat and release of this tree's seat library
against the library of ``--old-rev`` (default 29d1d9f^, the engine before the change),
and this tree's heartbeat carrying activity (``idle_seconds`` below the timeout, on a
license with an idle rule) against the old plain heartbeat: the issue's "heartbeats
carrying activity stay within today's heartbeat cost", today being the revision before.

Each revision runs in a worker process of its own (its own ``seatlease`` package: the old
one from ``git archive``, on PYTHONPATH), on its own license of ``--hot`` leases in the
same redis-server; both libraries are loaded at once (their names are digests of their
code). The parent sends each worker one batch of ``--batch`` calls at a time, pipelined,
after ``CONFIG RESETSTAT``, and reads ``cmdstat_fcall usec_per_call``: the server's own
time per call. The order of the variants rotates every round, so the load of the moment
weighs on all alike. Reported: the median of the per-round ratios new/old, and the ratio
of the minima (other processes' load only ever adds time).

Run: ``python3 bench/idle_share_ab.py`` (about 1 minute; ``--rounds``, ``--batch``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TENANT = "ab"
SEATS = 10_000_000
LEASE_SECONDS = 3600
IDLE_TIMEOUT = 600  # the activity heartbeats say 30 s: never warned
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
PIPELINE = 250
# (label, worker, command): the variants measured each round, in groups whose order
# rotates from round to round (the acquires first: the releases end their leases)
GROUPS = (
    (("acquire old", "old", "acquire"), ("acquire new", "new", "acquire")),
    (
        ("heartbeat old", "old", "heartbeat"),
        ("heartbeat new", "new", "heartbeat"),
        ("heartbeat (activity) new", "new", "activity"),
    ),
    (("release old", "old", "release"), ("release new", "new", "release")),
)
RATIOS = (  # (row, numerator, denominator)
    ("acquire (new lease)", "acquire new", "acquire old"),
    ("heartbeat", "heartbeat new", "heartbeat old"),
    ("heartbeat (activity) / old heartbeat", "heartbeat (activity) new", "heartbeat old"),
    ("release", "release new", "release old"),
)


# -- the worker: one revision's engine, batches on command ------------------------------


def worker(url: str, name: str, hot: int, batch: int, idle: bool) -> None:
    """Reads commands on stdin (acquire, heartbeat, activity, release, quit), runs one
    batch each, answers "ok" (or the unexpected reply)."""
    from seatlease.licenses import LicenseConfig
    from seatlease.seats.engine import SeatEngine
    from seatlease.seats.ids import new_request_id
    from seatlease.seats.keys import LicenseKeys
    from seatlease.seats.protocol.calls import acquire_call, heartbeat_call, release_call
    from seatlease.seats.redisconn import connect

    def config(_tenant: str, license_id: str) -> LicenseConfig:
        fields: dict[str, Any] = {}
        if license_id.startswith(
            "idle"
        ):  # (this tree's only: the old LicenseConfig has no idle rule)
            fields = {"idle_timeout_seconds": IDLE_TIMEOUT}
        return LicenseConfig(
            seats=SEATS, lease_seconds=LEASE_SECONDS, max_lease_seconds=LEASE_SECONDS, **fields
        )

    eng = SeatEngine(connect(url, socket_timeout=120), config)
    eng.scripts.library.load()
    client = eng.redis

    def run(items: list[Any], queue: Any, expect: str) -> None:
        for start in range(0, len(items), PIPELINE):
            pipe = client.pipeline(transaction=False)
            for item in items[start : start + PIPELINE]:
                queue(pipe, item)
            for reply in pipe.execute():
                if reply[0] != expect:
                    raise RuntimeError(f"unexpected reply {reply!r} (expected {expect!r})")

    made: dict[str, str] = {}

    def acquire(license_id: str) -> Any:
        def queue(pipe: Any, client_id: str) -> None:
            ks, av = acquire_call(TENANT, license_id, client_id, metadata_json=META,
                                  request_id=new_request_id())  # fmt: skip
            eng.scripts.acquire(keys=ks, args=av, client=pipe)
            made[client_id] = ""

        return queue

    def fill(license_id: str) -> list[str]:
        eng.cache_config(TENANT, license_id, config(TENANT, license_id))
        clients = [f"{license_id}-{i:07d}" for i in range(hot)]
        run(clients, acquire(license_id), "acquired")
        made.clear()
        return list(client.hmget(LicenseKeys.of(TENANT, license_id).clients, clients))

    lic = f"lic-{name}"
    sessions = fill(lic)
    idle_sessions = fill(f"idle-{name}") if idle else []

    def heartbeat(license_id: str, idle_seconds: int | None) -> Any:
        def queue(pipe: Any, sid: str) -> None:
            extra = {} if idle_seconds is None else {"idle_seconds": idle_seconds}
            ks, av = heartbeat_call(TENANT, license_id, sid, request_id=new_request_id(),
                                    **extra)  # fmt: skip
            eng.scripts.heartbeat(keys=ks, args=av, client=pipe)

        return queue

    def release(pipe: Any, sid: str) -> None:
        ks, av = release_call(TENANT, lic, sid, request_id=new_request_id())
        eng.scripts.release(keys=ks, args=av, client=pipe)

    clients_key = LicenseKeys.of(TENANT, lic).clients
    n = 0
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            break
        n += 1
        start = (n * batch) % max(1, hot - batch)
        if command == "acquire":
            made.clear()
            run([f"new-{n}-{i:05d}" for i in range(batch)], acquire(lic), "acquired")
        elif command == "heartbeat":
            run(sessions[start : start + batch], heartbeat(lic, None), "ok")
        elif command == "activity":
            run(idle_sessions[start : start + batch], heartbeat(f"idle-{name}", 30), "ok")
        elif command == "release":  # the last acquire's leases: the license as before
            run(list(client.hmget(clients_key, list(made))), release, "released")
        print("ok", flush=True)


# -- the parent: the server, the workers, the rounds ------------------------------------


def old_tree(rev: str, into: str) -> Path:
    """``shared/`` of ``rev`` (git archive), extracted under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "shared"],
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return Path(into) / "shared"


def start_worker(url: str, name: str, shared: Path, args: argparse.Namespace, idle: bool) -> Any:
    env = dict(os.environ, PYTHONPATH=str(shared))
    command = [sys.executable, __file__, "--worker", url, "--name", name, "--hot", str(args.hot),
               "--batch", str(args.batch)] + (["--idle"] if idle else [])  # fmt: skip
    proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=str(REPO / "bench"))  # fmt: skip
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("a worker did not start")
    return proc


def ask(proc: Any, command: str) -> None:
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline().strip()
    if answer != "ok":
        raise RuntimeError(f"worker: {answer!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--old-rev", default="29d1d9f^")
    parser.add_argument("--hot", type=int, default=10_000, help="live leases per license")
    parser.add_argument("--batch", type=int, default=300, help="calls per batch")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--idle", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.name, args.hot, args.batch, args.idle)
        return 0
    sys.path.insert(0, str(REPO / "shared"))
    from seatlease.seats.redisconn import connect
    from seatlease_cli.procs import start_redis

    server = start_redis()
    workers: dict[str, Any] = {}
    tmp = tempfile.TemporaryDirectory()
    try:
        old = old_tree(args.old_rev, tmp.name)
        workers["old"] = start_worker(server.url, "old", old, args, False)
        workers["new"] = start_worker(server.url, "new", REPO / "shared", args, True)
        client = connect(server.url)
        version = client.info("server")["redis_version"]
        libraries = client.function_list()
        if len(libraries) != 2:  # (each worker loaded its own revision's library)
            raise RuntimeError(f"{len(libraries)} seat libraries loaded, not the two revisions'")
        print(f"redis-server {version}; {args.old_rev} against this tree, {args.hot:,} leases"
              f" a license, {args.rounds} rounds of {args.batch} calls a variant")  # fmt: skip
        usec: dict[str, list[float]] = {label: [] for group in GROUPS for label, _w, _c in group}
        for r in range(args.rounds):
            order = [
                v for group in GROUPS for v in group[r % len(group) :] + group[: r % len(group)]
            ]
            for label, who, command in order:
                client.config_resetstat()
                ask(workers[who], command)
                usec[label].append(float(client.info("commandstats")["cmdstat_fcall"]
                                         ["usec_per_call"]))  # fmt: skip
        print(f"\n{'variant':<26}{'median us':>10}{'min us':>9}")
        for label, values in usec.items():
            print(f"{label:<26}{statistics.median(values):>10.2f}{min(values):>9.2f}")
        print("\nnew / old: median of the per-round ratios (ratio of the minima)")
        for row, top, bottom in RATIOS:
            ratio = statistics.median(a / b for a, b in zip(usec[top], usec[bottom], strict=True))
            print(f"  {row:<38}{ratio:6.3f}x ({min(usec[top]) / min(usec[bottom]):.3f}x)")
        client.close()
    finally:
        for proc in workers.values():
            if proc.poll() is None:
                proc.stdin.write("quit\n")
                proc.stdin.flush()
                proc.wait(timeout=30)
        server.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
