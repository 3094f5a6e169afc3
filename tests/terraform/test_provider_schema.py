"""Every attribute and block name used on a google_* resource exists in the provider.

The schema comes from the registry package ``cdktf-cdktf-provider-google`` (PyPI): its
wheel carries the jsii assembly generated from the google provider's schema, with the
Terraform name of every argument in the docs link (``.../cloudfunctions2_function#name``).
The wheel is read as a zip (nothing is imported or installed: the bindings need node).
It is found installed, or in ~/.cache/seatlease, or fetched there with
``pip download --no-deps`` (PyPI).

That package stops at google provider 6.50.0 (HashiCorp stopped publishing the
bindings); this configuration needs >= 7.21 for Direct VPC egress. Arguments added after
6.50 are listed in NEWER_THAN_BINDINGS with the provider release that added them; the
test fails if one of those is not used any more (stale list) or if anything else is
unknown.
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

import pytest
from tfconfig import META, all_dirs, is_block, load

BINDINGS = "cdktf-cdktf-provider-google"
BINDINGS_VERSION = "16.12.1"  # = hashicorp/google 6.50.0
CACHE = Path(os.environ.get("SEATLEASE_CACHE", Path.home() / ".cache" / "seatlease"))
META_ARGS = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner"}

# (kind, type, attribute path) -> provider release that added it (CHANGELOG.md).
NEWER_THAN_BINDINGS = {
    (
        "resource",
        "google_cloudfunctions2_function",
        "service_config.direct_vpc_network_interface",
    ): "7.21.0",
    ("resource", "google_cloudfunctions2_function", "service_config.direct_vpc_egress"): "7.21.0",
    ("resource", "google_redis_instance", "deletion_protection"): "7.8.0",
    ("resource", "google_redis_cluster", "labels"): "7.15.0",
    # Ephemeral resources are not part of the cdktf bindings at all (provider >= 6.x).
    ("ephemeral", "google_secret_manager_secret_version", "*"): "ephemeral resource",
}


def _wheel() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    name = f"cdktf_cdktf_provider_google-{BINDINGS_VERSION}-py3-none-any.whl"
    wheel = CACHE / name
    if not wheel.exists():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(CACHE),
                f"{BINDINGS}=={BINDINGS_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0 and wheel.exists(), f"cannot fetch {BINDINGS}:\n{proc.stderr}"
    return wheel


def _assembly() -> dict:
    with zipfile.ZipFile(_wheel()) as zf:
        (tgz,) = [n for n in zf.namelist() if n.endswith(".jsii.tgz")]
        with zf.open(tgz) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            member = tar.extractfile("package/.jsii")
            return json.load(member)


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


ANCHOR = re.compile(r"/docs/(?:resources|data-sources)/\w+#(\w+) ")
TYPE_LINK = re.compile(r"/docs/(resources|data-sources)/(\w+) (google_\w+)\}")


@cache
def schema() -> dict[tuple[str, str], dict]:
    """(kind, terraform type) -> {name: None | nested schema} (kind: resource/data)."""
    types = _assembly()["types"]

    def struct(fqn: str, seen: frozenset = frozenset()) -> dict:
        fields: dict[str, dict | None] = {}
        for prop in types[fqn].get("properties", []):
            remarks = prop.get("docs", {}).get("remarks", "")
            match = ANCHOR.search(remarks)
            name = match.group(1) if match else _snake(prop["name"])
            nested = _struct_ref(prop["type"])
            fields[name] = struct(nested, seen | {fqn}) if nested and nested not in seen else None
        return fields

    def _struct_ref(t: dict) -> str | None:
        if "fqn" in t and t["fqn"] in types and types[t["fqn"]].get("datatype"):
            return t["fqn"]
        if "collection" in t:
            return _struct_ref(t["collection"]["elementtype"])
        if "union" in t:
            for option in t["union"]["types"]:
                ref = _struct_ref(option)
                if ref:
                    return ref
        return None

    out = {}
    for fqn, t in types.items():
        if t.get("kind") != "class":
            continue
        match = TYPE_LINK.search(t.get("docs", {}).get("summary", ""))
        if not match or f"{fqn}Config" not in types:
            continue
        kind = "resource" if match.group(1) == "resources" else "data"
        out[(kind, match.group(3))] = struct(f"{fqn}Config")
    return out


def _walk(kind, rtype, body, fields, path, unknown, used_newer):
    for key, value in body.items():
        if key in META or (not path and key in META_ARGS):
            continue
        if key == "dynamic":
            for dyn in value:
                for name, spec in dyn.items():
                    for content in spec.get("content", []):
                        _visit(kind, rtype, name, content, fields, path, unknown, used_newer)
            continue
        if isinstance(value, list) and value and all(map(is_block, value)):
            for nested in value:
                _visit(kind, rtype, key, nested, fields, path, unknown, used_newer)
            continue
        _check(kind, rtype, key, fields, path, unknown, used_newer)


def _check(kind, rtype, key, fields, path, unknown, used_newer):
    dotted = ".".join([*path, key])
    if key in fields:
        return True
    newer = (kind, rtype, dotted)
    if newer in NEWER_THAN_BINDINGS:
        used_newer.add(newer)
        return False
    unknown.append(f"{kind} {rtype}: {dotted}")
    return False


def _visit(kind, rtype, key, nested, fields, path, unknown, used_newer):
    if _check(kind, rtype, key, fields, path, unknown, used_newer) and fields[key] is not None:
        _walk(kind, rtype, nested, fields[key], [*path, key], unknown, used_newer)


def test_every_google_attribute_exists_in_the_provider_schema():
    sch = schema()
    assert ("resource", "google_cloudfunctions2_function") in sch, "schema extraction broke"
    assert "service_config" in sch[("resource", "google_cloudfunctions2_function")]
    unknown: list[str] = []
    used_newer: set = set()
    checked = 0
    for directory in all_dirs():
        cfg = load(directory)
        for kind, items in (("resource", cfg.resources), ("data", cfg.data)):
            for (rtype, _name), body in items.items():
                if not rtype.startswith("google_"):
                    continue
                assert (kind, rtype) in sch, f"{kind} type {rtype} unknown to the provider"
                _walk(kind, rtype, body, sch[(kind, rtype)], [], unknown, used_newer)
                checked += 1
        for (rtype, _name), _body in cfg.ephemeral.items():
            if rtype.startswith("google_"):
                key = ("ephemeral", rtype, "*")
                assert key in NEWER_THAN_BINDINGS, f"ephemeral {rtype} unchecked"
                used_newer.add(key)
    # Resource/data blocks (a for_each block counts once): 55 when written; a floor, so
    # that a parsing slip that drops a module cannot pass unnoticed.
    assert checked >= 50, checked
    assert not unknown, "attributes unknown to the google provider:\n" + "\n".join(unknown)
    assert used_newer == set(NEWER_THAN_BINDINGS), (
        f"stale NEWER_THAN_BINDINGS entries: {set(NEWER_THAN_BINDINGS) - used_newer}"
    )


def test_schema_check_catches_a_misspelled_attribute():
    sch = schema()
    unknown: list[str] = []
    body = {
        "name": "x",
        "service_config": [{"max_instance_cuont": 3, "__is_block__": True}],
        "build_config": [{"entrypoint": "x", "__is_block__": True}],
    }
    rtype = "google_cloudfunctions2_function"
    _walk("resource", rtype, body, sch[("resource", rtype)], [], unknown, set())
    assert sorted(unknown) == [
        f"resource {rtype}: build_config.entrypoint",
        f"resource {rtype}: service_config.max_instance_cuont",
    ]


@pytest.mark.parametrize(
    ("rtype", "required"),
    [
        ("google_redis_instance", {"name", "memory_size_gb"}),
        ("google_sql_database_instance", {"database_version"}),
        ("google_cloud_scheduler_job", {"name"}),
    ],
)
def test_schema_knows_the_basics(rtype, required):
    assert required <= set(schema()[("resource", rtype)])
