#!/usr/bin/env python3
"""Build the deployable source archive of one Cloud Function (stdlib only).

Usage:
    python tools/build_function_source.py NAME OUTDIR
    python tools/build_function_source.py --terraform-external   # JSON on stdin
    python tools/build_function_source.py --stamp-lock           # run by `make lock`

The archive ``OUTDIR/NAME.zip`` holds, at its root, what the function runs and nothing
else:

* every file of ``functions/NAME/`` (so ``main.py`` is at the root; a per-folder
  ``requirements.txt`` is left out, see below),
* ``seatlease/``: the server runtime package, from ``shared/seatlease/``. The operator
  CLI (``seatlease_cli``: local stack, demo) and the vendor SDK (``seatlease_client``)
  are other deploy targets and never enter an archive,
* ``requirements.txt``: the lock ``requirements-functions.txt``, verbatim.

The lock pins every dependency of ``[project].dependencies`` in ``pyproject.toml`` (the
runtime's dependencies) to one version with its sha256 hashes, so every build installs
the same, checked bytes. It is made by ``make lock`` (pip-compile), which then runs
``--stamp-lock``: that appends the sha256 of those dependencies to the lock. The build
refuses, naming ``make lock``, a lock that is missing, holds anything but
``name==version`` pins with hashes, misses a dependency of ``pyproject.toml``, or was
stamped for other dependencies than today's (stale).

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
    missing = []
    for dep in deps:
        match = DIST_NAME_RE.match(dep)
        if match is None:
            raise BuildError(f"pyproject.toml: cannot read the dependency {dep!r}")
        if canonical_name(match[1]) not in pins:
            missing.append(match[1])
    if missing:
        raise BuildError(
            f"{lock} is stale: it does not pin {', '.join(missing)} "
            "(pyproject.toml [project].dependencies); run `make lock`"
        )


def lock_text(repo_root: Path) -> str:
    """The lock, checked: complete, hashed, and made from today's dependencies."""
    lock = repo_root / LOCK_FILE
    if not lock.is_file():
        raise BuildError(f"{lock} is missing: run `make lock` (pip-compile) to create it")
    text = lock.read_text(encoding="utf-8")
    deps = project_dependencies(repo_root)
    _check_covers(locked_pins(text, lock), deps, lock)
    stamps = STAMP_RE.findall(text)
    if len(stamps) != 1:
        raise BuildError(f"{lock} has no dependencies stamp: run `make lock`")
    if stamps[0] != dependencies_digest(deps):
        raise BuildError(
            f"{lock} is stale: pyproject.toml [project].dependencies changed since it "
            "was made; run `make lock`"
        )
    return text


def stamp_lock(repo_root: Path) -> Path:
    """Check the freshly compiled lock and record which dependencies it was made from."""
    lock = repo_root / LOCK_FILE
    if not lock.is_file():
        raise BuildError(f"{lock} is missing: run pip-compile first (make lock)")
    text = STAMP_RE.sub("", lock.read_text(encoding="utf-8").replace(STAMP_NOTE, ""))
    deps = project_dependencies(repo_root)
    _check_covers(locked_pins(text, lock), deps, lock)
    stamp = f"# pyproject-dependencies-sha256: {dependencies_digest(deps)}\n"
    lock.write_text(text.rstrip("\n") + "\n" + STAMP_NOTE + stamp, encoding="utf-8")
    return lock


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
    entries["requirements.txt"] = lock_text(repo_root).encode("utf-8")
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
    if args in (["--terraform-external"], ["--stamp-lock"]):
        try:
            if args == ["--stamp-lock"]:
                print(stamp_lock(REPO_ROOT))
                return 0
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
