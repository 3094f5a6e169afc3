"""The vendor SDK as a vendor gets it: ``shared/client`` built into a wheel, installed
alone (no index, no dependencies) into a fresh virtual environment, and used from that
environment's own interpreter, isolated from this repository, against the real
acquire/heartbeat/release functions served over HTTP (real Redis, real PostgreSQL).

It runs with this interpreter and again with Python 3.9, the oldest the client supports,
when one is on the machine (``SEATLEASE_PYTHON39``, ``python3.9`` on PATH, or pyenv's
3.9); ``make lint`` checks 3.9 compatibility with vermin either way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
from client_bad_server import KEY_X
from http_support import serving

from seatlease.api import runtime, tokens
from seatlease.records import store
from seatlease_cli import devserver
from seatlease_cli.procs import free_port
from seatlease_client import __version__

REPO = Path(__file__).resolve().parent.parent
CLIENT_SRC = REPO / "shared" / "client"
TENANT = "acme"
LICENSE = "wheel-lic"


def run(*args: str | Path, cwd: Path, timeout: float = 180) -> str:
    """A command with a scrubbed environment (no PYTHONPATH, no pip configuration of the
    machine, no proxies); its stdout, or a failure showing what it said."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "LC_ALL": "C.UTF-8",
    }
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


# -- the wheel -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's wheel, built without isolation (offline) from a copy of its source,
    so the build leaves nothing behind in the repository."""
    work = tmp_path_factory.mktemp("client-wheel")
    source = work / "src"
    shutil.copytree(
        CLIENT_SRC,
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
    )
    out = work / "dist"
    run(
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        out,
        source,
        cwd=work,
    )
    wheels = list(out.glob("*.whl"))
    assert [w.name for w in wheels] == [f"seatlease_client-{__version__}-py3-none-any.whl"]
    return wheels[0]


def test_the_wheel_declares_no_dependencies_no_scripts_and_python_3_9(wheel: Path) -> None:
    dist_info = f"seatlease_client-{__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = HeaderParser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
        record = archive.read(f"{dist_info}/RECORD").decode().splitlines()
    assert metadata["Name"] == "seatlease-client"
    assert metadata["Version"] == __version__
    # Nothing at run time, token verification included (the standard library's: issue
    # 48); the verify extra of 0.2 is kept, empty, so old install commands still work.
    assert metadata.get_all("Provides-Extra") == ["verify"]
    assert metadata.get_all("Requires-Dist") is None
    assert metadata["Requires-Python"] == ">=3.9"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert top_level == ["seatlease_client"]
    assert f"{dist_info}/entry_points.txt" not in names  # no console scripts
    recorded = {line.split(",")[0] for line in record}
    assert recorded == names
    assert {name.split("/")[0] for name in names} == {"seatlease_client", dist_info}
    assert "seatlease_client/py.typed" in names
    # Apache-2.0 section 4(a): the license's text travels with the wheel (issue 48).
    assert f"{dist_info}/licenses/LICENSE" in names
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(f"{dist_info}/licenses/LICENSE").decode()
    assert text == (REPO / "LICENSE").read_text() == (CLIENT_SRC / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert {n for n in names if n.endswith(".py")} == {
        f"seatlease_client/{p.name}" for p in (CLIENT_SRC / "seatlease_client").glob("*.py")
    }


# -- a Python 3.9 when the machine has one -------------------------------------------


def _is_python39(candidate: str | None) -> str | None:
    """``candidate`` if it runs and is Python 3.9 exactly (pyenv shims exist on PATH even
    for versions that are not selected, and fail when run)."""
    if not candidate:
        return None
    try:
        done = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    return candidate if done.returncode == 0 and done.stdout.strip() == "True" else None


def find_python39() -> str | None:
    candidates = [os.environ.get("SEATLEASE_PYTHON39"), shutil.which("python3.9")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        prefix = subprocess.run(
            [pyenv, "prefix", "3.9"], capture_output=True, text=True, timeout=30
        )
        if prefix.returncode == 0 and prefix.stdout.strip():
            candidates.append(str(Path(prefix.stdout.strip()) / "bin" / "python3.9"))
    for candidate in candidates:
        found = _is_python39(candidate)
        if found:
            return found
    return None


@pytest.fixture(scope="module", params=["current", "3.9"])
def base_python(request: pytest.FixtureRequest) -> str:
    if request.param == "current":
        return sys.executable
    found = find_python39()
    if found is None:
        message = "no Python 3.9 on this machine (vermin in make lint still checks 3.9)"
        if os.environ.get("CI"):  # CI's machine has pyenv's 3.9: its absence is a failure
            pytest.fail(message)
        pytest.skip(message)
    return found


# -- a fresh virtual environment with only the wheel ---------------------------------


class Venv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "bin" / "python"
        self.version: list[int] = []  # [major, minor] of its interpreter

    def site_packages(self) -> Path:
        found = list(self.root.glob("lib/python3.*/site-packages"))
        assert len(found) == 1, found
        return found[0]

    def distributions(self) -> set[str]:
        listed = run(self.python, "-m", "pip", "list", "--format=json", cwd=self.root)
        return {entry["name"].lower() for entry in json.loads(listed)}

    def snapshot(self) -> tuple[set[str], set[str], set[str]]:
        """(distributions, site-packages entries, bin entries)."""
        return (
            self.distributions(),
            {p.name for p in self.site_packages().iterdir() if p.name != "__pycache__"},
            {p.name for p in (self.root / "bin").iterdir()},
        )


@pytest.fixture(scope="module")
def venv(
    base_python: str, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Venv, dict[str, set[str]]]]:
    """A fresh venv (pip from ensurepip, offline) with the wheel installed alone; also
    what the install added (distributions, site-packages entries, bin entries)."""
    root = tmp_path_factory.mktemp("fresh-venv") / "venv"
    run(base_python, "-m", "venv", root, cwd=root.parent)
    env = Venv(root)
    env.version = json.loads(
        run(env.python, "-I", "-c", "import sys; print(list(sys.version_info[:2]))", cwd=root)
    )
    before = env.snapshot()
    run(env.python, "-m", "pip", "install", "--no-index", "--no-deps", wheel, cwd=root.parent)
    after = env.snapshot()
    added = {
        "distributions": after[0] - before[0],
        "site_packages": after[1] - before[1],
        "bin": after[2] - before[2],
        "removed": (before[0] - after[0]) | (before[1] - after[1]) | (before[2] - after[2]),
    }
    yield env, added


def test_the_wheel_is_the_one_version_of_all_five_clients() -> None:
    """shared/clients/VERSION is the version of every client; the Python client's
    _version.py writes it as a literal (a wheel build cannot read outside its folder)."""
    assert __version__ == (REPO / "shared" / "clients" / "VERSION").read_text().strip()


def test_installing_the_wheel_adds_one_distribution_and_one_import_name(venv) -> None:
    env, added = venv
    assert added["distributions"] == {"seatlease-client"}
    assert added["site_packages"] == {
        "seatlease_client",
        f"seatlease_client-{__version__}.dist-info",
    }
    assert added["bin"] == set()  # no console scripts
    assert added["removed"] == set()
    # The installed files are exactly the wheel's RECORD: nothing written beside it.
    site = env.site_packages()
    record = (site / f"seatlease_client-{__version__}.dist-info" / "RECORD").read_text()
    recorded = {line.split(",")[0] for line in record.splitlines()}
    installed = {
        str(p.relative_to(site))
        for top in added["site_packages"]
        for p in (site / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert installed == recorded - {r for r in recorded if "__pycache__" in r}


# -- the client from the fresh venv against the real functions -----------------------


class Counted:
    """WSGI wrapper counting requests per path, so the test sees the calls went out."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            self.counts[environ.get("PATH_INFO", "")] += 1
        return self.app(environ, start_response)


@pytest.fixture
def served(redis_url: str, database_url: str) -> Iterator[tuple[str, Counted]]:
    counted = Counted(devserver.create_app(["acquire", "heartbeat", "release", "keys"]))
    with serving(counted) as url:
        yield url, counted


# Runs in the fresh venv, with -I (no PYTHONPATH, no user site, no script directory on
# sys.path) and a working directory outside the repository.
VENDOR_PROGRAM = r"""
import asyncio, json, sys, time
import seatlease_client
from seatlease_client import (AsyncSeatClient, BackendUnavailable, NoSeatsAvailable,
                              SeatClient, UntrustedKey)

url, key, lic, dead_url, pinned, other_key = sys.argv[1:7]
pinned = pinned.split(",")
out = {"file": seatlease_client.__file__, "version": seatlease_client.__version__,
       "python": list(sys.version_info[:2])}
try:
    import seatlease  # the server package must not be importable from the vendor's venv
    out["server_visible"] = True
except ImportError:
    out["server_visible"] = False

client = SeatClient(url, key, backoff=0.1, pinned_keys=pinned)
with client.lease(lic, client_id="wheel-1", metadata={"user": "ann"}) as lease:
    out["lease"] = [lease.seats_used, lease.seats_total, lease.lease_seconds]
    out["verified"] = client.verify and bool(lease.token)
    first_expiry = lease.expires_at
    other = client.acquire(lic, "wheel-2")
    out["second"] = [other["seats_used"], other["seats_total"]]
    try:
        client.acquire(lic, "wheel-3")
        out["third"] = "granted"
    except NoSeatsAvailable as full:
        out["third"] = [full.status, full.seats_used, full.seats_total]
    beat = client.heartbeat(lic, other["session_id"])
    out["heartbeat"] = beat["session_id"] == other["session_id"]
    deadline = time.monotonic() + 10  # the background thread's heartbeat moves the deadline
    while lease.expires_at == first_expiry and time.monotonic() < deadline:
        time.sleep(0.05)
    out["background_heartbeat"] = lease.expires_at > first_expiry
    released = client.release(lic, other["session_id"])
    out["release_other"] = [released["released"], released["seats_used"]]
out["held_after_exit"] = len(client.held())
out["released"] = lease.released


async def main():
    held_by = AsyncSeatClient(url, key, pinned_keys=pinned)
    async with held_by.lease(lic, client_id="wheel-async") as held:
        return [held.seats_used, held.seats_total]

out["async"] = asyncio.run(main())

# A default install verifies (no extra, nothing but the wheel): a client pinned to
# another key refuses the deployment's grant, and one pinned to nothing is not made.
try:
    SeatClient(url, key, pinned_keys=[other_key], retries=0).acquire(lic, "wheel-5")
    out["other_key"] = "granted"
except UntrustedKey as refused:
    out["other_key"] = refused.code
try:
    SeatClient(url, key)
    out["unpinned"] = "constructed"
except ValueError as refused:
    out["unpinned"] = str(refused)
import seatlease_client._verify as verifying
out["verify_imports"] = sorted(
    name for name in ("jwt", "cryptography") if name in sys.modules
)

try:
    SeatClient(dead_url, key, retries=0, pinned_keys=pinned).acquire(lic, "wheel-4")
except BackendUnavailable as down:
    out["unreachable"] = [down.status, down.code, down.retry_after_seconds]

# The server's timestamps and other RFC 3339 forms that 3.9's fromisoformat rejects.
from seatlease_client._lease import _parse_time
stamps = ["2026-11-22T10:06:00.000Z", "2026-11-22T10:06:00Z", "2026-11-22t10:06:00.5z",
          "2026-11-22T12:06:00.1234567+02:00"]
out["timestamps"] = [_parse_time(stamp).isoformat() for stamp in stamps]
print(json.dumps(out))
"""


def test_the_installed_wheel_holds_heartbeats_and_releases_a_seat(
    venv, served, api_key, tmp_path
) -> None:
    env, _ = venv
    url, counted = served
    store.create_license(TENANT, LICENSE, seats=2, lease_seconds=3)
    runtime.refresh_license_cache(TENANT, LICENSE)
    program = tmp_path / "vendor_program.py"
    program.write_text(VENDOR_PROGRAM)
    dead_url = f"http://127.0.0.1:{free_port()}"
    pinned = ",".join(key["x"] for key in tokens.keyring().jwks()["keys"])
    out = json.loads(
        run(env.python, "-I", program, url, api_key, LICENSE, dead_url, pinned, KEY_X, cwd=tmp_path)
    )
    assert Path(out["file"]).is_relative_to(env.site_packages())
    assert not Path(out["file"]).is_relative_to(REPO)
    assert out["version"] == __version__
    assert out["python"] == env.version  # the venv's interpreter ran it, 3.9 included
    assert out["server_visible"] is False
    assert out["lease"] == [1, 2, 3]
    assert out["second"] == [2, 2]
    assert out["third"] == [409, 2, 2]
    assert out["heartbeat"] is True
    assert out["background_heartbeat"] is True
    assert out["release_other"] == [True, 1]
    assert out["held_after_exit"] == 0 and out["released"] is True
    assert out["async"] == [1, 2]
    assert out["verified"] is True
    assert out["other_key"] == "token_untrusted_key"
    assert "pinned_keys" in out["unpinned"] and "insecure_skip_verify" in out["unpinned"]
    assert out["verify_imports"] == []  # the standard library verified
    assert out["unreachable"] == [0, "network_error", None]
    assert out["timestamps"] == [
        "2026-11-22T10:06:00+00:00",
        "2026-11-22T10:06:00+00:00",
        "2026-11-22T10:06:00.500000+00:00",
        "2026-11-22T10:06:00.123456+00:00",
    ]
    assert runtime.seat_engine().live_leases(TENANT, LICENSE) == []
    # one explicit heartbeat plus at least one from the background thread
    assert counted.counts["/heartbeat"] >= 2
    # wheel-2, wheel-1 on exit, the async lease, and wheel-5's refused grant at once
    assert counted.counts["/release"] == 4
