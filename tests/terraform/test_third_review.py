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
from pathlib import Path

import pytest
from test_deploy_review import _validate_module_variables
from test_filters import evaluation_root
from test_stack_wiring import _terraform
from tfconfig import MODULES, TF, attr, block, blocks, function_folders, load

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
    assert named == set(function_folders())


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
    module holds today (66 / 208 in dev, 136 / 352 with prod's example)."""
    dev, prod = _max_instances()
    text = " ".join(README.split())
    for label, case in (("The dev defaults", dev), ("prod's example settings", prod)):
        match = re.search(rf"{label} \((\d+) instances, (\d+) addresses\)", text)
        assert match, label
        addresses = sum(math.ceil(2 * n / 16) * 16 for n in case.values())
        assert (int(match.group(1)), int(match.group(2))) == (sum(case.values()), addresses)
    assert (sum(dev.values()), sum(prod.values())) == (66, 136)


# -- 4. log_level: nothing above INFO, where the metrics' lines would vanish ---------------

FUNCTIONS_REQUIRED = {
    name: "x"
    for name, body in FUNCTIONS.variables.items()
    if "default" not in body and name not in ("name", "build_dir")
} | {"name": "seatlease-dev", "build_dir": "./.build"}


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
