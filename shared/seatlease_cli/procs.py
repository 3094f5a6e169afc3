"""Start the local stack's private services: a redis-server and the Pub/Sub emulator
(``seatlease local``; the tests use them too, and build a Redis Cluster and a private
PostgreSQL from the same pieces in tests/procs.py).

Each ``start_*`` returns a handle whose ``stop()`` ends what it started; a missing binary
raises ``MissingTool`` with a sentence that says what to install. A service can also be
``restart()``-ed on the same port with the same files: the local stack's supervisor does
that when one of them died, and tests use it to stage an outage.
"""

from __future__ import annotations

import http.client
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


def bindable(port: int) -> bool:
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
    """Processes started together, stopped together.

    ``relaunch`` (when set) starts them again on the same ports and files and waits until
    they serve, returning the new processes: what ``restart()`` runs. ``stop_signal`` is
    the polite one (PostgreSQL's SIGTERM waits for every client to leave; SIGINT does not).
    """

    procs: list[subprocess.Popen] = field(default_factory=list)
    workdir: str | None = None
    url: str = ""
    relaunch: Callable[[], list[subprocess.Popen]] | None = None
    stop_signal: int = signal.SIGTERM

    def alive(self) -> bool:
        return bool(self.procs) and all(proc.poll() is None for proc in self.procs)

    def kill(self) -> None:
        """SIGKILL every process group, as a crash would (tests stage one with it)."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    def halt(self) -> None:
        """End the processes (``stop_signal``, then SIGKILL after 10 s); keep their files.

        Each process group is signalled even when its leader is gone: a crashed wrapper
        (gcloud's emulator command runs a JVM) can leave a child that holds the port."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, self.stop_signal)
            except ProcessLookupError:
                continue
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            # The leader is gone; a child of its group may still hold the port for a
            # moment (the emulator's JVM under gcloud's wrapper): when halt returns, the
            # whole group is gone and its ports are free.
            _wait_group_gone(proc.pid, timeout=10)

    def restart(self) -> None:
        """End what is left of the processes and start them again (same port, same files)."""
        if self.relaunch is None:
            raise RuntimeError("this service cannot be restarted")
        self.halt()
        self.procs = self.relaunch()

    def stop(self) -> None:
        self.halt()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of the group runs as another user: still there
        return True
    return True


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Wait until no process of group ``pgid`` is left; SIGKILL what is after ``timeout``
    (and wait as long again for that, at most)."""
    for sig in (None, signal.SIGKILL):
        if sig is not None:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _group_alive(pgid):
                return
            time.sleep(0.02)


def spawn(
    args: list[str],
    log: Path,
    cwd: str | None = None,
    env: dict | None = None,
    user: str | None = None,
) -> subprocess.Popen:
    """Start ``args`` in its own process group (so stop() ends its children too), as
    ``user`` when given: our direct child then, which we reap ourselves (a wrapper such as
    runuser would leave it a zombie of init after a SIGKILL, and PostgreSQL refuses to
    start while the pid in its lock file still exists, even as a zombie)."""
    as_user: dict = {"user": user, "group": user, "extra_groups": []} if user else {}
    return subprocess.Popen(
        args,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        **as_user,
    )


def redis_args(port: int, workdir: str, *extra: str) -> list[str]:
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


def start_redis(
    port: int | None = None, persist: bool = False, *options: str, data_dir: Path | None = None
) -> Proc:
    """A private redis-server on a free port. Nothing on disk, unless ``persist``: then
    every write is appended to a file in its working directory first (AOF, fsync on each
    write), so that a ``restart()`` after a crash finds the same data. ``options``: more of
    redis-server's arguments (``--rename-command FCALL ""``: a server without functions).
    ``data_dir``: that working directory, kept when the server stops (a later server on
    it finds the same data: the local stack's Redis across its restarts); else a temporary
    one, removed."""
    port = port or free_port()
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        workdir = str(data_dir)
    else:
        workdir = tempfile.mkdtemp(prefix="seatlease-redis-")
    extra = ("--appendonly", "yes", "--appendfsync", "always") if persist else ()
    args = redis_args(port, workdir, *extra, *options)

    def launch() -> list[subprocess.Popen]:
        wait_port_free(port)
        proc = spawn(args, Path(workdir) / "redis.log")
        try:
            wait_until(lambda: port_open(port), 10, f"redis-server on port {port}")
        except RuntimeError:
            Proc([proc]).halt()
            raise
        return [proc]

    removed = None if data_dir is not None else workdir  # (a kept folder stays)
    try:
        return Proc(launch(), removed, f"redis://127.0.0.1:{port}/0", launch)
    except RuntimeError:
        if removed:
            shutil.rmtree(removed, ignore_errors=True)
        raise


def start_pubsub_emulator(project: str = "seatlease-local", port: int | None = None) -> Proc:
    """The Pub/Sub emulator (``gcloud beta emulators pubsub start``); needs Java."""
    gcloud = require("gcloud", "install the Google Cloud SDK with the pubsub-emulator component")
    require("java", "the Pub/Sub emulator needs a Java runtime (Debian's default-jre-headless)")
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="seatlease-pubsub-")
    args = [
        gcloud, "beta", "emulators", "pubsub", "start", f"--host-port=127.0.0.1:{port}",
        f"--project={project}", f"--data-dir={workdir}", "--quiet",
    ]  # fmt: skip
    log = Path(workdir) / "emulator.log"

    def launch() -> list[subprocess.Popen]:
        wait_port_free(port)
        proc = spawn(args, log)

        def ready() -> bool:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Pub/Sub emulator exited:\n{tail}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
                    return resp.status == 200
            except (OSError, http.client.HTTPException):
                # (while it starts, the emulator's gRPC side may answer the GET first:
                # "Unexpected HTTP/1.x request", a BadStatusLine to urllib; not ready yet)
                return False

        try:
            wait_until(ready, 90, f"Pub/Sub emulator on port {port}")
        except Exception:
            Proc([proc]).halt()
            raise
        return [proc]

    try:
        return Proc(launch(), workdir, f"127.0.0.1:{port}", launch)
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def wait_port_free(port: int) -> None:
    """Before a (re)start on a fixed port: a killed predecessor may still be exiting."""
    wait_until(lambda: not port_open(port), 10, f"port {port} to be released")
