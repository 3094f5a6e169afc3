"""Issue 40, item 3: two regions in Terraform (terraform/README.md, "Two regions").

1. One region (``secondary_region`` unset) is the stack as it was: every resource, data
   and ephemeral block the stack and its modules declared before the change is declared
   again, body for body (single_region_baseline.json, taken from the configuration before
   it; the only differences are the listed lifecycle additions and the second region's
   replication block, which has no instance with one region); every block added has no
   instance without a second region; and, evaluated by Terraform on recording stubs
   (two_regions_model.py), every module call of every root gets the inputs it got before,
   its new inputs at their defaults, and the two new calls have no instance.
2. Two regions (envs/prod's example): what each module call gets, by Terraform: the
   second region's Redis Cluster replicates the first's, the functions there use it, the
   replica of Cloud SQL, the secrets in both regions, the scheduler, the audit push and
   the load balancer's routes in the serving region, and what a failover changes.
3. Inside the modules: the load balancer's routing table (evaluated by Terraform) and its
   resources (NEGs in both regions, backends on the URL map), the secondary cluster's
   replication, the replica's master and flags, the secrets' replication and the plan that
   fails before a secret is replaced, the second region's functions against the first's,
   the second region's subnet (sized by Terraform), the variables' validations.
4. Every resource type and argument this relies on exists in both provider schemas
   (test_provider_schema.py checks every block; this names the ones the design needs).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_deploy_review import _validate_module_variables
from test_provider_schema import SCHEMAS, schema
from test_stack_wiring import _terraform
from tfconfig import MODULES, TF, attr, block, blocks, expr, load
from two_regions_model import (
    TWO_REGION_KEYS,
    declared_blocks,
    module_inputs,
    one_region,
    recording_tree,
)

BASELINE = json.loads((Path(__file__).with_name("single_region_baseline.json")).read_text())
ROOTS = ["envs/dev", "envs/prod", "examples/minimal"]
STACK = load(MODULES / "stack")
FN = load(MODULES / "functions")
LB = load(MODULES / "loadbalancer")
REGION, SECOND = "europe-west1", "europe-west4"
FUNCTIONS = [
    "acquire", "heartbeat", "release", "keys", "reaper", "audit", "admin", "portal",
    "webhooks", "webhooks-retry",
]  # fmt: skip

# Lifecycle blocks added to blocks that existed (they change no planned value):
ADDED_LIFECYCLE = {
    # gcloud switches the roles over; Terraform must never switch back or detach
    ("redis", "resource google_redis_cluster.this"): [
        {"ignore_changes": ["cross_cluster_replication_config"]}
    ],
    # a new replica location must never replace a secret (and its versions)
    ("secrets", "resource google_secret_manager_secret.db_password"): [
        {"ignore_changes": ["replication"]}
    ],
    ("secrets", "resource google_secret_manager_secret.redis_auth"): [
        {"ignore_changes": ["replication"]}
    ],
    ("secrets", "resource google_secret_manager_secret.signing_key"): [
        {"ignore_changes": ["annotations", "replication"]}
    ],
    # a failover moves the job: the new one first, the lost region's may not answer
    ("scheduler", "resource google_cloud_scheduler_job.reaper"): [{"create_before_destroy": True}],
}

# Every block added, and the expression that gives it no instance with one region.
ADDED_BLOCKS = {
    ("network", "resource google_compute_subnetwork.secondary"): (
        "for_each", "local.secondary_subnet_cidrs"),
    ("network", "resource time_sleep.secondary_functions_subnet_release"): (
        "count", "var.secondary_region == null ? 0 : 1"),
    ("network", "resource terraform_data.secondary_functions_subnet_size"): (
        "count", "var.secondary_region == null ? 0 : 1"),
    ("database", "resource google_sql_database_instance.replica"): (
        "count", "var.replica_region == null ? 0 : 1"),
    ("secrets", "resource terraform_data.replica_locations"): (
        "count", "length(var.replica_locations) > 1 ? 1 : 0"),
    ("functions", "resource google_cloudfunctions2_function.secondary"): (
        "for_each", "local.secondary_functions"),
    ("functions", "resource google_project_iam_member.build_sources_secondary"): (
        "count", "var.secondary_region == null ? 0 : 1"),
    ("functions", "resource google_project_iam_member.sql_client_replica"): (
        "for_each", "local.secondary_sql_functions"),
    ("functions", "resource google_project_iam_member.sql_instance_user_replica"): (
        "for_each", "var.db_iam_auth ? local.secondary_sql_functions : toset([])"),
    ("functions", "resource google_cloud_run_v2_service_iam_member.public_secondary"): (
        "for_each", "local.secondary_public_functions"),
    ("functions", "resource google_cloud_run_v2_service_iam_member.admin_secondary"): (
        "for_each", "local.secondary_admin_grants"),
    ("functions", "resource google_cloud_run_v2_service_iam_member.audit_push_secondary"): (
        "count", "var.secondary_region == null ? 0 : 1"),
    ("functions", "resource google_cloud_run_v2_service_iam_member.reaper_invoker_secondary"): (
        "count", "var.secondary_region == null ? 0 : 1"),
}  # fmt: skip
# The locals those for_each read: empty unless there is a second region.
EMPTY_WITHOUT_SECOND_REGION = {
    ("network", "secondary_subnet_cidrs"): "var.secondary_region == null ? {} :",
    ("functions", "secondary_functions"): "if var.secondary_region != null",
    ("functions", "secondary_sql_functions"): "if var.secondary_region != null",
    ("functions", "secondary_public_functions"): "if var.secondary_region != null",
    ("functions", "secondary_admin_grants"): "if var.secondary_region != null",
}
TWO_REGION_CALLS = {"redis_secondary", "loadbalancer"}


# --------------------------------------------------------------------------------------
# 1. one region: as before
# --------------------------------------------------------------------------------------


def _without_secondary_replication(body: dict) -> dict:
    """A redis cluster body without the dynamic replication block (no instance when
    primary_cluster_id is null, i.e. in the first region and with one region)."""
    body = dict(body)
    dynamic = [d for d in body.get("dynamic", []) if "cross_cluster_replication_config" not in d]
    if dynamic:
        body["dynamic"] = dynamic
    else:
        body.pop("dynamic", None)
    return body


def test_one_region_declares_every_block_it_declared_before():
    now = declared_blocks(TF)
    for module, blocks_before in BASELINE["blocks"].items():
        for key, before in blocks_before.items():
            assert key in now[module], f"{module}: {key} is gone"
            body, was = now[module][key]["body"], before["body"]
            if (module, key) == ("redis", "resource google_redis_cluster.this"):
                dyn = [d for d in body["dynamic"] if "cross_cluster_replication_config" in d]
                assert expr(dyn[0]["cross_cluster_replication_config"]["for_each"]) == (
                    "var.primary_cluster_id == null ? [] : [var.primary_cluster_id]"
                )
                body, was = (
                    _without_secondary_replication(body),
                    _without_secondary_replication(was),
                )
            assert body == was, f"{module}: {key} changed"
            lifecycle = ADDED_LIFECYCLE.get((module, key), before["lifecycle"])
            assert now[module][key]["lifecycle"] == lifecycle, f"{module}: {key} lifecycle"


def test_every_block_added_has_no_instance_with_one_region():
    now = declared_blocks(TF)
    added = {
        (module, key)
        for module, found in now.items()
        if module != "loadbalancer"  # called with count = local.two_regions ? 1 : 0
        for key in found
        if key not in BASELINE["blocks"].get(module, {})
    }
    # (A baseline written from today's tree holds them too: then nothing is new.)
    assert added <= set(ADDED_BLOCKS), added - set(ADDED_BLOCKS)
    for (module, key), (meta, gate) in ADDED_BLOCKS.items():
        assert expr(now[module][key]["body"][meta]) == gate, (module, key)
    for (module, name), empty in EMPTY_WITHOUT_SECOND_REGION.items():
        assert empty in expr(load(MODULES / module).locals[name]), (module, name)
    # The modules the stack calls only with two regions.
    counted = {name: expr(attr(c, "count")) for name, c in STACK.modules.items() if "count" in c}
    assert counted == dict.fromkeys(TWO_REGION_CALLS, "local.two_regions ? 1 : 0")
    assert STACK.locals["two_regions"] == "${var.secondary_region != null}"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    return recording_tree(TF, tmp_path_factory.mktemp("recording"))


def _defaults(module: str) -> dict:
    variables = load(MODULES / module).variables
    return {name: attr(v, "default") for name, v in variables.items() if "default" in v}


@pytest.mark.parametrize("rel", ROOTS)
def test_one_region_modules_get_the_inputs_they_got_before(recording, rel):
    tfvars = one_region((TF / rel / "terraform.tfvars.example").read_text())
    assert not set(re.findall(r"^(\w+)\s*=", tfvars, re.M)) & set(TWO_REGION_KEYS)
    got = module_inputs(recording, rel, tfvars)["modules"]
    before = BASELINE["inputs"][rel]
    assert {c for c, i in got.items() if i is None} == TWO_REGION_CALLS
    assert set(got) - TWO_REGION_CALLS == {c for c, i in before.items() if i is not None}
    sources = {name: (MODULES / "stack" / attr(c, "source")).resolve().name
               for name, c in STACK.modules.items()}  # fmt: skip
    for call, inputs in before.items():
        now = got[call]
        if inputs is None:  # a baseline written from today's tree: no instance either
            assert now is None, call
            continue
        for name, value in inputs.items():
            assert now[name] == value, (rel, call, name, value, now[name])
        defaults = _defaults(sources[call])
        for name in set(now) - set(inputs):
            assert name in defaults and now[name] == defaults[name], (rel, call, name, now[name])


# --------------------------------------------------------------------------------------
# 2. two regions: what each module call gets
# --------------------------------------------------------------------------------------

PROD_EXAMPLE = (TF / "envs" / "prod" / "terraform.tfvars.example").read_text()


def test_envs_prod_example_shows_two_regions():
    import hcl2

    values = {k: v.strip('"') if isinstance(v, str) else v
              for k, v in hcl2.loads(PROD_EXAMPLE).items()}  # fmt: skip
    assert values["secondary_region"] == SECOND and values["region"] == REGION
    assert values["use_redis_cluster"] is True
    assert values["lb_domains"] == ['"seats.example.com"'] or values["lb_domains"] == [
        "seats.example.com"
    ]
    # The failover's values are there, commented, for the operator to find.
    assert re.search(rf'^# serving_region\s*=\s*"{SECOND}"$', PROD_EXAMPLE, re.M)
    assert re.search(r"^# sql_replica_promoted\s*=\s*true$", PROD_EXAMPLE, re.M)


@pytest.fixture(scope="module")
def two_regions(recording) -> dict:
    """prod's example as it is (two regions, the first serving), and after a failover
    (the second serving, the replica promoted)."""
    failed_over = PROD_EXAMPLE + f'\nserving_region = "{SECOND}"\nsql_replica_promoted = true\n'
    return {
        "first": module_inputs(recording, "envs/prod", PROD_EXAMPLE),
        "failed_over": module_inputs(recording, "envs/prod", failed_over),
    }


def _service_map(module: str, output: str) -> dict[str, str]:
    return {fn: f"{module}.{output}.{fn}" for fn in FUNCTIONS}


def test_two_regions_wire_the_second_region(two_regions):
    m = two_regions["first"]["modules"]
    assert m["network"]["secondary_region"] == SECOND
    # The second region's Redis Cluster: a secondary of the first, in its own PSC subnet.
    redis2 = m["redis_secondary"]
    assert redis2["region"] == SECOND and redis2["name"] == f"seatlease-prod-{SECOND}"
    assert redis2["use_cluster"] is True and m["redis"]["use_cluster"] is True
    assert redis2["primary_cluster_id"] == "projects/stub/locations/stub/clusters/redis.instance_id"
    assert redis2["psc_subnet_id"] == "network.secondary_psc_subnet_id"
    assert m["redis"]["primary_cluster_id"] is None
    for same in ("network_id", "deletion_protection", "labels", "cluster_node_type",
                 "cluster_shard_count", "cluster_replica_count", "maintenance_day"):  # fmt: skip
        assert redis2[same] == m["redis"][same], same
    # Each region's functions use their own region's cluster; the database's writer.
    fn = m["functions"]
    assert fn["region"] == REGION and fn["secondary_region"] == SECOND
    assert (fn["redis_url"], fn["secondary_redis_url"]) == (
        "redis.redis_url", "redis_secondary.redis_url")  # fmt: skip
    assert (fn["redis_ca_cert"], fn["secondary_redis_ca_cert"]) == (
        "redis.ca_cert", "redis_secondary.ca_cert")  # fmt: skip
    assert fn["redis_cluster"] is True
    assert fn["secondary_subnet_id"] == "network.secondary_functions_subnet_id"
    assert fn["cloud_sql_instance"] == "database.connection_name"
    assert fn["sql_replica_instance_name"] == "database.replica_instance_name"
    # The Cloud SQL replica, not promoted.
    db = m["database"]
    assert (db["replica_region"], db["replica_name"], db["replica_promoted"]) == (
        SECOND, f"seatlease-prod-{SECOND}", False)  # fmt: skip
    # Secrets in both regions.
    assert m["secrets"]["replica_locations"] == [REGION, SECOND]
    # The first region serves: reaper, audit push, load balancer.
    assert m["scheduler"]["region"] == REGION
    assert m["scheduler"]["reaper_uri"] == "functions.service_uris.reaper"
    assert m["pubsub"]["audit_push_endpoint"] == "functions.service_uris.audit"
    lb = m["loadbalancer"]
    assert lb["service_names"] == {
        REGION: _service_map("functions", "service_names"),
        SECOND: _service_map("functions", "secondary_service_names"),
    }
    assert lb["serving_region"] == REGION
    assert lb["domains"] == ["seats.example.com"] and lb["ssl_certificates"] == []
    assert lb["name"] == "seatlease-prod"


def test_a_failover_moves_the_serving_region_and_the_writer(two_regions):
    m = two_regions["failed_over"]["modules"]
    assert m["scheduler"]["region"] == SECOND
    assert m["scheduler"]["reaper_uri"] == "functions.secondary_service_uris.reaper"
    # The same service account, granted on both regions' reapers (modules/functions).
    assert m["scheduler"]["service_account_email"] == "functions.scheduler_service_account_email"
    assert m["scheduler"]["name"] == "seatlease-prod"  # the same job name, another region
    assert m["pubsub"]["audit_push_endpoint"] == "functions.secondary_service_uris.audit"
    assert m["loadbalancer"]["serving_region"] == SECOND
    assert m["database"]["replica_promoted"] is True
    assert m["functions"]["cloud_sql_instance"] == "database.replica_connection_name"
    # Nothing else moves: each region keeps its functions, Redis and replication.
    first = two_regions["first"]["modules"]
    for call in ("network", "redis", "redis_secondary", "secrets", "monitoring"):
        assert m[call] == first[call], call
    changed = {k for k in m["functions"] if m["functions"][k] != first["functions"][k]}
    assert changed == {"cloud_sql_instance"}


def test_the_outputs_of_two_regions(two_regions):
    out = two_regions["first"]["outputs"]
    assert out["load_balancer_ip"] == "loadbalancer.ip_address"
    assert out["redis_endpoints"] == {
        REGION: "redis.host:6378",
        SECOND: "redis_secondary.host:6378",
    }
    assert out["sql_replica_connection_name"] == "database.replica_connection_name"
    assert out["cloud_sql_instance"] == "database.connection_name"
    assert out["secondary_function_urls"] == _service_map("functions", "secondary_urls")
    assert out["load_balancer_urls"] == _service_map("loadbalancer", "urls")
    after = two_regions["failed_over"]["outputs"]
    assert after["cloud_sql_instance"] == "database.replica_connection_name"


def test_one_region_outputs_are_null(recording):
    out = module_inputs(recording, "envs/dev", (TF / "envs/dev/terraform.tfvars.example")
                        .read_text())["outputs"]  # fmt: skip
    assert out["load_balancer_ip"] is None and out["load_balancer_urls"] is None
    assert out["redis_endpoints"] == {REGION: "redis.host:6378"}
    assert out["sql_replica_connection_name"] == "database.replica_connection_name"  # null
    assert out["cloud_sql_instance"] == "database.connection_name"


# --------------------------------------------------------------------------------------
# 3. inside the modules
# --------------------------------------------------------------------------------------


def _apply(root: Path, variables: dict) -> tuple[int, str, dict]:
    """init + apply of a throw-away root with terraform.tfvars.json: (rc, output, outputs)."""
    (root / "terraform.tfvars.json").write_text(json.dumps(variables))
    rc, out = _terraform(root, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(root, "apply", "-auto-approve", "-input=false", "-no-color")
    if rc != 0:
        return rc, out, {}
    rc, text = _terraform(root, "output", "-json")
    assert rc == 0, text
    values, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    return 0, out, {k: v["value"] for k, v in values.items()}


def _routing(tmp_path: Path, **variables) -> tuple[int, str, dict]:
    """modules/loadbalancer's variables.tf + routing.tf applied by Terraform."""
    root = tmp_path / "routing"
    root.mkdir()
    for tf in ("variables.tf", "routing.tf"):
        shutil.copy(MODULES / "loadbalancer" / tf, root / tf)
    (root / "out.tf").write_text("".join(
        f'output "{n}" {{\n  value = local.{n}\n}}\n'
        for n in ("negs", "serving_backends", "routes", "default_route", "paths", "test_host")
    ))  # fmt: skip
    services = {r: {fn: f"{fn}-svc" for fn in FUNCTIONS} for r in (REGION, SECOND)}
    base = {"project_id": "p", "name": "seatlease-prod", "service_names": services,
            "serving_region": REGION, "domains": ["seats.example.com"]}  # fmt: skip
    return _apply(root, {**base, **variables})


def test_the_load_balancer_routes_the_stateful_paths_to_the_serving_region(tmp_path):
    rc, out, v = _routing(tmp_path)
    assert rc == 0, out
    lb_functions = ["acquire", "heartbeat", "release", "portal", "keys"]
    # A serverless NEG per function and region, on the function's Cloud Run service.
    assert v["negs"] == {
        f"{fn}-{r}": {"function": fn, "region": r, "service": f"{fn}-svc"}
        for fn in lb_functions
        for r in (REGION, SECOND)
    }
    # A backend service per stateful function and region; keys: one for both.
    assert set(v["serving_backends"]) == {
        f"{fn}-{r}" for fn in lb_functions if fn != "keys" for r in (REGION, SECOND)
    }
    assert v["routes"] == {
        "acquire": f"serving/acquire-{REGION}",
        "heartbeat": f"serving/heartbeat-{REGION}",
        "release": f"serving/release-{REGION}",
        "portal": f"serving/portal-{REGION}",
        "keys": "everywhere/keys",
    }
    assert v["default_route"] == f"serving/portal-{REGION}"
    assert v["paths"]["acquire"] == ["/acquire", "/acquire/*"]
    assert v["test_host"] == "seats.example.com"
    shutil.rmtree(tmp_path / "routing")
    rc, out, v = _routing(tmp_path, serving_region=SECOND)
    assert rc == 0, out
    assert v["routes"]["heartbeat"] == f"serving/heartbeat-{SECOND}"
    assert v["routes"]["keys"] == "everywhere/keys"
    assert v["default_route"] == f"serving/portal-{SECOND}"


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"serving_region": "us-east1"}, "serving_region must be one of the regions"),
        ({"domains": []}, "The HTTPS proxy needs a certificate"),
        ({"domains": ["Seats.Example.com"]}, "lower-case DNS names"),
        ({"everywhere_functions": ["keys", "acquire"]}, "either in serving_functions"),
        ({"default_function": "keys"}, "default_function must be one of serving_functions"),
    ],
)
def test_the_load_balancer_refuses_what_cannot_work(tmp_path, variables, message):
    rc, out, _ = _routing(tmp_path, **variables)
    assert rc != 0 and message in " ".join(out.split()), out


def test_the_load_balancer_resources_are_wired():
    neg = LB.resource("google_compute_region_network_endpoint_group", "this")
    assert expr(attr(neg, "for_each")) == "local.negs"
    assert attr(neg, "network_endpoint_type") == "SERVERLESS"
    assert attr(neg, "region") == "${each.value.region}"
    # Gen2 functions are Cloud Run services: a cloud_run NEG on the service's name.
    assert attr(block(neg, "cloud_run"), "service") == "${each.value.service}"
    assert not blocks(neg, "cloud_function")
    serving = LB.resource("google_compute_backend_service", "serving")
    assert expr(attr(serving, "for_each")) == "local.serving_backends"
    (backend,) = blocks(serving, "backend")
    assert attr(backend, "group") == (
        "${google_compute_region_network_endpoint_group.this[each.key].id}"
    )
    everywhere = LB.resource("google_compute_backend_service", "everywhere")
    (dyn,) = [d["backend"] for d in everywhere["dynamic"]]
    assert expr(attr(dyn, "for_each")) == "local.regions"
    assert "google_compute_region_network_endpoint_group.this[" in attr(dyn["content"][0], "group")
    detection = block(everywhere, "outlier_detection")
    assert attr(detection, "consecutive_errors") == "${var.outlier_consecutive_errors}"
    assert attr(block(detection, "base_ejection_time"), "seconds") == 30
    assert not blocks(serving, "outlier_detection")  # one NEG: nothing to eject to
    for backend_service in (serving, everywhere):
        assert attr(backend_service, "load_balancing_scheme") == "EXTERNAL_MANAGED"
        assert "health_checks" not in backend_service and "timeout_sec" not in backend_service
        assert attr(block(backend_service, "log_config"), "enable") is True
    # Every route and the default on the URL map, through the backends' ids.
    ids = expr(LB.locals["backend_ids"])
    assert '"serving/${key}" => b.id' in ids and '"everywhere/${fn}" => b.id' in ids
    url_map = LB.resource("google_compute_url_map", "this")
    assert attr(url_map, "default_service") == "${local.backend_ids[local.default_route]}"
    assert attr(block(url_map, "host_rule"), "hosts") == ["*"]
    matcher = block(url_map, "path_matcher")
    (rules,) = [d["path_rule"] for d in matcher["dynamic"]]
    assert expr(attr(rules, "for_each")) == "local.routes"
    content = rules["content"][0]
    assert attr(content, "paths") == "${local.paths[path_rule.key]}"
    assert attr(content, "service") == "${local.backend_ids[path_rule.value]}"
    (tests,) = [d["test"] for d in url_map["dynamic"]]
    assert expr(attr(tests, "for_each")) == "local.routes"
    # HTTPS only, a managed certificate and/or given ones, TLS 1.2+.
    proxy = LB.resource("google_compute_target_https_proxy", "this")
    assert attr(proxy, "url_map") == "${google_compute_url_map.this.id}"
    assert attr(proxy, "ssl_certificates") == (
        "${concat(google_compute_managed_ssl_certificate.this[*].id, var.ssl_certificates)}"
    )
    policy = LB.resource("google_compute_ssl_policy", "this")
    assert attr(policy, "min_tls_version") == "TLS_1_2"
    cert = LB.resource("google_compute_managed_ssl_certificate", "this")
    assert attr(block(cert, "managed"), "domains") == "${var.domains}"
    rule = LB.resource("google_compute_global_forwarding_rule", "https")
    assert attr(rule, "port_range") == "443"
    assert attr(rule, "load_balancing_scheme") == "EXTERNAL_MANAGED"
    assert attr(rule, "ip_address") == "${google_compute_global_address.this.id}"
    assert attr(rule, "target") == "${google_compute_target_https_proxy.this.id}"
    assert not LB.of_type("google_compute_target_http_proxy"), "no plain HTTP"
    # The stack wires it to both regions' functions.
    call = STACK.modules["loadbalancer"]
    assert attr(call, "serving_region") == "${local.serving_region}"
    assert attr(call, "domains") == "${var.lb_domains}"


def _without(body: dict, *paths: tuple[str, ...]) -> dict:
    """A deep copy of a parsed body without the attributes at the given paths."""
    body = json.loads(json.dumps(body))
    for path in paths:
        node = body
        for name in path[:-1]:
            node = node[name][0]
        del node[path[-1]]
    return body


def test_the_second_regions_functions_are_the_first_regions_in_the_other_region():
    first = FN.resource("google_cloudfunctions2_function", "this")
    second = FN.resource("google_cloudfunctions2_function", "secondary")
    differing = [
        ("for_each",),
        ("location",),
        ("service_config", "ingress_settings"),
        ("service_config", "environment_variables"),
        ("service_config", "direct_vpc_network_interface", "subnetwork"),
        ("depends_on",),
    ]
    from two_regions_model import _strip  # the baseline's normalisation

    assert _without(_strip(first), *differing) == _without(_strip(second), *differing)
    assert attr(second, "location") == "${var.secondary_region}"
    service = block(second, "service_config")
    assert attr(service, "ingress_settings") == "${local.secondary_ingress[each.key]}"
    assert attr(service, "environment_variables") == "${local.secondary_environment[each.key]}"
    nic = block(service, "direct_vpc_network_interface")
    assert attr(nic, "subnetwork") == "${var.secondary_subnet_id}"
    assert set(attr(first, "depends_on")) < set(attr(second, "depends_on"))
    # Their environment: the first region's, with the second region's Redis.
    env = expr(FN.locals["secondary_environment"])
    assert "merge(local.environment[fn], f.redis ? local.secondary_redis_env : {})" in env
    redis_env = expr(FN.locals["secondary_redis_env"])
    assert "REDIS_URL = var.secondary_redis_url" in redis_env
    assert "REDIS_CA_CERT = var.secondary_redis_ca_cert" in redis_env
    assert 'var.redis_cluster ? {REDIS_CLUSTER = "1"} : {}' in redis_env
    # The public ones take the load balancer's traffic only.
    ingress = expr(FN.locals["secondary_ingress"])
    assert 'f.public ? "ALLOW_INTERNAL_AND_GCLB" : f.ingress' in ingress
    # The same issuer (either region re-admits the other's tokens): not region-derived
    # twice, the one local.
    assert "secondary_region" not in FN.locals["issuer"]


def test_the_second_regions_cluster_replicates_the_first():
    redis = load(MODULES / "redis")
    cluster = redis.resource("google_redis_cluster", "this")
    (dyn,) = [d["cross_cluster_replication_config"] for d in cluster["dynamic"]
              if "cross_cluster_replication_config" in d]  # fmt: skip
    content = dyn["content"][0]
    assert attr(content, "cluster_role") == "SECONDARY"
    primary = block(content, "primary_cluster")
    assert attr(primary, "cluster") == "${cross_cluster_replication_config.value}"
    assert "use_cluster" in str(redis.variables["primary_cluster_id"]["validation"])
    call = STACK.modules["redis_secondary"]
    assert attr(call, "primary_cluster_id") == "${module.redis.instance_id}"
    assert attr(call, "region") == "${var.secondary_region}"
    assert attr(call, "psc_subnet_id") == "${module.network.secondary_psc_subnet_id}"
    assert attr(call, "use_cluster") == "${var.use_redis_cluster}"
    # Two regions need Redis Cluster (the stack's validation, evaluated below).
    assert attr(STACK.modules["redis"], "use_cluster") == "${var.use_redis_cluster}"


def test_the_replica_follows_the_primary_and_is_promotable():
    db = load(MODULES / "database")
    primary = db.resource("google_sql_database_instance", "this")
    replica = db.resource("google_sql_database_instance", "replica")
    assert attr(replica, "master_instance_name") == (
        "${var.replica_promoted ? null : google_sql_database_instance.this.name}"
    )
    assert attr(replica, "instance_type") == (
        '${var.replica_promoted ? "CLOUD_SQL_INSTANCE" : "READ_REPLICA_INSTANCE"}'
    )
    assert attr(replica, "region") == "${var.replica_region}"
    assert not blocks(replica, "replica_configuration")  # failover_target: MySQL only
    ps, rs = block(primary, "settings"), block(replica, "settings")
    # The same flags (static and dynamic), private IP and TLS settings, tier.
    assert blocks(ps, "database_flags") == blocks(rs, "database_flags")
    assert blocks(ps, "ip_configuration") == blocks(rs, "ip_configuration")
    for name in ("tier", "edition", "availability_type", "connector_enforcement",
                 "deletion_protection_enabled", "disk_type"):  # fmt: skip
        assert attr(ps, name) == attr(rs, name), name
    # Backups only once promoted (Cloud SQL refuses them on a read replica).
    backup = block(rs, "backup_configuration")
    assert attr(backup, "enabled") == "${var.replica_promoted && var.backups_enabled}"
    assert expr(attr(backup, "point_in_time_recovery_enabled")).startswith("var.replica_promoted")
    assert attr(replica, "depends_on") == ["${var.private_services_connection}"]
    assert attr(replica, "deletion_protection") == "${var.deletion_protection}"


def test_the_secrets_are_replicated_to_both_regions_and_never_replaced_by_a_plan():
    sec = load(MODULES / "secrets")
    for name, secret in sec.of_type("google_secret_manager_secret").items():
        (dyn,) = [d["replicas"] for d in block(secret, "replication", "user_managed")["dynamic"]]
        assert expr(attr(dyn, "for_each")) == "var.replica_locations", name
        assert "replication" in attr(block(secret, "lifecycle"), "ignore_changes"), name
    guard = sec.resource("terraform_data", "replica_locations")
    condition = block(guard, "lifecycle", "precondition")
    assert attr(condition, "condition") == "${length(local.secrets_missing_a_location) == 0}"
    assert "signing_key" in expr(sec.locals["replicated_secrets"])
    assert "setsubtract(toset(var.replica_locations), locations)" in expr(
        sec.locals["secrets_missing_a_location"]
    )
    assert attr(STACK.modules["secrets"], "replica_locations") == (
        "${local.two_regions ? [var.region, var.secondary_region] : [var.region]}"
    )


def test_the_scheduler_runs_in_the_serving_region_only():
    call = STACK.modules["scheduler"]
    assert attr(call, "region") == "${local.serving_region}"
    assert STACK.locals["serving_region"] == "${coalesce(var.serving_region, var.region)}"
    assert expr(STACK.locals["serves_secondary"]) == (
        "local.two_regions && local.serving_region == var.secondary_region"
    )
    sched = load(MODULES / "scheduler")
    # The reaper's job and webhooks-retry's (issue 51): one each, both in that region.
    assert set(sched.of_type("google_cloud_scheduler_job")) == {"reaper", "webhooks_retry"}
    for job in ("reaper", "webhooks_retry"):
        assert "count" not in sched.resource("google_cloud_scheduler_job", job)
        assert attr(sched.resource("google_cloud_scheduler_job", job), "region") == "${var.region}"


def _size_secondary_subnet(tmp_path: Path, max_instances: dict, cidr: str | None = None):
    root = tmp_path / "sizing"
    root.mkdir()
    for tf in ("variables.tf", "sizing.tf"):
        shutil.copy(MODULES / "network" / tf, root / tf)
    (root / "out.tf").write_text(
        'output "cidr" {\n  value = local.secondary_functions_subnet_cidr\n}\n'
        'output "first" {\n  value = local.functions_subnet_cidr\n}\n'
    )
    variables = {"project_id": "p", "region": REGION, "name": "n",
                 "functions_max_instances": max_instances, "secondary_region": SECOND}  # fmt: skip
    if cidr:
        variables["secondary_functions_subnet_cidr"] = cidr
    return _apply(root, variables)


DEV = {"acquire": 20, "heartbeat": 20, "release": 10, "keys": 5, "reaper": 1, "audit": 5,
       "admin": 2, "portal": 3}  # fmt: skip
PROD = {**DEV, "acquire": 50, "heartbeat": 50, "release": 20}


@pytest.mark.parametrize(
    ("max_instances", "first", "second"),
    [(DEV, "10.10.0.0/24", "10.11.0.0/24"), (PROD, "10.10.2.0/23", "10.11.2.0/23")],
)
def test_the_second_regions_subnet_is_sized_like_the_first(tmp_path, max_instances, first, second):
    rc, out, v = _size_secondary_subnet(tmp_path, max_instances)
    assert rc == 0, out
    assert (v["first"], v["cidr"]) == (first, second)
    # The PSC subnet of the second region, and the subnets' names there.
    assert attr(load(MODULES / "network").variables["secondary_psc_subnet_cidr"], "default") == (
        "10.11.1.0/28"
    )


def test_a_second_region_subnet_too_small_fails_the_plan(tmp_path):
    rc, out, _ = _size_secondary_subnet(tmp_path, PROD, "10.11.0.0/24")
    assert rc != 0 and "Resource precondition failed" in out, out
    assert "second region's Direct VPC egress subnet" in " ".join(out.split())


STACK_REQUIRED = {
    "project_id": "p",
    "region": REGION,
    "environment": "prod",
    "name": "seatlease-prod",
    "deletion_protection": "true",
}
CERTIFICATE = "projects/p/global/sslCertificates/c"
SERVING_ERROR = "serving_region must be region or secondary_region"
TWO = {
    "secondary_region": SECOND,
    "use_redis_cluster": "true",
    "lb_domains": '["seats.example.com"]',
}


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({}, None),
        (TWO, None),
        ({**TWO, "serving_region": SECOND, "sql_replica_promoted": "true"}, None),
        ({**TWO, "lb_domains": "[]", "lb_ssl_certificates": f'["{CERTIFICATE}"]'}, None),
        ({**TWO, "use_redis_cluster": "false"}, "needs use_redis_cluster = true"),
        ({**TWO, "secondary_region": REGION}, "other than region"),
        ({**TWO, "lb_domains": "[]"}, "need a certificate for the load balancer"),
        ({**TWO, "serving_region": "us-east1"}, SERVING_ERROR),
        ({"serving_region": SECOND}, SERVING_ERROR),
        ({"sql_replica_promoted": "true"}, "sql_replica_promoted needs secondary_region"),
    ],
)  # fmt: skip
def test_the_stack_refuses_a_second_region_it_cannot_build(tmp_path, variables, message):
    rc, out = _validate_module_variables(
        tmp_path, MODULES / "stack", {**STACK_REQUIRED, **variables}
    )
    if message is None:
        assert rc == 0, out
    else:
        assert rc != 0 and message in " ".join(out.split()), out


@pytest.mark.parametrize(
    ("module", "required", "bad", "message"),
    [
        ("redis", {"project_id": "p", "region": SECOND, "name": "n", "network_id": "x",
                   "private_services_range_name": "r", "private_services_connection": "c",
                   "psc_subnet_id": "s"},
         {"primary_cluster_id": "projects/p/locations/r/clusters/c"}, "needs use_cluster = true"),
        ("database", {"project_id": "p", "region": REGION, "name": "n", "network_id": "x",
                      "private_services_range_name": "r", "private_services_connection": "c",
                      "deletion_protection": "true", "db_password": "x" * 24},
         {"replica_promoted": "true"}, "replica_promoted needs a replica"),
        ("secrets", {"project_id": "p", "name": "n", "redis_auth_enabled": "false",
                     "redis_auth_string": ""},
         {"replica_locations": f'["{REGION}", "{REGION}"]'}, "distinct regions"),
    ],
)  # fmt: skip
def test_the_modules_refuse_a_half_configured_second_region(
    tmp_path, module, required, bad, message
):
    if module == "secrets":
        required = {**required, "replica_locations": f'["{REGION}"]'}
    rc, out = _validate_module_variables(tmp_path, MODULES / module, required)
    assert rc == 0, out
    shutil.rmtree(tmp_path / ".terraform", ignore_errors=True)
    rc, out = _validate_module_variables(tmp_path, MODULES / module, {**required, **bad})
    assert rc != 0 and message in " ".join(out.split()), out


# --------------------------------------------------------------------------------------
# 4. the provider knows what this needs, at both ends of the allowed range
# --------------------------------------------------------------------------------------

NEEDED = {
    "resource google_redis_cluster": [
        ("cross_cluster_replication_config", "cluster_role"),
        ("cross_cluster_replication_config", "primary_cluster", "cluster"),
    ],
    "resource google_sql_database_instance": [("master_instance_name",), ("instance_type",)],
    "resource google_compute_region_network_endpoint_group": [
        ("network_endpoint_type",), ("cloud_run", "service")],
    "resource google_compute_backend_service": [
        ("outlier_detection", "consecutive_errors"),
        ("outlier_detection", "base_ejection_time", "seconds"),
        ("load_balancing_scheme",), ("backend", "group")],
    "resource google_compute_url_map": [
        ("path_matcher", "path_rule", "paths"), ("test", "service")],
    "resource google_compute_managed_ssl_certificate": [("managed", "domains")],
    "resource google_compute_target_https_proxy": [("ssl_policy",), ("ssl_certificates",)],
    "resource google_compute_global_forwarding_rule": [("load_balancing_scheme",)],
    "resource google_compute_ssl_policy": [("min_tls_version",), ("profile",)],
    "resource google_compute_global_address": [("labels",)],
    "resource google_secret_manager_secret": [
        ("replication", "user_managed", "replicas", "location")],
}  # fmt: skip


@pytest.mark.parametrize("bindings", sorted(SCHEMAS))
def test_the_provider_has_what_two_regions_need(bindings):
    sch = schema(bindings)
    for key, paths in NEEDED.items():
        assert key in sch, (bindings, key)
        for path in paths:
            fields = sch[key]
            for name in path[:-1]:
                assert name in fields, (bindings, key, path)
                fields = fields[name]["nested"]
            assert path[-1] in fields, (bindings, key, path)
    # The cluster takes at most one replication config, a secondary one primary.
    ccr = sch["resource google_redis_cluster"]["cross_cluster_replication_config"]
    assert ccr["max_one"] and ccr["nested"]["primary_cluster"]["max_one"]


# --------------------------------------------------------------------------------------
# The client-facing outputs: the load balancer's URLs with two regions
# --------------------------------------------------------------------------------------

CLIENT_OUTPUTS = ("acquire_url", "heartbeat_url", "release_url", "function_urls", "jwks_url")


def _client_outputs(tmp_path: Path, two: bool) -> dict:
    """modules/stack/outputs.tf's client_urls and client-facing outputs, applied by
    Terraform against stubs of the functions and loadbalancer modules."""
    text = (MODULES / "stack" / "outputs.tf").read_text()
    parts = [re.search(r"^locals \{\n.*?^\}\n", text, re.M | re.S).group(0)]
    parts += [re.search(rf'^output "{n}" \{{\n.*?^\}}\n', text, re.M | re.S).group(0)
              for n in CLIENT_OUTPUTS]  # fmt: skip
    root = tmp_path / ("two" if two else "one")
    for stub, body in {
        "functions": (
            f'output "urls" {{\n  value = {{ for fn in {json.dumps(FUNCTIONS)} : '
            f'fn => "https://{REGION}-${{fn}}.cloudfunctions.net" }}\n}}\n'
            f'output "jwks_url" {{\n  value = "https://{REGION}-keys.cloudfunctions.net"\n}}\n'
        ),
        "loadbalancer": (
            'output "urls" {\n  value = { for fn in ["acquire", "heartbeat", "release", '
            '"portal", "keys"] : fn => "https://seats.example.com/${fn}" }\n}\n'
        ),
    }.items():
        (root / stub).mkdir(parents=True)
        (root / stub / "main.tf").write_text(body)
    (root / "main.tf").write_text(
        'variable "two" {\n  type = bool\n}\n'
        "locals {\n  two_regions = var.two\n}\n"
        'module "functions" {\n  source = "./functions"\n}\n'
        'module "loadbalancer" {\n  source = "./loadbalancer"\n'
        "  count  = local.two_regions ? 1 : 0\n}\n" + "".join(parts)
    )
    rc, out, values = _apply(root, {"two": two})
    assert rc == 0, out
    return values


def test_client_outputs_are_the_load_balancers_with_two_regions(tmp_path):
    one = _client_outputs(tmp_path, two=False)
    for fn in ("acquire", "heartbeat", "release"):
        assert one[f"{fn}_url"] == f"https://{REGION}-{fn}.cloudfunctions.net"
    assert one["function_urls"] == {
        fn: f"https://{REGION}-{fn}.cloudfunctions.net" for fn in FUNCTIONS
    }
    # Two regions: the first region's public functions admit only the load balancer.
    two = _client_outputs(tmp_path, two=True)
    for fn in ("acquire", "heartbeat", "release"):
        assert two[f"{fn}_url"] == f"https://seats.example.com/{fn}"
    assert two["jwks_url"] == "https://seats.example.com/keys"
    behind = {"acquire", "heartbeat", "release", "keys", "portal"}
    assert two["function_urls"] == {
        fn: f"https://seats.example.com/{fn}" if fn in behind
        else f"https://{REGION}-{fn}.cloudfunctions.net"
        for fn in FUNCTIONS
    }  # fmt: skip
