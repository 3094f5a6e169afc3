"""What the stack declares, in a form two configurations can be compared in (issue 40:
two regions, and one region exactly as before).

* ``declared_blocks(tf)``: every resource, data and ephemeral block of the stack and of
  the modules it calls, parsed with python-hcl2, without line numbers and comments, its
  ``lifecycle`` apart (``{"redis": {"resource google_redis_cluster.this": {...}}}``).
* ``module_inputs(tf, root, tfvars)``: Terraform itself (``plan`` + ``show -json``, no
  provider) evaluates a root and the stack on a copy in which each module the stack calls
  is a *recording* stub: its real ``variables.tf``, a ``terraform_data.inputs`` holding
  every input it was given, and each output a known value named after it
  (``"redis.instance_id"``, or a map by function name, a bool or a number where the
  stack needs one). What every module call receives is then plain JSON:
  ``{"scheduler": {"region": "europe-west1", "reaper_uri":
  "functions.service_uris.reaper", ...}}``, and an argument that takes another module's
  output shows which output it took.

``single_region_baseline.json`` holds both, computed from the configuration before the
two-region change (``python tests/terraform/two_regions_model.py DIR`` writes it from
the terraform/ directory DIR). test_two_regions.py compares today's configuration
without ``secondary_region`` against it. After a change meant to alter the one-region
stack, review the test's report, then write it again from today's tree
(``python tests/terraform/two_regions_model.py terraform``).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from tfconfig import META, attr, load

# Module outputs the stack passes on as something else than a string.
FUNCTION_MAPS = {
    "urls",
    "service_uris",
    "service_names",
    "service_account_emails",
    "secondary_urls",
    "secondary_service_uris",
    "secondary_service_names",
}
NUMBER_MAPS = {"max_instance_counts", "sql_connections"}
OBJECT_MAPS = {"environment", "secret_environment"}
FUNCTIONS = [
    "acquire", "heartbeat", "release", "keys", "reaper", "audit", "admin", "portal",
    "webhooks", "webhooks-retry",
]  # fmt: skip
SPECIAL = {
    ("redis", "port"): "6378",
    ("redis", "is_cluster"): "var.use_cluster",
    ("redis", "auth_enabled"): "!var.use_cluster",
    ("database", "max_connections"): "100",
    # a cluster id (the second region's cluster validates the form of its primary's)
    ("redis", "instance_id"): '"projects/stub/locations/stub/clusters/{call}.instance_id"',
}
# Two-region keys of a tfvars file (a one-region variant of an example drops them).
TWO_REGION_KEYS = (
    "use_redis_cluster",
    "secondary_region",
    "serving_region",
    "sql_replica_promoted",
    "lb_domains",
    "lb_ssl_certificates",
)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in META}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _modules_of(tf: Path) -> dict[str, Path]:
    """The stack and every module directory it calls, by directory name."""
    return {"stack": tf / "modules" / "stack", **{src.name: src for src in _calls_of(tf).values()}}


def _calls_of(tf: Path) -> dict[str, Path]:
    """The stack's module calls: name -> the directory it calls."""
    stack = tf / "modules" / "stack"
    return {name: (stack / attr(c, "source")).resolve() for name, c in load(stack).modules.items()}


def declared_blocks(tf: Path) -> dict[str, dict[str, dict]]:
    """module -> "kind type.name" -> {"body": ..., "lifecycle": ...} (see the docstring)."""
    out: dict[str, dict[str, dict]] = {}
    for module, directory in sorted(_modules_of(tf).items()):
        cfg = load(directory)
        blocks: dict[str, dict] = {}
        for kind, items in (("resource", cfg.resources), ("data", cfg.data),
                            ("ephemeral", cfg.ephemeral)):  # fmt: skip
            for (rtype, name), body in items.items():
                body = _strip(body)
                lifecycle = body.pop("lifecycle", [])
                blocks[f"{kind} {rtype}.{name}"] = {"body": body, "lifecycle": lifecycle}
        out[module] = blocks
    return out


def _output_value(source: str, module: str, name: str) -> str:
    """The known value of output ``name`` of the stub of call ``module`` (of ``source``)."""
    if (source, name) in SPECIAL:
        return SPECIAL[(source, name)].format(call=module)
    if name in FUNCTION_MAPS:
        return "{ " + ", ".join(f'{fn} = "{module}.{name}.{fn}"' for fn in FUNCTIONS) + " }"
    if name in NUMBER_MAPS:
        return "{ " + ", ".join(f"{fn} = 1" for fn in FUNCTIONS) + " }"
    if name in OBJECT_MAPS:
        return (
            "{ " + ", ".join(f'{fn} = {{ X = "{module}.{name}.{fn}" }}' for fn in FUNCTIONS) + " }"
        )
    return f'"{module}.{name}"'


def _recording_stub(src: Path, dst: Path) -> None:
    """The stub of one module call (dst is named after the call)."""
    cfg = load(src)
    dst.mkdir(parents=True)
    shutil.copy(src / "variables.tf", dst / "variables.tf")
    recorded = [n for n, v in cfg.variables.items() if attr(v, "ephemeral") is not True]
    lines = ['resource "terraform_data" "inputs" {', "  input = {"]
    lines += [f"    {n} = var.{n}" for n in recorded]
    lines += ["  }", "}", ""]
    if any(attr(body, "ephemeral") is True for body in cfg.outputs.values()):
        lines.append(
            'variable "stub_ephemeral" {\n  type      = any\n  default   = null\n'
            "  ephemeral = true\n}\n"
        )
    for name, body in cfg.outputs.items():
        ephemeral = attr(body, "ephemeral") is True
        value = "var.stub_ephemeral" if ephemeral else _output_value(src.name, dst.name, name)
        flags = "".join(
            f"\n  {flag} = true" for flag in ("sensitive", "ephemeral") if attr(body, flag) is True
        )
        lines.append(
            f'output "{name}" {{\n  description = "stub"\n  value       = {value}{flags}\n}}\n'
        )
    (dst / "main.tf").write_text("\n".join(lines))


def recording_tree(tf: Path, dst: Path) -> Path:
    """A copy of the stack and the roots, with recording stubs (see the docstring)."""
    from test_stack_wiring import _rename, _stub_resources

    root = dst / "terraform"
    stack = tf / "modules" / "stack"
    renames: dict[str, str] = {}
    (root / "modules" / "stack").mkdir(parents=True)
    for tf_file in ("main.tf", "variables.tf", "outputs.tf"):
        text = _stub_resources((stack / tf_file).read_text(), renames)
        (root / "modules" / "stack" / tf_file).write_text(text)
    for tf_file in ("main.tf", "outputs.tf"):
        path = root / "modules" / "stack" / tf_file
        path.write_text(_rename(path.read_text(), renames))
    # One stub per call, named after it (redis_secondary calls ../redis: its stub is
    # ../redis_secondary), so that each output says which call it came from.
    main = root / "modules" / "stack" / "main.tf"
    main.write_text(
        re.sub(r'(module "(\w+)" \{\n\s*source\s*=\s*"\.\./)\w+"', r'\1\2"', main.read_text())
    )
    for name, src in _calls_of(tf).items():
        _recording_stub(src, root / "modules" / name)
    for rel in ("envs/dev", "envs/prod", "examples/minimal"):
        env = tf / rel
        (root / rel).mkdir(parents=True)
        for tf_file in sorted(env.glob("*.tf")):
            if tf_file.name != "versions.tf":
                (root / rel / tf_file.name).write_text(_rename(tf_file.read_text(), renames))
    return root


def one_region(tfvars_text: str) -> str:
    """A tfvars file without its two-region settings."""
    keys = "|".join(TWO_REGION_KEYS)
    return re.sub(rf"^(?:{keys})\s*=.*\n", "", tfvars_text, flags=re.M)


def module_inputs(tree: Path, rel: str, tfvars_text: str) -> dict[str, Any]:
    """Plan one root of a recording tree with these tfvars: {"modules": call -> inputs
    (None for a call that has no instance), "outputs": the root's planned outputs}."""
    from test_stack_wiring import _terraform

    cwd = tree / rel
    (cwd / "case.tfvars").write_text(tfvars_text)
    shutil.rmtree(cwd / ".terraform", ignore_errors=True)
    rc, out = _terraform(cwd, "init", "-backend=false", "-input=false", "-no-color")
    assert rc == 0, out
    rc, out = _terraform(
        cwd, "plan", "-input=false", "-no-color", "-lock=false", "-var-file=case.tfvars",
        "-out=case.plan",
    )  # fmt: skip
    assert rc == 0, out
    rc, out = _terraform(cwd, "show", "-json", "case.plan")
    assert rc == 0, out
    plan, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    calls = load(tree / "modules" / "stack").modules
    modules: dict[str, Any] = {name: None for name in calls}
    for change in plan["resource_changes"]:
        match = re.fullmatch(
            r"module\.seatlease\.module\.(\w+)(?:\[0\])?\.terraform_data\.inputs", change["address"]
        )
        if match:
            modules[match.group(1)] = change["change"]["after"]["input"]
    outputs = {k: v.get("after") for k, v in plan.get("output_changes", {}).items()}
    # The checkout's path (repo_root) is the copy's: name it the same in every copy.
    return _placeholder({"modules": modules, "outputs": outputs}, str(tree.parent))


def _placeholder(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return value.replace(path, "<checkout>")
    if isinstance(value, dict):
        return {k: _placeholder(v, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholder(v, path) for v in value]
    return value


def baseline(tf: Path, work: Path) -> dict[str, Any]:
    """The baseline file's content for the terraform/ directory ``tf``."""
    tree = recording_tree(tf, work)
    inputs = {}
    for rel in ("envs/dev", "envs/prod", "examples/minimal"):
        tfvars = one_region((tf / rel / "terraform.tfvars.example").read_text())
        inputs[rel] = module_inputs(tree, rel, tfvars)["modules"]
    return {"blocks": declared_blocks(tf), "inputs": inputs}


if __name__ == "__main__":
    import tempfile

    source = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        data = baseline(source, Path(tmp))
    target = Path(__file__).with_name("single_region_baseline.json")
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")
