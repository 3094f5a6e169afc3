"""shared/seatlease/api/openapi.yaml describes the running functions exactly.

Schemathesis generates requests from the spec (valid and deliberately invalid bodies,
wrong types, unknown fields, other methods, missing headers) and sends them to the real
functions (``seatlease_cli.devserver.create_app`` as WSGI) backed by the test's private
redis-server and PostgreSQL database, with a real tenant, API key and license. Every
response must be documented: status code, content type, body schema and required headers.
No 5xx is allowed except a documented ``503 backend_unavailable``.

Also here: docs/api.md is the rendering of the committed spec.
"""

from __future__ import annotations

import importlib.util
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from seatlease.records import store
from seatlease_cli import devserver

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "shared" / "seatlease" / "api" / "openapi.yaml"
EXAMPLE_LICENSE = "cad-suite-2026"  # the license id the spec's examples use
EXAMPLES = 120  # per operation and run: about 2 x 3 x 120 requests, well under a minute

schema = schemathesis.openapi.from_path(SPEC)
APP = devserver.create_app(["acquire", "heartbeat", "release", "keys"])

CONFORMANCE = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure here is reproducible
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _server_errors_are_documented_503s(response: Any) -> None:
    """The brief's "no server error": a 5xx may only be the documented 503."""
    if response.status_code >= 500:
        body = response.json()
        assert response.status_code == 503, (response.status_code, body)
        assert body["error"]["code"] == "backend_unavailable"


def _header(response: Any, name: str) -> str | None:
    """schemathesis' Response keeps headers as lower-cased names -> lists of values."""
    values = response.headers.get(name.lower())
    return values[0] if values else None


def _error_contract(response: Any) -> None:
    if response.status_code < 400 and str(response.request.url).endswith("/keys"):
        return  # the JWKS: application/jwk-set+json (or a bodiless 304), checked by the spec
    assert _header(response, "Content-Type") == "application/json"
    text = response.text
    assert "Traceback" not in text and 'File "' not in text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str) and error["message"]


class World:
    """A real tenant with a key and a roomy license (every lease_seconds and
    borrow_seconds of the spec's range is allowed), plus one live session per license for
    heartbeat/release cases."""

    def __init__(self) -> None:
        store.create_tenant("acme")
        self.key = store.create_api_key("acme").key
        self.auth = {"Authorization": f"Bearer {self.key}"}
        store.create_license(
            "acme",
            EXAMPLE_LICENSE,
            seats=1000,
            max_lease_seconds=604800,
            max_borrow_seconds=2592000,
        )
        self.sessions = [self._acquire(f"fixture-{i}") for i in range(3)]

    def _acquire(self, client_id: str) -> str:
        client = _client()
        response = client.post(
            "/acquire",
            json={"license_id": EXAMPLE_LICENSE, "client_id": client_id},
            headers=self.auth,
        )
        assert response.status_code == 201, response.text
        return response.json["session_id"]

    def aim(self, case: Any) -> None:
        """Point about half of the valid bodies at the real license (and, for heartbeat
        and release, a real session), so fuzzing reaches the seat rules and not only 404."""
        body = case.body
        if not isinstance(body, dict) or case.meta.generation.mode != GenerationMode.POSITIVE:
            return
        pick = zlib.crc32(json.dumps(body, sort_keys=True, default=str).encode())
        if pick % 2:
            return
        body["license_id"] = EXAMPLE_LICENSE
        if "session_id" in body and pick % 4 == 0:
            body["session_id"] = self.sessions[pick % len(self.sessions)]


def _client() -> Any:
    from werkzeug.test import Client

    return Client(APP)


@pytest.fixture
def world(redis_url: str, database_url: str) -> World:
    return World()


@schema.parametrize()
@FUZZ_SETTINGS
def test_spec_matches_functions_with_a_valid_key(case: Any, world: World) -> None:
    world.aim(case)
    response = case.call(app=APP, headers=world.auth)
    _server_errors_are_documented_503s(response)
    checks = [*CONFORMANCE]
    if case.meta.generation.mode == GenerationMode.NEGATIVE:
        checks.append(negative_data_rejection)  # the spec is not looser than the code
    case.validate_response(response, checks=checks, headers=world.auth)
    _error_contract(response)
    if response.status_code == 401:
        # Only the cases where schemathesis deliberately drops the header (a negative
        # mutation of the security parameter); the key itself is always accepted.
        assert case.meta.generation.mode == GenerationMode.NEGATIVE
        assert "Authorization" not in response.request.headers
    if response.status_code == 400 and case.meta.generation.mode == GenerationMode.POSITIVE:
        # The code is not stricter than the spec either: a body the spec calls valid is
        # only refused for what JSON Schema cannot express.
        assert _beyond_json_schema(case.body, response.json()["error"]), response.text


def _beyond_json_schema(body: dict[str, Any], error: dict[str, Any]) -> bool:
    """The documented limits JSON Schema cannot state: metadata over 4096 bytes, a
    lease_seconds above this license's maximum, a weight (``seats``) above this license's
    seats, integral floats (JSON Schema calls ``5.0`` an integer; the functions accept
    only ``5``, as the spec's text says), and borrow_seconds with lease_seconds."""
    metadata = json.dumps(body.get("metadata"), separators=(",", ":"))
    both = body.get("lease_seconds") is not None and body.get("borrow_seconds") is not None
    over_license = [
        d
        for d in error.get("details", [])
        if d.get("field") == "seats" and "at most" in d["problem"]
    ]
    return (
        len(metadata.encode()) > 4096
        or "max_lease_seconds" in error
        or isinstance(body.get("lease_seconds"), float)
        or isinstance(body.get("borrow_seconds"), float)
        or isinstance(body.get("seats"), float)
        or isinstance(body.get("idle_seconds"), float)
        or bool(over_license and body.get("seats", 0) > 1000)  # World's license: 1000 seats
        or both
    )


@schema.parametrize()
@FUZZ_SETTINGS
def test_spec_matches_functions_without_a_key(case: Any, world: World) -> None:
    world.aim(case)
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    case.headers = headers
    response = case.call(app=APP)
    _server_errors_are_documented_503s(response)
    case.validate_response(response, checks=CONFORMANCE)
    _error_contract(response)
    public = case.path == "/keys"  # the JWKS needs no key
    assert response.status_code in ((200, 304, 405) if public else (401, 405, 415)), response.text
    if response.status_code == 401:
        assert _header(response, "WWW-Authenticate") == "Bearer"


def test_every_operation_is_fuzzed() -> None:
    operations = sorted(op.ok().label for op in schema.get_all_operations())
    assert operations == ["GET /keys", "POST /acquire", "POST /heartbeat", "POST /release"]


def test_no_server_error_check_catches_a_500() -> None:
    """The 5xx guard really fails on an undocumented server error."""

    class Fake:
        status_code = 500

        def json(self) -> dict:
            return {"error": {"code": "internal_error", "message": "boom"}}

    with pytest.raises(AssertionError):
        _server_errors_are_documented_503s(Fake())


def test_spec_is_a_valid_openapi_31_document() -> None:
    from openapi_spec_validator import validate
    from openapi_spec_validator.readers import read_from_filename

    document, _ = read_from_filename(str(SPEC))
    assert document["openapi"].startswith("3.1")
    validate(document)


def _examples(document: dict) -> list[tuple[str, dict, Any]]:
    """(where, media type object, example value) for every example in the spec."""
    found = []
    for path, item in document["paths"].items():
        operation = item.get("post") or item["get"]
        media = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        for name, example in media.get("examples", {}).items():
            found.append((f"{path} request {name}", media, example["value"]))
        if "example" in media:
            found.append((f"{path} request", media, media["example"]))
        for status, response in operation["responses"].items():
            if "$ref" in response:
                response = document["components"]["responses"][response["$ref"].split("/")[-1]]
            for media in response.get("content", {}).values():
                if "example" in media:
                    found.append((f"{path} {status}", media, media["example"]))
    return found


def test_every_example_in_the_spec_matches_its_schema() -> None:
    import jsonschema
    import yaml

    document = yaml.safe_load(SPEC.read_text())
    examples = _examples(document)
    assert len(examples) >= 8
    for where, media, value in examples:
        # The media schema's $refs resolve against this root, which carries components.
        root = {"components": document["components"], **media["schema"]}
        errors = list(jsonschema.Draft202012Validator(root).iter_errors(value))
        assert not errors, (where, [e.message for e in errors])


def test_request_examples_are_accepted_by_the_functions(world: World) -> None:
    import yaml

    document = yaml.safe_load(SPEC.read_text())
    client = _client()
    for where, _media, value in _examples(document):
        if " request" not in where:
            continue
        path = where.split(" ")[0]
        response = client.post(path, json=value, headers=world.auth)
        # Requests name a session that is not live: heartbeat says so, release is a no-op.
        expected = {"/acquire": (200, 201), "/heartbeat": (410,), "/release": (200,)}[path]
        assert response.status_code in expected, (where, response.get_data(as_text=True))


# -- docs/api.md ----------------------------------------------------------------------


def _renderer() -> Any:
    path = REPO / "tools" / "render_api_docs.py"
    spec = importlib.util.spec_from_file_location("render_api_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_api_reference_is_up_to_date() -> None:
    renderer = _renderer()
    expected = renderer.render_file(SPEC)
    current = (REPO / "docs" / "api.md").read_text()
    assert current == expected, "docs/api.md is stale: run python tools/render_api_docs.py"
    assert renderer.main(["--check"]) == 0


def test_api_reference_covers_every_status_and_code() -> None:
    import yaml

    doc = yaml.safe_load(SPEC.read_text())
    text = (REPO / "docs" / "api.md").read_text()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            assert f"## `{method.upper()} {path}`" in text
            for status in operation["responses"]:
                assert f"| {status} |" in text
    for code in (
        "invalid_request",
        "unauthenticated",
        "license_suspended",
        "license_not_found",
        "method_not_allowed",
        "no_seats_available",
        "seats_mismatch",
        "session_expired",
        "payload_too_large",
        "unsupported_media_type",
        "internal_error",
        "backend_unavailable",
    ):
        assert f"### `{code}`" in text


def test_render_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "api.md"
    stale.write_text("old\n")
    assert _renderer().main(["--check", "--output", str(stale)]) == 1
