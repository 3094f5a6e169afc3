"""The Node client (shared/clients/node) against the served functions: its own test
programs (``node --test``: the token vectors, the lease life, a stalled server, borrow,
typed errors, the wait queue served in join order, the policy's errors, a proxy) run as a
subprocess against tests/client_harness.py's server on real Redis and PostgreSQL, and
against tests/client_bad_server.py's behaviours (``SEATLEASE_BAD_URL``, its signing key
pinned from ``SEATLEASE_BAD_PINNED_KEY``: a Retry-After of an hour, an ended term, a
suspension, refused grants released at once, the drips, 404s, a redirect); and the
package ``npm pack`` makes: its LICENSE, ``require`` and ``import`` of it, and a
CommonJS (``.cts``) and an ES module (``.mts``) consumer type-checked with ``types: []``
(no @types/node) and run. Its ``hold`` is checked with every client's in
tests/test_client_holds.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
from client_bad_server import KEY_X, bad_server
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
        env = {
            **client_functions.env(),
            "SEATLEASE_BAD_URL": bad_url,
            "SEATLEASE_BAD_PINNED_KEY": KEY_X,
        }
        result = run(["node", "--test", "--test-concurrency=1", "test/"], env=env, timeout=300)
    # node's TAP output: each failed test's "not ok" line and what follows it (its error),
    # a suite's failed subtests (indented) included, so the failure names its test
    failed = re.findall(
        r"^ *not ok .*(?:\n(?! *(?:not )?ok ).*){0,25}", result.stdout, re.MULTILINE
    )
    assert result.returncode == 0, "\n".join(failed)[-8000:] + result.stderr[-3000:]
    summary = dict(
        line[2:].split(" ", 1) for line in result.stdout.splitlines() if line.startswith("# ")
    )
    assert int(summary["fail"]) == 0 and int(summary["skipped"]) == 0
    assert int(summary["pass"]) >= 40, summary  # every vector and every life-cycle test ran
    # the bad server's drips (issue 48) ran, and the refused grants' releases
    for name in (
        "an acquire whose answer drips ends within its timeout",
        "a release whose answer drips ends within releaseTimeoutMs",
        "a heartbeat whose answer drips loses the seat (unreachable) by the lease's deadline",
        "a grant without a token is refused (TokenMissing) and its session released at once",
        # the review of issue 48: released only for the token or shape; the JWKS bounded
        "a grant whose key fetch fails once (a 503 on /keys) is not released: the check is "
        "retried and the seat held",
        "a release whose JWKS refetch drips (a rotated kid) ends within releaseTimeoutMs, "
        "the fetch included",
        'a grant without lease_expires_at, with lease_seconds 60.5, or with session_id "" is '
        "invalid_response; the first two released at once",
        "a grant whose seats_used and seats_total are null is a seat (the counts as absent)",
        "through a proxy, an IP-literal https base URL's certificate is checked against that "
        "IP, not the proxy's host",
        "a pinned key of small order (the identity, 0, p-1, p, p+1, the points of order 8) is "
        "refused at construction",
        # issue 50: idle reporting, on the wire and end to end
        "after the first touch each heartbeat sends the whole seconds since it",
        "after a warning a touch sends a heartbeat at once, one for many key presses",
        "a 410 idle is lost as idle, not asked for again until a touch, then regained",
        "idle: a lease idle past the timeout is warned (onIdleWarning once) and a touch "
        "cancels the warning",
        "idle: always reclaims an idle lease, lost as idle, not taken back until a touch",
        "idle: a busy lease is never warned nor reclaimed",
    ):
        assert re.search(rf"^\s*ok \d+ - {re.escape(name)}", result.stdout, re.MULTILINE), name


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


@pytest.fixture(scope="module")
def packed(node_package, tmp_path_factory) -> Path:
    """The tarball ``npm pack`` makes."""
    folder = tmp_path_factory.mktemp("packed")
    packed = run(["npm", "pack", "--json", "--pack-destination", str(folder)])
    assert packed.returncode == 0, packed.stderr
    [info] = json.loads(packed.stdout)
    return folder / info["filename"]


def test_the_npm_tarball_carries_the_license(node_package, packed):
    """Apache-2.0 section 4(a): the license's text goes with the package."""
    dry = run(["npm", "pack", "--dry-run", "--json"])
    assert dry.returncode == 0, dry.stderr
    [info] = json.loads(dry.stdout)
    assert "LICENSE" in {entry["path"] for entry in info["files"]}
    with tarfile.open(packed) as archive:
        text = archive.extractfile("package/LICENSE").read().decode()  # type: ignore[union-attr]
        manifest = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]
    assert text == (REPO / "LICENSE").read_text()
    assert "Apache License" in text and manifest["license"] == "Apache-2.0"
    assert manifest["version"] == (REPO / "shared" / "clients" / "VERSION").read_text().strip()


CTS_CONSUMER = """\
// A CommonJS consumer (an Electron main process): compiled to require().
import { InvalidResponse, SeatClient, SeatError, VERSION } from "seatlease-client";
import type { ClientOptions, Lease } from "seatlease-client";
declare const console: { log(...values: unknown[]): void };
const options: ClientOptions = { pinnedKeys: [PINNED], timeoutMs: 1000, proxy: false };
const client = new SeatClient("http://127.0.0.1:9", "sl_key", options);
const held: Lease[] = client.held();
let refused = "";
try {
  new SeatClient("http://127.0.0.1:9", "sl_key");
} catch (error) {
  refused = error instanceof TypeError ? "TypeError" : "other";
}
const invalid = new InvalidResponse(200, "invalid_response", "x") instanceof SeatError;
const [verified, count] = [client.verified, held.length];
const kind = "cts";
console.log(JSON.stringify({ kind, version: VERSION, verified, held: count, refused, invalid }));
"""

MTS_CONSUMER = """\
// An ES module consumer.
import { SeatClient, VERSION, type Lease } from "seatlease-client";
declare const console: { log(...values: unknown[]): void };
const client = new SeatClient("http://127.0.0.1:9", "sl_key", { insecureSkipVerify: true });
const held: Lease[] = client.held();
const verified = client.verified;
console.log(JSON.stringify({ kind: "mts", version: VERSION, verified, held: held.length }));
"""

INTERNALS = """\
import { Lease } from "seatlease-client";
declare const lease: Lease;
const made = new Lease();
lease.apply({ session_id: "forged" });
export { made };
"""


def _tsconfig(files: list[str]) -> str:
    """The strictest consumer: no @types/node, no DOM, library declarations checked."""
    options = {
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "target": "ES2022",
        "lib": ["ES2022"],
        "types": [],
        "strict": True,
        "skipLibCheck": False,
        "outDir": "out",
    }
    return json.dumps({"compilerOptions": options, "files": files})


def test_the_packed_package_is_required_and_imported_and_its_types_need_no_types_node(
    node_package, packed, tmp_path
):
    """Dual CommonJS and ES modules (what an Electron app needs): ``require`` and
    ``import`` give the same classes; a ``.cts`` and an ``.mts`` consumer type-check with
    ``types: []`` and run; Lease's constructor and apply() are not in the types."""
    project = tmp_path / "product"
    project.mkdir()
    (project / "package.json").write_text('{"name": "product", "private": true}')  # CommonJS
    install = run(
        ["npm", "install", "--offline", "--no-audit", "--no-fund", str(packed)], cwd=project
    )
    assert install.returncode == 0, install.stderr
    script = (
        "const cjs = require('seatlease-client');"
        "import('seatlease-client').then((esm) => console.log(JSON.stringify({"
        " version: cjs.VERSION, same: esm.SeatClient === cjs.SeatClient"
        " && esm.SeatError === cjs.SeatError, client: typeof cjs.SeatClient })));"
    )
    loaded = run(["node", "-e", script], cwd=project)
    assert loaded.returncode == 0, loaded.stderr
    version = (REPO / "shared" / "clients" / "VERSION").read_text().strip()
    assert json.loads(loaded.stdout) == {"version": version, "same": True, "client": "function"}

    (project / "consumer.cts").write_text(CTS_CONSUMER.replace("PINNED", json.dumps(KEY_X)))
    (project / "consumer.mts").write_text(MTS_CONSUMER)
    (project / "tsconfig.json").write_text(_tsconfig(["consumer.cts", "consumer.mts"]))
    tsc = str(NODE_DIR / "node_modules" / "typescript" / "bin" / "tsc")
    assert not (project / "node_modules" / "@types").exists()
    compiled = run(["node", tsc, "-p", "tsconfig.json"], cwd=project)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert 'require("seatlease-client")' in (project / "out" / "consumer.cjs").read_text()
    ran = run(["node", "out/consumer.cjs"], cwd=project)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "kind": "cts",
        "version": version,
        "verified": True,
        "held": 0,
        "refused": "TypeError",
        "invalid": True,
    }
    ran = run(["node", "out/consumer.mjs"], cwd=project)
    assert ran.returncode == 0, ran.stderr
    mts = {"kind": "mts", "version": version, "verified": False, "held": 0}
    assert json.loads(ran.stdout) == mts

    # the internals: a product cannot make a Lease or apply an answer to one
    (project / "internals.cts").write_text(INTERNALS)
    (project / "tsconfig.json").write_text(_tsconfig(["internals.cts"]))
    refused = run(["node", tsc, "-p", "tsconfig.json", "--noEmit"], cwd=project)
    assert refused.returncode != 0
    errors = refused.stdout
    assert "Constructor of class 'Lease' is private" in errors, errors
    assert "Property 'apply' does not exist on type 'Lease'" in errors, errors
    assert errors.count("error TS") == 2, errors
