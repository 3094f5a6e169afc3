"""Issue 53, items 1 and 2: the failover's Terraform steps work with region A lost.

The runbook (docs/operations.md, "Fail over" and "When A returns") is read from the
page: its fenced shell blocks, continuation lines joined, every ``terraform`` command in
order. They must be the commands this test expects (so that the page and the test cannot
drift apart), and for each targeted apply the configuration's graph of references
(tfgraph.py, python-hcl2) from its targets, which is what Terraform plans and may call:

* it reaches none of region A's functions (the bug of issue 53: the load balancer,
  scheduler and push subscription took their names and URIs from A's function
  resources, so step 5 updated A's functions, whose CLOUD_SQL_INSTANCE had changed);
* every resource of region A it reaches depends on neither failover variable
  (``sql_replica_promoted``, ``serving_region``): with ``-refresh=false`` Terraform
  plans no change for it and makes no call for it; the resources that may change are
  in B or global;
* ``state rm`` takes out exactly the resources whose region follows ``serving_region``
  (they would otherwise be replaced, i.e. deleted in A);
* no step promotes the replica by hand (Terraform does, from the state).

The same check against the configuration before issue 53 (its functions module's
outputs) finds A's functions in the traffic step: the test is not vacuous.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import textwrap

import pytest
from tfconfig import REPO, TF
from tfgraph import BOTH, GLOBAL, SERVING, A, B, Graph

RUNBOOK = REPO / "docs" / "operations.md"
SECTIONS = ("### Fail over (A lost, B takes over)", "### When A returns")
FAILOVER_VARS = {"sql_replica_promoted", "serving_region"}

M = "module.seatlease.module."
EXPECTED = [
    ("apply", {
        "refresh": False,
        "vars": {"sql_replica_promoted": "true"},
        "targets": [f"{M}database.google_sql_database_instance.replica",
                    f"{M}functions.google_cloudfunctions2_function.secondary"],
    }),
    ("state rm", [f"{M}scheduler.google_cloud_scheduler_job.reaper",
                  f"{M}scheduler.google_cloud_scheduler_job.webhooks_retry"]),
    ("apply", {
        "refresh": False,
        "vars": {"sql_replica_promoted": "true", "serving_region": "$B"},
        "targets": [f"{M}loadbalancer", f"{M}scheduler",
                    f"{M}pubsub.google_pubsub_subscription.audit",
                    f"{M}pubsub.google_pubsub_subscription.webhooks"],
    }),
    # When A returns: A answers again, a full apply with a refresh.
    ("apply", {"refresh": True,
               "vars": {"sql_replica_promoted": "true", "serving_region": "$B"},
               "targets": []}),
]  # fmt: skip

# Region-A resources a step may reach, each with why it is there; all must be inert.
A_REACHED = {
    # step 2: the replica names its primary; B's functions name A's database user and
    # database (DB_USER, DB_NAME), the instance both regions' grants are limited to, and
    # B's Redis Cluster replicates A's.
    "database.google_sql_database_instance.this",
    "database.google_sql_database.app",
    "database.google_sql_user.app",
    "redis.google_redis_cluster.this",
    "redis.google_redis_instance.this",
    "redis.google_network_connectivity_service_connection_policy.redis",
    "network.google_compute_subnetwork.this",
    # step 4: the URL map's backend services hold both regions' serverless NEGs.
    "loadbalancer.google_compute_region_network_endpoint_group.this",
}


def section_text(markdown: str) -> str:
    parts = []
    for title in SECTIONS:
        assert title in markdown, f"docs/operations.md has no section {title!r}"
        start = markdown.index(title)
        end = markdown.find("\n### ", start + len(title))
        parts.append(markdown[start : end if end != -1 else None])
    return "\n".join(parts)


def shell_commands(markdown: str) -> list[list[str]]:
    """Every command of the fenced sh blocks of the failover sections, as argv."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section_text(markdown), flags=re.S):
        lines = re.sub(r"\\\n\s*", " ", textwrap.dedent(block)).splitlines()
        for line in lines:
            line = line.split("#", 1)[0].strip() if not line.strip().startswith("#") else ""
            if line:
                commands.append(shlex.split(line))
    return commands


def terraform_steps(commands: list[list[str]]) -> list[tuple[str, object]]:
    steps: list[tuple[str, object]] = []
    for argv in commands:
        if argv[0] != "terraform":
            continue
        if argv[1:3] == ["state", "rm"]:
            steps.append(("state rm", argv[3:]))
            continue
        assert argv[1] == "apply", f"unexpected terraform command: {argv}"
        step = {"refresh": True, "vars": {}, "targets": []}
        args = iter(argv[2:])
        for arg in args:
            if arg == "-refresh=false":
                step["refresh"] = False
            elif arg == "-var":
                key, _, value = next(args).partition("=")
                step["vars"][key] = value
            elif arg.startswith("-target="):
                step["targets"].append(arg.removeprefix("-target="))
            else:
                raise AssertionError(f"unexpected argument {arg!r} in {argv}")
        steps.append(("apply", step))
    return steps


def _short(graph: Graph, node) -> str:
    return graph.address(node).removeprefix(M)


def check_step(graph: Graph, targets: list[str]) -> dict[str, set[str]]:
    """What one targeted apply reaches: {"A functions", "A changing", "A inert",
    "unknown"}, each a set of short addresses."""
    nodes = set().union(*(graph.target(t) for t in targets))
    reached = [n for n in graph.closure(nodes) if n[1] == "resource"]
    found: dict[str, set[str]] = {"A functions": set(), "A changing": set(), "A inert": set(),
                                  "unknown": set()}  # fmt: skip
    for node in reached:
        region = graph.region_of(node)
        short = _short(graph, node)
        if short == "functions.google_cloudfunctions2_function.this":
            found["A functions"].add(short)
        if region in (A, BOTH):
            changing = graph.depends_on_var(node, FAILOVER_VARS)
            found["A changing" if changing else "A inert"].add(short)
        elif region not in (B, GLOBAL, SERVING):
            found["unknown"].add(f"{short} ({region})")
    return found


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph.of(TF)


def test_the_runbook_commands_are_the_ones_checked():
    steps = terraform_steps(shell_commands(RUNBOOK.read_text(encoding="utf-8")))
    assert steps == EXPECTED


def test_no_step_promotes_the_replica_by_hand():
    commands = shell_commands(RUNBOOK.read_text(encoding="utf-8"))
    assert commands, "no commands read"
    assert not [c for c in commands if "promote-replica" in c]
    # The first apply is the one that promotes: it sets sql_replica_promoted.
    first = next(s for kind, s in terraform_steps(commands) if kind == "apply")
    assert first["vars"].get("sql_replica_promoted") == "true"


@pytest.mark.parametrize("index", [0, 2], ids=["promote", "traffic"])
def test_each_failover_apply_reaches_nothing_in_a_it_could_change(graph, index):
    kind, step = EXPECTED[index]
    assert kind == "apply" and step["targets"] and step["refresh"] is False
    found = check_step(graph, step["targets"])
    assert found["A functions"] == set()
    assert found["A changing"] == set()
    assert found["unknown"] <= {
        # the source bucket's location is a multi-region (test_failover_hardening.py)
        "functions.google_storage_bucket.sources (other: ${local.source_bucket_location})",
        "functions.google_storage_bucket_object.source (other: ${local.source_bucket_location})",
    }, found["unknown"]
    assert found["A inert"] <= A_REACHED, found["A inert"] - A_REACHED


def test_the_targets_change_what_the_failover_needs(graph):
    """Not vacuous: the targets reach the resources a failover must change."""
    promote = check_step(graph, EXPECTED[0][1]["targets"])
    traffic = check_step(graph, EXPECTED[2][1]["targets"])
    assert "database.google_sql_database_instance.this" in promote["A inert"]
    assert "loadbalancer.google_compute_region_network_endpoint_group.this" in traffic["A inert"]
    replica = graph.target(f"{M}database.google_sql_database_instance.replica")
    assert all(graph.depends_on_var(n, {"sql_replica_promoted"}) for n in replica)
    url_map = graph.target(f"{M}loadbalancer.google_compute_url_map.this")
    assert all(graph.depends_on_var(n, {"serving_region"}) for n in url_map)
    subscription = graph.target(f"{M}pubsub.google_pubsub_subscription.audit")
    assert all(graph.depends_on_var(n, {"serving_region"}) for n in subscription)
    (job,) = graph.target(f"{M}scheduler.google_cloud_scheduler_job.reaper")
    assert graph.region_of(job) == SERVING


def test_state_rm_takes_out_what_follows_the_serving_region(graph):
    follows = {graph.address(n) for n in graph.resources() if graph.region_of(n) == SERVING}
    (removed,) = [s for kind, s in EXPECTED if kind == "state rm"]
    assert set(removed) == follows


def test_every_resource_has_a_known_region(graph):
    """Not vacuous: region_of tells A from B for every resource of the stack."""
    regions = {_short(graph, n): graph.region_of(n) for n in graph.resources()}
    assert regions["functions.google_cloudfunctions2_function.this"] == A
    assert regions["functions.google_cloudfunctions2_function.secondary"] == B
    assert regions["database.google_sql_database_instance.replica"] == B
    assert regions["database.google_sql_user.app"] == A  # on the primary
    assert regions["functions.google_sql_user.iam"] == A  # on the primary, by name
    assert regions["loadbalancer.google_compute_url_map.this"] == GLOBAL
    unknown = {k: v for k, v in regions.items() if v.startswith("other")}
    assert set(unknown) == {"functions.google_storage_bucket.sources",
                            "functions.google_storage_bucket_object.source"}  # fmt: skip


def test_the_check_finds_the_bug_of_issue_53(tmp_path):
    """Against the functions module's outputs before issue 53 (from git), the traffic
    step reaches A's functions, which the failover variables change."""
    copy = tmp_path / "terraform"
    shutil.copytree(TF, copy, ignore=shutil.ignore_patterns(".terraform", ".build"))
    old = subprocess.run(
        ["git", "-C", str(REPO), "show", "3c4bfca:terraform/modules/functions/outputs.tf"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "google_cloudfunctions2_function.this : fn => f.service_config[0].uri" in old
    (copy / "modules" / "functions" / "outputs.tf").write_text(old)
    old_graph = Graph.of(copy)
    try:
        found = check_step(old_graph, EXPECTED[2][1]["targets"])
    finally:
        Graph.of(TF)  # the load cache back on this checkout
    assert found["A functions"] == {"functions.google_cloudfunctions2_function.this"}
    assert "functions.google_cloudfunctions2_function.this" in found["A changing"]


def test_the_runbook_reader_sees_a_changed_command(tmp_path):
    """Not vacuous: a hand promotion or a changed target in the page fails the checks."""
    text = RUNBOOK.read_text(encoding="utf-8")
    promoted = text.replace(
        "   terraform apply -refresh=false -var sql_replica_promoted=true \\\n",
        "   gcloud sql instances promote-replica $NAME-$B --project=$PROJECT\n"
        "   terraform apply -refresh=false -var sql_replica_promoted=true \\\n",
        1,
    )
    assert promoted != text
    assert [c for c in shell_commands(promoted) if "promote-replica" in c]
    widened = text.replace(
        f"-target={M}database.google_sql_database_instance.replica",
        f"-target={M}database",
        1,
    )
    assert widened != text
    assert terraform_steps(shell_commands(widened)) != EXPECTED


REAPER_GRANTS = {
    A: ("functions.google_cloud_run_v2_service_iam_member.reaper_invoker",
        "functions.google_cloudfunctions2_function.this"),
    B: ("functions.google_cloud_run_v2_service_iam_member.reaper_invoker_secondary",
        "functions.google_cloudfunctions2_function.secondary"),
}  # fmt: skip


@pytest.mark.parametrize("region", [A, B])
def test_the_reaper_grant_waits_for_the_reaper_of_its_region(graph, region):
    """A first apply: the scheduler's run.invoker grant on the reaper names the reaper's
    function resource, so Terraform creates it after the Cloud Run service (an IAM call
    on a service that does not exist yet fails). A service name from the function table
    would not order them."""
    grant_address, function_address = REAPER_GRANTS[region]
    (grant,) = graph.target(M + grant_address)
    (function,) = graph.target(M + function_address)
    assert graph.region_of(grant) == region
    assert function in graph.edges[grant], sorted(graph.edges[grant])
    # The grant's principal is the identity the job's OIDC token carries.
    (sa,) = graph.target(f"{M}functions.google_service_account.scheduler")
    assert sa in graph.edges[grant]
    (job,) = graph.target(f"{M}scheduler.google_cloud_scheduler_job.reaper")
    assert sa in graph.closure({job})


def test_the_traffic_step_creates_no_grant_and_reaches_no_function_of_a(graph):
    """The grants exist in both regions before a failover: the traffic step's targets
    reach neither grant, nor any of region A's functions (the job is the only resource of
    the scheduler, and the one that moves)."""
    targets = EXPECTED[2][1]["targets"]
    reached = {_short(graph, n) for n in graph.closure(
        set().union(*(graph.target(t) for t in targets))) if n[1] == "resource"}  # fmt: skip
    assert "scheduler.google_cloud_scheduler_job.reaper" in reached
    assert not {grant for grant, _ in REAPER_GRANTS.values()} & reached
    assert "functions.google_cloudfunctions2_function.this" not in reached
    scheduler = {_short(graph, n) for n in graph.resources() if n[0][-1:] == ("scheduler",)}
    assert scheduler == {
        "scheduler.google_cloud_scheduler_job.reaper",
        "scheduler.google_cloud_scheduler_job.webhooks_retry",
    }
