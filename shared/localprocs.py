"""Start private local services: a redis-server, a three-node Redis Cluster, a PostgreSQL
database and the Pub/Sub emulator. Used by the test fixtures and by ``seatlease local``.

Each ``start_*`` returns a handle whose ``stop()`` ends what it started; a missing binary
raises ``MissingTool`` with a sentence that says what to install.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class MissingTool(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too (so at most 55535)."""
    import random

    for _ in range(200):
        port = random.randint(20000, 45000)
        if all(_bindable(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def require(binary: str, hint: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise MissingTool(f"{binary} not found: {hint}")
    return path


@dataclass
class Proc:
    """Processes started together, stopped together."""

    procs: list[subprocess.Popen] = field(default_factory=list)
    workdir: str | None = None
    url: str = ""

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _spawn(
    args: list[str], log: Path, cwd: str | None = None, env: dict | None = None
) -> subprocess.Popen:
    return subprocess.Popen(
        args,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,  # its own process group: stop() ends its children too
    )


def _redis_args(port: int, workdir: str, *extra: str) -> list[str]:
    binary = require("redis-server", "install Debian's redis-server package")
    return [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", workdir,
        "--maxmemory-policy", "noeviction",
        *extra,
    ]  # fmt: skip


def start_redis(port: int | None = None) -> Proc:
    """A private redis-server on a free port (nothing on disk)."""
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="seatlease-redis-")
    proc = _spawn(_redis_args(port, workdir), Path(workdir) / "redis.log")
    handle = Proc([proc], workdir, f"redis://127.0.0.1:{port}/0")
    try:
        wait_until(lambda: port_open(port), 10, f"redis-server on port {port}")
    except RuntimeError:
        handle.stop()
        raise
    return handle


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
            args = _redis_args(
                port,
                str(node_dir),
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000",
            )  # fmt: skip
            handle.procs.append(_spawn(args, node_dir / "redis.log"))
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
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run it as the postgres user
        shutil.chown(workdir, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*run_as, _pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True, capture_output=True, env=env,
    )  # fmt: skip
    proc = _spawn(
        [*run_as, _pg_bin("postgres"), "-D", str(data), "-p", str(port), "-k", workdir,
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
        Path(workdir) / "pg.log",
    )  # fmt: skip
    handle = Proc([proc], workdir, f"postgresql+pg8000://postgres@127.0.0.1:{port}/postgres")
    try:
        wait_until(lambda: port_open(port), 30, f"postgres on port {port}")
        time.sleep(0.5)
    except RuntimeError:
        handle.stop()
        raise
    return handle


def start_pubsub_emulator(project: str = "seatlease-local", port: int | None = None) -> Proc:
    """The Pub/Sub emulator (``gcloud beta emulators pubsub start``); needs Java."""
    gcloud = require("gcloud", "install the Google Cloud SDK with the pubsub-emulator component")
    require("java", "the Pub/Sub emulator needs a Java runtime (Debian's default-jre-headless)")
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="seatlease-pubsub-")
    proc = _spawn(
        [gcloud, "beta", "emulators", "pubsub", "start", f"--host-port=127.0.0.1:{port}",
         f"--project={project}", f"--data-dir={workdir}", "--quiet"],
        Path(workdir) / "emulator.log",
    )  # fmt: skip
    handle = Proc([proc], workdir, f"127.0.0.1:{port}")

    def ready() -> bool:
        if proc.poll() is not None:
            log = (Path(workdir) / "emulator.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Pub/Sub emulator exited:\n{log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_until(ready, 90, f"Pub/Sub emulator on port {port}")
    except Exception:
        handle.stop()
        raise
    return handle
