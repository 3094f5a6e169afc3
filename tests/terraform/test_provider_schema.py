"""Every google_* resource, data source and ephemeral resource of terraform/ against the
schema of the google provider versions the configuration allows.

The schema comes from the provider bindings ``cdktn-provider-google`` (PyPI, the CDK
Terrain continuation of the cdktf bindings): each wheel carries the jsii assembly that
was generated from one google provider release's ``terraform providers schema``, with
the Terraform name of every argument in its docs link (``.../redis_instance#tier``),
whether it is optional, its type, and whether it is a block (``"tier block."``) and how
many it takes (a struct: at most one; a list of structs: any number). The wheel is read
as a zip: nothing is imported or installed (the bindings need node). It is found in
~/.cache/seatlease or fetched there with ``pip download --no-deps`` (PyPI), and what is
extracted from it is cached next to it.

The modules require ``hashicorp/google >= 7.31, < 8.0``. The check runs against both
ends of that range that have bindings: 7.31.0, the oldest version allowed (an argument
added later would break ``terraform init`` on it), and 7.46.1, the newest 7.x with
bindings (an argument deprecated and removed would show there). There is no list of
exceptions: an argument unknown to either schema fails the test.

(Ephemeral resources are in the bindings only from cdktn 20 on, so the ephemeral
``google_secret_manager_secret_version`` is checked against 7.46.1 only.)

Checked: every argument and block name, at every nesting level (dynamic blocks too);
every required argument or block is set (a dynamic block counts as set); a block the
provider takes at most once is not written twice; an attribute is not written as a
block or the other way round; literal values have the type the schema states (a string
where a number is needed, a scalar where a list or map is needed...). Expressions
(``var.x``, ``each.value``...) are not evaluated here: test_stack_wiring.py has
Terraform evaluate what it can without the provider.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tfconfig import META, all_dirs, is_block, load

BINDINGS = "cdktn-provider-google"
# bindings version -> google provider version it was generated from (its README says).
SCHEMAS = {"19.0.0": "7.31.0", "20.3.1": "7.46.1"}
CONSTRAINT = ">= 7.31, < 8.0"
CACHE = Path(os.environ.get("SEATLEASE_CACHE", Path.home() / ".cache" / "seatlease"))
META_ARGS = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner"}
KINDS = {"resources": "resource", "data-sources": "data", "ephemeral-resources": "ephemeral"}

TYPE_LINK = re.compile(
    r"/google/([\d.]+)/docs/(resources|data-sources|ephemeral-resources)/\w+ (google_\w+)\}"
)
ANCHOR = re.compile(r"/docs/(?:resources|data-sources|ephemeral-resources)/\w+#(\w+) ")
EXPR = re.compile(r"\$\{")


def _wheel(version: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    wheel = CACHE / f"cdktn_provider_google-{version}-py3-none-any.whl"
    if not wheel.exists():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--dest", str(CACHE), f"{BINDINGS}=={version}"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0 and wheel.exists(), f"cannot fetch {BINDINGS}:\n{proc.stderr}"
    return wheel


def _assembly(version: str) -> dict:
    with zipfile.ZipFile(_wheel(version)) as zf:
        (tgz,) = [n for n in zf.namelist() if n.endswith(".jsii.tgz")]
        with zf.open(tgz) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            member = tar.extractfile("package/.jsii")
            assert member is not None
            return json.load(member)


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _type_of(t: dict, types: dict) -> tuple[str, str | None, bool]:
    """(type, nested struct fqn or None, multiple) of a jsii property type."""
    if "primitive" in t:
        return {"boolean": "bool"}.get(t["primitive"], t["primitive"]), None, False
    if "fqn" in t:
        if t["fqn"] in types and types[t["fqn"]].get("datatype"):
            return "object", t["fqn"], False
        return "any", None, False  # cdktn.IResolvable and the like
    if "collection" in t:
        kind = "map" if t["collection"]["kind"] == "map" else "list"
        inner, nested, _ = _type_of(t["collection"]["elementtype"], types)
        return f"{kind}({inner})", nested, True
    if "union" in t:  # e.g. boolean | IResolvable, IResolvable | Struct[]
        options = [_type_of(o, types) for o in t["union"]["types"]]
        concrete = [o for o in options if o[0] != "any"]
        return concrete[0] if len(concrete) == 1 else ("any", None, False)
    return "any", None, False


def _extract(assembly: dict) -> tuple[str, dict]:
    """(provider version, {"kind type": {argument: spec}}) from a jsii assembly."""
    types = assembly["types"]
    versions: set[str] = set()

    def struct(fqn: str, seen: frozenset) -> dict:
        fields: dict[str, dict] = {}
        for prop in types[fqn].get("properties", []):
            docs = prop.get("docs", {})
            match = ANCHOR.search(docs.get("remarks", ""))
            name = match.group(1) if match else _snake(prop["name"])
            tf_type, nested, multiple = _type_of(prop["type"], types)
            spec: dict[str, Any] = {
                "type": tf_type,
                "required": not prop.get("optional", False),
                "block": docs.get("summary", "").endswith(" block."),
            }
            if spec["block"]:
                spec["max_one"] = not multiple
            if nested and nested not in seen:
                spec["nested"] = struct(nested, seen | {fqn})
            fields[name] = spec
        return fields

    out = {}
    for fqn, t in types.items():
        if t.get("kind") != "class":
            continue
        match = TYPE_LINK.search(t.get("docs", {}).get("summary", ""))
        if not match or f"{fqn}Config" not in types:
            continue
        versions.add(match.group(1))
        out[f"{KINDS[match.group(2)]} {match.group(3)}"] = struct(f"{fqn}Config", frozenset())
    (version,) = versions
    return version, out


@cache
def schema(bindings: str) -> dict:
    """{"kind type": {argument: spec}} of one bindings release (cached as JSON)."""
    cached = CACHE / f"google-schema-{bindings}.json"
    if cached.exists():
        data = json.loads(cached.read_text())
    else:
        version, types = _extract(_assembly(bindings))
        data = {"provider_version": version, "types": types}
        cached.write_text(json.dumps(data))
    assert data["provider_version"] == SCHEMAS[bindings], data["provider_version"]
    return data["types"]


# --------------------------------------------------------------------------------------
# the check
# --------------------------------------------------------------------------------------


def _literal_type_error(value: Any, tf_type: str) -> str | None:
    """Why a literal cannot be converted to tf_type (None: fine, or not a literal)."""
    if value is None or (isinstance(value, str) and EXPR.search(value)):
        return None  # null, or an expression/template: Terraform's job at plan time
    if tf_type == "any" or tf_type == "object":
        return None
    if tf_type == "string":
        if isinstance(value, list | dict):
            return f"a {type(value).__name__} where a string is needed"
        return None
    if tf_type == "number":
        if isinstance(value, bool) or isinstance(value, list | dict):
            return f"{value!r} where a number is needed"
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return f"{value!r} where a number is needed"
        return None
    if tf_type == "bool":
        if isinstance(value, bool) or value in ("true", "false"):
            return None
        return f"{value!r} where a bool is needed"
    inner = tf_type[tf_type.index("(") + 1 : -1]
    if tf_type.startswith("list("):
        if not isinstance(value, list):
            return f"{value!r} where a list is needed"
        return next((e for e in (_literal_type_error(v, inner) for v in value) if e), None)
    if tf_type.startswith("map("):
        if not isinstance(value, dict):
            return f"{value!r} where a map is needed"
        values = [v for k, v in value.items() if k not in META]
        return next((e for e in (_literal_type_error(v, inner) for v in values) if e), None)
    return None


def _blocks_in(body: dict) -> dict[str, list[tuple[dict, bool]]]:
    """Nested block name -> [(body, written as a dynamic block)]."""
    found: dict[str, list[tuple[dict, bool]]] = {}
    for key, value in body.items():
        if key in META:
            continue
        if key == "dynamic":
            for dyn in value:
                for name, spec in dyn.items():
                    for content in spec.get("content", []):
                        found.setdefault(name, []).append((content, True))
        elif isinstance(value, list) and value and all(map(is_block, value)):
            found.setdefault(key, []).extend((b, False) for b in value)
    return found


def check_body(where: str, body: dict, fields: dict, top: bool = True) -> list[str]:
    """Every problem of one block body against its schema fields."""
    problems: list[str] = []
    blocks = _blocks_in(body)
    attributes = {
        k: v
        for k, v in body.items()
        if k not in META and k != "dynamic" and k not in blocks and not (top and k in META_ARGS)
    }
    for name, value in attributes.items():
        spec = fields.get(name)
        if spec is None:
            problems.append(f"{where}.{name}: unknown argument")
        elif spec["block"]:
            problems.append(f"{where}.{name}: is a block, written as an argument")
        elif error := _literal_type_error(value, spec["type"]):
            problems.append(f"{where}.{name}: {error} ({spec['type']})")
    for name, instances in blocks.items():
        if top and name in META_ARGS:
            continue
        spec = fields.get(name)
        if spec is None:
            problems.append(f"{where}.{name}: unknown block")
            continue
        if not spec["block"]:
            problems.append(f"{where}.{name}: is an argument, written as a block")
            continue
        static = [b for b, dynamic in instances if not dynamic]
        if spec.get("max_one") and (len(static) > 1 or len(instances) > 1):
            problems.append(f"{where}.{name}: the provider takes at most one such block")
        for nested, _dynamic in instances:
            problems.extend(check_body(f"{where}.{name}", nested, spec.get("nested", {}), False))
    for name, spec in fields.items():
        if spec["required"] and name not in attributes and name not in blocks:
            problems.append(f"{where}: required {'block' if spec['block'] else 'argument'} "
                            f"{name} is not set")  # fmt: skip
    return problems


def _google_blocks() -> list[tuple[str, str, dict]]:
    """(kind type, where, body) of every google_* block in terraform/."""
    found = []
    for directory in all_dirs():
        cfg = load(directory)
        for kind, items in (("resource", cfg.resources), ("data", cfg.data),
                            ("ephemeral", cfg.ephemeral)):  # fmt: skip
            for (rtype, name), body in items.items():
                if rtype.startswith("google_"):
                    where = f"{directory.relative_to(directory.parents[1])}: {kind} {rtype}.{name}"
                    found.append((f"{kind} {rtype}", where, body))
    return found


@pytest.mark.parametrize("bindings", sorted(SCHEMAS))
def test_every_google_block_matches_the_provider_schema(bindings):
    sch = schema(bindings)
    assert "service_config" in sch["resource google_cloudfunctions2_function"]
    # The bindings generator emitted ephemeral resources only from cdktn 20 on: an older
    # release has none at all, so it can say nothing about them (the newer one checks).
    has_ephemeral = any(key.startswith("ephemeral ") for key in sch)
    problems: list[str] = []
    checked = 0
    for key, where, body in _google_blocks():
        if key.startswith("ephemeral ") and not has_ephemeral:
            continue
        assert key in sch, f"{where}: {key} does not exist in google {SCHEMAS[bindings]}"
        problems.extend(check_body(where, body, sch[key]))
        checked += 1
    # A floor (58 blocks when written, 79 with the two-region blocks: the loadbalancer
    # module, the second region's functions and grants, the Cloud SQL replica, the
    # second region's subnets), so that a parsing slip that drops a module cannot pass
    # unnoticed.
    assert checked >= 75, checked
    assert has_ephemeral or bindings != max(SCHEMAS), "the newest bindings must check ephemerals"
    assert not problems, f"against google {SCHEMAS[bindings]}:\n" + "\n".join(problems)


def test_modules_require_the_provider_range_that_is_checked():
    for directory in all_dirs():
        cfg = load(directory)
        for tf in cfg.terraform:
            for providers in tf.get("required_providers", []):
                if "google" in providers:
                    assert providers["google"]["version"] == CONSTRAINT, directory


# --------------------------------------------------------------------------------------
# the check catches what it should
# --------------------------------------------------------------------------------------

FN = "resource google_cloudfunctions2_function"


def _block(**body: Any) -> dict:
    return {**body, "__is_block__": True}


def _function(**changes: Any) -> dict:
    body = {
        "name": "x",
        "location": "europe-west1",
        "build_config": [_block(runtime="python312", entry_point="x")],
        "service_config": [_block(max_instance_count=3, ingress_settings="ALLOW_ALL")],
    }
    body.update(changes)
    return body


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),
        (
            {"service_config": [_block(max_instance_cuont=3)]},
            ["f.service_config.max_instance_cuont: unknown argument"],
        ),
        (
            {"build_config": [_block(entrypoint="x")]},
            ["f.build_config.entrypoint: unknown argument"],
        ),
        ({"name": None, "location": None}, []),  # null: Terraform's business
        (
            {"service_config": [_block(max_instance_count="three")]},
            ["f.service_config.max_instance_count: 'three' where a number is needed (number)"],
        ),
        (
            {"service_config": [_block(all_traffic_on_latest_revision="yes")]},
            [
                "f.service_config.all_traffic_on_latest_revision: "
                "'yes' where a bool is needed (bool)"
            ],
        ),
        ({"labels": "app=x"}, ["f.labels: 'app=x' where a map is needed (map(string))"]),
        ({"labels": "${var.labels}"}, []),
        (
            {"build_config": [_block(runtime="a"), _block(runtime="b")]},
            ["f.build_config: the provider takes at most one such block"],
        ),
        ({"service_config": "x"}, ["f.service_config: is a block, written as an argument"]),
    ],
)
def test_check_catches_names_types_and_block_counts(changes, expected):
    assert check_body("f", _function(**changes), schema("20.3.1")[FN]) == expected


def test_check_catches_a_missing_required_argument():
    body = _function()
    del body["name"]
    assert check_body("f", body, schema("20.3.1")[FN]) == ["f: required argument name is not set"]
    redis = {"name": "r", "__is_block__": True}
    problems = check_body("r", redis, schema("19.0.0")["resource google_redis_instance"])
    assert problems == ["r: required argument memory_size_gb is not set"]


def test_an_argument_newer_than_the_oldest_allowed_provider_is_caught():
    """REMOVE_PEERING-era arguments aside, e.g. an argument that 7.46 has and 7.31 lacks."""
    old, new = schema("19.0.0"), schema("20.3.1")
    added = {
        (key, name)
        for key, fields in new.items()
        if key in old
        for name in fields
        if name not in old[key]
    }
    assert added, "7.46.1 should know arguments that 7.31.0 does not"
    key, name = sorted(added)[0]
    body = {name: "x"}
    assert f"t.{name}: unknown argument" in check_body("t", body, old[key])


@pytest.mark.parametrize(
    ("key", "required"),
    [
        ("resource google_redis_instance", {"name", "memory_size_gb"}),
        ("resource google_sql_database_instance", {"database_version"}),
        ("resource google_cloud_scheduler_job", {"name"}),
    ],
)
def test_schema_knows_the_basics(key, required):
    for bindings in SCHEMAS:
        fields = schema(bindings)[key]
        assert required <= {n for n, s in fields.items() if s["required"]}, bindings
    fields = schema("20.3.1")["ephemeral google_secret_manager_secret_version"]
    assert {"secret"} <= {n for n, s in fields.items() if s["required"]}
    assert not [k for k in schema("19.0.0") if k.startswith("ephemeral ")]
