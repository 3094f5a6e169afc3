#!/usr/bin/env python3
"""Build the deployable source archive of one Cloud Function (stdlib only).

Usage:
    python tools/build_function_source.py NAME OUTDIR
    python tools/build_function_source.py --terraform-external   # JSON on stdin

The archive ``OUTDIR/NAME.zip`` holds, at its root:

* every file of ``functions/NAME/`` (so ``main.py`` is at the root; a per-folder
  ``requirements.txt`` is replaced, see below),
* the ``shared/`` package (the Python package every function imports),
* ``requirements.txt``: a copy of the repo-root ``requirements-functions.txt`` when it
  exists, otherwise generated from ``[project].dependencies`` in ``pyproject.toml``.

The archive is deterministic: entries are sorted, every timestamp is 1980-01-01 00:00,
permissions are fixed and caches (``__pycache__``, ``*.pyc``) are left out, so the same
tree always gives the same bytes (and the same sha256). Terraform names the uploaded
object after that hash, so an unchanged tree never redeploys a function.

``--terraform-external`` implements the protocol of Terraform's ``external`` data
source: it reads ``{"name": ..., "outdir": ..., "repo_root": ...}`` from stdin and
prints ``{"path": ..., "sha256": ..., "md5_base64": ..., "size": ...}``.
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
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "tests"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
EXCLUDED_NAMES = {".DS_Store", "requirements.txt"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


class BuildError(Exception):
    """Raised when the archive cannot be built (bad name, missing folder...)."""


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


def requirements_text(repo_root: Path) -> str:
    """requirements.txt for the function runtime (see the module docstring)."""
    pinned = repo_root / "requirements-functions.txt"
    if pinned.is_file():
        return pinned.read_text(encoding="utf-8")
    pyproject = repo_root / "pyproject.toml"
    if not pyproject.is_file():
        raise BuildError(f"neither {pinned} nor {pyproject} exists")
    with pyproject.open("rb") as fh:
        deps = tomllib.load(fh).get("project", {}).get("dependencies", [])
    if not deps:
        raise BuildError(f"{pyproject} declares no [project].dependencies")
    header = "# generated from pyproject.toml [project].dependencies by build_function_source.py\n"
    return header + "".join(f"{dep}\n" for dep in deps)


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
    shared_dir = repo_root / "shared"
    if not (function_dir / "main.py").is_file():
        raise BuildError(f"{function_dir / 'main.py'} does not exist")
    if not (shared_dir / "__init__.py").is_file():
        raise BuildError(f"{shared_dir} is not a Python package (no __init__.py)")

    entries: dict[str, bytes] = {}
    for path in _walk(function_dir):
        entries[path.relative_to(function_dir).as_posix()] = path.read_bytes()
    for path in _walk(shared_dir):
        entries["shared/" + path.relative_to(shared_dir).as_posix()] = path.read_bytes()
    entries["requirements.txt"] = requirements_text(repo_root).encode("utf-8")
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
    outdir = Path(query["outdir"]).resolve()
    print(json.dumps(describe(build(query["name"], outdir, repo_root))))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--terraform-external"]:
        try:
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
