"""The deployable source archive (tools/build_function_source.py) really runs.

Terraform uploads exactly what this builder produces, so these tests build the archive,
unpack it in a temporary directory outside the repository and start it with the
Functions Framework with PYTHONPATH pointing at the unpacked tree only: ``shared`` must
come from the archive, and ``requirements.txt`` must name what the runtime installs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILDER = REPO / "tools" / "build_function_source.py"
FUNCTIONS = sorted(p.name for p in (REPO / "functions").iterdir() if p.is_dir())


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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _functions_framework_cmd() -> list[str]:
    exe = shutil.which("functions-framework")
    return [exe] if exe else [sys.executable, "-m", "functions_framework"]


def _isolated_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_folder_builds_an_archive(name, outside_tmp):
    path = _build_cli(name, outside_tmp)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert "main.py" in names, "main.py must sit at the archive root"
        assert "shared/__init__.py" in names
        assert "requirements.txt" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert names == sorted(names)
        requirements = zf.read("requirements.txt").decode()
        main_py = zf.read("main.py").decode()
    for dist in ("functions-framework", "redis", "pydantic", "sqlalchemy", "pg8000"):
        assert dist in requirements.lower()
    assert f"def {name}(" in main_py


def test_archive_is_deterministic(outside_tmp):
    first = _build_cli("acquire", outside_tmp / "a").read_bytes()
    time.sleep(1.1)  # a builder that leaked mtimes would now produce different bytes
    second = _build_cli("acquire", outside_tmp / "b").read_bytes()
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()
    with zipfile.ZipFile(outside_tmp / "a" / "acquire.zip") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_requirements_prefer_requirements_functions_txt(outside_tmp):
    fake = outside_tmp / "repo"
    (fake / "functions" / "hello").mkdir(parents=True)
    (fake / "functions" / "hello" / "main.py").write_text("def hello(request):\n    return 'x'\n")
    (fake / "functions" / "hello" / "requirements.txt").write_text("ignored==1\n")
    (fake / "shared").mkdir()
    (fake / "shared" / "__init__.py").write_text("")
    (fake / "shared" / "__pycache__").mkdir()
    (fake / "shared" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (fake / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "0"\ndependencies = ["redis>=5", "pg8000"]\n'
    )
    generated = builder.build("hello", outside_tmp / "out1", fake)
    with zipfile.ZipFile(generated) as zf:
        assert zf.read("requirements.txt").decode().splitlines()[1:] == ["redis>=5", "pg8000"]
        assert "shared/__pycache__/x.cpython-311.pyc" not in zf.namelist()
    (fake / "requirements-functions.txt").write_text("redis==5.0.1\n")
    pinned = builder.build("hello", outside_tmp / "out2", fake)
    with zipfile.ZipFile(pinned) as zf:
        assert zf.read("requirements.txt").decode() == "redis==5.0.1\n"
    with pytest.raises(builder.BuildError):
        builder.build("../etc", outside_tmp / "out3", fake)
    with pytest.raises(builder.BuildError):
        builder.build("missing", outside_tmp / "out3", fake)


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


def test_acquire_archive_serves_405_from_the_unpacked_tree(outside_tmp):
    archive = _build_cli("acquire", outside_tmp / "dist")
    tree = outside_tmp / "src"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tree)
    env = _isolated_env(tree)

    # `shared` must resolve to the unpacked copy, not to the repository checkout.
    probe = subprocess.run(
        [sys.executable, "-c", "import shared, sys; print(shared.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).resolve().is_relative_to(tree.resolve())

    port = _free_port()
    cmd = [
        *_functions_framework_cmd(),
        "--target",
        "acquire",
        "--source",
        str(tree / "main.py"),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
    ]
    log = (outside_tmp / "ff.log").open("w+")
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        status, body, headers = None, b"", {}
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                    status, body, headers = resp.status, resp.read(), dict(resp.headers)
            except urllib.error.HTTPError as err:
                status, body, headers = err.code, err.read(), dict(err.headers)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.3)
                continue
            break
        log.seek(0)
        output = log.read()
        assert status is not None, f"functions-framework never answered:\n{output}"
        assert status == 405, f"GET / answered {status}: {body!r}\n{output}"
        assert headers.get("Content-Type", "").startswith("application/json"), headers
        payload = json.loads(body)
        assert payload["error"]["code"], payload
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
