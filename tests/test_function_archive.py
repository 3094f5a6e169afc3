"""The deployable source archive (tools/build_function_source.py) is what the function
runs, and runs.

Terraform uploads exactly what this builder produces, so these tests build the
archives, check what they hold (``main.py``, the ``seatlease`` runtime package and the
function's hashed lock as ``requirements.txt``; no CLI, client, local stack, demo or test
code), that each lock pins every library its function can import (google-cloud-pubsub,
and with it the OpenTelemetry SDK, only for the functions that publish),
that they are byte-for-byte reproducible, and serve one: unpacked in a temporary
directory outside the repository, started with the Functions Framework on a Python whose
``sys.path`` holds the unpacked tree and the third-party libraries only (``-S``: none of
the editable installs of this checkout), taking a seat on a real Redis and PostgreSQL.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from http_support import live_sessions, new_tenant
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from seatlease.records import store

REPO = Path(__file__).resolve().parent.parent
BUILDER = REPO / "tools" / "build_function_source.py"
LOCK = REPO / "requirements-functions.txt"
NOPUBSUB_LOCK = REPO / "requirements-functions-nopubsub.txt"
RUNTIME_SRC = REPO / "shared" / "seatlease"
FUNCTIONS = sorted(p.name for p in (REPO / "functions").iterdir() if p.is_dir())
# First-party code that must never be deployed: other deploy targets and local tooling.
FORBIDDEN_PACKAGES = {"seatlease_cli", "seatlease_client", "tests"}
FORBIDDEN_MODULES = {"localstack", "procs", "localprocs", "devserver", "demo", "conftest"}
HASH = "--hash=sha256:"
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_function_source", BUILDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = _load_builder()


@pytest.fixture
def outside_tmp():
    """A temporary directory guaranteed to be outside the repository."""
    path = Path(tempfile.mkdtemp(prefix="seatlease-archive-"))
    assert REPO not in path.parents
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _build_cli(name: str, outdir: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, str(BUILDER), name, str(outdir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    assert path == outdir / f"{name}.zip"
    return path


def _lock_entries(text: str) -> list[list[str]]:
    """The lock's requirement entries as token lists, continuation lines joined (read
    here independently of the builder's own parser)."""
    entries, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        current += line.removesuffix("\\") + " "
        if not line.endswith("\\"):
            entries.append(current.split())
            current = ""
    assert not current, f"dangling continuation: {current!r}"
    return entries


def _runtime_python() -> str:
    """The functions' runtime version from Terraform, e.g. ``3.12`` for python312."""
    main_tf = (REPO / "terraform" / "modules" / "functions" / "main.tf").read_text()
    runtimes = set(re.findall(r'runtime\s*=\s*"python(3)(\d+)"', main_tf))
    assert len(runtimes) == 1, runtimes
    major, minor = runtimes.pop()
    return f"{major}.{minor}"


def _clean_pip_env() -> dict[str, str]:
    """pip with no config file and no PIP_* settings: this machine's pip config adds
    local find-links and indexes that the runtime's build does not have."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


# -- what an archive holds -----------------------------------------------------------


def _first_party_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


RUNTIME_FOLDERS = {
    "seatlease",
    "seatlease/admin",
    "seatlease/api",
    "seatlease/events",
    "seatlease/portal",
    "seatlease/portal/static",
    "seatlease/records",
    "seatlease/records/migrations",
    "seatlease/records/migrations/versions",
    "seatlease/records/reports",
    "seatlease/seats",
    "seatlease/seats/protocol",
    "seatlease/seats/lua",
    "seatlease/webhooks",
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_archive_holds_main_the_runtime_package_and_the_lock_only(name, outside_tmp):
    path = _build_cli(name, outside_tmp)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        contents = {n: zf.read(n) for n in names}
    assert names == sorted(names)
    assert "main.py" in names, "main.py must sit at the archive root"
    assert {n.split("/")[0] for n in names} == {"main.py", "requirements.txt", "seatlease"}
    # the whole runtime package, nothing more
    expected = {
        "seatlease/" + p.relative_to(RUNTIME_SRC).as_posix()
        for p in RUNTIME_SRC.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert {n for n in names if n.startswith("seatlease/")} == expected
    assert "seatlease/seats/lua/acquire.lua" in names and "seatlease/api/openapi.yaml" in names
    # the runtime's rooms (docs/design.md), each a package, and no other folder
    folders = {n.rsplit("/", 1)[0] for n in names if n.startswith("seatlease/")}
    assert folders == RUNTIME_FOLDERS, folders ^ RUNTIME_FOLDERS
    packages = folders - {"seatlease/portal/static", "seatlease/seats/lua"}
    assert all(f"{folder}/__init__.py" in names for folder in packages)
    for entry in names:
        parts = entry.split("/")
        assert not FORBIDDEN_PACKAGES & set(parts), entry
        assert Path(entry).stem not in FORBIDDEN_MODULES, entry
        assert "__pycache__" not in parts and not entry.endswith((".pyc", ".pyo")), entry
        if entry.endswith(".py"):
            imports = _first_party_imports(contents[entry].decode())
            assert not imports & FORBIDDEN_PACKAGES, (entry, imports)
    lock = LOCK if name == "reaper" else NOPUBSUB_LOCK  # only the reaper publishes
    assert contents["requirements.txt"] == lock.read_bytes(), "requirements.txt is the lock"
    assert f"def {name}(" in contents["main.py"].decode()


def _copy_sources(target: Path) -> Path:
    """The builder's inputs, copied with fresh mtimes (a snapshot: the checkout may be
    edited while the test runs)."""
    for rel in ("functions/acquire", "shared/seatlease", "tools"):
        shutil.copytree(REPO / rel, target / rel, copy_function=shutil.copy)
    for rel in ("pyproject.toml", LOCK.name, NOPUBSUB_LOCK.name):
        shutil.copy(REPO / rel, target / rel)
    return target


def _build_from(repo_root: Path, outdir: Path) -> bytes:
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / BUILDER.name), "acquire", str(outdir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip()).read_bytes()


def test_archive_is_deterministic(outside_tmp):
    """Two checkouts of the same tree, at other paths and with other mtimes, give the
    same bytes."""
    first = _build_from(_copy_sources(outside_tmp / "one"), outside_tmp / "a")
    time.sleep(1.1)  # a builder that leaked mtimes would now produce different bytes
    second = _build_from(_copy_sources(outside_tmp / "other"), outside_tmp / "b")
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()
    with zipfile.ZipFile(outside_tmp / "a" / "acquire.zip") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.external_attr >> 16 for i in zf.infolist()} == {0o100644}


# -- the lock ------------------------------------------------------------------------


def _pins(text: str) -> dict[str, tuple[Version, frozenset[str]]]:
    """Canonical name -> (version, hashes) of every lock entry, checked for form."""
    entries = _lock_entries(text)
    pins = {}
    for tokens in entries:
        spec, hashes = tokens[0], tokens[1:]
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^=;\s]+", spec), tokens
        assert hashes and all(h.startswith(HASH) for h in hashes), tokens
        assert all(HEX64.match(h.removeprefix(HASH)) for h in hashes), tokens
        name, version = spec.split("==")
        pins[canonicalize_name(name)] = (Version(version), frozenset(hashes))
    assert len(pins) == len(entries), "a distribution is pinned twice"
    return pins


@pytest.mark.parametrize(
    ("lock", "left_out"), [(LOCK, set()), (NOPUBSUB_LOCK, {"google-cloud-pubsub"})]
)
def test_lock_pins_every_dependency_exactly_with_hashes(lock, left_out):
    text = lock.read_text()
    pins = _pins(text)
    # the lock is made from pyproject's [project].dependencies, and still satisfies them
    with (REPO / "pyproject.toml").open("rb") as fh:
        deps = [Requirement(d) for d in tomllib.load(fh)["project"]["dependencies"]]
    assert left_out <= {canonicalize_name(dep.name) for dep in deps}
    for dep in deps:
        if canonicalize_name(dep.name) in left_out:
            assert canonicalize_name(dep.name) not in pins, f"{dep.name} in {lock.name}"
            continue
        pinned = pins.get(canonicalize_name(dep.name))
        assert pinned is not None, f"{dep.name} is not locked: make lock"
        assert dep.specifier.contains(pinned[0], prereleases=True), f"{dep} vs {pinned}"
    assert "hiredis" in pins, "redis[hiredis]: the extra's dependency is locked too"
    assert re.search(r"^#\s+make lock$", text, re.MULTILINE), "the header names the command"


def test_the_nopubsub_lock_is_the_full_lock_without_pubsub_and_the_opentelemetry_sdk():
    """Same libraries at the same versions and hashes (a function that does not publish
    runs what the reaper runs), less google-cloud-pubsub and what only it needs: the
    OpenTelemetry SDK, which redis-py imports at `import redis` whenever it is there."""
    full, lean = _pins(LOCK.read_text()), _pins(NOPUBSUB_LOCK.read_text())
    assert {n: full.get(n) for n in lean} == lean
    assert set(full) - set(lean) == {
        "google-cloud-pubsub",
        "opentelemetry-sdk",
        "opentelemetry-semantic-conventions",
    }


def _module_distributions() -> dict[Path, str]:
    """Installed file -> canonical distribution name, for this (dev) environment."""
    files = {}
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or ():
            if file.suffix == ".py":
                files[Path(dist.locate_file(file)).resolve()] = name
    return files


def _imports_reached(main: Path) -> tuple[set[Path], set[str]]:
    """First-party files reached from ``main`` by any import statement, lazy ones (inside
    functions) included, and the third-party module names they import."""
    todo, seen, third_party = [main], set(), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "seatlease":
                    module = REPO / "shared" / Path(*name.split("."))
                    todo += [p for p in (module.with_suffix(".py"), module / "__init__.py")
                             if p.is_file()]  # fmt: skip
                elif top not in sys.stdlib_module_names and top != "__future__":
                    third_party.add(name)
    return seen, third_party


def _distribution_of(name: str, files: dict[Path, str]) -> str | None:
    """The distribution that provides module ``name`` (or its nearest parent module;
    ``pkg.Class`` is ``pkg``); None for a namespace package of its own."""
    parts = name.split(".")
    while parts:
        try:
            spec = importlib.util.find_spec(".".join(parts))
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            if spec.origin in (None, "namespace"):
                return None
            return files[Path(spec.origin).resolve()]
        parts.pop()
    raise AssertionError(f"{name} is not installed in the dev environment")


@pytest.fixture(scope="module")
def module_distributions():
    return _module_distributions()


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_library_a_function_can_import_is_in_its_archive_lock(
    name, outside_tmp, module_distributions
):
    """Every import any code of the function can run (lazy ones too: the cache-miss
    SQL, Secret Manager, Cloud SQL, the reaper's publisher) comes from a distribution its
    archive's requirements.txt pins: a function that publishes without
    google-cloud-pubsub in its lock would fail here, not at its first publish."""
    with zipfile.ZipFile(_build_cli(name, outside_tmp)) as zf:
        pins = _pins(zf.read("requirements.txt").decode())
    reached, imports = _imports_reached(REPO / "functions" / name / "main.py")
    assert REPO / "shared" / "seatlease" / "api" / "http.py" in reached or name in (
        "audit",
        "reaper",
    )
    needed = {_distribution_of(module, module_distributions) for module in imports} - {None}
    assert "functions-framework" in needed and needed <= set(pins), sorted(needed - set(pins))
    publishes = REPO / "shared" / "seatlease" / "events" / "pubsub.py" in reached
    assert publishes == ("google-cloud-pubsub" in needed)
    assert publishes == (name in builder.PUBLISHING_FUNCTIONS) == (name == "reaper")
    # ... and nothing that only publishing needs: the OpenTelemetry SDK stays out
    assert publishes == ("google-cloud-pubsub" in pins) == ("opentelemetry-sdk" in pins)


def test_make_lock_names_no_package_index_host():
    """`make lock` clears the local pip configuration and then relies on pip's default
    index: the command names no index host (one that is named is one to keep right, and
    one a mirror-only machine cannot reach)."""
    proc = subprocess.run(
        ["make", "-n", "lock", "PYTHON=python3"], cwd=REPO, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    commands = proc.stdout.replace("\\\n", " ")
    compile_cmds = [line for line in commands.splitlines() if "pip-compile" in line]
    assert len(compile_cmds) == 2, compile_cmds  # the full lock, then the one without pubsub
    assert compile_cmds[0].endswith(f"--output-file {LOCK.name} pyproject.toml")
    assert f"-c {LOCK.name}" in compile_cmds[1]
    assert f"--output-file {NOPUBSUB_LOCK.name} -" in compile_cmds[1]
    assert f"--lock-input {NOPUBSUB_LOCK.name} |" in compile_cmds[1]
    for compile_cmd in compile_cmds:
        compile_cmd = compile_cmd[compile_cmd.index("env ") :]  # pip-compile's command only
        assert "://" not in compile_cmd, compile_cmd
        options = re.findall(r"--[a-z-]+", compile_cmd)
        assert not {"--index-url", "--extra-index-url", "--find-links", "-i", "-f"} & set(options)
        # ... because no local setting can add one: config file and PIP_* variables cleared.
        assert "PIP_CONFIG_FILE=/dev/null" in compile_cmd, compile_cmd
        for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT"):
            assert f"-u {var}" in compile_cmd, var
        assert "--no-emit-index-url" in options and "--generate-hashes" in options


@pytest.mark.parametrize("lock", [LOCK, NOPUBSUB_LOCK], ids=lambda p: p.name)
def test_lock_installs_on_the_function_runtime_with_require_hashes(lock, outside_tmp):
    """pip, as the runtime's build would run it (Python version from Terraform, manylinux
    x86_64, wheels only), accepts the lock in hash-checking mode: every pin has a wheel
    whose hash is listed, and every dependency of every pin is pinned. Dry run against
    PyPI, into a temporary target: nothing is installed anywhere."""
    python = _runtime_python()
    platforms = ["manylinux_2_28", "manylinux_2_17", "manylinux2014", "manylinux_2_5"]
    abi = "cp" + python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    cmd += ["--require-hashes", "--only-binary=:all:", "--no-cache-dir", "--quiet"]
    cmd += ["--target", str(outside_tmp / "t")]  # pip's default index, config cleared
    cmd += ["--python-version", python, "--implementation", "cp"]
    cmd += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in platforms:
        cmd += ["--platform", f"{platform}_x86_64"]
    cmd += ["--report", str(outside_tmp / "report.json"), "-r", str(lock)]
    proc = subprocess.run(
        cmd, env=_clean_pip_env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((outside_tmp / "report.json").read_text())
    installed = {canonicalize_name(item["metadata"]["name"]) for item in report["install"]}
    assert installed == {
        canonicalize_name(tokens[0].split("==")[0]) for tokens in _lock_entries(lock.read_text())
    }


# -- refusing a missing or stale lock ------------------------------------------------


def _fake_repo(root: Path, deps: list[str]) -> Path:
    (root / "functions" / "hello").mkdir(parents=True)
    (root / "functions" / "hello" / "main.py").write_text("def hello(request):\n    return 'x'\n")
    (root / "functions" / "hello" / "requirements.txt").write_text("ignored==1\n")
    package = root / "shared" / "seatlease"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "shared" / "seatlease_cli").mkdir()
    (root / "shared" / "seatlease_cli" / "__init__.py").write_text("")
    _write_pyproject(root, deps)
    return root


def _write_pyproject(root: Path, deps: list[str]) -> None:
    listed = ", ".join(json.dumps(d) for d in deps)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "x"\nversion = "0"\ndependencies = [{listed}]\n'
    )


def _pin(name: str, version: str) -> str:
    return f"{name}=={version} \\\n    {HASH}{'a' * 64} \\\n    {HASH}{'b' * 64}\n    # via x\n"


def test_build_refuses_a_missing_or_stale_lock(outside_tmp, monkeypatch):
    monkeypatch.setattr(builder, "PUBLISHING_FUNCTIONS", frozenset({"hello"}))  # full lock
    fake = _fake_repo(outside_tmp / "repo", ["redis[hiredis]>=5", "PG8000>=1.30"])
    lock = fake / "requirements-functions.txt"
    out = outside_tmp / "out"

    with pytest.raises(builder.BuildError, match=r"missing.*make lock"):
        builder.build("hello", out, fake)
    proc = subprocess.run(
        [sys.executable, str(BUILDER), "hello", str(out), "--repo-root", str(fake)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "make lock" in proc.stderr, proc.stderr
    assert not (out / "hello.zip").exists()

    lock.write_text("# header\n" + _pin("redis", "8.1.0") + _pin("hiredis", "3.5.0"))
    with pytest.raises(builder.BuildError, match=r"stale.*PG8000.*make lock"):
        builder.stamp_lock(fake)
    lock.write_text(lock.read_text() + _pin("pg8000", "1.31.6"))
    with pytest.raises(builder.BuildError, match="no dependencies stamp"):
        builder.build("hello", out, fake)  # pip-compile alone, without make lock's stamp

    builder.stamp_lock(fake)
    builder.stamp_lock(fake)  # idempotent: one stamp, replaced
    assert lock.read_text().count("pyproject-dependencies-sha256") == 1
    with zipfile.ZipFile(builder.build("hello", out, fake)) as zf:
        assert zf.namelist() == ["main.py", "requirements.txt", "seatlease/__init__.py"]
        assert zf.read("requirements.txt") == lock.read_bytes()

    # reordering and spacing are the same dependencies; a changed bound is not
    _write_pyproject(fake, ["PG8000 >= 1.30", "redis[hiredis]>=5"])
    builder.build("hello", out, fake)
    _write_pyproject(fake, ["redis[hiredis]>=6", "PG8000>=1.30"])
    with pytest.raises(builder.BuildError, match=r"stale.*changed since"):
        builder.build("hello", out, fake)
    _write_pyproject(fake, ["redis[hiredis]>=5", "PG8000>=1.30", "pydantic>=2"])
    with pytest.raises(builder.BuildError, match=r"stale.*pydantic"):
        builder.build("hello", out, fake)
    _write_pyproject(fake, ["redis[hiredis]>=5", "PG8000>=1.30"])
    builder.build("hello", out, fake)

    # anything but hashed == pins would let a build install unchecked bytes
    good = lock.read_text()
    for bad in (
        "pydantic>=2\n",
        "pydantic==2.14.3\n",
        "-e .\n",
        "--index-url https://example.org/simple\n",
    ):
        lock.write_text(bad + good)
        with pytest.raises(builder.BuildError, match="not a name==version pin"):
            builder.build("hello", out, fake)
    lock.write_text(good)

    with pytest.raises(builder.BuildError):
        builder.build("../etc", out, fake)
    with pytest.raises(builder.BuildError):
        builder.build("missing", out, fake)
    (fake / "functions" / "hello" / "seatlease").mkdir()
    (fake / "functions" / "hello" / "seatlease" / "x.py").write_text("")
    with pytest.raises(builder.BuildError, match="shadow"):
        builder.build("hello", out, fake)


def test_build_refuses_a_nopubsub_lock_that_is_missing_stale_or_not_the_full_ones(outside_tmp):
    """A function that does not publish gets the lock without google-cloud-pubsub, and
    that lock must be the full lock's versions less the Pub/Sub client."""
    deps = ["redis>=5", "google-cloud-pubsub>=2"]
    fake = _fake_repo(outside_tmp / "repo", deps)
    full, lean = fake / builder.FULL_LOCK.file, fake / builder.NOPUBSUB_LOCK.file
    out = outside_tmp / "out"
    assert builder.lock_for("hello") == builder.NOPUBSUB_LOCK
    assert builder.lock_input(lean.name, fake) == "redis>=5\n"
    full.write_text(_pin("redis", "8.1.0") + _pin("google-cloud-pubsub", "2.44.0"))
    builder.stamp_lock(fake, builder.FULL_LOCK)
    with pytest.raises(builder.BuildError, match=r"nopubsub.txt is missing.*make lock"):
        builder.build("hello", out, fake)

    lean.write_text(_pin("redis", "8.0.0"))  # not the full lock's version
    with pytest.raises(builder.BuildError, match=r"stale: redis==8.0.0 \(8.1.0\).*make lock"):
        builder.stamp_lock(fake, builder.NOPUBSUB_LOCK)
    lean.write_text(_pin("redis", "8.1.0") + _pin("google-cloud-pubsub", "2.44.0"))
    with pytest.raises(builder.BuildError, match=r"stale: it pins google-cloud-pubsub"):
        builder.stamp_lock(fake, builder.NOPUBSUB_LOCK)
    lean.write_text(_pin("redis", "8.1.0"))
    with pytest.raises(builder.BuildError, match="no dependencies stamp"):
        builder.build("hello", out, fake)
    builder.stamp_lock(fake, builder.NOPUBSUB_LOCK)
    with zipfile.ZipFile(builder.build("hello", out, fake)) as zf:
        assert zf.read("requirements.txt") == lean.read_bytes()
    # the full lock moves on (make lock ran for it alone): the other one is stale
    full.write_text(_pin("redis", "8.2.0") + _pin("google-cloud-pubsub", "2.44.0"))
    builder.stamp_lock(fake, builder.FULL_LOCK)
    with pytest.raises(builder.BuildError, match=r"stale: redis==8.1.0 \(8.2.0\)"):
        builder.build("hello", out, fake)
    # a dependency added to pyproject is missing from both
    _write_pyproject(fake, [*deps, "pydantic>=2"])
    with pytest.raises(builder.BuildError, match=r"nopubsub.txt is stale.*pydantic"):
        builder.build("hello", out, fake)
    with pytest.raises(builder.BuildError, match="no lock named"):
        builder.lock_input("requirements.txt", fake)


def test_terraform_external_protocol(outside_tmp):
    query = {"name": "acquire", "outdir": str(outside_tmp), "repo_root": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(BUILDER), "--terraform-external"],
        input=json.dumps(query),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert all(isinstance(v, str) for v in result.values()), "external wants strings only"
    data = Path(result["path"]).read_bytes()
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    assert result["size"] == str(len(data))
    bad = subprocess.run(
        [sys.executable, str(BUILDER), "--terraform-external"],
        input=json.dumps({"name": "nope", "outdir": str(outside_tmp)}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0 and "nope" in bad.stderr


# -- serving the unpacked archive ----------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _isolated(tree: Path, **extra: str) -> tuple[list[str], dict[str, str]]:
    """Interpreter prefix and environment that see only the unpacked tree plus the
    third-party libraries: ``-S`` skips site, so the editable installs of this checkout
    (``.pth`` files putting ``shared/`` on the path) are not loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), sysconfig.get_paths()["purelib"]])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return [sys.executable, "-S"], env


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_archive_imports_from_its_own_tree(name, outside_tmp):
    with zipfile.ZipFile(_build_cli(name, outside_tmp / "dist")) as zf:
        zf.extractall(outside_tmp / "src")
    tree = outside_tmp / "src"
    python, env = _isolated(tree)
    probe = (
        "import importlib.util, json, main, seatlease; print(json.dumps({"
        "'seatlease': seatlease.__file__, 'main': main.__file__, "
        "'cli': bool(importlib.util.find_spec('seatlease_cli')), "
        "'client': bool(importlib.util.find_spec('seatlease_client'))}))"
    )
    proc = subprocess.run(
        [*python, "-c", probe],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(found["seatlease"]).resolve().is_relative_to(tree.resolve()), found
    assert Path(found["main"]).resolve().is_relative_to(tree.resolve()), found
    assert found["cli"] is False and found["client"] is False, found


def _request(url: str, method: str, body: bytes | None = None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def _unpinned_modules(requirements: str) -> set[str]:
    """Module prefixes of the distributions the full lock pins and ``requirements`` does
    not (google-cloud-pubsub, the OpenTelemetry SDK...): the shortest dotted prefix of
    each of their files that no pinned distribution shares (``google.cloud`` is shared,
    ``google.cloud.pubsub_v1`` is not)."""
    pinned = set(_pins(requirements))
    missing = set(_pins(LOCK.read_text())) - pinned
    shared, theirs = set(), []
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or ():
            if file.suffix != ".py":
                continue
            parts = file.with_suffix("").parts
            if name in pinned:
                shared |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            elif name in missing:
                theirs.append(parts)
    return {
        next(p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p not in shared)
        for parts in theirs
        if ".".join(parts) not in shared
    }


# Runs functions-framework with the given module prefixes not importable, as in an
# environment where their distributions are not installed.
WITHOUT = """
import importlib.abc, runpy, sys
hidden = set(sys.argv.pop(1).split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in hidden):
            raise ModuleNotFoundError(f"No module named {name!r} (not in the lock)", name=name)
sys.meta_path.insert(0, Hide())
runpy.run_module("functions_framework", run_name="__main__", alter_sys=True)
"""


def test_acquire_archive_serves_a_seat_from_the_unpacked_tree(outside_tmp, redis_url, database_url):
    archive = _build_cli("acquire", outside_tmp / "dist")
    tree = outside_tmp / "src"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tree)
    tenant = new_tenant("acme")
    # Only in PostgreSQL, not in the Redis cache: the served function must read it there.
    store.create_license("acme", "cad", seats=3)

    port = _free_port()
    python, env = _isolated(tree, REDIS_URL=redis_url, DATABASE_URL=database_url)
    env.pop("CLOUD_SQL_INSTANCE", None)
    # Served without what its lock leaves out: redis-py finds no OpenTelemetry SDK.
    hidden = _unpinned_modules((tree / "requirements.txt").read_text())
    assert {"opentelemetry.sdk", "google.cloud.pubsub_v1"} <= hidden, sorted(hidden)
    cmd = [*python, "-c", WITHOUT, ",".join(sorted(hidden)), "--target", "acquire"]
    cmd += ["--source", str(tree / "main.py"), "--port", str(port), "--host", "127.0.0.1"]
    log = (outside_tmp / "ff.log").open("w+")
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        status = None
        deadline = time.monotonic() + 45
        while status is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                status, body, headers = _request(url, "GET")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.3)
        log.seek(0)
        assert status is not None, f"functions-framework never answered:\n{log.read()}"
        assert status == 405, f"GET / answered {status}: {body!r}"
        assert headers.get("Content-Type", "").startswith("application/json"), headers
        assert json.loads(body)["error"]["code"]

        request = json.dumps({"license_id": "cad", "client_id": "ws-1@host"}).encode()
        status, body, headers = _request(
            url,
            "POST",
            request,
            {"Content-Type": "application/json", **tenant.auth},
        )
        log.seek(0)
        assert status == 201, f"acquire answered {status}: {body!r}\n{log.read()}"
        lease = json.loads(body)
        assert (lease["license_id"], lease["client_id"]) == ("cad", "ws-1@host")
        assert (lease["seats_used"], lease["seats_total"]) == (1, 3)
        assert live_sessions(tenant, "cad") == [lease["session_id"]]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
