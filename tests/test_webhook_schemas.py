"""The webhook payloads documented in shared/seatlease/api/openapi.yaml (its OpenAPI 3.1
``webhooks``, rendered into docs/api.md): each family's example matches its own schema
and no other family's, the families cover every event type an endpoint may filter on,
and the payloads the service builds (seatlease.webhooks.payload) match the schemas."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

SPEC = Path(__file__).resolve().parents[1] / "shared" / "seatlease" / "api" / "openapi.yaml"
DOC = yaml.safe_load(SPEC.read_text())
FAMILIES = {"lease-event": "WebhookLeaseEvent", "license-alert": "WebhookLicenseAlert",
            "webhook-test": "WebhookTest"}  # fmt: skip


def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    root = {"components": DOC["components"], "$ref": f"#/components/schemas/{schema_name}"}
    return jsonschema.Draft202012Validator(root)


def _example(family: str) -> dict:
    return DOC["webhooks"][family]["post"]["requestBody"]["content"]["application/json"]["example"]


def _family_types(schema_name: str) -> set[str]:
    variant = DOC["components"]["schemas"][schema_name]["allOf"][1]["properties"]["type"]
    return set(variant.get("enum", [variant.get("const")]))


def test_every_family_is_a_webhook_with_the_signature_headers():
    assert set(DOC["webhooks"]) == set(FAMILIES)
    for family, schema_name in FAMILIES.items():
        post = DOC["webhooks"][family]["post"]
        media = post["requestBody"]["content"]["application/json"]
        assert media["schema"] == {"$ref": f"#/components/schemas/{schema_name}"}
        parameters = DOC["components"]["parameters"]
        headers = [parameters[p["$ref"].rsplit("/", 1)[1]] for p in post["parameters"]]
        assert [(h["name"], h["in"], h["required"]) for h in headers] == [
            ("webhook-id", "header", True),
            ("webhook-timestamp", "header", True),
            ("webhook-signature", "header", True),
        ]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_example_matches_its_family_only(family):
    for other, schema_name in FAMILIES.items():
        errors = list(_validator(schema_name).iter_errors(_example(family)))
        assert (not errors) is (other == family), (family, other, [e.message for e in errors])


def test_the_families_split_every_event_type_an_endpoint_may_filter_on():
    every = DOC["components"]["schemas"]["WebhookEventType"]["enum"]
    assert len(every) == len(set(every))
    parts = [_family_types(name) for name in FAMILIES.values()]
    assert set().union(*parts) == set(every)
    assert sum(len(p) for p in parts) == len(every), "a type in two families"
    # The alerts the issue names, each in the alerts' family.
    alerts = _family_types("WebhookLicenseAlert")
    assert {"license.nearly_full", "license.capacity_ok", "license.denials",
            "license.term_ending"} <= alerts  # fmt: skip


def test_a_payload_without_its_envelope_fields_is_refused():
    for family, schema_name in FAMILIES.items():
        for field in ("type", "id", "occurred_at", "tenant_id", "license_id", "sequence", "data"):
            payload = {k: v for k, v in _example(family).items() if k != field}
            assert list(_validator(schema_name).iter_errors(payload)), (family, field)


def test_the_service_builds_payloads_the_schemas_describe():
    payload = pytest.importorskip(
        "seatlease.webhooks.payload", reason="seatlease.webhooks (issue 51) not there yet"
    )
    assert set(payload.EVENT_TYPES) == set(DOC["components"]["schemas"]["WebhookEventType"]["enum"])
    event = {
        "event_id": "9f2c4e1a0b7d3c55-7",
        "type": "lease.acquired",
        "tenant_id": "acme",
        "license_id": "cad",
        "session_id": "KknRb3nMHk4ELnZTVlPgoL6p",
        "client_id": "ws-017-cad",
        "occurred_at": "2026-11-22T23:58:40.002Z",
        "seats_used": 1,
        "seats_total": 2,
        "count": 1,
        "metadata": {"user": "alice"},
    }
    built = payload.payload_of(event)
    errors = list(_validator("WebhookLeaseEvent").iter_errors(built))
    assert not errors, [e.message for e in errors]
    assert (built["id"], built["type"], built["data"]["session_id"]) == (
        "9f2c4e1a0b7d3c55-7",
        "lease.acquired",
        "KknRb3nMHk4ELnZTVlPgoL6p",
    )
