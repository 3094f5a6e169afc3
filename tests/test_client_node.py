"""The Node client (shared/clients/node) against the served functions: its own test
programs (``node --test``: the token vectors, the lease life, a stalled server, borrow,
typed errors, the wait queue served in join order, the policy's errors) run as a
subprocess against tests/client_harness.py's server on real Redis and PostgreSQL, and
against tests/client_bad_server.py's behaviours (``SEATLEASE_BAD_URL``: a Retry-After of
an hour, an ended term, a suspension); and the package ``npm pack`` makes. Its ``hold``
is checked with every client's in tests/test_client_holds.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
from client_bad_server import bad_server
from http_support import post_json

from seatlease_client import SeatClient

REPO = Path(__file__).resolve().parent.parent
NODE_DIR = REPO / "shared" / "clients" / "node"


def run(
    args: list[str], timeout: float = 300, cwd: Path = NODE_DIR, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def node_package() -> Path:
    """The package built (dev dependencies from package-lock.json, then tsc)."""
    for tool in ("node", "npm"):
        assert shutil.which(tool), f"{tool} is missing: make test installs it (README)"
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        ci = run(["npm", "ci", "--no-audit", "--no-fund"])
        assert ci.returncode == 0, ci.stdout + ci.stderr
    build = run(["npm", "run", "build"])
    assert build.returncode == 0, build.stdout + build.stderr
    return NODE_DIR


def test_the_node_client_passes_its_tests_against_the_served_functions(
    node_package, client_functions
):
    with bad_server() as bad_url:
        env = {**client_functions.env(), "SEATLEASE_BAD_URL": bad_url}
        result = run(["node", "--test", "--test-concurrency=1", "test/"], env=env, timeout=300)
    # node's TAP output: each failed test's "not ok" line and what follows it (its error)
    failed = re.findall(r"^not ok .*(?:\n(?!(?:not )?ok ).*){0,25}", result.stdout, re.MULTILINE)
    assert result.returncode == 0, "\n".join(failed)[-8000:] + result.stderr[-3000:]
    summary = dict(
        line[2:].split(" ", 1) for line in result.stdout.splitlines() if line.startswith("# ")
    )
    assert int(summary["fail"]) == 0 and int(summary["skipped"]) == 0
    assert int(summary["pass"]) >= 40, summary  # every vector and every life-cycle test ran


def test_npm_pack_makes_a_package_without_runtime_dependencies(node_package, tmp_path):
    packed = run(["npm", "pack", "--json", "--pack-destination", str(tmp_path)])
    assert packed.returncode == 0, packed.stderr
    [info] = json.loads(packed.stdout)
    files = {entry["path"] for entry in info["files"]}
    assert {"dist/index.js", "dist/index.d.ts", "package.json"} <= files
    assert not any(name.startswith(("src/", "test/", "node_modules/")) for name in files)
    tarball = tmp_path / info["filename"]
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]
    assert "dependencies" not in manifest and manifest["name"] == "seatlease-client"
    # Installed into an empty project with no registry: nothing else is needed.
    project = tmp_path / "product"
    project.mkdir()
    (project / "package.json").write_text('{"name": "product", "type": "module"}')
    install = run(
        ["npm", "install", "--offline", "--no-audit", "--no-fund", str(tarball)], cwd=project
    )
    assert install.returncode == 0, install.stderr
    assert sorted(p.name for p in (project / "node_modules").iterdir() if p.name[0] != ".") == [
        "seatlease-client"
    ]
    script = "import('seatlease-client').then(m => console.log(typeof m.SeatClient))"
    check = run(["node", "-e", script], cwd=project)
    assert check.stdout.strip() == "function", check.stderr


def test_a_seat_borrowed_by_the_python_client_loads_in_the_node_client(
    node_package, client_functions, tmp_path
):
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": "node-shared-borrow", "max_borrow_seconds": 86400},
    )
    with urllib.request.urlopen(f"{client_functions.url}/keys", timeout=10) as answer:
        pinned = [key["x"] for key in json.load(answer)["keys"]]
    python_client = SeatClient(
        client_functions.url, client_functions.api_key, pinned_keys=pinned, tenant_id="acme"
    )
    seat = python_client.borrow("node-shared-borrow", "laptop", 3600, path=tmp_path / "seat.json")
    script = (
        "import { SeatClient } from 'seatlease-client';"
        "const [url, key, path, pinned] = process.argv.slice(1);"
        "const options = { pinnedKeys: pinned.split(','), tenantId: 'acme' };"
        "const client = new SeatClient(url, key, options);"
        "const seat = await client.loadBorrowed(path);"
        "console.log(JSON.stringify({ session: seat.sessionId, left: seat.secondsLeft }));"
    )
    path = str(tmp_path / "seat.json")
    args = [
        "node",
        "--input-type=module",
        "-e",
        script,
        client_functions.url,
        client_functions.api_key,
        path,
    ]
    loaded = run([*args, ",".join(pinned)])
    assert loaded.returncode == 0, loaded.stderr
    answer = json.loads(loaded.stdout)
    assert answer["session"] == seat.session_id and 3500 < answer["left"] <= 3600
