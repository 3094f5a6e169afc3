"""Issue 53, item 3: what a real apply and a region's return would meet.

* The Cloud SQL primary ignores its disk_size (disk_autoresize grows the disk; a plan
  must not want it back, a shrink being a replacement deletion protection refuses).
* The functions' source bucket is a multi-region (evaluated by Terraform for regions of
  several continents), never one region: the second region's builds read it.
* Every google_redis_cluster persists (persistence_config, AOF when persistence is on)
  and the second region's cluster gets the first's persistence, node type and shards;
  envs/prod runs dedicated-core nodes.
* With two regions no public function is ALLOW_ALL (evaluated by Terraform from the
  function table): clients go through the load balancer, whose backends carry a Cloud
  Armor policy with a per-client-IP rate rule; the load balancer has a 5xx alert.
* The standby's size and warm instances are a documented choice with its cost.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_two_regions import _apply
from tfconfig import ENVS, MODULES, REPO, TF, attr, block, blocks, expr, load

REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
STACK = load(MODULES / "stack")


def _locals_block(text: str, *names: str) -> str:
    """The source lines of the named locals (one per line, as terraform fmt writes a
    one-line local; multi-line ones up to their closing brace)."""
    out = []
    for name in names:
        match = re.search(rf"^  {name}\s*=\s*(.*)$", text, flags=re.M)
        assert match, name
        start = match.start()
        value = match.group(1)
        if value.rstrip().endswith("{"):
            end = text.index("\n  }\n", start) + len("\n  }\n")
            out.append(text[start:end].rstrip("\n"))
        else:
            out.append(text[start : match.end()])
    return "locals {\n" + "\n".join(out) + "\n}\n"


def _variable_block(text: str, name: str) -> str:
    start = text.index(f'variable "{name}" {{')
    return text[start : text.index("\n}\n", start) + 3]


# --------------------------------------------------------------------------------------
# Cloud SQL
# --------------------------------------------------------------------------------------


def test_the_primary_ignores_its_disk_size():
    db = load(MODULES / "database")
    primary = db.resource("google_sql_database_instance", "this")
    settings = block(primary, "settings")
    assert attr(settings, "disk_size") == "${var.disk_size_gb}"
    assert attr(settings, "disk_autoresize") is True
    ignored = [expr(i) for i in attr(block(primary, "lifecycle"), "ignore_changes")]
    assert "settings[0].disk_size" in ignored


def test_no_apply_starts_the_fenced_old_primary_again():
    """When A returns its old primary is stopped by hand (the runbook's patch); the
    provider's default activation policy (ALWAYS) must not start it at the next apply."""
    db = load(MODULES / "database")
    primary = db.resource("google_sql_database_instance", "this")
    assert "activation_policy" not in block(primary, "settings")
    ignored = [expr(i) for i in attr(block(primary, "lifecycle"), "ignore_changes")]
    assert "settings[0].activation_policy" in ignored
    ops = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    returns = ops[ops.index("### When A returns") :]
    returns = returns[: returns.index("\n### ")]
    assert "gcloud sql instances patch $NAME --activation-policy=NEVER" in returns
    assert "gcloud scheduler jobs delete $NAME-reaper --location=$A" in returns
    # The replica sets no disk_size at all (it starts from its primary's).
    replica = db.resource("google_sql_database_instance", "replica")
    assert "disk_size" not in block(replica, "settings")


# --------------------------------------------------------------------------------------
# The source bucket
# --------------------------------------------------------------------------------------


def _bucket_location(tmp_path: Path, **variables) -> tuple[int, str, dict]:
    fn_dir = MODULES / "functions"
    root = tmp_path / "bucket"
    root.mkdir()
    variables_tf = (fn_dir / "variables.tf").read_text()
    (root / "main.tf").write_text(
        _variable_block(variables_tf, "region")
        + _variable_block(variables_tf, "source_bucket_location")
        + _locals_block((fn_dir / "main.tf").read_text(), "multi_regions", "source_bucket_location")
        + 'output "location" {\n  value = local.source_bucket_location\n}\n'
    )
    return _apply(root, variables)


@pytest.mark.parametrize(
    ("region", "given", "location"),
    [
        ("europe-west1", None, "EU"),
        ("europe-west4", None, "EU"),
        ("us-central1", None, "US"),
        ("northamerica-northeast1", None, "US"),
        ("asia-east1", None, "ASIA"),
        ("southamerica-east1", None, "US"),
        ("europe-west1", "eur4", "EUR4"),
    ],
)
def test_the_source_bucket_is_never_one_region(tmp_path, region, given, location):
    variables = {"region": region}
    if given:
        variables["source_bucket_location"] = given
    rc, out, values = _bucket_location(tmp_path, **variables)
    assert rc == 0, out
    assert values["location"] == location
    assert not REGION_RE.match(values["location"].lower())


def test_a_single_region_source_bucket_is_refused(tmp_path):
    rc, out, _ = _bucket_location(
        tmp_path, region="europe-west1", source_bucket_location="europe-west1"
    )
    assert rc != 0 and "not a single region" in " ".join(out.split()), out


def test_the_bucket_uses_that_location_and_names_it():
    fn = load(MODULES / "functions")
    bucket = fn.resource("google_storage_bucket", "sources")
    assert attr(bucket, "location") == "${local.source_bucket_location}"
    # A bucket cannot move: another location is another bucket (another name).
    assert "local.source_bucket_location" in attr(bucket, "name")


# --------------------------------------------------------------------------------------
# Redis Cluster
# --------------------------------------------------------------------------------------


def test_every_redis_cluster_persists():
    clusters = [
        (d.name, name, body)
        for d in sorted(MODULES.iterdir())
        if d.is_dir()
        for name, body in load(d).of_type("google_redis_cluster").items()
    ]
    assert clusters, "no google_redis_cluster found"
    for module, name, body in clusters:
        persistence = block(body, "persistence_config")
        assert attr(persistence, "mode") == '${var.persistence_enabled ? "AOF" : "DISABLED"}', (
            module,
            name,
        )
        (aof,) = blocks(persistence, "aof_config")
        assert attr(aof, "append_fsync") == "EVERYSEC"


def test_both_regions_clusters_get_the_same_shape_and_persistence():
    first, second = STACK.modules["redis"], STACK.modules["redis_secondary"]
    for name, value in (
        ("persistence_enabled", "${var.redis_persistence_enabled}"),
        ("cluster_node_type", "${var.redis_cluster_node_type}"),
        ("cluster_shard_count", "${var.redis_cluster_shard_count}"),
    ):
        assert attr(first, name) == value, name
        assert attr(second, name) == value, name


def test_prod_runs_dedicated_core_nodes():
    prod = load(ENVS / "prod")
    call = prod.modules["seatlease"]
    assert attr(call, "redis_cluster_node_type") == "${var.redis_cluster_node_type}"
    assert attr(call, "redis_persistence_enabled") is True
    node_type = attr(prod.variables["redis_cluster_node_type"], "default")
    assert node_type.startswith("REDIS_") and "SHARED_CORE" not in node_type
    validation = block(load(MODULES / "redis").variables["cluster_node_type"], "validation")
    assert node_type in expr(attr(validation, "condition"))
    # dev keeps the cheap default.
    assert "redis_cluster_node_type" not in load(ENVS / "dev").modules["seatlease"]


# --------------------------------------------------------------------------------------
# All client traffic through the load balancer (two regions)
# --------------------------------------------------------------------------------------


def _ingress(tmp_path: Path, secondary_region: str | None) -> dict:
    fn_dir = MODULES / "functions"
    root = tmp_path / f"ingress-{secondary_region}"
    root.mkdir()
    shutil.copy(fn_dir / "settings.tf", root / "settings.tf")
    variables_tf = (fn_dir / "variables.tf").read_text()
    (root / "main.tf").write_text(
        _variable_block(variables_tf, "function_settings")
        # (the module's own declaration validates it against other inputs)
        + 'variable "secondary_region" {\n  type    = string\n  default = null\n}\n'
        + _locals_block(
            (fn_dir / "main.tf").read_text(),
            "secondary_functions",
            "primary_ingress",
            "secondary_ingress",
        )
        + 'output "first" {\n  value = local.primary_ingress\n}\n'
        + 'output "second" {\n  value = local.secondary_ingress\n}\n'
        + 'output "public" {\n  value = [for fn, f in local.functions : fn if f.public]\n}\n'
    )
    variables = {} if secondary_region is None else {"secondary_region": secondary_region}
    rc, out, values = _apply(root, variables)
    assert rc == 0, out
    return values


def test_with_two_regions_no_public_function_is_allow_all(tmp_path):
    fn = load(MODULES / "functions")
    first = block(fn.resource("google_cloudfunctions2_function", "this"), "service_config")
    assert attr(first, "ingress_settings") == "${local.primary_ingress[each.key]}"
    two = _ingress(tmp_path, "europe-west4")
    assert set(two["public"]) == {"acquire", "heartbeat", "release", "keys", "portal"}
    for region in ("first", "second"):
        for name in two["public"]:
            assert two[region][name] == "ALLOW_INTERNAL_AND_GCLB", (region, name)
        assert two[region]["reaper"] == two[region]["audit"] == "ALLOW_INTERNAL_ONLY"
    # One region: the table's ingress, as before (the clients use the function URLs).
    one = _ingress(tmp_path, None)
    assert one["first"]["acquire"] == "ALLOW_ALL" and one["second"] == {}


def test_the_load_balancer_has_a_cloud_armor_rate_limit_per_ip():
    lb = load(MODULES / "loadbalancer")
    for name, backend in lb.of_type("google_compute_backend_service").items():
        assert attr(backend, "security_policy") == "${local.security_policy}", name
    assert expr(lb.locals["security_policy"]) == (
        "var.security_policy != null ? var.security_policy : "
        "google_compute_security_policy.this[0].id"
    )
    policy = lb.resource("google_compute_security_policy", "this")
    assert expr(attr(policy, "count")) == "var.security_policy == null ? 1 : 0"
    (throttle,) = [r for r in blocks(policy, "rule") if attr(r, "action") == "throttle"]
    options = block(throttle, "rate_limit_options")
    assert attr(options, "enforce_on_key") == "IP"
    assert attr(options, "exceed_action") == "deny(429)"
    threshold = block(options, "rate_limit_threshold")
    assert attr(threshold, "count") == "${var.rate_limit_per_ip}"
    assert attr(threshold, "interval_sec") == 60
    # The last rule allows the rest (a policy needs its default rule).
    priorities = [attr(r, "priority") for r in blocks(policy, "rule")]
    assert max(priorities) == 2147483647 and attr(throttle, "priority") < max(priorities)


def test_the_load_balancer_has_a_5xx_alert():
    lb = load(MODULES / "loadbalancer")
    alert = lb.resource("google_monitoring_alert_policy", "lb_5xx")
    condition = block(alert, "conditions", "condition_threshold")
    flt = attr(condition, "filter")
    for part in (
        'resource.type=\\"https_lb_rule\\"',
        'resource.labels.forwarding_rule_name=\\"${var.name}-https\\"',
        'metric.type=\\"loadbalancing.googleapis.com/https/request_count\\"',
        "metric.labels.response_code_class=500",
    ):
        assert part in flt, part
    rule = lb.resource("google_compute_global_forwarding_rule", "https")
    assert attr(rule, "name") == "${var.name}-https"
    assert attr(alert, "notification_channels") == "${var.notification_channels}"
    assert attr(STACK.modules["loadbalancer"], "notification_channels") == (
        "${var.notification_channels}"
    )


# --------------------------------------------------------------------------------------
# The standby, documented
# --------------------------------------------------------------------------------------


def test_the_standby_is_a_documented_choice_with_its_cost():
    ops = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    start = ops.index("### The standby: its size and cost")
    section = ops[start : ops.index("\n### ", start + 10)]
    for piece in ("Redis Cluster", "Cloud SQL", "warm function instances", "load balancer"):
        row = next((line for line in section.splitlines() if line.startswith(f"| {piece}")), None)
        assert row and "USD" in row, piece
    assert "REGIONAL" in section and "min_instances" in section
    assert (TF / "README.md").read_text().count("The standby") >= 1


# --------------------------------------------------------------------------------------
# Redis Cluster IAM authentication (item 4)
# --------------------------------------------------------------------------------------


def test_prod_redis_cluster_requires_iam_and_the_functions_send_tokens():
    prod = load(ENVS / "prod")
    assert attr(prod.variables["redis_iam_auth"], "default") is True
    assert attr(prod.modules["seatlease"], "redis_iam_auth") == "${var.redis_iam_auth}"
    # Both regions' clusters, and the functions, from the same switch.
    wanted = "${var.use_redis_cluster && var.redis_iam_auth}"
    for call in ("redis", "redis_secondary"):
        assert attr(STACK.modules[call], "iam_auth") == wanted, call
    assert attr(STACK.modules["functions"], "redis_iam_auth") == wanted
    fn = load(MODULES / "functions")
    for env in ("redis_env", "secondary_redis_env"):
        assert 'var.redis_iam_auth ? {REDIS_IAM_AUTH = "1"} : {}' in expr(fn.locals[env]), env
    grant = fn.resource("google_project_iam_member", "redis_connection_user")
    assert attr(grant, "role") == "roles/redis.dbConnectionUser"
    assert "f.redis" in expr(attr(grant, "for_each"))
    assert "var.redis_iam_auth" in expr(attr(grant, "for_each"))
    for name in ("this", "secondary"):
        deps = attr(fn.resource("google_cloudfunctions2_function", name), "depends_on")
        assert "${google_project_iam_member.redis_connection_user}" in deps, name
    # The Memorystore for Redis instance keeps its AUTH string: IAM is the cluster's.
    validation = block(load(MODULES / "redis").variables["iam_auth"], "validation")
    assert expr(attr(validation, "condition")) == "!var.iam_auth || var.use_cluster"
