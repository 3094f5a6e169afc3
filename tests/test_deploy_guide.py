"""terraform/README.md's "First deploy, step by step", played as an operator pastes it
(issue 52): every `sh` block of the section, in its order, run by bash against what the
apply created, with the cloud's endpoints replaced by local ones: the functions served on
loopback (the admin function as ``admin_url``, acquire as ``acquire_url``, keys as
``jwks_url``) on a private Redis and a fresh, unmigrated database named ``seatlease`` of
the test PostgreSQL, and Secret Manager by tests/secretmanager_fake.py (the real client,
``SECRET_MANAGER_ENDPOINT``). Each replacement is listed in ``LOCAL`` and must be used, so a
changed command does not silently stop being replaced.

Not played, by one rule (``needs_the_cloud``): a block with a ``gcloud`` or ``terraform``
command left after the replacements (the APIs, the state bucket, ``terraform init``, the
ops VM and its deletion). ``BLOCKS`` and ``PLAYED`` are counted, so a new block is either
played or named here. The VM's block runs in a subshell of its own (another machine: its
``DATABASE_URL`` stays there); the others share one shell, as on the operator's machine.
The guide used to fail at ``seatlease tenant create`` ("DATABASE_URL is set but REDIS_URL is
not")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from secretmanager_fake import FakeSecretManager
from sqlalchemy import create_engine, text

from seatlease.api import tokens
from seatlease.records import db
from seatlease_cli.procs import free_port

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "terraform" / "README.md"
pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.timeout(300)]
SIGNING_SECRET = "projects/seatlease-guide/secrets/seatlease-dev-signing-key"
BLOCKS = 9  # the section's sh blocks
PLAYED = 4  # the ones that run here: keys, the VM's schema, the tenant, the smoke test


def guide_blocks() -> list[str]:
    guide = GUIDE.read_text()
    start = guide.index("## First deploy, step by step")
    end = guide.index("## Destroy")
    found = re.findall(r"```sh\n(.*?)```", guide[start:end], re.S)
    return [re.sub(r"^ {3}", "", block, flags=re.M) for block in found]  # list indentation


def needs_the_cloud(block: str) -> bool:
    """The rule for the blocks not played: one runs gcloud or terraform itself."""
    return any(
        re.match(r"(gcloud|terraform)\s", line.strip()) for line in block.splitlines()
    ) or bool(re.search(r"\$\((gcloud|terraform)\s", block))


def local_endpoints(base: str, pg_port: int, database: str) -> dict[str, str]:
    """What the guide reads from the cloud -> what stands for it here."""
    return {
        '"$(terraform output -raw signing_key_secret)"': f'"{SIGNING_SECRET}"',
        '"$(terraform output -raw jwks_url)"': f'"{base}/keys"',
        '"$(terraform output -raw admin_url)"': f'"{base}/admin"',
        '"$(terraform output -raw acquire_url)"': f'"{base}/acquire"',
        "$(gcloud sql instances describe seatlease-dev --format='value(connectionName)')": (
            "seatlease-guide:europe-west1:seatlease-dev"
        ),
        # The proxy's job (a local port to Cloud SQL's private IP): the test's PostgreSQL
        # is on loopback already, on its own port.
        'cloud-sql-proxy --private-ip "$INSTANCE" --port 5432 &': ": the database is local",
        "@127.0.0.1:5432/seatlease": f"@127.0.0.1:{pg_port}/{database}",
        "$(gcloud secrets versions access latest --secret=seatlease-dev-db-password)": (
            "guide-password"
        ),
    }


@pytest.fixture
def guide_database(postgres_admin_url: str):
    """A fresh, empty database owned by a role named ``seatlease``, as the apply makes
    (the test server trusts local connections: any password)."""
    name = f"seatlease_guide_{uuid.uuid4().hex[:8]}"
    admin = create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = 'seatlease'")).first():
            conn.execute(text("CREATE ROLE seatlease LOGIN"))
        conn.execute(text(f'CREATE DATABASE "{name}" OWNER seatlease'))
    host_port = postgres_admin_url.split("@", 1)[1].split("/", 1)[0]
    yield name, int(host_port.rpartition(":")[2])
    db.reset()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_the_deploy_guide_runs_in_order(tmp_path, monkeypatch, redis_url, guide_database):
    database, pg_port = guide_database
    secrets = FakeSecretManager().start()
    secrets.create_secret(SIGNING_SECRET)  # Terraform's part: the secret, never a version
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The functions' environment, as Terraform sets it (Redis and the database local).
    monkeypatch.setenv(
        "DATABASE_URL", f"postgresql+pg8000://seatlease:x@127.0.0.1:{pg_port}/{database}"
    )
    monkeypatch.setenv("SIGNING_KEY_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SECRET_MANAGER_ENDPOINT", secrets.url)
    monkeypatch.setenv("SIGNING_KEYS_REFRESH_SECONDS", "0")
    monkeypatch.setenv("SEATLEASE_ISSUER", base)
    monkeypatch.delenv("SIGNING_KEYS_DIR", raising=False)
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    db.reset()
    tokens.reset()
    from seatlease_cli.devserver import create_app, make_server

    server = make_server("127.0.0.1", port, create_app())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        blocks = guide_blocks()
        assert len(blocks) == BLOCKS, blocks
        local = local_endpoints(base, pg_port, database)
        used = {old: False for old in local}
        script = ["set -euo pipefail"]
        played = 0
        for n, block in enumerate(blocks):
            for old, new in local.items():
                if old in block:
                    used[old] = True
                    block = block.replace(old, new)
            if needs_the_cloud(block):
                continue
            played += 1
            script.append(f"echo; echo '=== block {n} ==='")
            on_the_vm = "seatlease db upgrade" in block
            script.append(f"(\n{block}\n)" if on_the_vm else block)
        assert played == PLAYED, script
        assert all(used.values()), [old for old, hit in used.items() if not hit]
        # The operator's shell: the CLI of the venv, nothing of the functions' settings;
        # Secret Manager's endpoint is the one replaced by the local stand-in.
        drop = ("REDIS_URL", "DATABASE_URL", "SIGNING_KEY_SECRET", "SEATLEASE_ISSUER")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        ran = subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=240,
        )  # fmt: skip
        output = ran.stdout
        assert ran.returncode == 0, f"{output[-3000:]}\n{ran.stderr[-3000:]}"
        said = dict(re.findall(r"=== block (\d+) ===\n(.*?)(?==== block|\Z)", output, re.S))
        keys, schema, tenant, smoke = (said[n] for n in sorted(said, key=int))
        assert '"keys"' in keys and "signing" in keys, keys
        assert "is at revision head" in schema, schema
        assert "created tenant acme" in tenant, tenant
        assert re.search(r"^sl_\S+$", tenant.strip().splitlines()[-1]), tenant  # the API key
        assert '"session_id"' in smoke and '"lease_token"' in smoke, smoke
        assert '"error"' not in smoke and "laptop-1" in smoke, smoke
    finally:
        server.shutdown()
        server.server_close()
        secrets.stop()
        tokens.reset()
