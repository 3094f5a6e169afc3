"""Offline checks of terraform/ on the HCL parsed with python-hcl2.

`terraform validate` needs provider downloads, which CI cannot do; these tests pin the
properties a reviewer would otherwise have to check by eye.
"""

from __future__ import annotations

import re

import pytest
from tfconfig import (
    ENVS,
    FUNCTIONS_DIR,
    META,
    MODULES,
    REPO,
    TF,
    attr,
    block,
    blocks,
    entry_point,
    env_dirs,
    expr,
    function_folders,
    function_names,
    load,
    module_dirs,
    source_of,
)

COMPONENT_MODULES = {
    "network",
    "redis",
    "database",
    "pubsub",
    "functions",
    "scheduler",
    "secrets",
    "monitoring",
    "loadbalancer",  # two regions only (test_two_regions.py)
}
EXPECTED_MODULES = COMPONENT_MODULES | {"stack"}  # stack: the composition the envs call
EXPECTED_FUNCTIONS = {
    "acquire", "heartbeat", "release", "keys", "reaper", "audit", "admin", "portal",
    "webhooks", "webhooks-retry",
}  # fmt: skip
# webhooks-retry is functions/webhooks/'s second entry point (webhooks_retry).
EXPECTED_FOLDERS = EXPECTED_FUNCTIONS - {"webhooks-retry"}
MODULE_META_ARGS = {"source", "version", "depends_on", "providers", "count", "for_each"}

MODULES_CFG = {p.name: load(p) for p in module_dirs()}
ENVS_CFG = {p.name: load(p) for p in env_dirs()}
STACK = MODULES_CFG["stack"]

# What distinguishes the environments (what envs/*/main.tf and variables.tf held before
# the stack module, value for value). Sizes are literal arguments of the stack call;
# operator settings are env variables whose default differs.
ENV_SIZES = {
    "dev": {
        "redis_tier": "BASIC",
        "redis_memory_size_gb": 1,
        "redis_persistence_enabled": False,
        "sql_tier": "db-custom-1-3840",
        "sql_availability_type": "ZONAL",
        "sql_point_in_time_recovery": False,
        "sql_backup_retained_count": 7,
    },
    "prod": {
        "redis_tier": "STANDARD_HA",
        "redis_memory_size_gb": 5,
        "redis_persistence_enabled": True,
        "sql_tier": "db-custom-2-7680",
        "sql_availability_type": "REGIONAL",
        "sql_point_in_time_recovery": True,
        "sql_backup_retained_count": 30,
    },
}
ENV_DEFAULTS = {
    "dev": {"name": "seatlease-dev", "deletion_protection": False, "log_level": "DEBUG"},
    "prod": {"name": "seatlease-prod", "deletion_protection": True, "log_level": "INFO"},
}
ENV_OUTPUTS = {
    "acquire_url",
    "heartbeat_url",
    "release_url",
    "admin_url",
    "function_urls",
    "cloud_sql_instance",
    "db_name",
    "db_user",
    "db_password_secret",
    "redis_host",
    "dead_letter_subscription",
    "jwks_url",
    "signing_key_secret",
    # two regions (test_two_regions.py): null or empty with one region
    "load_balancer_ip",
    "load_balancer_urls",
    "redis_endpoints",
    "sql_replica_connection_name",
    "secondary_function_urls",
}


def all_configs():
    return [*MODULES_CFG.values(), *ENVS_CFG.values()]


def config_id(cfg):
    return cfg.path.relative_to(REPO).as_posix()


# --------------------------------------------------------------------------------
# layout, variables, outputs, module wiring
# --------------------------------------------------------------------------------


def test_expected_modules_and_envs_exist():
    assert set(MODULES_CFG) == EXPECTED_MODULES
    assert set(ENVS_CFG) == {"dev", "prod"}


@pytest.mark.parametrize("module", sorted(EXPECTED_MODULES))
def test_module_has_the_four_files_and_pins_versions(module):
    cfg = MODULES_CFG[module]
    assert {"main.tf", "variables.tf", "outputs.tf", "versions.tf"} <= set(cfg.files)
    (tf_block,) = cfg.terraform
    assert attr(tf_block, "required_version") == ">= 1.11"  # write-only arguments
    providers = block(tf_block, "required_providers")
    google = attr(providers, "google")
    assert google["source"] == "hashicorp/google"
    # Direct VPC egress needs >= 7.21; 7.31 is the oldest 7.x whose schema the tests
    # check (test_provider_schema.py); 8.x is another major version.
    assert google["version"] == ">= 7.31, < 8.0"
    assert all(m in cfg.files["variables.tf"] for m in cfg.variables)
    assert not cfg.providers, "modules inherit providers; only the envs configure them"
    assert not [t for t in cfg.terraform if "backend" in t], "backends belong to the envs"


@pytest.mark.parametrize("cfg", all_configs(), ids=config_id)
def test_every_variable_is_typed_and_described(cfg):
    assert cfg.variables, f"{cfg.path} declares no variables"
    for name, var in cfg.variables.items():
        assert attr(var, "type"), f"{cfg.path.name}: variable {name} has no type"
        description = attr(var, "description", "")
        assert len(description.strip()) >= 10, f"{cfg.path.name}: variable {name} undescribed"


@pytest.mark.parametrize("cfg", all_configs(), ids=config_id)
def test_every_output_is_described(cfg):
    for name, out in cfg.outputs.items():
        assert attr(out, "description"), f"{cfg.path.name}: output {name} undescribed"


def _code(cfg) -> str:
    """Text of a configuration's files without comment lines and moved blocks."""
    text = "\n".join(cfg.files.values())
    text = re.sub(r"^moved \{\n.*?^\}\n", "", text, flags=re.M | re.S)
    return "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith(("#", "//"))
    )


@pytest.mark.parametrize("cfg", all_configs(), ids=config_id)
def test_every_reference_resolves_and_every_variable_is_used(cfg):
    code = _code(cfg)
    for name in set(re.findall(r"\bvar\.(\w+)", code)):
        assert name in cfg.variables, f"{config_id(cfg)}: var.{name} undeclared"
    for name in set(re.findall(r"\blocal\.(\w+)", code)):
        assert name in cfg.locals, f"{config_id(cfg)}: local.{name} undefined"
    for call, output in set(re.findall(r"\bmodule\.(\w+)\.(\w+)", code)):
        assert call in cfg.modules, f"{config_id(cfg)}: module.{call} is not called"
        callee = load(source_of(cfg, call))
        assert output in callee.outputs, (
            f"{config_id(cfg)}: module.{call}.{output} is not an output of {callee.path.name}"
        )
    unused = {n for n in cfg.variables if not re.search(rf"\bvar\.{n}\b", code)}
    assert not unused, f"{config_id(cfg)}: variables never used: {sorted(unused)}"


# The stack calls each component module once, and redis a second time for the second
# region's cluster (redis_secondary, two regions only).
CALLERS = {"stack": [*COMPONENT_MODULES, "redis"], "dev": ["stack"], "prod": ["stack"]}


@pytest.mark.parametrize(("caller", "expected"), sorted(CALLERS.items()))
def test_module_calls_pass_every_required_input_and_no_unknown_one(caller, expected):
    """The stack calls each component module once (redis twice: the second region's
    cluster); each env calls the stack once."""
    cfg = MODULES_CFG.get(caller) or ENVS_CFG[caller]
    called = []
    for call, body in cfg.modules.items():
        src = source_of(cfg, call)
        assert src.parent == MODULES, f"{caller}: module {call} is not one of terraform/modules"
        module = MODULES_CFG[src.name]
        called.append(src.name)
        passed = set(body) - MODULE_META_ARGS - META
        declared = set(module.variables)
        required = {n for n, v in module.variables.items() if "default" not in v}
        assert passed <= declared, f"{caller}.{call}: unknown inputs {sorted(passed - declared)}"
        assert required <= passed, f"{caller}.{call}: missing inputs {sorted(required - passed)}"
        for name in passed:
            for ref in re.findall(r"module\.(\w+)\.(\w+)", str(body[name])):
                other_src = source_of(cfg, ref[0]).name
                assert ref[1] in MODULES_CFG[other_src].outputs, (
                    f"{caller}.{call}.{name} reads module.{ref[0]}.{ref[1]}, which is not an output"
                )
            for ref in re.findall(r"var\.(\w+)", str(body[name])):
                assert ref in cfg.variables, f"{caller}.{call}.{name}: var.{ref} undeclared"
    assert sorted(called) == sorted(expected), "each module called as often as expected"


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_env_is_a_thin_root_over_the_stack(env):
    cfg = ENVS_CFG[env]
    assert not cfg.resources and not cfg.data and not cfg.ephemeral, "resources live in modules"
    assert set(cfg.modules) == {"seatlease"}
    assert source_of(cfg, "seatlease") == MODULES / "stack"
    call = cfg.modules["seatlease"]
    # Every env variable is passed through under its own name ...
    for name in cfg.variables:
        assert attr(call, name) == f"${{var.{name}}}", f"{env}: {name} not passed through"
    # ... and the rest of the call is this environment's sizes, as literals.
    assert attr(call, "environment") == "${local.environment}"
    assert cfg.locals["environment"] == env
    literals = set(call) - MODULE_META_ARGS - META - set(cfg.variables) - {"environment"}
    assert literals == set(ENV_SIZES[env]), literals ^ set(ENV_SIZES[env])


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_env_keeps_its_sizes_and_defaults(env):
    cfg = ENVS_CFG[env]
    call = cfg.modules["seatlease"]
    for name, value in ENV_SIZES[env].items():
        assert attr(call, name) == value, f"{env}: {name} = {attr(call, name)!r}, want {value!r}"
    for name, value in ENV_DEFAULTS[env].items():
        assert attr(cfg.variables[name], "default") == value, f"{env}: default of {name}"
    # Both environments' sizes are valid choices of the stack's inputs.
    assert set(ENV_SIZES[env]) <= set(STACK.variables)


def test_prod_is_production_grade():
    prod = ENVS_CFG["prod"]
    call = prod.modules["seatlease"]
    assert attr(call, "redis_tier") == "STANDARD_HA"
    assert attr(call, "sql_availability_type") == "REGIONAL"
    assert attr(call, "sql_point_in_time_recovery") is True
    assert attr(prod.variables["deletion_protection"], "default") is True
    db = STACK.modules["database"]
    assert attr(db, "backups_enabled") is True
    assert expr(attr(db, "point_in_time_recovery_enabled")) == "var.sql_point_in_time_recovery"
    # The stack's own defaults are the production shapes; deletion protection is explicit.
    for name, value in ENV_SIZES["prod"].items():
        assert attr(STACK.variables[name], "default") == value, f"stack default of {name}"
    assert "default" not in STACK.variables["deletion_protection"]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_env_backend_outputs_and_tfvars_example(env):
    cfg = ENVS_CFG[env]
    backends = [b for t in cfg.terraform for b in t.get("backend", [])]
    assert len(backends) == 1 and set(backends[0]) == {"gcs"}, "one GCS backend expected"
    assert set(backends[0]["gcs"]) <= META, "partial configuration: bucket via -backend-config"
    assert f"prefix=seatlease/{env}" in cfg.files["versions.tf"]
    (provider,) = [p["google"] for p in cfg.providers]
    assert attr(provider, "default_labels") == {"app": "seatlease", "env": "${local.environment}"}
    # Every output of the stack is forwarded under the same name.
    assert set(cfg.outputs) == set(STACK.outputs) == ENV_OUTPUTS
    for name, out in cfg.outputs.items():
        assert expr(attr(out, "value")) == f"module.seatlease.{name}"
        assert attr(out, "description") == attr(STACK.outputs[name], "description")
    # The client functions at the URL clients can call (the load balancer's with two
    # regions: test_two_regions.py applies it); admin at its own.
    for out in ("acquire_url", "heartbeat_url", "release_url"):
        fn = out.removesuffix("_url")
        assert expr(attr(STACK.outputs[out], "value")) == f'local.client_urls["{fn}"]'
    assert expr(attr(STACK.outputs["admin_url"], "value")) == 'module.functions.urls["admin"]'
    example = (ENVS / env / "terraform.tfvars.example").read_text()
    keys = re.findall(r"^(\w+)\s*=", example, flags=re.M)
    assert "project_id" in keys
    assert set(keys) <= set(cfg.variables), set(keys) - set(cfg.variables)
    assert re.search(rf'^name\s*=\s*"{ENV_DEFAULTS[env]["name"]}"', example, flags=re.M)
    dp = str(ENV_DEFAULTS[env]["deletion_protection"]).lower()
    assert re.search(rf"^deletion_protection\s*=\s*{dp}$", example, flags=re.M)
    assert "-backend-config" in cfg.files["versions.tf"]


def test_readme_documents_every_env_input_and_output():
    """terraform/README.md has an input and an output table per env, and points to the
    module READMEs (whose tables test_readmes.py checks)."""
    readme = (TF / "README.md").read_text()
    sections = dict(
        re.findall(r"^#### `(envs/\w+)`\n(.*?)(?=^#### |^## |\Z)", readme, flags=re.M | re.S)
    )
    configs = {f"envs/{k}": v for k, v in ENVS_CFG.items()}
    assert set(sections) == set(configs)
    for title, cfg in configs.items():
        parts = re.split(r"^\| output \|", sections[title], flags=re.M)
        assert len(parts) == 2 and "| input |" in parts[0], f"README {title}: two tables"
        inputs, outputs = (set(re.findall(r"^\| `(\w+)` \|", p, flags=re.M)) for p in parts)
        assert inputs == set(cfg.variables), (title, inputs ^ set(cfg.variables))
        assert outputs == set(cfg.outputs), (title, outputs ^ set(cfg.outputs))
    for module in MODULES_CFG:
        assert f"(modules/{module}/README.md)" in readme, module


# --------------------------------------------------------------------------------
# functions
# --------------------------------------------------------------------------------

FN = MODULES_CFG["functions"]
FN_MAP = FN.locals["functions"]


def test_function_folders_match_the_function_resource():
    folders = set(function_folders())
    assert folders == EXPECTED_FOLDERS, folders
    assert set(function_names()) == EXPECTED_FUNCTIONS
    assert set(FN_MAP) == EXPECTED_FUNCTIONS, "a function per folder and per second entry point"
    assert set(FN.locals["defaults"]) == EXPECTED_FUNCTIONS
    assert FN.locals["second_entry_points"] == {"webhooks-retry": "webhooks"}
    assert expr(FN.locals["source_folder"]) == (
        "{for fn in keys(local.functions) : fn => lookup(local.second_entry_points, fn, fn)}"
    )
    assert expr(FN.locals["entry_point"]) == (
        '{for fn in keys(local.functions) : fn => replace(fn, "-", "_")}'
    )
    fn = FN.resource("google_cloudfunctions2_function", "this")
    assert expr(attr(fn, "for_each")) == "local.functions"
    assert expr(attr(fn, "name")) == "each.key"
    build = block(fn, "build_config")
    assert attr(build, "runtime") == "python312"
    assert expr(attr(build, "entry_point")) == "local.entry_point[each.key]"
    storage = block(build, "source", "storage_source")
    assert "google_storage_bucket_object.source[local.source_folder[each.key]]" in attr(
        storage, "object"
    )
    # One archive per folder: a second entry point shares its folder's.
    for kind, name in (("data", "source"), ("resource", "source")):
        found = (
            FN.data[("external", name)]
            if kind == "data"
            else FN.resource("google_storage_bucket_object", name)
        )
        assert expr(attr(found, "for_each")) == "local.source_folders"
    assert expr(FN.locals["source_folders"]) == "toset(values(local.source_folder))"


@pytest.mark.parametrize("name", sorted(EXPECTED_FUNCTIONS))
def test_entry_point_is_defined_in_the_folders_main_py(name):
    folder = FN.locals["second_entry_points"].get(name, name)
    main_py = FUNCTIONS_DIR / folder / "main.py"
    assert main_py.is_file(), f"{main_py} missing"
    assert re.search(rf"^def {entry_point(name)}\(", main_py.read_text(), flags=re.M), (
        f"functions/{folder}/main.py has no top-level def {entry_point(name)}("
    )


def test_each_function_has_its_own_service_account_and_direct_vpc_egress():
    fn = FN.resource("google_cloudfunctions2_function", "this")
    svc = block(fn, "service_config")
    assert (
        attr(svc, "service_account_email") == "${google_service_account.function[each.key].email}"
    )
    assert expr(attr(FN.resource("google_service_account", "function"), "for_each")) == (
        "local.functions"
    )
    nic = block(svc, "direct_vpc_network_interface")
    assert attr(nic, "network") == "${var.network_id}"
    assert attr(nic, "subnetwork") == "${var.subnet_id}"
    assert attr(svc, "direct_vpc_egress") == "VPC_EGRESS_PRIVATE_RANGES_ONLY"
    assert "vpc_connector" not in svc
    for setting, var in (
        ("min_instance_count", "min_instances"),
        ("max_instance_count", "max_instances"),
        ("max_instance_request_concurrency", "concurrency"),
    ):
        assert expr(attr(svc, setting)) == f"local.settings[each.key].{var}"
    assert "function_settings" in FN.variables


def test_function_access_profiles_are_least_privilege():
    assert FN_MAP["reaper"]["publish"] is True
    assert {n for n, f in FN_MAP.items() if f["publish"]} == {"reaper"}
    assert FN_MAP["audit"]["sql"] is True and FN_MAP["audit"]["redis"] is False
    assert FN_MAP["reaper"]["sql"] is False
    for client in ("acquire", "heartbeat", "release"):
        assert FN_MAP[client]["public"] is True
        assert FN_MAP[client]["redis"] is True and FN_MAP[client]["sql"] is True
    # keys serves the JWKS: public keys only, no API key, no Redis, no database.
    # portal: the tenants' page and API (tenant admin key in the code): Redis and SQL only.
    assert {n for n, f in FN_MAP.items() if f["public"]} == {
        "acquire", "heartbeat", "release", "keys", "portal"}  # fmt: skip
    portal = FN_MAP["portal"]
    assert (portal["redis"], portal["sql"], portal["publish"]) == (True, True, False)
    assert portal["signing_key"] == "none"
    assert (FN_MAP["keys"]["redis"], FN_MAP["keys"]["sql"]) == (False, False)
    assert FN_MAP["reaper"]["ingress"] == "ALLOW_INTERNAL_ONLY"
    assert FN_MAP["audit"]["ingress"] == "ALLOW_INTERNAL_ONLY"
    publisher = FN.resource("google_pubsub_topic_iam_member", "publisher")
    assert expr(attr(publisher, "for_each")) == "local.publish_functions"
    assert attr(publisher, "role") == "roles/pubsub.publisher"
    sql_client = FN.resource("google_project_iam_member", "sql_client")
    assert expr(attr(sql_client, "for_each")) == "local.sql_functions"
    assert attr(sql_client, "role") == "roles/cloudsql.client"
    assert "var.sql_instance_name" in attr(block(sql_client, "condition"), "expression")
    assert "f.publish" in expr(FN.locals["publish_functions"])
    assert "f.sql" in expr(FN.locals["sql_functions"])


def test_environment_contract_names():
    text = FN.files["main.tf"]
    for env_name in (
        "REDIS_URL",
        "REDIS_CA_CERT",
        "REDIS_CLUSTER",
        "CLOUD_SQL_INSTANCE",
        "DB_NAME",
        "DB_USER",
        "DB_IAM_AUTH",
        "PUBSUB_TOPIC",
        "GOOGLE_CLOUD_PROJECT",
        "LOG_LEVEL",
    ):
        assert re.search(rf"\b{env_name}\s*=", text), env_name
    assert 'REDIS_CLUSTER = "1"' in text
    redis_out = MODULES_CFG["redis"].outputs
    assert attr(redis_out["redis_url"], "value").startswith("rediss://")


def test_every_secret_a_function_reads_exists_and_is_granted_to_that_function_only():
    secrets_expr = expr(FN.locals["secrets"])
    assert "REDIS_PASSWORD = var.redis_password_secret_id" in secrets_expr
    assert "f.redis && local.redis_auth" in secrets_expr
    assert "DB_PASSWORD = var.db_password_secret_id" in secrets_expr
    assert "f.sql && !var.db_iam_auth" in secrets_expr
    fn = FN.resource("google_cloudfunctions2_function", "this")
    (sev,) = blocks(block(fn, "service_config"), "secret_environment_variables")
    assert attr(sev, "secret") == "${secret_environment_variables.value}"
    assert attr(sev, "version") == "latest"
    dyn = block(fn, "service_config")["dynamic"][0]["secret_environment_variables"]
    assert expr(attr(dyn, "for_each")) == "local.secrets[each.key]"
    grant = FN.resource("google_secret_manager_secret_iam_member", "function")
    assert expr(attr(grant, "for_each")) == "local.secret_grants"
    assert attr(grant, "role") == "roles/secretmanager.secretAccessor"
    assert attr(grant, "secret_id") == "${each.value.secret}"
    assert "google_service_account.function[each.value.function].email" in attr(grant, "member")
    assert "for env, secret in s" in expr(FN.locals["secret_grants"])
    assert not FN.of_type("google_project_iam_member").get("secret_accessor")
    assert "secretmanager" not in str(FN.of_type("google_project_iam_member"))

    # The secret ids the functions get are the ones the secrets module creates.
    sec = MODULES_CFG["secrets"]
    out = sec.outputs
    assert "google_secret_manager_secret.redis_auth[0].secret_id" in attr(
        out["redis_password_secret_id"], "value"
    )
    assert "google_secret_manager_secret.db_password.secret_id" in attr(
        out["db_password_secret_id"], "value"
    )
    fmod = STACK.modules["functions"]
    assert attr(fmod, "redis_password_secret_id") == "${module.secrets.redis_password_secret_id}"
    assert attr(fmod, "db_password_secret_id") == "${module.secrets.db_password_secret_id}"


def test_only_the_signers_read_the_signing_key_and_the_jwks_only_its_metadata():
    signing = {n: f["signing_key"] for n, f in FN_MAP.items()}
    # webhooks and webhooks-retry sign the deliveries' v1a with the same key (api.md).
    assert {n for n, k in signing.items() if k == "sign"} == {
        "acquire", "heartbeat", "release", "webhooks", "webhooks-retry"}  # fmt: skip
    assert {n for n, k in signing.items() if k == "publish"} == {"keys"}
    assert set(signing.values()) == {"sign", "publish", "none"}
    accessor = FN.resource("google_secret_manager_secret_iam_member", "signing_key_accessor")
    assert expr(attr(accessor, "for_each")) == "local.signing_functions"
    assert attr(accessor, "role") == "roles/secretmanager.secretAccessor"
    assert 'f.signing_key == "sign"' in expr(FN.locals["signing_functions"])
    viewer = FN.resource("google_secret_manager_secret_iam_member", "signing_key_viewer")
    assert expr(attr(viewer, "for_each")) == "local.key_metadata_functions"
    assert attr(viewer, "role") == "roles/secretmanager.viewer"  # metadata, no payload
    for grant in (accessor, viewer):
        assert attr(grant, "secret_id") == "${var.signing_key_secret_id}"
    # Terraform creates the secret but never a version: no private key in state or plan.
    sec = MODULES_CFG["secrets"]
    assert "signing_key" in sec.of_type("google_secret_manager_secret")
    versions = sec.of_type("google_secret_manager_secret_version")
    assert not [name for name in versions if "signing" in name]
    secret = sec.resource("google_secret_manager_secret", "signing_key")
    assert "annotations" in str(block(secret, "lifecycle"))  # written by keys rotate
    assert attr(STACK.modules["functions"], "signing_key_secret_id") == (
        "${module.secrets.signing_key_secret_id}"
    )
    env = expr(FN.locals["signing_env"])
    assert "SIGNING_KEY_SECRET" in env and "${local.issuer}" in env


def test_secret_values_are_write_only():
    sec = MODULES_CFG["secrets"]
    for name, version in sec.of_type("google_secret_manager_secret_version").items():
        assert "secret_data" not in version, f"{name} stores its value in state"
        assert "secret_data_wo" in version and "secret_data_wo_version" in version
    user = MODULES_CFG["database"].resource("google_sql_user", "app")
    assert "password" not in user and "password_wo" in user and "password_wo_version" in user
    assert attr(MODULES_CFG["database"].variables["db_password"], "ephemeral") is True
    assert attr(sec.outputs["db_password"], "ephemeral") is True
    assert ("random_password", "db") in sec.ephemeral


def test_reaper_and_other_private_functions_are_not_public():
    public_members = [
        (cfg.path.name, rtype, name)
        for cfg in all_configs()
        for (rtype, name), body in cfg.resources.items()
        for key in ("member", "members")
        if re.search(r"allUsers|allAuthenticatedUsers", str(body.get(key, "")))
    ]
    assert public_members == [
        ("functions", "google_cloud_run_v2_service_iam_member", "public"),
        ("functions", "google_cloud_run_v2_service_iam_member", "public_secondary"),
    ]
    public = FN.resource("google_cloud_run_v2_service_iam_member", "public")
    assert expr(attr(public, "for_each")) == "local.public_functions"
    assert "f.public" in expr(FN.locals["public_functions"])
    # The second region's (two regions only): the same public functions.
    public = FN.resource("google_cloud_run_v2_service_iam_member", "public_secondary")
    assert expr(attr(public, "for_each")) == "local.secondary_public_functions"
    assert "fn in local.public_functions" in expr(FN.locals["secondary_public_functions"])
    # reaper: invoker is the scheduler's service account, and nobody else.
    sched = MODULES_CFG["scheduler"]
    invokers = [
        (cfg.path.name, name, body)
        for cfg in all_configs()
        for name, body in cfg.of_type("google_cloud_run_v2_service_iam_member").items()
    ]
    reaper_grants = [i for i in invokers if "reaper" in str(i[2]["name"])]
    assert [(m, n) for m, n, _ in reaper_grants] == [
        ("functions", "reaper_invoker"),
        ("functions", "reaper_invoker_secondary"),
    ]
    for name in ("reaper_invoker", "reaper_invoker_secondary"):
        grant = FN.resource("google_cloud_run_v2_service_iam_member", name)
        assert attr(grant, "member") == "serviceAccount:${google_service_account.scheduler.email}"
    assert not sched.of_type("google_cloud_run_v2_service_iam_member")
    assert attr(STACK.modules["scheduler"], "service_account_email") == (
        "${module.functions.scheduler_service_account_email}"
    )
    admin = FN.resource("google_cloud_run_v2_service_iam_member", "admin")
    assert 'google_cloudfunctions2_function.this["admin"]' in attr(admin, "name")
    assert expr(attr(admin, "for_each")) == "local.admin_invoker_grants"
    assert 'contains(var.admin_invokers, "allUsers")' in str(FN.variables["admin_invokers"])


def test_scheduler_calls_the_reaper_every_minute_with_oidc():
    job = MODULES_CFG["scheduler"].resource("google_cloud_scheduler_job", "reaper")
    assert attr(MODULES_CFG["scheduler"].variables["schedule"], "default") == "* * * * *"
    assert attr(job, "schedule") == "${var.schedule}"
    target = block(job, "http_target")
    assert attr(target, "http_method") == "POST"
    assert attr(target, "uri") == "${var.reaper_uri}"
    oidc = block(target, "oidc_token")
    assert attr(oidc, "service_account_email") == "${var.service_account_email}"
    assert attr(oidc, "audience") == "${var.reaper_uri}"
    assert blocks(job, "retry_config")
    call = STACK.modules["scheduler"]
    # The serving region's reaper (the first region's unless two regions failed over:
    # test_two_regions.py).
    assert attr(call, "reaper_uri") == (
        '${local.serves_secondary ? module.functions.secondary_service_uris["reaper"] : '
        'module.functions.service_uris["reaper"]}'
    )


# --------------------------------------------------------------------------------
# Redis, Cloud SQL, Pub/Sub
# --------------------------------------------------------------------------------


def test_redis_has_auth_tls_noeviction_and_a_maintenance_window():
    redis = MODULES_CFG["redis"]
    assert redis.locals["redis_configs"] == {"maxmemory-policy": "noeviction"}
    inst = redis.resource("google_redis_instance", "this")
    assert attr(inst, "auth_enabled") is True
    assert attr(inst, "transit_encryption_mode") == "SERVER_AUTHENTICATION"
    assert attr(inst, "redis_configs") == "${local.redis_configs}"
    assert attr(inst, "connect_mode") == "PRIVATE_SERVICE_ACCESS"
    assert attr(inst, "redis_version") == "${var.redis_version}"
    assert attr(redis.variables["redis_version"], "default").startswith("REDIS_7_")
    assert block(inst, "maintenance_policy", "weekly_maintenance_window")
    assert "${var.private_services_connection}" in attr(inst, "depends_on")
    cluster = redis.resource("google_redis_cluster", "this")
    assert attr(cluster, "transit_encryption_mode") == (
        "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION"
    )
    assert attr(cluster, "redis_configs") == "${local.redis_configs}"
    assert block(cluster, "maintenance_policy", "weekly_maintenance_window")
    policy = redis.resource("google_network_connectivity_service_connection_policy", "redis")
    assert attr(policy, "service_class") == "gcp-memorystore-redis"
    assert "google_network_connectivity_service_connection_policy.redis" in str(
        attr(cluster, "depends_on")
    )
    # Every CA of the instance (two during a CA rotation), not only the first.
    assert (
        'join("\\n", google_redis_instance.this[0].server_ca_certs[*].cert)'
        in redis.locals["ca_cert"]
    )
    assert "server_ca_certs[0]" not in redis.files["main.tf"]
    # IAM authentication where the stack asks for it (envs/prod), else none (issue 53).
    assert attr(cluster, "authorization_mode") == (
        '${var.iam_auth ? "AUTH_MODE_IAM_AUTH" : "AUTH_MODE_DISABLED"}'
    )
    assert attr(STACK.modules["redis"], "iam_auth") == (
        "${var.use_redis_cluster && var.redis_iam_auth}"
    )
    assert attr(load(TF / "envs" / "prod").variables["redis_iam_auth"], "default") is True
    comment = redis.files["main.tf"].split('resource "google_redis_cluster"')[0]
    assert "roles/redis.dbConnectionUser" in comment and "Private Service Connect" in comment
    assert attr(redis.outputs["auth_string"], "sensitive") is True
    assert re.search(
        r'var\.redis_cluster \? \{\s*REDIS_CLUSTER = "1"\s*\}', expr(FN.locals["redis_env"])
    )
    assert attr(STACK.modules["functions"], "redis_cluster") == "${module.redis.is_cluster}"


def test_cloud_sql_is_private_only_with_iam_auth_and_explicit_network_dependency():
    db = MODULES_CFG["database"]
    inst = db.resource("google_sql_database_instance", "this")
    assert attr(db.variables["database_version"], "default") == "POSTGRES_15"
    settings = block(inst, "settings")
    ipc = block(settings, "ip_configuration")
    assert attr(ipc, "ipv4_enabled") is False
    assert attr(ipc, "private_network") == "${var.network_id}"
    assert not blocks(ipc, "authorized_networks")
    flags = {attr(f, "name"): attr(f, "value") for f in blocks(settings, "database_flags")}
    assert flags["cloudsql.iam_authentication"] == "on"
    backup = block(settings, "backup_configuration")
    assert attr(backup, "enabled") == "${var.backups_enabled}"
    assert "var.point_in_time_recovery_enabled" in attr(backup, "point_in_time_recovery_enabled")
    assert attr(inst, "deletion_protection") == "${var.deletion_protection}"
    assert "default" not in db.variables["deletion_protection"], "must be set explicitly"
    assert "${var.private_services_connection}" in attr(inst, "depends_on")
    assert db.resource("google_sql_database", "app")
    assert attr(STACK.modules["database"], "private_services_connection") == (
        "${module.network.private_services_connection}"
    )
    net = MODULES_CFG["network"]
    assert expr(attr(net.outputs["private_services_connection"], "value")) == (
        "terraform_data.private_services_peering.output.connection"
    )


def test_destroy_gets_past_the_private_services_connection():
    """Provider issues #16275/#19908: deleting the connection fails while Cloud SQL's
    producer resources linger. The connection is abandoned, its peering removed on
    destroy after Cloud SQL and Redis, so that the range and the network can go."""
    net = MODULES_CFG["network"]
    conn = net.resource("google_service_networking_connection", "private_services")
    assert attr(conn, "deletion_policy") == "ABANDON"
    assert attr(conn, "update_on_creation_fail") is True
    peering = net.resource("terraform_data", "private_services_peering")
    inputs = attr(peering, "input")
    assert inputs["peering"] == "${google_service_networking_connection.private_services.peering}"
    assert inputs["network"] == "${google_compute_network.this.name}"
    assert inputs["connection"] == "${google_service_networking_connection.private_services.id}"
    (prov,) = peering["provisioner"]
    local_exec = prov["local-exec"]
    assert attr(local_exec, "when") == "${destroy}" or attr(local_exec, "when") == "destroy"
    command = attr(local_exec, "command")
    assert "gcloud compute networks peerings delete" in command
    assert "self.input.peering" in str(attr(local_exec, "environment"))
    # Both users of private services access take the connection from that resource (so
    # they are destroyed before it) and depend on it explicitly.
    for module, rtype in (("database", "google_sql_database_instance"),
                          ("redis", "google_redis_instance")):  # fmt: skip
        body = MODULES_CFG[module].resource(rtype, "this")
        assert "${var.private_services_connection}" in attr(body, "depends_on")
        call = STACK.modules[module]
        assert attr(call, "private_services_connection") == (
            "${module.network.private_services_connection}"
        )


def test_every_module_waits_for_the_apis():
    """On a fresh project nothing may run before its API is enabled and usable."""
    for name, call in STACK.modules.items():
        assert attr(call, "depends_on") == [
            "${google_project_service.apis}",
            "${time_sleep.apis_propagated}",
        ], name
    wait = STACK.resource("time_sleep", "apis_propagated")
    assert expr(attr(wait, "count")) == "var.enable_apis ? 1 : 0"
    assert attr(wait, "create_duration") == "${var.api_propagation_wait}"
    assert "google_project_service.apis" in expr(attr(wait, "triggers"))
    # Every API a module's resource type belongs to is in the list (by resource prefix).
    apis = set(STACK.locals["apis"])
    needed = {
        "google_cloudfunctions2_": "cloudfunctions.googleapis.com",
        "google_cloud_run_v2_": "run.googleapis.com",
        "google_cloud_scheduler_": "cloudscheduler.googleapis.com",
        "google_pubsub_": "pubsub.googleapis.com",
        "google_redis_": "redis.googleapis.com",
        "google_sql_": "sqladmin.googleapis.com",
        "google_secret_manager_": "secretmanager.googleapis.com",
        "google_compute_": "compute.googleapis.com",
        "google_service_networking_": "servicenetworking.googleapis.com",
        "google_network_connectivity_": "networkconnectivity.googleapis.com",
        "google_logging_": "logging.googleapis.com",
        "google_monitoring_": "monitoring.googleapis.com",
        "google_service_account": "iam.googleapis.com",
    }
    used = {rtype for cfg in MODULES_CFG.values() for rtype, _ in cfg.resources}
    for prefix, api in needed.items():
        if any(r.startswith(prefix) for r in used):
            assert api in apis, (prefix, api)


def test_alert_policies_wait_until_monitoring_knows_the_log_metrics():
    """Provider issue #11102: a policy on a log-based metric created in the same apply
    gets 404 for up to 10 minutes. Every policy and chart reads the metric names through
    the wait, and the wait lists every log-based metric."""
    wait = MON.resource("time_sleep", "log_metrics_visible")
    assert attr(wait, "create_duration") == "${var.log_metric_visibility_wait}"
    assert attr(MON.variables["log_metric_visibility_wait"], "default") == "10m"
    triggers = expr(attr(wait, "triggers"))
    for name in MON.of_type("google_logging_metric"):
        assert re.search(rf"google_logging_metric\.{name}\b", triggers), name
    user_metric = expr(MON.locals["user_metric"])
    assert "time_sleep.log_metrics_visible.triggers" in user_metric
    # Nothing outside the wait names a log-based metric resource.
    text = MON.files["main.tf"]
    wait_block = re.search(r'^resource "time_sleep".*?^\}\n', text, flags=re.M | re.S).group(0)
    rest = text.replace(wait_block, "")
    assert not re.search(r"google_logging_metric\.\w+\.name", rest)


def test_build_service_account_holds_what_the_docs_list_and_no_more():
    grants = FN.resource("google_project_iam_member", "build")
    assert attr(
        grants, "for_each"
    ) == '${toset(["roles/logging.logWriter", "roles/artifactregistry.writer"])}' or set(
        re.findall(r"roles/[\w.]+", str(attr(grants, "for_each")))
    ) == {"roles/logging.logWriter", "roles/artifactregistry.writer"}
    sources = FN.resource("google_project_iam_member", "build_sources")
    assert attr(sources, "role") == "roles/storage.objectAdmin"
    cond = attr(block(sources, "condition"), "expression")
    assert "projects/_/buckets/${local.gcf_sources_bucket}" in cond
    assert FN.locals["gcf_sources_bucket"] == (
        "gcf-v2-sources-${data.google_project.this.number}-${var.region}"
    )
    assert "projects/_/buckets/${google_storage_bucket.sources.name}" in cond
    # Every grant to the build account is one of these resources (the third: the second
    # region's gen2 source bucket, two regions only).
    build_member = "serviceAccount:${google_service_account.build.email}"
    holders = [
        (rtype, name)
        for (rtype, name), body in FN.resources.items()
        if body.get("member") == build_member
    ]
    assert sorted(holders) == [
        ("google_project_iam_member", "build"),
        ("google_project_iam_member", "build_sources"),
        ("google_project_iam_member", "build_sources_secondary"),
    ]
    secondary = FN.resource("google_project_iam_member", "build_sources_secondary")
    assert attr(secondary, "role") == "roles/storage.objectAdmin"
    assert expr(attr(secondary, "count")) == "var.secondary_region == null ? 0 : 1"
    assert attr(block(secondary, "condition"), "expression") == (
        'resource.name.startsWith(\\"projects/_/buckets/gcf-v2-sources-'
        '${data.google_project.this.number}-${var.secondary_region}\\")'
    )
    fn = FN.resource("google_cloudfunctions2_function", "this")
    assert "${google_project_iam_member.build_sources}" in attr(fn, "depends_on")
    assert "docs" in FN.files["main.tf"][: FN.files["main.tf"].index('"build_sources"')]


def test_source_bucket_is_only_force_destroyed_without_deletion_protection():
    bucket = FN.resource("google_storage_bucket", "sources")
    assert attr(bucket, "force_destroy") == "${var.source_bucket_force_destroy}"
    assert attr(FN.variables["source_bucket_force_destroy"], "default") is False
    assert attr(STACK.modules["functions"], "source_bucket_force_destroy") == (
        "${!var.deletion_protection}"
    )


def test_seat_events_topic_dead_letters_into_a_held_subscription():
    ps = MODULES_CFG["pubsub"]
    assert attr(ps.variables["topic_name"], "default") == "seat-events"
    topics = ps.of_type("google_pubsub_topic")
    assert {"events", "dead_letter"} <= set(topics)
    for topic in topics.values():
        assert attr(topic, "message_retention_duration")
    audit = ps.resource("google_pubsub_subscription", "audit")
    assert attr(audit, "topic") == "${google_pubsub_topic.events.id}"
    dlp = block(audit, "dead_letter_policy")
    assert attr(dlp, "dead_letter_topic") == "${google_pubsub_topic.dead_letter.id}"
    assert attr(dlp, "max_delivery_attempts") == "${var.max_delivery_attempts}"
    assert blocks(audit, "retry_policy")
    push = block(audit, "push_config")
    assert attr(block(push, "oidc_token"), "audience") == "${var.audit_push_endpoint}"
    held = [
        s
        for s in ps.of_type("google_pubsub_subscription").values()
        if attr(s, "topic") == "${google_pubsub_topic.dead_letter.id}"
    ]
    assert len(held) == 1, "dead-lettered messages are lost without a subscription"
    agent = ps.locals["pubsub_service_agent"]
    assert (
        agent == "service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    )
    pub = ps.resource("google_pubsub_topic_iam_member", "dead_letter_publisher")
    assert attr(pub, "topic") == "${google_pubsub_topic.dead_letter.name}"
    assert attr(pub, "role") == "roles/pubsub.publisher"
    assert attr(pub, "member") == "serviceAccount:${local.pubsub_service_agent}"
    sub = ps.resource("google_pubsub_subscription_iam_member", "audit_dead_letter_subscriber")
    assert attr(sub, "subscription") == "${google_pubsub_subscription.audit.name}"
    assert attr(sub, "role") == "roles/pubsub.subscriber"
    assert attr(sub, "member") == "serviceAccount:${local.pubsub_service_agent}"
    invoker = FN.resource("google_cloud_run_v2_service_iam_member", "audit_push")
    assert attr(invoker, "member") == "serviceAccount:${google_service_account.audit_push.email}"
    assert attr(STACK.modules["pubsub"], "audit_push_endpoint") == (
        '${local.serves_secondary ? module.functions.secondary_service_uris["audit"] : '
        'module.functions.service_uris["audit"]}'
    )


# --------------------------------------------------------------------------------
# monitoring
# --------------------------------------------------------------------------------

MON = MODULES_CFG["monitoring"]
CLIENT_LOG_FIELDS = {
    "severity",
    "message",
    "function",
    "outcome",
    "status",
    "license_id",
    "tenant_id",
    "seats_used",
    "seats_total",
    "latency_ms",
}
REAPER_LOG_FIELDS = {
    "reclaimed",
    "published",
    "outbox_backlog",
    "shards_swept",
    "duration_ms",
    "denials",
}
# The audit function's "license notice" line (functions/audit/main.py): the event's type,
# tenant and license, and the notice's metadata.
AUDIT_NOTICE_FIELDS = {"type", "tenant_id", "license_id", "expires_at", "threshold_days"}


THRESHOLD_ALERTS = MON.locals["threshold_alerts"]
ALERT_PURPOSES = {
    "reaper",
    "crash_wave",
    "client_5xx",
    "denials",
    "outbox_backlog",
    "dead_letters",
    "redis_memory",
    "license_expiring",
    # issue 51: Google's own metrics of the webhooks' subscription and functions
    "webhooks_backlog",
    "webhooks_failing",
    "webhooks_dead_letters",
}


def _conditions(policy_name):
    policy = MON.resource("google_monitoring_alert_policy", policy_name)
    assert expr(attr(policy, "notification_channels")) == "local.notification.channels"
    assert blocks(policy, "documentation")
    return blocks(policy, "conditions")


def _user_metric(short_name: str) -> str:
    """The logging metric resource behind local.user_metric.<short_name> (whose names
    come from the triggers of the wait for Monitoring to know the metrics)."""
    assert "time_sleep.log_metrics_visible.triggers" in expr(MON.locals["user_metric"])
    names = expr(attr(MON.resource("time_sleep", "log_metrics_visible"), "triggers"))
    if short_name in MON.locals["reaper_values"]:
        assert "for k, m in google_logging_metric.reaper_value : k => m.name" in names
        return f'google_logging_metric.reaper_value["{short_name}"]'
    match = re.search(rf"\b{short_name}\s*=\s*(google_logging_metric\.\w+)\.name", names)
    assert match, f"local.user_metric has no {short_name}"
    return match.group(1)


def test_log_metrics_only_use_fields_the_code_logs():
    text = MON.files["main.tf"]
    used = set(re.findall(r"jsonPayload\.(\w+)", text))
    known = CLIENT_LOG_FIELDS | REAPER_LOG_FIELDS | AUDIT_NOTICE_FIELDS
    assert used <= known, used - known
    values = {v["field"] for v in MON.locals["reaper_values"].values()}
    assert {"reclaimed", "outbox_backlog"} <= values <= REAPER_LOG_FIELDS
    assert 'jsonPayload.message=\\"reaper run\\"' in expr(MON.locals["reaper_run"])
    lat = MON.resource("google_logging_metric", "client_latency")
    assert attr(lat, "value_extractor") == "EXTRACT(jsonPayload.latency_ms)"
    assert attr(block(lat, "metric_descriptor"), "value_type") == "DISTRIBUTION"
    seats = MON.resource("google_logging_metric", "seats_used")
    assert attr(seats, "value_extractor") == "EXTRACT(jsonPayload.seats_used)"
    denials = MON.resource("google_logging_metric", "denials")
    # The outcome a denied acquire logs is its error code (shared/seatlease/api/http.py):
    # take it from the code, so the metric cannot drift from what the functions write.
    from seatlease.api.http import to_api_error
    from seatlease.errors import NoSeatsAvailable

    denied = to_api_error(NoSeatsAvailable(2, 2, 5)).code
    assert denied == "no_seats_available"
    assert f'jsonPayload.outcome=\\"{denied}\\"' in attr(denials, "filter")
    reaper_vals = MON.resource("google_logging_metric", "reaper_value")
    assert attr(reaper_vals, "value_extractor") == "EXTRACT(jsonPayload.${each.value.field})"


def test_required_alerts_exist():
    assert (
        set(THRESHOLD_ALERTS)
        | set(n for (rt, n) in MON.resources if rt == "google_monitoring_alert_policy")
        - {"threshold"}
        == ALERT_PURPOSES
    )
    ids = expr(attr(MON.outputs["alert_policy_ids"], "value"))
    assert "google_monitoring_alert_policy.threshold" in ids
    assert "google_monitoring_alert_policy.reaper.id" in ids
    assert "google_monitoring_alert_policy.client_5xx.id" in ids
    assert 'metric.type=\\"${local.metric_prefix}/${m}\\"' in expr(MON.locals["user_metric"])

    reaper = _conditions("reaper")
    errors = [block(c, "condition_threshold") for c in reaper if blocks(c, "condition_threshold")]
    assert [attr(e, "filter") for e in errors] == ["${local.user_metric.reaper_errors}"]
    assert _user_metric("reaper_errors") == "google_logging_metric.reaper_errors"
    absent = [block(c, "condition_absent") for c in reaper if blocks(c, "condition_absent")]
    assert [attr(a, "filter") for a in absent] == ["${local.user_metric.reaper_runs}"]
    assert _user_metric("reaper_runs") == "google_logging_metric.reaper_runs"
    assert attr(MON.variables["reaper_stalled_after"], "default") == "300s"
    assert attr(absent[0], "duration") == "${var.reaper_stalled_after}"

    crash = THRESHOLD_ALERTS["crash_wave"]
    assert crash["filter"] == "${local.user_metric.reaper_reclaimed}"
    reclaimed = _user_metric("reaper_reclaimed")
    assert reclaimed == 'google_logging_metric.reaper_value["reaper_reclaimed"]'
    assert crash["threshold"] == "${var.reclaimed_per_minute_threshold}"

    # client 5xx: a rate (denominator), in the function logs and in Cloud Run's counts.
    (five,) = _conditions("client_5xx")
    five_t = block(five, "condition_threshold")
    dyn = MON.resource("google_monitoring_alert_policy", "client_5xx")["dynamic"][0]["conditions"]
    assert expr(attr(dyn, "for_each")) == "local.client_5xx_conditions"
    assert attr(five_t, "filter") == "${conditions.value.filter}"
    assert attr(five_t, "denominator_filter") == "${conditions.value.denominator}"
    assert blocks(five_t, "denominator_aggregations")
    logged, run = MON.locals["client_5xx_conditions"]
    assert logged["filter"] == "${local.user_metric.client_5xx}"
    assert logged["denominator"] == "${local.user_metric.client_requests}"
    assert _user_metric("client_5xx") == "google_logging_metric.client_5xx"
    assert _user_metric("client_requests") == "google_logging_metric.client_requests"
    assert 'response_code_class=\\"5xx\\"' in run["filter"]
    assert run["denominator"] == "${local.client_run_requests}"
    assert "run.googleapis.com/request_count" in MON.locals["client_run_requests"]

    denials = THRESHOLD_ALERTS["denials"]
    assert denials["filter"] == "${local.user_metric.denials}"
    assert _user_metric("denials") == "google_logging_metric.denials"

    backlog = THRESHOLD_ALERTS["outbox_backlog"]
    assert backlog["filter"] == "${local.user_metric.reaper_outbox_backlog}"
    assert "reaper_outbox_backlog" in MON.locals["reaper_values"]

    dlq = THRESHOLD_ALERTS["dead_letters"]
    assert "pubsub.googleapis.com/subscription/num_undelivered_messages" in dlq["filter"]
    assert "var.dead_letter_subscription_name" in dlq["filter"]
    assert dlq["threshold"] == 0
    assert attr(STACK.modules["monitoring"], "dead_letter_subscription_name") == (
        "${module.pubsub.dead_letter_subscription_name}"
    )

    mem = THRESHOLD_ALERTS["redis_memory"]
    assert mem["filter"] == "${local.redis_memory_filter}"
    assert "redis.googleapis.com/stats/memory/usage_ratio" in MON.locals["redis_memory_filter"]
    # Well before noeviction refuses writes: 30% of memory left, held one minute only.
    assert attr(MON.variables["redis_memory_ratio_threshold"], "default") == 0.7
    assert mem["duration"] == "60s"

    assert MON.resource("google_monitoring_dashboard", "seatlease")
    titles = " ".join(c["title"] for c in MON.locals["dashboard_charts"]).lower()
    for word in ("seats used", "acquires", "denials", "reclaimed", "latency"):
        assert word in titles
    assert "notification_channels" in MON.variables


def test_threshold_alerts_share_one_resource_and_keep_their_state():
    fields = {
        "title",
        "condition",
        "filter",
        "threshold",
        "duration",
        "period",
        "aligner",
        "reducer",
        "auto_close",
        "documentation",
    }
    for name, alert in THRESHOLD_ALERTS.items():
        assert set(alert) == fields, f"{name}: {set(alert) ^ fields}"
    policy = MON.resource("google_monitoring_alert_policy", "threshold")
    assert expr(attr(policy, "for_each")) == "local.threshold_alerts"
    assert attr(policy, "display_name") == "${var.name}: ${each.value.title}"
    assert expr(attr(policy, "notification_channels")) == "local.notification.channels"
    (cond,) = blocks(policy, "conditions")
    assert attr(cond, "display_name") == "${each.value.condition}"
    threshold = block(cond, "condition_threshold")
    for arg, field in (
        ("filter", "filter"),
        ("threshold_value", "threshold"),
        ("duration", "duration"),
    ):
        assert attr(threshold, arg) == f"${{each.value.{field}}}"
    agg = block(threshold, "aggregations")
    assert attr(agg, "alignment_period") == "${each.value.period}"
    assert attr(agg, "per_series_aligner") == "${each.value.aligner}"
    assert attr(agg, "cross_series_reducer") == "${each.value.reducer}"
    assert attr(block(policy, "documentation"), "content") == "${each.value.documentation}"
    assert attr(block(policy, "alert_strategy"), "auto_close") == "${each.value.auto_close}"


def test_network_subnets_have_flow_logs():
    net = MODULES_CFG["network"]
    assert net.locals["subnet_cidrs"] == {
        "functions": "${local.functions_subnet_cidr}",  # sized in sizing.tf
        "psc": "${var.psc_subnet_cidr}",
    }
    subnet = net.resource("google_compute_subnetwork", "this")
    assert expr(attr(subnet, "for_each")) == "local.subnet_cidrs"
    assert attr(subnet, "name") == "${var.name}-${each.key}"
    assert attr(subnet, "private_ip_google_access") is True
    assert attr(block(subnet, "log_config"), "flow_sampling") == "${var.flow_log_sampling}"
    # The functions take the subnet through the wait that a destroy spends between
    # deleting them and deleting the subnet (Direct VPC egress releases its addresses
    # 1 to 2 hours after the functions are gone).
    wait = net.resource("time_sleep", "functions_subnet_release")
    assert attr(wait, "triggers") == {
        "subnet_id": '${google_compute_subnetwork.this["functions"].id}'
    }
    assert attr(wait, "destroy_duration") == "${var.functions_subnet_release_wait}"
    assert "create_duration" not in wait
    assert attr(net.variables["functions_subnet_release_wait"], "default") == "120m"
    assert expr(attr(net.outputs["functions_subnet_id"], "value")) == (
        'time_sleep.functions_subnet_release.triggers["subnet_id"]'
    )
    assert 'google_compute_subnetwork.this["psc"]' in attr(net.outputs["psc_subnet_id"], "value")


def test_the_license_expiring_alert_is_log_based_on_the_audit_functions_notices():
    """Issue 30: a log-based alert (condition_matched_log, no metric) on the audit
    function's "license notice" lines of type license.expiring, naming the license in
    its labels and its text, at most one notification per 5 minutes, closing itself."""
    (condition,) = _conditions("license_expiring")
    matched = block(condition, "condition_matched_log")
    assert attr(matched, "filter") == "${local.license_expiring_log}"
    log_filter = MON.locals["license_expiring_log"]
    assert 'resource.labels.service_name=\\"${var.audit_service_name}\\"' in log_filter
    assert 'jsonPayload.message=\\"license notice\\"' in log_filter
    assert 'jsonPayload.type=\\"license.expiring\\"' in log_filter
    assert attr(MON.variables["audit_service_name"], "default") == "audit"
    labels = attr(matched, "label_extractors")
    assert set(labels) == {"tenant_id", "license_id", "expires_at", "threshold_days"}
    assert all(v == f"EXTRACT(jsonPayload.{k})" for k, v in labels.items())
    policy = MON.resource("google_monitoring_alert_policy", "license_expiring")
    (strategy,) = blocks(policy, "alert_strategy")
    assert attr(block(strategy, "notification_rate_limit"), "period") == "300s"
    assert attr(strategy, "auto_close") == "604800s"
    content = attr(block(policy, "documentation"), "content")
    assert "${log.extracted_label.license_id}" in content and "--renew-for" in content
    ids = expr(attr(MON.outputs["alert_policy_ids"], "value"))
    assert "google_monitoring_alert_policy.license_expiring.id" in ids


def test_webhook_alerts_watch_the_webhooks_subscription_functions_and_dead_letters():
    backlog = THRESHOLD_ALERTS["webhooks_backlog"]
    assert "subscription/oldest_unacked_message_age" in backlog["filter"]
    assert "${var.webhooks_subscription_name}" in backlog["filter"]
    assert backlog["threshold"] == "${var.webhooks_backlog_seconds}"
    failing = THRESHOLD_ALERTS["webhooks_failing"]
    assert 'one_of(\\"webhooks\\", \\"webhooks-retry\\")' in failing["filter"]
    assert 'response_code_class=\\"5xx\\"' in failing["filter"]
    dead = THRESHOLD_ALERTS["webhooks_dead_letters"]
    assert "${var.webhooks_dead_letter_subscription_name}" in dead["filter"]
    assert dead["threshold"] == 0
    stack_call = STACK.modules["monitoring"]
    for name in ("webhooks_subscription_name", "webhooks_dead_letter_subscription_name"):
        assert attr(stack_call, name) == f"${{module.pubsub.{name}}}"


def test_the_webhooks_subscription_pushes_to_the_webhooks_function_with_its_own_dead_letters():
    ps = MODULES_CFG["pubsub"]
    sub = ps.resource("google_pubsub_subscription", "webhooks")
    assert attr(sub, "topic") == "${google_pubsub_topic.events.id}"
    assert attr(sub, "retain_acked_messages") is True  # seek replays (operations.md)
    push = block(sub, "push_config")
    assert attr(push, "push_endpoint").startswith("${var.webhooks_push_endpoint}/projects/")
    oidc = block(push, "oidc_token")
    assert attr(oidc, "service_account_email") == "${var.webhooks_push_service_account_email}"
    dead = block(sub, "dead_letter_policy")
    # Not the audit's: the audit's replay would acknowledge (and drop) webhook dead letters.
    assert attr(dead, "dead_letter_topic") == "${google_pubsub_topic.webhooks_dead_letter.id}"
    grant = ps.resource("google_pubsub_subscription_iam_member", "webhooks_dead_letter_subscriber")
    assert attr(grant, "subscription") == "${google_pubsub_subscription.webhooks.name}"
    publisher = ps.resource("google_pubsub_topic_iam_member", "webhooks_dead_letter_publisher")
    assert attr(publisher, "topic") == "${google_pubsub_topic.webhooks_dead_letter.name}"
    hold = ps.resource("google_pubsub_subscription", "webhooks_dead_letter")
    assert attr(hold, "topic") == "${google_pubsub_topic.webhooks_dead_letter.id}"
    # Invoked only by its own push identity, in each region.
    for name, fn in (("webhooks_push", "this"), ("webhooks_push_secondary", "secondary")):
        invoker = FN.resource("google_cloud_run_v2_service_iam_member", name)
        assert (
            attr(invoker, "name") == f'${{google_cloudfunctions2_function.{fn}["webhooks"].name}}'
        )
        assert attr(invoker, "member") == (
            "serviceAccount:${google_service_account.webhooks_push.email}"
        )
    assert attr(STACK.modules["pubsub"], "webhooks_push_endpoint") == (
        '${local.serves_secondary ? module.functions.secondary_service_uris["webhooks"] : '
        'module.functions.service_uris["webhooks"]}'
    )


def test_webhooks_retry_runs_every_minute_from_the_serving_region_as_the_scheduler():
    job = MODULES_CFG["scheduler"].resource("google_cloud_scheduler_job", "webhooks_retry")
    assert attr(job, "schedule") == "${var.webhooks_retry_schedule}"
    assert attr(MODULES_CFG["scheduler"].variables["webhooks_retry_schedule"], "default") == (
        "* * * * *"
    )
    target = block(job, "http_target")
    assert attr(target, "uri") == "${var.webhooks_retry_uri}"
    assert attr(target, "http_method") == "POST"
    oidc = block(target, "oidc_token")
    assert attr(oidc, "service_account_email") == "${var.service_account_email}"
    assert attr(oidc, "audience") == "${var.webhooks_retry_uri}"
    assert attr(STACK.modules["scheduler"], "webhooks_retry_uri") == (
        '${local.serves_secondary ? module.functions.secondary_service_uris["webhooks-retry"] : '
        'module.functions.service_uris["webhooks-retry"]}'
    )
    for name, fn in (
        ("webhooks_retry_invoker", "this"),
        ("webhooks_retry_invoker_secondary", "secondary"),
    ):
        invoker = FN.resource("google_cloud_run_v2_service_iam_member", name)
        assert attr(invoker, "name") == (
            f'${{google_cloudfunctions2_function.{fn}["webhooks-retry"].name}}'
        )
        assert attr(invoker, "member") == "serviceAccount:${google_service_account.scheduler.email}"


def test_the_webhook_key_is_generated_write_only_and_read_by_its_four_functions():
    sec = MODULES_CFG["secrets"]
    version = sec.resource("google_secret_manager_secret_version", "webhook_key")
    # base64 of the 32 bytes of a SHA-256: what crypto.py takes (base64 of 32 bytes).
    assert expr(attr(version, "secret_data_wo")) == (
        "base64sha256(ephemeral.random_password.webhook_key.result)"
    )
    assert "secret_data" not in version  # never in the state
    assert attr(version, "secret_data_wo_version") == 1  # a new key strands every secret
    assert (
        FN.locals["webhook_key_functions"]
        == '${toset(["admin", "portal", "webhooks", "webhooks-retry"])}'
    )
    assert "WEBHOOK_KEY = var.webhook_key_secret_id" in expr(FN.locals["secrets"])
    assert attr(STACK.modules["functions"], "webhook_key_secret_id") == (
        "${module.secrets.webhook_key_secret_id}"
    )
    assert "webhook-key:" in attr(sec.outputs["secret_versions"], "value")


def test_the_webhook_senders_reach_the_internet_and_nothing_private_but_cloud_sql():
    fn = FN.resource("google_cloudfunctions2_function", "this")
    svc = block(fn, "service_config")
    # Public destinations never enter the VPC: they go straight out.
    assert attr(svc, "direct_vpc_egress") == "VPC_EGRESS_PRIVATE_RANGES_ONLY"
    assert attr(block(svc, "direct_vpc_network_interface"), "tags") == (
        "${local.network_tags[each.key]}"
    )
    assert "seatlease-webhook-senders" in expr(FN.locals["network_tags"])
    assert attr(FN.outputs["webhook_sender_tag"], "value") == "seatlease-webhook-senders"
    net = MODULES_CFG["network"]
    allow = net.resource("google_compute_firewall", "webhook_senders_to_sql")
    deny = net.resource("google_compute_firewall", "webhook_senders_deny_private")
    for rule in (allow, deny):
        assert attr(rule, "direction") == "EGRESS"
        assert attr(rule, "target_tags") == ["${var.webhook_sender_tag}"]
    assert attr(allow, "priority") < attr(deny, "priority")
    assert attr(block(allow, "allow"), "ports") == ["3307"]
    assert "google_compute_global_address.private_services" in attr(allow, "destination_ranges")[0]
    assert set(attr(deny, "destination_ranges")) == {
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}  # fmt: skip
    assert attr(block(deny, "deny"), "protocol") == "all"
    assert attr(STACK.modules["network"], "webhook_sender_tag") == (
        "${module.functions.webhook_sender_tag}"
    )
