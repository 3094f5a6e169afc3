#!/usr/bin/env python3
"""Render the API reference docs/api.md from shared/seatlease/api/openapi.yaml (stdlib + PyYAML).

Usage:
    python tools/render_api_docs.py            # rewrite docs/api.md
    python tools/render_api_docs.py --check    # exit 1 if docs/api.md is out of date

The output is deterministic (no dates, stable order), so the committed docs/api.md can be
compared byte for byte with a fresh rendering (tests/test_openapi.py does).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "shared" / "seatlease" / "api" / "openapi.yaml"
OUTPUT = REPO / "docs" / "api.md"
METHODS = ("get", "put", "post", "delete", "patch")

Schema = dict[str, Any]


class Spec:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def resolve(self, node: Any) -> Any:
        """Follow ``$ref`` (local references only, which is all the spec uses)."""
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"only local $ref are supported, got {ref!r}")
            target: Any = self.doc
            for part in ref[2:].split("/"):
                target = target[part]
            node = target
            seen += 1
            if seen > 50:
                raise ValueError(f"$ref loop at {ref!r}")
        return node

    def flatten(self, schema: Any) -> Schema:
        """One schema with ``allOf`` merged (properties merged deeply, lists joined)."""
        schema = dict(self.resolve(schema) or {})
        parts = schema.pop("allOf", [])
        merged: Schema = {}
        for part in [*parts, schema]:
            _merge(merged, self.flatten(part) if "allOf" in part or "$ref" in part else part)
        return merged


def _merge(into: Schema, other: Schema) -> None:
    for key, value in other.items():
        if key == "properties":
            props = into.setdefault("properties", {})
            for name, sub in value.items():
                props[name] = {**props.get(name, {}), **sub} if name in props else dict(sub)
                if "properties" in sub and name in props:
                    props[name]["properties"] = {
                        **into["properties"][name].get("properties", {}),
                        **sub["properties"],
                    }
        elif key == "required":
            into["required"] = sorted({*into.get("required", []), *value})
        else:
            into[key] = value


def _type_text(spec: Spec, schema: Any) -> str:
    schema = spec.flatten(schema)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    parts = []
    for k in kinds:
        if k == "array":
            parts.append(f"array of {_type_text(spec, schema.get('items', {}))}")
        elif k == "object" and "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            if isinstance(extra, dict):
                inner = _type_text(spec, extra)
                parts.append(f"object of ({inner})" if "\\|" in inner else f"object of {inner}")
            else:
                parts.append("object")
        elif k == "string" and schema.get("format"):
            parts.append(f"string ({schema['format']})")
        else:
            parts.append(str(k))
    return " \\| ".join(parts)


def _constraints(spec: Spec, schema: Any) -> str:
    schema = spec.flatten(schema)
    out = []
    if "minimum" in schema and "maximum" in schema:
        out.append(f"{schema['minimum']} to {schema['maximum']}")
    elif "minimum" in schema:
        out.append(f">= {schema['minimum']}")
    elif "maximum" in schema:
        out.append(f"<= {schema['maximum']}")
    if "pattern" in schema:
        out.append(f"pattern `{schema['pattern']}`")
    elif "minLength" in schema or "maxLength" in schema:
        out.append(f"length {schema.get('minLength', 0)} to {schema.get('maxLength', '...')}")
    return "; ".join(out)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _strip_code(text: str) -> str:
    """Response descriptions start with "`code`: "; tables show the code in its own column."""
    text = text.strip()
    if text.startswith("`") and "`: " in text[:40]:
        text = text.split("`: ", 1)[1]
    return text[:1].upper() + text[1:]


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _fields_table(spec: Spec, schema: Any, prefix: str = "") -> list[str]:
    schema = spec.flatten(schema)
    required = set(schema.get("required", []))
    rows = []
    for name, sub in schema.get("properties", {}).items():
        flat = spec.flatten(sub)
        desc = flat.get("description", "")
        rows.append(
            f"| `{prefix}{name}` | {_type_text(spec, flat)} | "
            f"{'yes' if name in required else 'no'} | {_cell(_constraints(spec, flat))} | "
            f"{_cell(desc)} |"
        )
        if flat.get("type") == "object" and "properties" in flat:
            rows.extend(_fields_table(spec, flat, f"{prefix}{name}.")[2:])
        items = spec.flatten(flat.get("items", {})) if flat.get("type") == "array" else {}
        if items.get("properties"):
            rows.extend(_fields_table(spec, items, f"{prefix}{name}[].")[2:])
    if not rows:
        return []
    return [
        "| field | type | required | constraints | description |",
        "|---|---|---|---|---|",
        *rows,
    ]


def _json_block(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2), "```"]


def _error_code(spec: Spec, media: dict[str, Any]) -> str:
    schema = spec.flatten(media.get("schema", {}))
    error = schema.get("properties", {}).get("error", {})
    code = error.get("properties", {}).get("code", {})
    if "enum" in code:  # one response for several codes (503: unavailable, not configured)
        return " or ".join(f"`{value}`" for value in code["enum"])
    return f"`{code['const']}`" if "const" in code else ""


def _render_operation(spec: Spec, path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
    if op.get("description"):
        lines += [op["description"].rstrip(), ""]
    body = spec.resolve(op.get("requestBody", {}))
    for media_type, media in body.get("content", {}).items():
        lines += [f"### Request body (`{media_type}`)", ""]
        lines += [*_fields_table(spec, media["schema"]), ""]
        schema = spec.flatten(media["schema"])
        if schema.get("additionalProperties") is False:
            lines += ["Unknown fields are rejected (`400 invalid_request`).", ""]
        examples = media.get("examples") or (
            {"example": {"value": media["example"]}} if "example" in media else {}
        )
        for example in examples.values():
            title = spec.resolve(example).get("summary")
            lines += [f"Example ({title[:1].lower() + title[1:]}):" if title else "Example:", ""]
            lines += [*_json_block(spec.resolve(example)["value"]), ""]
    lines += ["### Responses", "", "| status | code | description | headers |", "|---|---|---|---|"]
    bodies: dict[str, list[str]] = {}  # success body schema -> statuses sharing it
    for status, response in op.get("responses", {}).items():
        response = spec.resolve(response)
        media = response.get("content", {}).get("application/json", {})
        headers = ", ".join(f"`{h}`" for h in response.get("headers", {}))
        description = _first_sentence(_strip_code(response.get("description", "")))
        lines.append(
            f"| {status} | {_error_code(spec, media)} | {_cell(description)} | {headers} |"
        )
        if status.startswith("2") and media:
            bodies.setdefault(json.dumps(media["schema"], sort_keys=True), []).append(status)
    lines += ["", "Errors are described under [Errors](#errors).", ""]
    for key, statuses in bodies.items():
        lines += [f"### {' and '.join(statuses)} response body", ""]
        lines += [*_fields_table(spec, json.loads(key)), ""]
        for status in statuses:
            media = spec.resolve(op["responses"][status])["content"]["application/json"]
            if "example" in media:
                lines += [f"Example ({status}):", "", *_json_block(media["example"]), ""]
    return lines


def _render_webhooks(spec: Spec) -> list[str]:
    """The OpenAPI 3.1 ``webhooks``: what the service POSTs to a tenant's endpoints."""
    webhooks = spec.doc.get("webhooks", {})
    if not webhooks:
        return []
    lines = ["## Webhooks", "", spec.doc.get("x-webhooks-description", "").rstrip(), ""]
    for name, item in webhooks.items():
        op = item["post"]
        lines += [f"### Webhook `{name}`", "", op.get("summary", ""), ""]
        if op.get("description"):
            lines += [op["description"].rstrip(), ""]
        lines += ["Headers:", "", "| header | type | description |", "|---|---|---|"]
        for parameter in op.get("parameters", []):
            parameter = spec.resolve(parameter)
            lines.append(
                f"| `{parameter['name']}` | {_type_text(spec, parameter['schema'])} | "
                f"{_cell(parameter.get('description', '').strip())} |"
            )
        lines.append("")
        for media_type, media in spec.resolve(op["requestBody"])["content"].items():
            lines += [f"Body (`{media_type}`):", "", *_fields_table(spec, media["schema"]), ""]
            if "example" in media:
                lines += ["Example:", "", *_json_block(media["example"]), ""]
        lines += ["The receiver's answer:", "", "| status | what the service does |", "|---|---|"]
        for status, response in op.get("responses", {}).items():
            description = spec.resolve(response).get("description", "").strip()
            lines.append(f"| {status} | {_cell(description)} |")
        lines.append("")
    return lines


def _render_errors(spec: Spec) -> list[str]:
    lines = [
        "## Errors",
        "",
        "Every error response has `Content-Type: application/json` and the body "
        '`{"error": {"code": "...", "message": "..."}}`; some codes add fields. It never '
        "contains a stack trace.",
        "",
    ]
    responses = spec.doc["components"]["responses"]
    for name in responses:
        response = responses[name]
        media = response.get("content", {}).get("application/json", {})
        code = _error_code(spec, media) or name
        lines += [f"### {code}", "", _strip_code(response.get("description", "")), ""]
        for header, header_spec in response.get("headers", {}).items():
            header_spec = spec.resolve(header_spec)
            lines.append(
                f"Header `{header}` ({_type_text(spec, header_spec['schema'])}): "
                f"{_cell(header_spec.get('description', 'always present'))}"
            )
            lines.append("")
        schema = spec.flatten(media.get("schema", {}))
        error = schema.get("properties", {}).get("error", {})
        extra = {
            k: v for k, v in error.get("properties", {}).items() if k not in ("code", "message")
        }
        if extra:
            table = _fields_table(
                spec,
                {"type": "object", "properties": extra, "required": error.get("required", [])},
                "error.",
            )
            lines += [*table, ""]
        if "example" in media:
            lines += ["Example:", "", *_json_block(media["example"]), ""]
    return lines


def render(doc: dict[str, Any]) -> str:
    spec = Spec(doc)
    info = doc["info"]
    lines = [
        f"# {info['title']} (version {info['version']})",
        "",
        "<!-- Generated by tools/render_api_docs.py from shared/seatlease/api/openapi.yaml;"
        " do not edit. -->",
        "",
        info.get("description", "").rstrip(),
        "",
        "## Servers",
        "",
    ]
    for server in doc.get("servers", []):
        lines.append(f"- `{server['url']}`: {server.get('description', '')}")
    lines += ["", "## Authentication", ""]
    for name, scheme in doc["components"].get("securitySchemes", {}).items():
        fmt = f", format `{scheme['bearerFormat']}`" if "bearerFormat" in scheme else ""
        lines += [
            f"`{name}`: HTTP `{scheme.get('scheme', scheme['type'])}`{fmt}.",
            "",
            scheme.get("description", "").rstrip(),
            "",
        ]
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                lines += _render_operation(spec, path, method, item[method])
    lines += _render_webhooks(spec)
    lines += _render_errors(spec)
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip() + "\n"


def render_file(spec_path: Path = SPEC) -> str:
    return render(yaml.safe_load(spec_path.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the output is stale")
    parser.add_argument("--spec", type=Path, default=SPEC)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render_file(args.spec)
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python tools/render_api_docs.py")
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
