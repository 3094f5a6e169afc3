"""Cold import of each client function against functions-framework alone, each in the
environment its archive installs.

What a cold start costs before the first request: a fresh interpreter imports
``functions_framework`` (the baseline: what any Python function pays) and then the
function's ``main.py``, as ``functions-framework --target NAME`` does. Each function is
measured as it is deployed: its archive is built (tools/build_function_source.py) and
unpacked, and its interpreter is a virtualenv holding exactly the archive's
``requirements.txt`` (``pip install --require-hashes --no-deps``, cached under
``.bench/cold_import/`` by the lock's sha256; the first run installs it, which needs
the package index). The baseline runs in the same environment. ``--environment dev``
measures the old way instead: the function folders on this checkout's virtualenv, which
holds every dependency of every function and the dev tools; ``--lock FILE`` installs
``FILE`` instead of each archive's lock (e.g. ``requirements-functions.txt`` to measure
the archives as they were before the lock without Pub/Sub).

Each run starts a new interpreter (``python -c``, from the unpacked archive, with the
environment the function needs so that it starts configured), alternating the baseline,
every function and ``functions_framework + redis`` (the floor: redis-py is the client
every function needs, and ``import redis`` loads all of it) so that drift in the
machine's load hits all of them; the figures are the medians of ``--runs`` runs of the
interpreter's CPU time (user + system, from ``getrusage``; interpreter start included:
it is part of a cold start too) and, less steady on a shared machine, its wall clock.
The ratio is case / baseline in CPU time; target: acquire at most ``--target`` (1.5).

The modules each function loads beyond functions-framework are listed by package, and
the ``--forbid`` packages (never needed to serve a client call) must not be among them.

Run: ``python3 bench/cold_import.py`` (about a minute, plus the first install). Exit
status 1 when a forbidden package is imported; a missed target is printed (exit 2 only
with ``--strict``).
"""

from __future__ import annotations

import argparse
import collections
import functools
import glob
import hashlib
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS = ("acquire", "heartbeat", "release")
BASELINE = "import functions_framework"
FLOOR = "functions_framework + redis"
CACHE = ROOT / ".bench" / "cold_import"
LOADED = (
    "import sys, json\n"
    "import functions_framework\n"
    "before = set(sys.modules)\n"
    "import main\n"
    "print(json.dumps(sorted(set(sys.modules) - before)))\n"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(python: str, code: str, cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one fresh interpreter running ``code``."""
    cpu = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(
        [python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{code!r} failed:\n{proc.stderr}")
    return _children_cpu() - cpu, elapsed, proc.stdout


# The functions' runtime (terraform/modules/functions: runtime = "python312"): the archives
# are measured on it when it is installed here.
RUNTIME_PYTHON = "python3.12"


def runtime_python() -> str:
    """The functions' runtime Python when one runs here (on PATH, or a pyenv version),
    else this interpreter."""
    candidates = [shutil.which(RUNTIME_PYTHON)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return sys.executable


def _builder():
    path = ROOT / "tools" / "build_function_source.py"
    spec = importlib.util.spec_from_file_location("build_function_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def python_version(python: str) -> str:
    """``python``'s version ("3.12.1"), asked once."""
    return subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def environment(requirements: bytes, base_python: str) -> str:
    """The Python of a virtualenv of ``base_python`` holding exactly ``requirements`` (a
    hashed lock), made once and kept under .bench/cold_import/ by the lock's sha256 and
    the interpreter's version."""
    version = python_version(base_python)
    venv = CACHE / (hashlib.sha256(requirements).hexdigest()[:16] + f"-py{version}")
    python = venv / "bin" / "python"
    if (venv / "complete").is_file():
        return str(python)
    shutil.rmtree(venv, ignore_errors=True)
    print(f"installing the lock into {venv.relative_to(ROOT)} (once)", flush=True)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    (venv / "requirements.txt").write_bytes(requirements)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-qq", "--disable-pip-version-check",
         "--require-hashes", "--no-deps", "-r", str(venv / "requirements.txt")],
        check=True,
    )  # fmt: skip
    (venv / "complete").write_text("")
    return str(python)


def deployed(
    names: tuple[str, ...], into: Path, lock: Path | None, base_python: str
) -> dict[str, tuple[str, Path]]:
    """Function -> (Python, folder): each archive unpacked, on its own lock's virtualenv."""
    builder, cases = _builder(), {}
    for name in names:
        with zipfile.ZipFile(builder.build(name, into / "dist")) as zf:
            zf.extractall(into / name)
            requirements = lock.read_bytes() if lock else zf.read("requirements.txt")
        cases[name] = (environment(requirements, base_python), into / name)
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per case")
    parser.add_argument("--target", type=float, default=1.5, help="acquire / baseline")
    parser.add_argument(
        "--forbid",
        default="sqlalchemy,google,pg8000,jwt",
        help="packages a client function must not import at start-up",
    )
    parser.add_argument(
        "--environment",
        choices=("archive", "dev"),
        default="archive",
        help="each archive on a virtualenv of its lock, or the folders on this venv",
    )
    parser.add_argument("--lock", type=Path, help="install this lock instead of the archive's")
    parser.add_argument(
        "--python",
        default=None,
        help=f"the interpreter of the archives' virtualenvs (default {RUNTIME_PYTHON}, the "
        "functions' runtime in Terraform, when installed; else this one)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args()

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
        "SEATLEASE_ISSUER": "http://bench",
        "SIGNING_KEYS_DIR": str(ROOT),  # set, not read at import
    }
    with tempfile.TemporaryDirectory(prefix="seatlease-cold-") as tmp:
        if args.environment == "dev":
            cases = {name: (sys.executable, ROOT / "functions" / name) for name in FUNCTIONS}
        else:
            cases = deployed(FUNCTIONS, Path(tmp), args.lock, args.python or runtime_python())
        return measure(cases, env, args)


def measure(cases: dict[str, tuple[str, Path]], env: dict[str, str], args) -> int:
    forbidden = set(args.forbid.split(",")) if args.forbid else set()
    status = 0
    for name, (python, folder) in cases.items():
        _, _, out = run(python, LOADED, folder, env)
        modules = json.loads(out.strip().splitlines()[-1])
        packages = collections.Counter(m.split(".")[0] for m in modules)
        top = ", ".join(f"{p} {n}" for p, n in packages.most_common(8))
        print(f"{name}: {len(modules)} modules beyond functions_framework ({top}, ...)")
        if bad := sorted(forbidden & set(packages)):
            print(f"  FAIL: imports {', '.join(bad)} at start-up")
            status = 1

    # The baseline and the floor run in acquire's environment (the target is about it).
    python, folder = cases["acquire"]
    codes = {
        "functions_framework": (python, BASELINE, folder),
        **{name: (py, BASELINE + "; import main", f) for name, (py, f) in cases.items()},
        FLOOR: (python, BASELINE + "; import redis", folder),
    }
    cpu: dict[str, list[float]] = {n: [] for n in codes}
    wall: dict[str, list[float]] = {n: [] for n in codes}
    for py, code, cwd in codes.values():
        run(py, code, cwd, env)  # warm the file cache and the bytecode
    for _ in range(args.runs):
        for name, (py, code, cwd) in codes.items():
            spent, elapsed, _ = run(py, code, cwd, env)
            cpu[name].append(spent)
            wall[name].append(elapsed)
    base = statistics.median(cpu["functions_framework"])
    base_wall = statistics.median(wall["functions_framework"])
    where = "this checkout's venv" if args.environment == "dev" else "each archive's lock"
    if args.lock:
        where = f"{args.lock.name} for every function"
    print(
        f"\nPython {python_version(python)}, {where}, {args.runs} runs, medians"
        " (interpreter start included):"
    )
    for name in codes:
        median, median_wall = statistics.median(cpu[name]), statistics.median(wall[name])
        print(
            f"  {name:27s} CPU {median * 1000:5.0f} ms  x{median / base:.2f}   "
            f"wall {median_wall * 1000:5.0f} ms  x{median_wall / base_wall:.2f}"
        )
    ratio = statistics.median(cpu["acquire"]) / base
    verdict = "PASS" if ratio <= args.target else "FAIL"
    print(f"acquire / functions_framework = {ratio:.2f}: {verdict} (target {args.target})")
    if verdict == "FAIL" and args.strict:
        status = status or 2
    return status


if __name__ == "__main__":
    sys.exit(main())
