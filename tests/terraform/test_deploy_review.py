"""The second deploy review (issue 22): a destroy, a first apply and a busy day.

Each test pins one finding of that review on the HCL parsed with python-hcl2; the
arithmetic of the Direct VPC egress subnet and the database's variable validations are
evaluated by Terraform itself (terraform_data and variables only: no provider download).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_stack_wiring import _terraform
from tfconfig import (
    MODULES,
    REPO,
    TF,
    attr,
    block,
    blocks,
    env_dirs,
    expr,
    function_names,
    load,
)

DATABASE = load(MODULES / "database")
FUNCTIONS = load(MODULES / "functions")
NETWORK = load(MODULES / "network")
STACK = load(MODULES / "stack")
README = (TF / "README.md").read_text()


# -- 1. destroy: PostgreSQL refuses DROP ROLE / DROP DATABASE, the instance removes both --


@pytest.mark.parametrize(
    ("cfg", "rtype", "name"),
    [
        (DATABASE, "google_sql_database", "app"),
        (DATABASE, "google_sql_user", "app"),
        (FUNCTIONS, "google_sql_user", "iam"),
    ],
)
def test_sql_users_and_database_are_abandoned_on_destroy(cfg, rtype, name):
    assert attr(cfg.resource(rtype, name), "deletion_policy") == "ABANDON"


def test_every_sql_user_and_database_is_abandoned_on_destroy():
    """Any user or database added later gets the same treatment (or this fails)."""
    found = 0
    for module in sorted(MODULES.iterdir()):
        cfg = load(module)
        for rtype in ("google_sql_user", "google_sql_database"):
            for name, body in cfg.of_type(rtype).items():
                found += 1
                assert attr(body, "deletion_policy") == "ABANDON", f"{module.name}: {rtype}.{name}"
    assert found == 3


# -- 2. backups vs transaction log retention ------------------------------------------


def test_log_retention_is_sent_only_with_point_in_time_recovery():
    instance = DATABASE.resource("google_sql_database_instance", "this")
    backup = block(block(instance, "settings"), "backup_configuration")
    retention = expr(attr(backup, "transaction_log_retention_days"))
    assert retention == (
        "var.backups_enabled && var.point_in_time_recovery_enabled ? "
        "var.transaction_log_retention_days : null"
    )
    assert expr(attr(backup, "point_in_time_recovery_enabled")) == (
        "var.backups_enabled && var.point_in_time_recovery_enabled"
    )


def _validate_module_variables(tmp_path: Path, module: Path, variables: dict) -> tuple[int, str]:
    """terraform plan of a root holding only ``module``'s variables.tf (validations and
    all), with ``variables`` as -var arguments."""
    shutil.copy(module / "variables.tf", tmp_path / "variables.tf")
    args = [f"-var={k}={v}" for k, v in variables.items()]
    rc, out = _terraform(tmp_path, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    return _terraform(tmp_path, "plan", "-input=false", "-no-color", "-lock=false", *args)


DATABASE_REQUIRED = {
    "project_id": "p",
    "region": "europe-west1",
    "name": "seatlease-dev",
    "network_id": "n",
    "private_services_range_name": "r",
    "private_services_connection": "c",
    "deletion_protection": "false",
    "db_password": "x" * 24,
}


@pytest.mark.parametrize(
    ("settings", "accepted"),
    [
        ({"backup_retained_count": 7}, False),  # 7 backups, 7 days of logs: refused
        ({"backup_retained_count": 8}, True),
        ({"backup_retained_count": 3, "transaction_log_retention_days": 2}, True),
        ({"backup_retained_count": 2, "transaction_log_retention_days": 2}, False),
        ({"backup_retained_count": 7, "point_in_time_recovery_enabled": "false"}, True),
        ({"backup_retained_count": 7, "backups_enabled": "false"}, True),
        ({"backup_retained_count": 30, "transaction_log_retention_days": 8}, False),
    ],
)
def test_terraform_refuses_no_more_backups_than_days_of_logs(tmp_path, settings, accepted):
    rc, out = _validate_module_variables(
        tmp_path, MODULES / "database", {**DATABASE_REQUIRED, **settings}
    )
    assert (rc == 0) is accepted, out
    if not accepted:
        assert "Invalid value for variable" in out, out


def test_envs_and_examples_keep_valid_backup_settings():
    """The stack sends the database module's default log retention (7 days): every root
    that asks for point-in-time recovery keeps more backups than that."""
    days = DATABASE.variables["transaction_log_retention_days"]["default"]
    stack_defaults = {n: attr(v, "default") for n, v in STACK.variables.items()}
    roots = [*env_dirs(), *sorted(TF.glob("examples/*/"))]
    assert len(roots) == 3
    for root in roots:
        call = next(iter(load(root).modules.values()))
        pitr = call.get("sql_point_in_time_recovery", stack_defaults["sql_point_in_time_recovery"])
        count = call.get("sql_backup_retained_count", stack_defaults["sql_backup_retained_count"])
        assert not pitr or count > days, root


# -- 3. prerequisites the stack cannot enable itself ----------------------------------


def test_readme_names_the_apis_the_provider_needs_before_the_stack_enables_any():
    first_deploy = README[README.index("## First deploy") :]
    prerequisites = first_deploy[: first_deploy.index("1. **State bucket**")]
    command = re.search(r"gcloud services enable ([^\n]*(?:\\\n[^\n]*)*)", prerequisites)
    assert command, "no gcloud services enable command in the prerequisites"
    enabled = set(re.findall(r"[a-z]+\.googleapis\.com", command.group(1)))
    # Service Usage: google_project_service enables the others through it. Cloud
    # Resource Manager: data "google_project" and every google_project_iam_member.
    assert enabled == {"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"}
    assert not enabled & set(STACK.locals["apis"]), "the stack enables those itself"
    assert "google_project" in FUNCTIONS.files["main.tf"]


# -- 4. Direct VPC egress: about two addresses per instance, /28 blocks, at least /26 --


def test_subnet_is_sized_from_the_functions_maximum_instances():
    call = STACK.modules["network"]
    assert attr(call, "functions_max_instances") == "${module.functions.max_instance_counts}"
    out = FUNCTIONS.outputs["max_instance_counts"]
    assert expr(attr(out, "value")) == "{for fn, s in local.settings : fn => s.max_instances}"
    assert NETWORK.locals["subnet_cidrs"]["functions"] == "${local.functions_subnet_cidr}"
    assert attr(NETWORK.variables["functions_subnet_cidr"], "default") is None


@pytest.mark.parametrize(
    "description",
    [
        NETWORK.variables["functions_subnet_cidr"]["description"],
        FUNCTIONS.variables["subnet_id"]["description"],
        README,
    ],
)
def test_no_description_says_one_address_per_instance(description):
    text = " ".join(description.split())
    assert not re.search(r"one address", text), text
    assert re.search(r"two addresses [^.]*per instance", text), text


def _addresses(max_instances: dict[str, int]) -> int:
    return sum(math.ceil(2 * n / 16) * 16 for n in max_instances.values())


def _size_subnet(tmp_path: Path, max_instances: dict[str, int], cidr: str | None = None):
    """Apply network's variables.tf + sizing.tf (terraform_data only) and read the
    subnet it chose; (rc, output) when the plan fails."""
    shutil.copy(MODULES / "network" / "variables.tf", tmp_path / "variables.tf")
    shutil.copy(MODULES / "network" / "sizing.tf", tmp_path / "sizing.tf")
    (tmp_path / "outputs.tf").write_text(
        'output "cidr" {\n  value = local.functions_subnet_cidr\n}\n'
        'output "needed" {\n  value = local.functions_addresses_needed\n}\n'
    )
    hcl_map = "{" + ",".join(f"{k}={v}" for k, v in max_instances.items()) + "}"
    args = ["-var=project_id=p", "-var=region=r", "-var=name=n"]
    args.append(f"-var=functions_max_instances={hcl_map}")
    if cidr is not None:
        args.append(f"-var=functions_subnet_cidr={cidr}")
    rc, out = _terraform(tmp_path, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(tmp_path, "apply", "-auto-approve", "-input=false", "-no-color", *args)
    if rc != 0:
        return rc, out
    rc, out = _terraform(tmp_path, "output", "-json")
    assert rc == 0, out
    values, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    return values["cidr"]["value"], values["needed"]["value"]


# The seven functions' maxima on 2026-11-24 (dev defaults, envs/prod's example): fixed
# data for the arithmetic. The functions the modules hold today, however many, are
# checked by test_the_functions_of_the_envs_fit.
DEV = {"acquire": 20, "heartbeat": 20, "release": 10, "keys": 5, "reaper": 1, "audit": 5,
       "admin": 2}  # fmt: skip
PROD = {**DEV, "acquire": 50, "heartbeat": 50, "release": 20}


def _reference_cidr(max_instances: dict[str, int]) -> str:
    """The rule of sizing.tf, written again: the smallest /26../20 holding the addresses
    (4 reserved), at 10.10.0.0 up to a /24, else the second block of its size."""
    needed = _addresses(max_instances)
    prefix = next((p for p in range(26, 19, -1) if 2 ** (32 - p) - 4 >= needed), 20)
    block = 0 if prefix >= 24 else 1
    base = block * 2 ** (32 - prefix)
    return f"10.10.{base // 256}.{base % 256}/{prefix}"


def test_the_functions_of_the_envs_fit(tmp_path):
    """Whatever functions the module defines now (one added later too): dev's defaults
    and prod's example overrides are sized by Terraform as the rule says, and fit."""
    defaults = {fn: d["max_instances"] for fn, d in FUNCTIONS.locals["defaults"].items()}
    assert set(defaults) == set(function_names())
    tfvars = (TF / "envs" / "prod" / "terraform.tfvars.example").read_text()
    overrides = dict(
        re.findall(r"^[ \t]*(\w+)[ \t]*=[ \t]*\{[^}\n]*max_instances\s*=\s*(\d+)", tfvars, re.M)
    )
    assert overrides, "envs/prod's example sets max_instances"
    prod = {**defaults, **{fn: int(n) for fn, n in overrides.items()}}
    for case in (defaults, prod):
        (tmp_path / str(len(case))).mkdir(exist_ok=True)
        cidr, needed = _size_subnet(tmp_path / str(len(case)), case)
        assert (cidr, needed) == (_reference_cidr(case), _addresses(case))
        shutil.rmtree(tmp_path / str(len(case)))
    assert _reference_cidr(DEV) == "10.10.0.0/24" and _reference_cidr(PROD) == "10.10.2.0/23"


@pytest.mark.parametrize(
    ("max_instances", "cidr", "needed"),
    [
        (DEV, "10.10.0.0/24", 192),  # the range every stack has had: unchanged
        (PROD, "10.10.2.0/23", 336),  # 133 instances overflowed the /24 in a rollout
        ({"acquire": 1}, "10.10.0.0/26", 16),  # never smaller than a /26
        ({"a": 8, "b": 8, "c": 8, "d": 8}, "10.10.0.0/25", 64),  # 64 > 62 usable
        ({"acquire": 1000}, "10.10.8.0/21", 2000),
        ({"acquire": 1100}, "10.10.16.0/20", 2208),
    ],
)
def test_terraform_sizes_the_subnet(tmp_path, max_instances, cidr, needed):
    assert _addresses(max_instances) == needed
    assert _size_subnet(tmp_path, max_instances) == (cidr, needed)


@pytest.mark.parametrize(
    ("max_instances", "cidr"),
    [
        ({"acquire": 3000}, None),  # beyond a /20
        (PROD, "10.10.0.0/24"),  # prod at the old default: 336 > 252
        ({"acquire": 1}, "10.10.0.0/27"),  # Cloud Run wants at least a /26
    ],
)
def test_terraform_fails_the_plan_when_the_functions_cannot_fit(tmp_path, max_instances, cidr):
    rc, out = _size_subnet(tmp_path, max_instances, cidr)
    assert rc != 0 and "Resource precondition failed" in out, out
    assert "usable addresses" in out, out


def test_a_given_range_that_fits_is_used_as_is(tmp_path):
    assert _size_subnet(tmp_path, PROD, "100.64.0.0/22") == ("100.64.0.0/22", 336)


# -- 5. function sources: no churn across checkouts, live archives never aged out ------


def test_source_objects_are_named_by_digest_from_a_path_relative_to_the_root():
    obj = FUNCTIONS.resource("google_storage_bucket_object", "source")
    assert expr(attr(obj, "for_each")) == "local.source_folders"  # any added function too
    assert attr(obj, "name") == "${each.key}/${data.external.source[each.key].result.sha256}.zip"
    assert expr(attr(obj, "source")) == "data.external.source[each.key].result.path"
    build_dir = expr(STACK.locals["build_dir"])
    assert "abspath" not in build_dir and build_dir.startswith("${path.root}"), build_dir
    assert expr(attr(STACK.modules["functions"], "build_dir")) == "local.build_dir"


def test_build_tool_reports_a_relative_path_for_a_relative_outdir(tmp_path):
    """What Terraform stores as the object's source is the same in every checkout."""
    query = {"name": "keys", "outdir": "./.build", "repo_root": str(REPO)}
    results = []
    for checkout in ("a", "b"):
        cwd = tmp_path / checkout
        cwd.mkdir()
        proc = subprocess.run(
            [sys.executable, str(REPO / "tools" / "build_function_source.py"),
             "--terraform-external"],
            input=json.dumps(query), capture_output=True, text=True, cwd=cwd, timeout=60,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert (cwd / result["path"]).is_file()
        results.append(result)
    assert results[0] == results[1]
    assert results[0]["path"] == ".build/keys.zip"


def test_source_bucket_ages_noncurrent_versions_only():
    bucket = FUNCTIONS.resource("google_storage_bucket", "sources")
    assert attr(block(bucket, "versioning"), "enabled") is True
    rules = blocks(bucket, "lifecycle_rule")
    assert rules
    for rule in rules:
        condition = block(rule, "condition")
        # Every rule is limited to noncurrent versions: no age rule on live archives.
        assert attr(condition, "with_state") == "ARCHIVED", condition
        assert "age" not in condition, condition
        assert attr(block(rule, "action"), "type") == "Delete"
    assert any("days_since_noncurrent_time" in block(r, "condition") for r in rules)


# -- 6. docs -----------------------------------------------------------------------------

NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
           9: "nine", 10: "ten"}  # fmt: skip


def _docs() -> list[Path]:
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [*found, *sorted(TF.rglob("*.md"))]


def test_docs_count_the_functions_right():
    count = len(function_names())
    assert count == len(FUNCTIONS.locals["functions"])
    for doc in _docs():
        text = doc.read_text()
        for n, word in NUMBERS.items():
            if n == count:
                continue
            pattern = rf"\b(?:{word}|{n}) (?:Cloud |client-facing )?functions\b"
            hits = [m.group(0) for m in re.finditer(pattern, text, flags=re.I)]
            assert not [h for h in hits if "three" not in h.lower()], (doc, hits)


def test_prod_machine_tier_in_descriptions_is_the_one_prod_uses():
    prod = next(iter(load(TF / "envs" / "prod").modules.values()))
    tier = prod["sql_tier"]
    for cfg in (DATABASE, STACK):
        for var in cfg.variables.values():
            text = var.get("description", "")
            for match in re.finditer(r"(db-[a-z0-9-]+) \(([^)]*prod[^)]*)\)", text):
                assert match.group(1) == tier, text
