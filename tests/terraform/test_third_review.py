"""The third deploy review (issue 33): a busy day and a second apply, not only the first.

Each test pins one finding. What Terraform computes (the dashboard's JSON, the alert
texts, the connection budget, the variable validations) is evaluated by Terraform itself
on throw-away roots of terraform_data and locals (no provider download); the rest is the
HCL parsed with python-hcl2 and the README read as text.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from test_deploy_review import DATABASE_REQUIRED, _validate_module_variables
from test_filters import evaluation_root
from test_stack_wiring import _terraform
from tfconfig import MODULES, TF, attr, block, blocks, function_names, load

FUNCTIONS = load(MODULES / "functions")
MONITORING = load(MODULES / "monitoring")
README = (TF / "README.md").read_text()


def _apply_and_read(root: Path, *args: str) -> dict:
    """init + apply of a throw-away root; its outputs as a dict (name -> value)."""
    rc, out = _terraform(root, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(root, "apply", "-auto-approve", "-input=false", "-no-color", *args)
    assert rc == 0, out
    rc, out = _terraform(root, "output", "-json")
    assert rc == 0, out
    values, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    return {k: v["value"] for k, v in values.items()}


# -- 3. the dashboard: fields the API drops are never sent ------------------------------


@pytest.fixture(scope="module")
def monitoring_texts(tmp_path_factory) -> dict:
    """The monitoring module's locals evaluated by Terraform (test_filters' root), with
    the dashboard JSON and the alert texts as outputs."""
    root = tmp_path_factory.mktemp("monitoring") / "root"
    evaluation_root(root)
    (root / "texts.tf").write_text(
        'output "dashboard_json" {\n  value = local.dashboard_json\n}\n'
        'output "threshold_titles" {\n'
        "  value = { for k, a in local.threshold_alerts : k => a.title }\n}\n"
        'output "error_ratio_percent" {\n  value = local.error_ratio_percent\n}\n'
    )
    return _apply_and_read(root)


def _walk(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def test_the_dashboard_sends_no_field_the_api_drops(monitoring_texts):
    """xPos = 0, yPos = 0 and groupByFields = [] come back absent (provider issue
    16173): sent, they make every plan show a change to the dashboard."""
    dashboard = json.loads(monitoring_texts["dashboard_json"])
    dropped = [
        path
        for path, key, value in _walk(dashboard)
        if (key in ("xPos", "yPos") and value == 0) or (key == "groupByFields" and value == [])
    ]
    assert dropped == []


def test_the_dashboard_keeps_its_layout_and_groupings(monitoring_texts):
    """What is left out is exactly the zero values: the tiles are where they were, two
    per row of height 4, and the charts that group still do."""
    tiles = json.loads(monitoring_texts["dashboard_json"])["mosaicLayout"]["tiles"]
    charts = MONITORING.locals["dashboard_charts"]
    assert len(tiles) == len(charts) == 8
    for i, (tile, chart) in enumerate(zip(tiles, charts, strict=True)):
        assert (tile.get("xPos", 0), tile.get("yPos", 0)) == ((i % 2) * 6, (i // 2) * 4)
        assert (tile["width"], tile["height"]) == (6, 4)
        aggregation = tile["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"][
            "timeSeriesFilter"
        ]["aggregation"]
        assert aggregation.get("groupByFields", []) == chart["group_by"]
        assert aggregation["perSeriesAligner"] == chart["aligner"]
    assert sum("xPos" in t for t in tiles) == 4 and sum("yPos" in t for t in tiles) == 6
    assert sum("groupByFields" in t["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"][
        "timeSeriesFilter"]["aggregation"] for t in tiles) == 6  # fmt: skip


def test_the_dashboard_resource_sends_the_evaluated_json():
    dashboard = MONITORING.resource("google_monitoring_dashboard", "seatlease")
    assert attr(dashboard, "dashboard_json") == "${local.dashboard_json}"


# -- 5. percentages in the alert texts ---------------------------------------------------


def test_the_5xx_alert_text_says_2_percent(monitoring_texts):
    policy = MONITORING.resource("google_monitoring_alert_policy", "client_5xx")
    content = attr(block(policy, "documentation"), "content")
    assert "${local.error_ratio_percent}%" in content, content
    assert attr(MONITORING.variables["error_ratio_threshold"], "default") == 0.02
    assert monitoring_texts["error_ratio_percent"] == "2"


def test_the_redis_memory_alert_title_says_70_percent(monitoring_texts):
    title = monitoring_texts["threshold_titles"]["redis_memory"]
    assert title == "Redis memory above 70%", title


def test_no_alert_text_multiplies_a_number_unformatted():
    """Any other `x * 100` in a text would print Terraform's 150 digits again."""
    for name, policy in MONITORING.of_type("google_monitoring_alert_policy").items():
        for doc in blocks(policy, "documentation"):
            assert "* 100" not in attr(doc, "content"), name
    for key, alert in MONITORING.locals["threshold_alerts"].items():
        for field in ("title", "condition", "documentation"):
            assert "* 100" not in alert[field], (key, field)


# -- 6. terraform/README.md: the portal, and the subnet's numbers -------------------------


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    rest = text[start + len(heading) :]
    end = re.search(r"^#{2,3} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def test_who_can_do_what_names_every_function():
    table = _section(README, "### Who can do what")
    named: set[str] = set()
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith(("| function", "|---")):
            named |= {n.strip() for n in line.split("|")[1].split(",")}
    assert named == set(function_names())


def test_the_diagram_shows_every_public_function():
    diagram = _section(README, "## What gets created").split("```")[1]
    public = [fn for fn, f in FUNCTIONS.locals["functions"].items() if f["public"]]
    assert "portal" in public
    for fn in public:
        assert re.search(rf"\b{fn}\b", diagram), fn


def _max_instances() -> tuple[dict[str, int], dict[str, int]]:
    defaults = {fn: d["max_instances"] for fn, d in FUNCTIONS.locals["defaults"].items()}
    tfvars = (TF / "envs" / "prod" / "terraform.tfvars.example").read_text()
    overrides = dict(
        re.findall(r"^[ \t]*(\w+)[ \t]*=[ \t]*\{[^}\n]*max_instances\s*=\s*(\d+)", tfvars, re.M)
    )
    return defaults, {**defaults, **{fn: int(n) for fn, n in overrides.items()}}


def test_readme_subnet_numbers_are_todays():
    """The sizing paragraph's instance and address counts, from the functions the
    module holds today (72 / 240 in dev, 142 / 384 with prod's example)."""
    dev, prod = _max_instances()
    text = " ".join(README.split())
    for label, case in (("The dev defaults", dev), ("prod's example settings", prod)):
        match = re.search(rf"{label} \((\d+) instances, (\d+) addresses\)", text)
        assert match, label
        addresses = sum(math.ceil(2 * n / 16) * 16 for n in case.values())
        assert (int(match.group(1)), int(match.group(2))) == (sum(case.values()), addresses)
    assert (sum(dev.values()), sum(prod.values())) == (72, 142)


# -- 4. log_level: nothing above INFO, where the metrics' lines would vanish ---------------

FUNCTIONS_REQUIRED = {
    name: "x"
    for name, body in FUNCTIONS.variables.items()
    if "default" not in body and name not in ("name", "build_dir", "sql_max_connections")
} | {"name": "seatlease-dev", "build_dir": "./.build", "sql_max_connections": 100}


@pytest.mark.parametrize(
    ("level", "accepted"),
    [("DEBUG", True), ("INFO", True), ("WARNING", False), ("ERROR", False)],
)
def test_terraform_refuses_a_log_level_that_drops_the_metrics_lines(tmp_path, level, accepted):
    rc, out = _validate_module_variables(
        tmp_path, MODULES / "functions", {**FUNCTIONS_REQUIRED, "log_level": level}
    )
    assert (rc == 0) is accepted, out
    if not accepted:
        assert "Invalid value for variable" in out and "reaper run" in out, out


def test_every_root_defaults_to_a_level_the_metrics_survive():
    for root in [*sorted((TF / "envs").iterdir()), MODULES / "stack"]:
        default = attr(load(root).variables["log_level"], "default")
        assert default in ("DEBUG", "INFO"), root


# -- 2. the Cloud SQL connection budget -------------------------------------------------

DATABASE = load(MODULES / "database")


def _hcl(value) -> str:
    """A Python value as an HCL expression for -var."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_hcl(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _tier_max_connections(tmp_path: Path, tier: str, max_connections=None):
    """The database module's max_connections output, evaluated by Terraform."""
    root = tmp_path / "database"
    root.mkdir()
    for tf in ("variables.tf", "connections.tf"):
        shutil.copy(MODULES / "database" / tf, root / tf)
    (root / "out.tf").write_text('output "max_connections" {\n  value = local.max_connections\n}\n')
    args = [f"-var={k}={v}" for k, v in {**DATABASE_REQUIRED, "tier": tier}.items()]
    if max_connections is not None:
        args.append(f"-var=max_connections={max_connections}")
    values = _apply_and_read(root, *args)
    shutil.rmtree(root)
    return values.get("max_connections")


def _sql_budget(tmp_path: Path, function_settings: dict, max_connections):
    """The functions module's settings.tf and sql_pool.tf applied by Terraform (its
    terraform_data precondition included): (outputs, None), or (None, the failed output)."""
    root = tmp_path / "functions"
    root.mkdir()
    for tf in ("variables.tf", "settings.tf", "sql_pool.tf"):
        shutil.copy(MODULES / "functions" / tf, root / tf)
    (root / "out.tf").write_text(
        'output "pool" {\n  value = local.sql_pool_size\n}\n'
        'output "connections" {\n  value = local.sql_connections\n}\n'
        'output "total" {\n  value = local.sql_connections_total\n}\n'
    )
    variables = {**FUNCTIONS_REQUIRED, "sql_max_connections": max_connections}
    variables["function_settings"] = function_settings
    (root / "terraform.tfvars").write_text(
        "".join(f"{k} = {_hcl(v)}\n" for k, v in variables.items())
    )
    rc, out = _terraform(root, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(root, "apply", "-auto-approve", "-input=false", "-no-color")
    if rc != 0:
        shutil.rmtree(root)
        return None, out
    rc, text = _terraform(root, "output", "-json")
    assert rc == 0, text
    values, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    shutil.rmtree(root)
    return {k: v["value"] for k, v in values.items()}, None


@pytest.mark.parametrize(
    ("tier", "expected"),
    [
        ("db-f1-micro", 25),
        ("db-g1-small", 50),
        ("db-custom-1-3840", 100),  # 3.75 GiB
        ("db-custom-2-7680", 200),  # 7.5 GiB: the lower row of the boundary
        ("db-custom-2-8192", 400),
        ("db-custom-4-15360", 400),  # 15 GiB: the lower row again
        ("db-custom-8-30720", 500),
        ("db-custom-16-61440", 600),
        ("db-custom-32-122880", 800),  # 120 GiB: the lower row
        ("db-custom-32-131072", 1000),
        ("db-perf-optimized-N-2", None),  # unknown here: the budget check then fails
    ],
)
def test_the_tiers_connection_limit(tmp_path, tier, expected):
    assert _tier_max_connections(tmp_path, tier) == expected


def test_a_set_max_connections_flag_is_the_limit(tmp_path):
    assert _tier_max_connections(tmp_path, "db-g1-small", 120) == 120
    instance = DATABASE.resource("google_sql_database_instance", "this")
    flags = blocks(block(instance, "settings"), "database_flags")
    assert {"name": "max_connections", "value": "${tostring(database_flags.value)}"} in [
        {k: f[k] for k in ("name", "value")} for f in flags
    ]


def test_pools_are_sized_from_concurrency_and_reach_the_runtime(tmp_path):
    values, failed = _sql_budget(tmp_path, {}, 100)
    assert failed is None, failed
    # concurrency 80 / 80 per connection for the cache-miss readers; 10 / 5 and 20 / 5.
    assert values["pool"] == {
        "acquire": 1, "heartbeat": 1, "release": 1, "audit": 2, "admin": 2, "portal": 4,
        "webhooks": 2, "webhooks-retry": 1,
    }  # fmt: skip
    assert values["connections"] == {
        "acquire": 20, "heartbeat": 20, "release": 10, "audit": 10, "admin": 4, "portal": 12,
        "webhooks": 10, "webhooks-retry": 1,
    }  # fmt: skip
    assert values["total"] == 87
    values, _ = _sql_budget(tmp_path, {"audit": {"concurrency": 23}}, 200)
    assert values["pool"]["audit"] == 5 and values["connections"]["audit"] == 25
    env = FUNCTIONS.locals["environment"]
    assert "DB_POOL_SIZE = tostring(local.sql_pool_size[fn])" in env
    assert 'DB_MAX_OVERFLOW = "0"' in env
    assert set(FUNCTIONS.locals["sql_requests_per_connection"]) == {
        fn for fn, f in FUNCTIONS.locals["functions"].items() if f["sql"]
    }


@pytest.mark.parametrize(
    ("settings", "max_connections", "message"),
    [
        ({}, 50, "could open 87 Cloud SQL connections"),  # db-g1-small: 87 > 40
        ({}, 85, "the instance accepts 85"),  # 76 > 75
        (  # 100 + 100 + 10 + 10 + 4 + 12 = 236 > 190
            {"acquire": {"max_instances": 100}, "heartbeat": {"max_instances": 100}},
            200,
            "acquire 100 x 1",
        ),
        ({}, None, "an unknown number"),
    ],
)
def test_terraform_fails_the_plan_beyond_the_budget(tmp_path, settings, max_connections, message):
    values, failed = _sql_budget(tmp_path, settings, max_connections)
    assert values is None, values
    assert "Resource precondition failed" in failed and message in " ".join(failed.split()), failed


def test_the_budget_holds_exactly_at_the_limit(tmp_path):
    values, failed = _sql_budget(tmp_path, {}, 97)  # 87 of 97 - 10
    assert failed is None and values["total"] == 87, failed


def _roots() -> list[tuple[str, str, dict]]:
    """(root, its sql_tier, function_settings) for every root that calls the stack, with
    no overrides and with its example tfvars."""
    import hcl2

    cases = []
    for root in [*sorted((TF / "envs").iterdir()), *sorted((TF / "examples").iterdir())]:
        call = next(iter(load(root).modules.values()))
        tier = call["sql_tier"]
        cases.append((root.name, tier, {}))
        example = root / "terraform.tfvars.example"
        settings = hcl2.loads(example.read_text()).get("function_settings", {})
        if settings:
            cases.append((f"{root.name} example", tier, settings))
    return cases


def test_every_root_fits_its_tier(tmp_path):
    """Each env and example, with the stack's defaults and with its example tfvars: the
    pools at the maximum instance counts fit the tier's connections less the reserve."""
    totals = {}
    for name, tier, settings in _roots():
        limit = _tier_max_connections(tmp_path, tier)
        values, failed = _sql_budget(tmp_path, settings, limit)
        assert failed is None, (name, failed)
        totals[name] = (values["total"], limit)
    assert totals["dev"] == (87, 100) and totals["prod example"] == (157, 200), totals
    assert totals["minimal"] == (87, 100)


def test_the_stack_passes_the_limit_on():
    stack = load(MODULES / "stack")
    assert attr(stack.modules["functions"], "sql_max_connections") == (
        "${module.database.max_connections}"
    )
    assert attr(stack.modules["database"], "max_connections") == "${var.sql_max_connections}"


def test_readme_states_todays_connection_numbers(tmp_path):
    """terraform/README.md's budget table: each function's pool and connections, the
    totals and budgets, for dev and prod's example, as Terraform computes them."""
    table = README[README.index("| pool per instance (concurrency)") :].split("\n\n")[0]
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in table.splitlines()
    }
    order = ["acquire", "heartbeat", "release", "audit", "admin", "portal", "webhooks",
             "webhooks-retry"]  # fmt: skip
    roots = {name: (tier, settings) for name, tier, settings in _roots()}
    dev, prod = _max_instances()
    for label, root, instances in (
        ("dev: max instances, connections", "dev", dev),
        ("prod example: max instances, connections", "prod example", prod),
    ):
        tier, settings = roots[root]
        limit = _tier_max_connections(tmp_path, tier)
        values, failed = _sql_budget(tmp_path, settings, limit)
        assert failed is None, failed
        assert sorted(values["connections"]) == sorted(order)
        cells = rows[label]
        for fn, cell in zip(order, cells, strict=False):
            assert cell == f"{instances[fn]}, {values['connections'][fn]}", (label, fn, cell)
        assert cells[8:] == [f"**{values['total']}**", f"{limit} - 10 = {limit - 10}"], label
    values, _ = _sql_budget(tmp_path, {}, 100)
    for fn, cell in zip(order, rows["pool per instance (concurrency)"], strict=False):
        concurrency = FUNCTIONS.locals["defaults"][fn]["concurrency"]
        assert cell == f"{values['pool'][fn]} ({concurrency})", (fn, cell)


# -- 1. the client functions in prod keep a warm instance -----------------------------


def test_prods_example_keeps_the_client_functions_warm():
    """Besides the cold-start wait (tests/test_startup_wait.py): prod's example keeps
    one instance of each client function, so the first calls after a quiet period meet
    no cold start at all."""
    import hcl2

    example = TF / "envs" / "prod" / "terraform.tfvars.example"
    settings = hcl2.loads(example.read_text())["function_settings"]
    for fn in ("acquire", "heartbeat", "release"):
        assert settings[fn]["min_instances"] >= 1, fn
    assert "min_instances" in (TF / "README.md").read_text().split("## Cost notes")[1]
