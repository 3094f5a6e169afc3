#!/usr/bin/env python3
"""Build the deployable source archive of one Cloud Function (stdlib only).

Usage:
    python tools/build_function_source.py NAME OUTDIR
    python tools/build_function_source.py --terraform-external   # JSON on stdin
    python tools/build_function_source.py --stamp-lock           # run by `make lock`
    python tools/build_function_source.py --lock-input LOCK      # run by `make lock`

The archive ``OUTDIR/NAME.zip`` holds, at its root, what the function runs and nothing
else:

* every file of ``functions/NAME/`` (so ``main.py`` is at the root; a per-folder
  ``requirements.txt`` is left out, see below),
* ``seatlease/``: the server runtime package, from ``shared/seatlease/``. The operator
  CLI (``seatlease_cli``: local stack, demo) and the vendor SDK (``seatlease_client``)
  are other deploy targets and never enter an archive,
* ``requirements.txt``: the function's lock, verbatim (see below).

There are two locks, and each function's archive carries one:

* ``requirements-functions.txt`` pins every dependency of ``[project].dependencies`` in
  ``pyproject.toml`` (the runtime's dependencies). The functions that publish to Pub/Sub
  (``PUBLISHING_FUNCTIONS``: the reaper) get it.
* ``requirements-functions-nopubsub.txt`` pins the same dependencies without
  google-cloud-pubsub, at the versions of the first lock. Every other function gets it:
  google-cloud-pubsub brings the OpenTelemetry SDK, and redis-py imports that SDK at
  ``import redis`` whenever it is installed (40-60 ms of a cold start, for nothing).

Each lock pins its dependencies to one version with their sha256 hashes, so every build
installs the same, checked bytes. ``make lock`` makes both (pip-compile; the second from
``--lock-input``, constrained to the first), then runs ``--stamp-lock``: that appends to
each lock the sha256 of the dependencies it was compiled from. The build refuses, naming
``make lock``, a lock that is missing, holds anything but ``name==version`` pins with
hashes, misses one of its dependencies, was stamped for other dependencies than today's,
or (the second) pins a version the first does not or a dependency it leaves out (stale).

The archive is deterministic: entries are sorted, every timestamp is 1980-01-01 00:00,
permissions are fixed and caches (``__pycache__``, ``*.pyc``) are left out, so the same
tree always gives the same bytes (and the same sha256). Terraform names the uploaded
object after that hash, so an unchanged tree never redeploys a function.

``--terraform-external`` implements the protocol of Terraform's ``external`` data
source: it reads ``{"name": ..., "outdir": ..., "repo_root": ...}`` from stdin and
prints ``{"path": ..., "sha256": ..., "md5_base64": ..., "size": ...}``; ``path`` is
relative when ``outdir`` is (Terraform passes the root module's ``./.build``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNTIME_PACKAGE = "seatlease"
LOCK_FILE = "requirements-functions.txt"
FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "tests"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
EXCLUDED_NAMES = {".DS_Store", "requirements.txt"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
# A lock entry as pip-compile --generate-hashes writes it, continuation lines joined.
PIN_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.!+_-]+)"
    r"(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})+)$"
)
DIST_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
STAMP_RE = re.compile(r"^# pyproject-dependencies-sha256: ([0-9a-f]{64})$", re.MULTILINE)
STAMP_NOTE = (
    "# Written by tools/build_function_source.py --stamp-lock (make lock): the sha256 of\n"
    "# the pyproject.toml [project].dependencies this lock was compiled from.\n"
)


class Lock(NamedTuple):
    """A lock file and the ``[project].dependencies`` it leaves out (canonical names)."""

    file: str
    leaves_out: tuple[str, ...] = ()


FULL_LOCK = Lock(LOCK_FILE)
NOPUBSUB_LOCK = Lock("requirements-functions-nopubsub.txt", leaves_out=("google-cloud-pubsub",))
LOCKS = (FULL_LOCK, NOPUBSUB_LOCK)
# The functions that publish with google-cloud-pubsub (seatlease.events.pubsub); Terraform grants
# the same ones the publisher role (terraform/modules/functions: publish = true).
PUBLISHING_FUNCTIONS = frozenset({"reaper"})


def lock_for(name: str) -> Lock:
    """The lock a function's archive carries."""
    return FULL_LOCK if name in PUBLISHING_FUNCTIONS else NOPUBSUB_LOCK


class BuildError(Exception):
    """Raised when the archive cannot be built (bad name, missing folder, bad lock...)."""


def _included(path: Path, root: Path) -> bool:
    rel = path.relative_to(root)
    if any(part in EXCLUDED_DIRS or part.startswith(".") for part in rel.parts[:-1]):
        return False
    name = rel.parts[-1]
    return not (name in EXCLUDED_NAMES or name.startswith(".") or name.endswith(EXCLUDED_SUFFIXES))


def _walk(root: Path) -> list[Path]:
    return sorted(
        (p for p in root.rglob("*") if p.is_file() and _included(p, root)),
        key=lambda p: p.relative_to(root).as_posix(),
    )


# -- the lock ------------------------------------------------------------------------


def canonical_name(name: str) -> str:
    """PEP 503 normalised distribution name (``Flask`` and ``flask`` are one project)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_dependencies(repo_root: Path) -> list[str]:
    pyproject = repo_root / "pyproject.toml"
    if not pyproject.is_file():
        raise BuildError(f"{pyproject} does not exist")
    try:
        with pyproject.open("rb") as fh:
            deps = tomllib.load(fh).get("project", {}).get("dependencies", [])
    except tomllib.TOMLDecodeError as exc:
        raise BuildError(f"{pyproject}: {exc}") from exc
    if not deps:
        raise BuildError(f"{pyproject} declares no [project].dependencies")
    return deps


def lock_dependencies(repo_root: Path, lock: Lock) -> list[str]:
    """The dependencies ``lock`` is compiled from: pyproject's, less what it leaves out."""
    deps = project_dependencies(repo_root)
    return [dep for dep in deps if _dist_name(dep) not in lock.leaves_out]


def _dist_name(dep: str) -> str:
    match = DIST_NAME_RE.match(dep)
    if match is None:
        raise BuildError(f"pyproject.toml: cannot read the dependency {dep!r}")
    return canonical_name(match[1])


def dependencies_digest(deps: list[str]) -> str:
    """sha256 of the dependency list; order and whitespace do not count."""
    normalised = sorted("".join(dep.split()) for dep in deps)
    return hashlib.sha256("\n".join(normalised).encode("utf-8")).hexdigest()


def _logical_lines(text: str) -> Iterator[str]:
    """Requirement lines with their backslash continuations joined; comments dropped."""
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield (pending + line).strip()
        pending = ""
    if pending.strip():
        yield pending.strip()


def locked_pins(text: str, lock: Path) -> dict[str, str]:
    """Canonical name -> version of every entry; refuses anything but hashed ``==`` pins
    (a range, a URL or an option line would let a build install unchecked bytes)."""
    pins: dict[str, str] = {}
    for line in _logical_lines(text):
        match = PIN_RE.match(line)
        if match is None:
            shown = line if len(line) <= 100 else line[:97] + "..."
            raise BuildError(f"{lock}: not a name==version pin with --hash=sha256: {shown!r}")
        pins[canonical_name(match["name"])] = match["version"]
    if not pins:
        raise BuildError(f"{lock} pins nothing")
    return pins


def _check_covers(pins: dict[str, str], deps: list[str], lock: Path) -> None:
    missing = [DIST_NAME_RE.match(dep)[1] for dep in deps if _dist_name(dep) not in pins]
    if missing:
        raise BuildError(
            f"{lock} is stale: it does not pin {', '.join(missing)} "
            "(pyproject.toml [project].dependencies); run `make lock`"
        )


def _check_subset(pins: dict[str, str], lock: Lock, repo_root: Path) -> None:
    """A lock that leaves dependencies out pins the full lock's versions, and none of what
    it leaves out (pip-compile -c: the functions run the same libraries)."""
    if not lock.leaves_out:
        return
    full_path = repo_root / FULL_LOCK.file
    if not full_path.is_file():
        raise BuildError(f"{full_path} is missing: run `make lock` (pip-compile) to create it")
    full = locked_pins(full_path.read_text(encoding="utf-8"), full_path)
    if kept := sorted(set(lock.leaves_out) & set(pins)):
        raise BuildError(f"{lock.file} is stale: it pins {', '.join(kept)}; run `make lock`")
    if differ := sorted(n for n, v in pins.items() if full.get(n) != v):
        shown = ", ".join(f"{n}=={pins[n]} ({full.get(n, 'not pinned')})" for n in differ)
        raise BuildError(f"{lock.file} is stale: {shown} against {FULL_LOCK.file}; run `make lock`")


def lock_text(repo_root: Path, lock: Lock = FULL_LOCK) -> str:
    """The lock, checked: complete, hashed, and made from today's dependencies."""
    path = repo_root / lock.file
    if not path.is_file():
        raise BuildError(f"{path} is missing: run `make lock` (pip-compile) to create it")
    text = path.read_text(encoding="utf-8")
    deps = lock_dependencies(repo_root, lock)
    pins = locked_pins(text, path)
    _check_covers(pins, deps, path)
    stamps = STAMP_RE.findall(text)
    if len(stamps) != 1:
        raise BuildError(f"{path} has no dependencies stamp: run `make lock`")
    if stamps[0] != dependencies_digest(deps):
        raise BuildError(
            f"{path} is stale: pyproject.toml [project].dependencies changed since it "
            "was made; run `make lock`"
        )
    _check_subset(pins, lock, repo_root)
    return text


def stamp_lock(repo_root: Path, lock: Lock = FULL_LOCK) -> Path:
    """Check the freshly compiled lock and record which dependencies it was made from."""
    path = repo_root / lock.file
    if not path.is_file():
        raise BuildError(f"{path} is missing: run pip-compile first (make lock)")
    text = STAMP_RE.sub("", path.read_text(encoding="utf-8").replace(STAMP_NOTE, ""))
    deps = lock_dependencies(repo_root, lock)
    pins = locked_pins(text, path)
    _check_covers(pins, deps, path)
    _check_subset(pins, lock, repo_root)
    stamp = f"# pyproject-dependencies-sha256: {dependencies_digest(deps)}\n"
    path.write_text(text.rstrip("\n") + "\n" + STAMP_NOTE + stamp, encoding="utf-8")
    return path


def lock_input(lock_file: str, repo_root: Path = REPO_ROOT) -> str:
    """What pip-compile compiles ``lock_file`` from (one requirement a line)."""
    by_file = {lock.file: lock for lock in LOCKS}
    if lock_file not in by_file:
        raise BuildError(f"no lock named {lock_file!r}: {', '.join(by_file)}")
    return "".join(f"{dep}\n" for dep in lock_dependencies(repo_root, by_file[lock_file]))


# -- the archive ---------------------------------------------------------------------


def _zipinfo(arcname: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time=FIXED_DATE_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100644 & 0xFFFF) << 16
    info.create_system = 3  # unix, so the permissions above are honoured
    return info


def archive_entries(name: str, repo_root: Path) -> dict[str, bytes]:
    """Archive path -> content, for function ``name``."""
    if not NAME_RE.match(name):
        raise BuildError(f"invalid function name {name!r}")
    function_dir = repo_root / "functions" / name
    package_dir = repo_root / "shared" / RUNTIME_PACKAGE
    if not (function_dir / "main.py").is_file():
        raise BuildError(f"{function_dir / 'main.py'} does not exist")
    if not (package_dir / "__init__.py").is_file():
        raise BuildError(f"{package_dir} is not a Python package (no __init__.py)")

    entries: dict[str, bytes] = {}
    for path in _walk(function_dir):
        entries[path.relative_to(function_dir).as_posix()] = path.read_bytes()
    clash = sorted(n for n in entries if n.split("/", 1)[0] == RUNTIME_PACKAGE)
    if clash:
        raise BuildError(f"{function_dir} must not hold {clash[0]}: it would shadow the runtime")
    for path in _walk(package_dir):
        entries[f"{RUNTIME_PACKAGE}/{path.relative_to(package_dir).as_posix()}"] = path.read_bytes()
    entries["requirements.txt"] = lock_text(repo_root, lock_for(name)).encode("utf-8")
    return entries


def build(name: str, outdir: Path, repo_root: Path = REPO_ROOT) -> Path:
    """Write ``outdir/name.zip`` deterministically and return its path."""
    entries = archive_entries(name, repo_root)
    outdir.mkdir(parents=True, exist_ok=True)
    target = outdir / f"{name}.zip"
    tmp = outdir / f".{name}.zip.tmp{os.getpid()}"
    with zipfile.ZipFile(tmp, "w") as zf:
        for arcname in sorted(entries):
            zf.writestr(_zipinfo(arcname), entries[arcname], compresslevel=9)
    os.replace(tmp, target)
    return target


def describe(path: Path) -> dict[str, str]:
    data = path.read_bytes()
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "md5_base64": base64.b64encode(hashlib.md5(data).digest()).decode("ascii"),  # noqa: S324
        "size": str(len(data)),
    }


def _terraform_external() -> int:
    query = json.load(sys.stdin)
    repo_root = Path(query.get("repo_root") or REPO_ROOT).resolve()
    # Not resolved: a relative outdir (the root module's ./.build) gives a relative path,
    # the same in every checkout, which Terraform stores as the object's source.
    outdir = Path(query["outdir"])
    print(json.dumps(describe(build(query["name"], outdir, repo_root))))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--terraform-external"], ["--stamp-lock"]) or args[:1] == ["--lock-input"]:
        try:
            if args == ["--stamp-lock"]:
                for lock in LOCKS:  # the full lock first: the others are checked against it
                    print(stamp_lock(REPO_ROOT, lock))
                return 0
            if args[0] == "--lock-input" and len(args) == 2:
                sys.stdout.write(lock_input(args[1]))
                return 0
            if args[0] == "--lock-input":
                raise BuildError("usage: --lock-input LOCK_FILE")
            return _terraform_external()
        except (BuildError, KeyError, ValueError, OSError) as exc:
            print(f"build_function_source: {exc}", file=sys.stderr)
            return 1
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="function folder under functions/ (also its entry point)")
    parser.add_argument("outdir", type=Path, help="directory that receives NAME.zip")
    parser.add_argument("--repo-root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    ns = parser.parse_args(args)
    try:
        path = build(ns.name, ns.outdir, ns.repo_root.resolve())
    except BuildError as exc:
        parser.error(str(exc))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
