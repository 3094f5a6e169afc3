"""Cold import of each client function against functions-framework alone.

What a cold start costs before the first request: a fresh interpreter imports
``functions_framework`` (the baseline: what any Python function pays) and then the
function's ``main.py``, as ``functions-framework --target NAME`` does. Each run starts a
new interpreter (``python -c``, from the function's folder, with the environment the
function needs so that it starts configured), alternating the baseline and every
function so that drift in the machine's load hits all of them; the figures are the
medians of ``--runs`` runs of the interpreter's CPU time (user + system, from
``getrusage``; interpreter start included: it is part of a cold start too) and, less
steady on a shared machine, its wall clock. The ratio is function / baseline in CPU
time; target: acquire at most ``--target`` (1.5).

The modules each function loads beyond functions-framework are listed by package, and
the ``--forbid`` packages (never needed to serve a client call) must not be among them.

Run: ``python3 bench/cold_import.py`` (about a minute). Exit status 1 when a forbidden
package is imported; a missed target is printed (exit 2 only with ``--strict``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS = ("acquire", "heartbeat", "release")
BASELINE = "import functions_framework"
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


def run(code: str, cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one fresh interpreter running ``code``."""
    cpu = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{code!r} failed:\n{proc.stderr}")
    return _children_cpu() - cpu, elapsed, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per case")
    parser.add_argument("--target", type=float, default=1.5, help="acquire / baseline")
    parser.add_argument(
        "--forbid",
        default="sqlalchemy,google,pg8000,jwt",
        help="packages a client function must not import at start-up",
    )
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args()

    env = {
        **os.environ,
        "SEATLEASE_ISSUER": "http://bench",
        "SIGNING_KEYS_DIR": str(ROOT),  # set, not read at import
    }
    folders = {name: ROOT / "functions" / name for name in FUNCTIONS}
    forbidden = set(args.forbid.split(",")) if args.forbid else set()
    status = 0
    for name, folder in folders.items():
        _, _, out = run(LOADED, folder, env)
        modules = json.loads(out.strip().splitlines()[-1])
        packages = collections.Counter(m.split(".")[0] for m in modules)
        top = ", ".join(f"{p} {n}" for p, n in packages.most_common(8))
        print(f"{name}: {len(modules)} modules beyond functions_framework ({top}, ...)")
        if bad := sorted(forbidden & set(packages)):
            print(f"  FAIL: imports {', '.join(bad)} at start-up")
            status = 1

    names = ["functions_framework", *FUNCTIONS]
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    run(BASELINE, ROOT, env)  # warm the file cache and the bytecode
    for _ in range(args.runs):
        for name in names:
            code = BASELINE if name == "functions_framework" else BASELINE + "; import main"
            spent, elapsed, _ = run(code, folders.get(name, folders["acquire"]), env)
            cpu[name].append(spent)
            wall[name].append(elapsed)
    base = statistics.median(cpu["functions_framework"])
    base_wall = statistics.median(wall["functions_framework"])
    python = sys.version.split()[0]
    print(f"\nPython {python}, {args.runs} runs, medians (interpreter start included):")
    for name in names:
        median, median_wall = statistics.median(cpu[name]), statistics.median(wall[name])
        print(
            f"  {name:19s} CPU {median * 1000:5.0f} ms  x{median / base:.2f}   "
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
