"""Each function's archive carries the lock its Terraform role needs (issue 22, cold start).

The functions that publish to Pub/Sub (``publish = true`` in terraform/modules/functions,
which grants them the publisher role) get requirements-functions.txt, with
google-cloud-pubsub; every other function gets requirements-functions-nopubsub.txt,
without it and without the OpenTelemetry SDK it brings (redis-py imports that SDK at
``import redis`` whenever it is installed: about 40 ms of every cold start). The archives
are built exactly as the ``external`` data source builds them: same program, same query.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest
from tfconfig import MODULES, REPO, attr, expr, load

FUNCTIONS = load(MODULES / "functions")
FN_MAP = FUNCTIONS.locals["functions"]


def test_the_data_source_asks_only_for_the_function_by_name():
    """The builder chooses the lock from the function's name: no per-function lock in the
    query that a new function could forget."""
    source = FUNCTIONS.data[("external", "source")]
    assert expr(attr(source, "for_each")) == "local.source_folders"
    assert set(attr(source, "query")) == {"name", "outdir", "repo_root"}


# One archive per folder (a second entry point runs its folder's): by folder name.
FOLDERS = sorted({FUNCTIONS.locals["second_entry_points"].get(fn, fn) for fn in FN_MAP})


@pytest.mark.parametrize("name", FOLDERS)
def test_only_the_publishing_functions_carry_pubsub_and_the_opentelemetry_sdk(name, tmp_path):
    query = {"name": name, "outdir": str(tmp_path), "repo_root": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_function_source.py"),
         "--terraform-external"],
        input=json.dumps(query), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(json.loads(proc.stdout)["path"]) as zf:
        requirements = zf.read("requirements.txt").decode()
    pins = {line.split("==")[0].lower() for line in requirements.splitlines() if "==" in line}
    second = FUNCTIONS.locals["second_entry_points"]
    sharing = [fn for fn in FN_MAP if second.get(fn, fn) == name]
    assert len({FN_MAP[fn]["publish"] for fn in sharing}) == 1, "one archive, one lock"
    publishes = FN_MAP[name]["publish"] is True
    lock = "requirements-functions.txt" if publishes else "requirements-functions-nopubsub.txt"
    assert requirements == (REPO / lock).read_text()
    assert ("google-cloud-pubsub" in pins) is publishes
    assert ("opentelemetry-sdk" in pins) is publishes
    assert {"redis", "functions-framework", "pydantic", "cryptography"} <= pins
