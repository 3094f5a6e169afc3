"""Every filter terraform/modules/monitoring builds, in its own language's grammar, and
every log-based metric's filter run on log lines the code really writes.

The filters are Terraform templates (``"${local.run_logs} AND ..."``). To get the text
Google receives, Terraform itself evaluates them: a throw-away root holds the module's
``variables.tf`` and ``locals`` blocks verbatim, with the two kinds of resources the
locals read (``google_logging_metric``, ``time_sleep``) replaced by locals holding the
same ``name``/``filter``/``triggers`` expressions, and outputs listing every filter.
``terraform apply`` of that root creates nothing (no provider) and prints them.

The log lines come from the real functions (functions-framework apps, as Cloud
Functions loads them) against a private Redis, PostgreSQL and the Pub/Sub emulator:
acquire (201, 409 no seats, 500), heartbeat, release, a reaper run, and a failed reaper
run. Each becomes the LogEntry Cloud Run makes of a JSON line on stdout
(``severity`` moves to the entry, the rest is ``jsonPayload``; ``resource`` is the
function's Cloud Run revision).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import functions_framework
import pytest
from filters import (
    FilterSyntaxError,
    comparisons,
    matches,
    parse_logging,
    parse_monitoring,
)
from http_support import acquire, heartbeat, log_lines, new_license, new_tenant, release
from test_stack_wiring import _terraform
from tfconfig import FUNCTIONS_DIR, MODULES, attr, blocks, expr, load

from seatlease.seats import redisconn
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.redisconn import get_redis

MON = MODULES / "monitoring"
RESOURCE_RE = re.compile(r'^resource "(\w+)" "(\w+)" \{\n(.*?)^\}\n', re.S | re.M)
LOCALS_RE = re.compile(r"^locals \{\n.*?^\}\n", re.S | re.M)


def _attribute(body: str, name: str) -> str:
    """The expression of a top-level argument of a formatted block body (one line, or
    up to the closing bracket at the argument's indentation)."""
    match = re.search(rf"^  {name}\s*=\s*(.*)$", body, flags=re.M)
    assert match, name
    value = match.group(1)
    if value.rstrip().endswith(("(", "{", "[")):
        rest = body[match.end() :]
        end = re.search(r"^  [)\]}]", rest, flags=re.M)
        assert end, name
        value += rest[: end.end()]
    return value


def evaluation_root(dst: Path) -> None:
    """A root module that evaluates the monitoring module's filters without providers."""
    text = (MON / "main.tf").read_text()
    stubs = []
    for rtype, name, body in RESOURCE_RE.findall(text):
        if rtype == "google_logging_metric":
            fields = "\n".join(
                f"    {a} = {_attribute(body, a)}" for a in ("name", "filter", "description")
            )
            if "for_each" in body:
                source = _attribute(body, "for_each")
                fields = fields.replace("each.key", "k").replace("each.value", "v")
                stubs.append(f"  lm_{name} = {{ for k, v in {source} : k => {{\n{fields}\n  }} }}")
            else:
                stubs.append(f"  lm_{name} = {{\n{fields}\n  }}")
        elif rtype == "time_sleep":
            stubs.append(f"  ts_{name} = {{\n    triggers = {_attribute(body, 'triggers')}\n  }}")
    code = "\n".join(LOCALS_RE.findall(text)) + "\nlocals {\n" + "\n".join(stubs) + "\n}\n"
    code = re.sub(r"\bgoogle_logging_metric\.(\w+)", r"local.lm_\1", code)
    code = re.sub(r"\btime_sleep\.(\w+)", r"local.ts_\1", code)
    outputs = """
output "logging_filters" {
  value = merge(
    { for k, m in local.lm_reaper_value : "reaper_value/${k}" => m.filter },
    { for k, m in {
      client_requests = local.lm_client_requests, client_5xx = local.lm_client_5xx,
      denials = local.lm_denials, client_latency = local.lm_client_latency,
      seats_used = local.lm_seats_used, reaper_runs = local.lm_reaper_runs,
      reaper_errors = local.lm_reaper_errors,
    } : k => m.filter },
  )
}

output "log_alert_filters" {
  value = { license_expiring = local.license_expiring_log }
}

output "monitoring_filters" {
  value = merge(
    { for k, a in local.threshold_alerts : "threshold/${k}" => a.filter },
    { for i, c in local.client_5xx_conditions : "client_5xx/${i}" => c.filter },
    { for i, c in local.client_5xx_conditions : "client_5xx/${i}/denominator" => c.denominator },
    {
      "reaper/errors" = local.user_metric.reaper_errors
      "reaper/runs"   = local.user_metric.reaper_runs
    },
    { for i, c in local.dashboard_charts : "dashboard/${i}" => c.filter },
  )
}
"""
    dst.mkdir(parents=True)
    shutil.copy(MON / "variables.tf", dst / "variables.tf")
    (dst / "main.tf").write_text(code + outputs)
    (dst / "terraform.tfvars").write_text(
        'project_id = "p"\nname = "seatlease-test"\n'
        'dead_letter_subscription_name = "seat-events-dead-letter-hold"\n'
        'redis_instance_id = "projects/p/locations/r/instances/seatlease-test"\n'
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, dict[str, str]]:
    root = tmp_path_factory.mktemp("filters") / "root"
    evaluation_root(root)
    rc, out = _terraform(root, "init", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(root, "apply", "-auto-approve", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(root, "output", "-json")
    assert rc == 0, out
    data = json.loads(out[: out.rindex("}") + 1])
    return {k: v["value"] for k, v in data.items()}


def test_every_filter_of_the_module_is_rendered(rendered):
    """The outputs above cover every filter argument the module's resources have."""
    cfg = load(MON)
    seen = set()
    for name, policy in cfg.of_type("google_monitoring_alert_policy").items():
        for cond in blocks(policy, "conditions"):
            for kind in ("condition_threshold", "condition_absent"):
                for c in blocks(cond, kind):
                    for arg in ("filter", "denominator_filter"):
                        if arg in c:
                            seen.add((name, expr(attr(c, arg))))
    assert seen == {
        ("threshold", "each.value.filter"),
        ("client_5xx", "conditions.value.filter"),
        ("client_5xx", "conditions.value.denominator"),
        ("reaper", "local.user_metric.reaper_errors"),
        ("reaper", "local.user_metric.reaper_runs"),
    }, seen
    assert "filter = c.filter" in cfg.files["main.tf"]  # the dashboard's charts
    assert len(rendered["logging_filters"]) == len(cfg.of_type("google_logging_metric")) - 1 + len(
        cfg.locals["reaper_values"]
    )


def test_monitoring_filters_follow_the_monitoring_grammar(rendered):
    for key, text in rendered["monitoring_filters"].items():
        tree = parse_monitoring(text)
        cmps = comparisons(tree)
        types = [c for c in cmps if c[0] == "metric.type"]
        assert len(types) == 1 and types[0][1] == "=" and types[0][2][0] == "STR", (key, text)
        assert any(c[0] == "resource.type" for c in cmps), (key, text)
    five = parse_monitoring(rendered["monitoring_filters"]["client_5xx/1"])
    (service,) = [c for c in comparisons(five) if c[0] == "resource.labels.service_name"]
    assert service[2] == ("FN", "one_of", ["acquire", "heartbeat", "release"])


def test_log_metric_filters_follow_the_logging_grammar(rendered):
    for key, text in rendered["logging_filters"].items():
        tree = parse_logging(text)
        fields = {c[0] for c in comparisons(tree)} | {t[1] for t in _present(tree)}
        assert "resource.type" in fields, (key, text)


def _present(tree):
    if tree[0] == "PRESENT":
        return [tree]
    if tree[0] == "NOT":
        return _present(tree[1])
    if tree[0] in ("AND", "OR"):
        return [p for t in tree[1] for p in _present(t)]
    return []


@pytest.mark.parametrize(
    ("language", "text"),
    [
        # The defect this test was written for: Logging's OR list inside Monitoring's one_of.
        ("monitoring", 'resource.labels.service_name=one_of("acquire" OR "heartbeat")'),
        ("monitoring", 'resource.labels.service_name=("acquire" OR "heartbeat")'),
        ("monitoring", 'metric.type="x" AND jsonPayload.status>=500'),
        ("monitoring", 'metric.type=starts_with("a", "b")'),
        ("logging", 'resource.labels.service_name=one_of("acquire", "heartbeat")'),
        ("logging", "jsonPayload.status>= AND severity>=ERROR"),
        ("logging", 'resource.type="cloud_run_revision" AND (severity>=ERROR'),
    ],
)
def test_each_grammar_refuses_the_other_languages_forms(language, text):
    parse = parse_monitoring if language == "monitoring" else parse_logging
    with pytest.raises(FilterSyntaxError):
        parse(text)


def test_each_grammar_accepts_its_documented_examples():
    parse_monitoring('resource.labels.zone = starts_with("europe-")')
    parse_monitoring(
        'metric.type = "compute.googleapis.com/instance/cpu/usage_time" AND '
        'metric.labels.instance_name = monitoring.regex.full_match("gke-(hipster|nginx).*")'
    )
    parse_monitoring('resource.labels.service_name = one_of("a", "b", "c")')
    parse_logging('resource.type = ("k8s_cluster" OR "gce_instance")')
    parse_logging(
        'resource.type = "gce_instance" AND\nseverity >= "ERROR" AND\nNOT textPayload:robot'
    )


# --------------------------------------------------------------------------------------
# the log-based metrics on the lines the code writes
# --------------------------------------------------------------------------------------


def _entry(line: dict, service: str) -> dict:
    """The LogEntry Cloud Run makes of one JSON line a function printed."""
    payload = {k: v for k, v in line.items() if k != "severity"}
    return {
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": service}},
        "severity": line.get("severity", "DEFAULT"),
        "jsonPayload": payload,
    }


@pytest.fixture
def logged(redis_url, database_url, pubsub, capsys, monkeypatch) -> dict[str, dict]:
    """One entry per kind of line, by name, from the real functions."""
    tenant = new_tenant("acme")
    new_license(tenant, "cad", seats=1)
    capsys.readouterr()
    lines: dict[str, dict] = {}

    def take(name: str, service: str) -> None:
        out = log_lines(capsys.readouterr().out)
        request = [line for line in out if "status" in line and "function" in line]
        assert request or service == "reaper", out
        lines[name] = _entry(request[-1] if request else out[-1], service)

    lease = acquire(tenant, "cad", "ws-1").get_json()
    take("acquired", "acquire")
    assert acquire(tenant, "cad", "ws-2").status_code == 409
    take("denied", "acquire")
    heartbeat(tenant, "cad", lease["session_id"])
    take("heartbeat", "heartbeat")
    release(tenant, "cad", lease["session_id"])
    take("released", "release")
    get_redis().set(LicenseKeys.of("acme", "cad").leases, "not a zset")  # -> 500
    assert acquire(tenant, "cad", "ws-3").status_code == 500
    out = log_lines(capsys.readouterr().out)
    lines["failed"] = _entry([x for x in out if "status" in x][-1], "acquire")
    lines["failed_trace"] = _entry([x for x in out if "stack_trace" in x][-1], "acquire")
    get_redis().delete(LicenseKeys.of("acme", "cad").leases)

    reaper = functions_framework.create_app(
        "reaper", str(FUNCTIONS_DIR / "reaper" / "main.py")
    ).test_client()
    assert reaper.post("/").status_code == 200
    out = log_lines(capsys.readouterr().out)
    lines["reaper_run"] = _entry([x for x in out if x.get("message") == "reaper run"][-1], "reaper")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    redisconn.reset()
    assert reaper.post("/").status_code == 503
    out = log_lines(capsys.readouterr().out)
    lines["reaper_failed"] = _entry([x for x in out if x.get("severity") == "ERROR"][-1], "reaper")
    return lines


REQUESTS = {"acquired", "denied", "heartbeat", "released", "failed"}
REAPER_VALUES = {"reclaimed", "published", "outbox_backlog", "duration_ms", "denials"}
EXPECTED = {
    "client_requests": REQUESTS,
    "client_5xx": {"failed"},
    "denials": {"denied"},
    "client_latency": REQUESTS,
    "reaper_runs": {"reaper_run"},
    "reaper_errors": {"reaper_failed"},
}


def test_each_log_metric_counts_exactly_the_lines_it_is_meant_for(rendered, logged):
    filters = rendered["logging_filters"]
    got = {
        key: {name for name, entry in logged.items() if matches(parse_logging(text), entry)}
        for key, text in filters.items()
    }
    for key, names in EXPECTED.items():
        assert got[key] == names, (key, filters[key], got[key])
    # seats_used: every request line that reports the seats of a license.
    seats = {n for n in REQUESTS if "seats_used" in logged[n]["jsonPayload"]}
    assert "acquired" in seats and got["seats_used"] == seats
    for key in (k for k in filters if k.startswith("reaper_value/")):
        assert got[key] == {"reaper_run"}, (key, filters[key])
    # The fields the metrics extract are in the lines they count.
    assert REAPER_VALUES <= set(logged["reaper_run"]["jsonPayload"])
    assert logged["denied"]["jsonPayload"]["outcome"] == "no_seats_available"


# --------------------------------------------------------------------------------------
# the log-based alert on the audit function's license notices
# --------------------------------------------------------------------------------------


def test_the_license_expiring_alert_matches_exactly_the_expiring_notices(
    rendered, database_url, capsys
):
    """The audit function stores a message with a license.expiring and a license.expired
    notice and a lease event; the alert's filter (Logging query language) matches the
    one line of the expiring notice and nothing else it logged."""
    import base64

    text = rendered["log_alert_filters"]["license_expiring"]
    tree = parse_logging(text)
    assert "resource.type" in {c[0] for c in comparisons(tree)}
    audit = functions_framework.create_app(
        "audit", str(FUNCTIONS_DIR / "audit" / "main.py")
    ).test_client()
    common = {"tenant_id": "acme", "license_id": "cad", "occurred_at": "2026-11-26T00:00:00Z"}
    notice = {"expires_at": "2026-12-26T00:00:00.000Z", "grace_ends_at": "2026-12-26T00:00:00.000Z"}
    events = [
        {**common, "event_id": "n-1", "type": "license.expiring",
         "metadata": {**notice, "threshold_days": 30}},
        {**common, "event_id": "n-2", "type": "license.expired", "metadata": notice},
        {**common, "event_id": "l-1", "type": "lease.acquired", "session_id": "s1",
         "client_id": "c1", "seats_used": 1, "seats_total": 2, "metadata": {}},
    ]  # fmt: skip
    capsys.readouterr()
    data = base64.b64encode(json.dumps(events).encode()).decode()
    body = {"message": {"data": data, "messageId": "1"}, "subscription": "projects/p/s/audit"}
    assert audit.post("/", json=body).status_code == 200
    lines = [_entry(line, "audit") for line in log_lines(capsys.readouterr().out)]
    matched = [e["jsonPayload"] for e in lines if matches(tree, e)]
    assert len(lines) == 3 and len(matched) == 1, lines
    assert matched[0]["type"] == "license.expiring" and matched[0]["threshold_days"] == 30
    assert {"tenant_id", "license_id", "expires_at"} <= set(matched[0])
    # the same line from another service is not the audit function's
    assert not matches(tree, _entry({**lines[1]["jsonPayload"], "severity": "WARNING"}, "reaper"))
