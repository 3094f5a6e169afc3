"""The README's five-minute tour, played as a reader pastes it (issue 42): every `sh`
block of the tour, as the README prints it and in its order, run by bash in a second
"terminal" (a subprocess in the project folder, the `seatlease` of the venv on its PATH,
no REDIS_URL or DATABASE_URL: it finds the stack through .seatlease/local.json) against a
fresh local stack (the only change: the stack's port for 8080). Each block must succeed
and answer what the README says it answers; the weighted-seats step used to get a 409
when pasted in order.

Not played here: `make run` itself (the stack is started in-process, as
tests/test_localstack.py does), the Python program and the five `hold` programs (the
clients' own tests run them: tests/test_client_holds.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seatlease.records import db
from seatlease.seats import redisconn
from seatlease_cli.localstack import LocalStack
from seatlease_cli.procs import free_port

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.timeout(600)]


def tour_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text()
    start = readme.index("## A five-minute tour")
    end = readme.index("**Your own tenant, license and API key**")
    return re.findall(r"```sh\n(.*?)```", readme[start:end], re.S)


def test_the_tour_works_pasted_in_order(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)
    redisconn.reset()
    db.reset()
    import seatlease.events.reaper

    monkeypatch.setattr(seatlease.events.reaper, "_publisher", None)
    stack = LocalStack(port=free_port(), reaper_interval=1.0, say=lambda _line: None)
    blocks = tour_blocks()
    assert len(blocks) >= 7, blocks
    try:
        state = stack.start()
        base = state["base_url"]
        script = ["set -euo pipefail"]
        for n, block in enumerate(blocks):
            script.append(f"echo '=== block {n} ==='")
            script.append(block.replace("http://127.0.0.1:8080", base))
        env = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST")}  # fmt: skip
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        played = subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=540,
        )  # fmt: skip
        output = played.stdout
        assert played.returncode == 0, f"{output[-3000:]}\n{played.stderr[-3000:]}"
        outputs = dict(re.findall(r"=== block (\d+) ===\n(.*?)(?==== block|\Z)", output, re.S))
        said = {int(n): text for n, text in outputs.items()}
        by_start = {blocks[n].strip().splitlines()[0]: said[n] for n in said}

        def answer_of(first_line_start: str) -> str:
            return next(
                text for line, text in by_start.items() if line.startswith(first_line_start)
            )

        assert '"session_id"' in said[0] and '"error"' not in said[0], said[0]
        assert "carol gets bob's seat" in answer_of("seatlease demo")
        queued = answer_of("seatlease license update --tenant demo --license demo-app --queue")
        assert re.search(r'"queued": ?true', queued) and '"error"' not in queued, queued
        term = answer_of("seatlease license update --tenant demo --license demo-app \\")
        assert re.search(r'"in_grace": ?true', term), term
        freed = answer_of("seatlease status --tenant demo ")
        assert freed.count("revoked session") == 2, freed
        weighted = next(text for n, text in said.items()
                        if n > 0 and '"render-1"' in blocks[n])  # fmt: skip
        assert re.search(r'"seats": ?2\b', weighted), weighted
        assert re.search(r'"seats_used": ?2\b', weighted), weighted
        assert '"error"' not in weighted, weighted
        assert (tmp_path / "usage.png").exists()
        sizing = answer_of("seatlease report sizing")
        assert "demo-app:" in sizing and "VERDICT" in sizing, sizing
    finally:
        stack.stop()
