"""Servers the tests and benchmarks start and the local stack does not: a local Redis
Cluster and a private PostgreSQL cluster. The building blocks (ports, ``Proc``, spawning
redis-server) are the local stack's own, in ``seatlease_cli.procs``."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from seatlease_cli.procs import (
    MissingTool,
    Proc,
    bindable,
    free_port,
    port_open,
    redis_args,
    require,
    spawn,
    wait_port_free,
    wait_until,
)


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too (so at most 55535)."""

    for _ in range(200):
        port = random.randint(20000, 45000)
        if all(bindable(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def start_redis_cluster(nodes: int = 3) -> Proc:
    """A local Redis Cluster of ``nodes`` masters (redis-server --cluster-enabled yes)."""
    cli = require("redis-cli", "install Debian's redis-tools package")
    workdir = tempfile.mkdtemp(prefix="seatlease-cluster-")
    ports: list[int] = []
    while len(ports) < nodes:
        port = free_cluster_port()
        if port not in ports:
            ports.append(port)
    handle = Proc([], workdir)
    try:
        for port in ports:
            node_dir = Path(workdir) / str(port)
            node_dir.mkdir()
            args = redis_args(
                port,
                str(node_dir),
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000",
            )  # fmt: skip
            handle.procs.append(spawn(args, node_dir / "redis.log"))
        for port in ports:
            wait_until(lambda p=port: port_open(p), 10, f"cluster node on port {port}")
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

        def cluster_ok() -> bool:
            out = subprocess.run(
                [cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True, text=True
            ).stdout
            return "cluster_state:ok" in out

        wait_until(cluster_ok, 30, "redis cluster")
    except Exception:
        handle.stop()
        raise
    handle.url = f"redis+cluster://127.0.0.1:{ports[0]}/0"
    return handle


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    raise MissingTool(f"{name} not found: install Debian's postgresql package")


def start_postgres() -> Proc:
    """A private PostgreSQL cluster (initdb in a temp dir) on a free port."""
    workdir = tempfile.mkdtemp(prefix="seatlease-pg-")
    port = free_port()
    data = Path(workdir) / "data"
    env = dict(os.environ)
    user = None
    if os.geteuid() == 0:  # initdb and postgres refuse root: run them as the postgres user
        shutil.chown(workdir, "postgres")
        user = "postgres"
    as_user: dict = {"user": user, "group": user, "extra_groups": []} if user else {}
    subprocess.run(
        [_pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True, capture_output=True, env=env, cwd=workdir, **as_user,
    )  # fmt: skip
    args = [
        _pg_bin("postgres"), "-D", str(data), "-p", str(port), "-k", workdir,
        "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
    ]  # fmt: skip

    def launch() -> list[subprocess.Popen]:
        wait_port_free(port)
        proc = spawn(args, Path(workdir) / "pg.log", cwd=workdir, user=user)
        try:
            wait_until(lambda: port_open(port), 30, f"postgres on port {port}")
            time.sleep(0.5)
        except RuntimeError:
            Proc([proc], stop_signal=signal.SIGINT).halt()
            raise
        return [proc]

    try:
        procs = launch()
    except RuntimeError:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    url = f"postgresql+pg8000://postgres@127.0.0.1:{port}/postgres"
    return Proc(procs, workdir, url, launch, stop_signal=signal.SIGINT)


MACHINE_PG = "postgresql+pg8000://postgres@127.0.0.1:5432/postgres"


def private_database() -> tuple[str, Callable[[], None]]:
    """A fresh, migrated database on the machine's PostgreSQL (or on a private cluster
    started here when none answers); returns its URL and the function that drops it."""
    from sqlalchemy import create_engine, text

    from seatlease.records import db, store

    handle: Proc | None = None
    admin_url = MACHINE_PG
    if not port_open(5432):
        handle = start_postgres()
        admin_url = handle.url
    name = f"seatlease_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    engine = db.make_engine(url)
    store.upgrade(engine)
    engine.dispose()

    def cleanup() -> None:
        db.reset()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        if handle:
            handle.stop()

    return url, cleanup


CLOCKSHIFT_SOURCE = Path(__file__).resolve().parent / "clockshift" / "clockshift.c"


class ShiftedClock:
    """The wall clock of a redis-server started by ``start_shifted_redis``: ``advance``
    moves it forward (never back: what waiting does), at once for every later command
    (TIME, key expiry, a script's time). ``offset_ms`` is how far it is ahead of the real
    clock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset_ms = 0
        if not path.exists():
            path.write_bytes(bytes(8))
        self._write()

    def _write(self) -> None:
        # In place, never truncated: the server maps these 8 bytes, and reading a mapping
        # past the file's end (a truncate-then-write) is a SIGBUS in the server.
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, self.offset_ms.to_bytes(8, "little", signed=True), 0)
        finally:
            os.close(fd)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self.offset_ms += round(seconds * 1000)
        self._write()


def build_clockshift(into: Path) -> Path:
    """tests/clockshift/clockshift.c built into ``into`` (cc, as the C client's build has)."""
    cc = require("cc", "install a C compiler (Debian's gcc): the time-jump tests build a shim")
    target = into / "clockshift.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(target),
         str(CLOCKSHIFT_SOURCE)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return target


def start_shifted_redis() -> tuple[Proc, ShiftedClock]:
    """A private redis-server whose wall clock the test moves (``ShiftedClock.advance``):
    lease deadlines, a term's end and grace, the config cache's TTL and the reply store's
    generations all pass as they would by waiting, in a moment. The shim
    (tests/clockshift/clockshift.c) is preloaded into the server alone."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="seatlease-shifted-redis-"))
    shim = build_clockshift(workdir)
    clock = ShiftedClock(workdir / "offset")
    env = {**os.environ, "LD_PRELOAD": str(shim), "CLOCKSHIFT_FILE": str(clock.path)}
    args = redis_args(port, str(workdir))

    def launch() -> list[subprocess.Popen]:
        wait_port_free(port)
        proc = spawn(args, workdir / "redis.log", env=env)
        try:
            wait_until(lambda: port_open(port), 10, f"redis-server (shifted clock) on {port}")
        except RuntimeError:
            Proc([proc]).halt()
            raise
        return [proc]

    return Proc(launch(), str(workdir), f"redis://127.0.0.1:{port}/0", launch), clock
