"""A tenant's webhook endpoints (issue 51): create (the ``whsec_`` secret is answered
once), list, delete, rotate the secret (answered once; the old one keeps signing beside it
for a while), send a ``webhook.test`` at once, and list the deliveries' attempts.

The tenant portal runs these same handlers bound to its key's tenant
(``seatlease.portal.actions``), so an endpoint is always looked up within one tenant:
another tenant's endpoint is ``NotFound``, the answer for one that does not exist.

No answer ever carries a secret but the one made by ``webhook_create`` or
``webhook_rotate_secret`` (``endpoint_view`` keeps only the named fields of a row, never
``secret_enc``). A URL is checked before anything is stored (``urls.check_url``: https in
the cloud, no private, loopback, link-local or metadata address after DNS), so a refused
one leaves no row and nothing is ever sent to it.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from seatlease import clock
from seatlease.admin.common import Action, iso_time, require_license
from seatlease.errors import NotFound
from seatlease.fields import Identifier
from seatlease.records import store as records
from seatlease.webhooks import deliver, urls
from seatlease.webhooks import store as webhooks
from seatlease.webhooks.payload import EVENT_TYPES, TEST_TYPE

MAX_URL_CHARS = 2048
MAX_LICENSE_FILTERS = 100
MAX_DELIVERIES_LIMIT = 1000
# How long ``webhook_test`` lets the delivery worker claim what is due, its own test
# among it (the sends started by then finish within their 10 s timeout): a test not
# tried by then is answered ``pending`` (202) and goes on the delivery schedule.
TEST_BUDGET_SECONDS = 3.0

EndpointId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


class WebhookCreate(Action):
    action: Literal["webhook_create"]
    tenant_id: Identifier
    url: Annotated[str, Field(min_length=1, max_length=MAX_URL_CHARS)]
    # Empty: every type (and every license); the types are seatlease.webhooks.EVENT_TYPES.
    event_types: Annotated[list[str], Field(max_length=len(EVENT_TYPES))] = []
    license_ids: Annotated[list[Identifier], Field(max_length=MAX_LICENSE_FILTERS)] = []

    @field_validator("event_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        unknown = [t for t in value if t not in EVENT_TYPES]
        if unknown:
            shown = ", ".join(repr(t[:60]) for t in unknown[:5])
            raise ValueError(f"unknown event type {shown}; one of: {', '.join(EVENT_TYPES)}")
        return list(dict.fromkeys(value))  # each once, in the order given

    @field_validator("license_ids")
    @classmethod
    def _each_once(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class WebhookList(Action):
    action: Literal["webhook_list"]
    tenant_id: Identifier


class WebhookDelete(Action):
    action: Literal["webhook_delete"]
    tenant_id: Identifier
    endpoint_id: EndpointId


class WebhookRotateSecret(Action):
    action: Literal["webhook_rotate_secret"]
    tenant_id: Identifier
    endpoint_id: EndpointId


class WebhookTest(Action):
    action: Literal["webhook_test"]
    tenant_id: Identifier
    endpoint_id: EndpointId


class WebhookRekey(Action):
    """Every endpoint's secrets sealed again under ``WEBHOOK_KEY``'s first key: the
    operator's step of a key rotation (``seatlease.webhooks.crypto``); not a tenant's."""

    action: Literal["webhook_rekey"]


class WebhookDeliveries(Action):
    action: Literal["webhook_deliveries"]
    tenant_id: Identifier
    endpoint_id: EndpointId | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_DELIVERIES_LIMIT)] = 100


# -- what an answer shows ---------------------------------------------------------------

# An endpoint's fields an answer may carry: never secret_enc or old_secret_enc.
ENDPOINT_FIELDS = (
    "id",
    "tenant_id",
    "url",
    "event_types",
    "license_ids",
    "created_at",
    "state",
    "failing_reason",
    "failing_since",
    "old_secret_until",
    "pending",  # its deliveries waiting
)
# A delivery attempt's fields (the store's rows may carry more: the payload stays out,
# it is the receiver's to see).
ATTEMPT_FIELDS = (
    "at",  # None: not tried yet (pending, or refused by a bound: error says why)
    "attempt",
    "status",
    "latency_ms",
    "error",
    "delivery_id",
    "endpoint_id",
    "event_id",
    "type",
    "license_id",
    "state",
    "attempts",
    "next_attempt_at",
    "last_status",
    "last_error",
    "created_at",
)


def _shown(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_time(value)
    return value


def _json_list(value: Any) -> list[Any]:
    """A JSON list column as a list (a driver may hand back its text)."""
    if isinstance(value, str):
        value = json.loads(value or "[]")
    return list(value or [])


def endpoint_view(row: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as every answer shows it: its named fields only (no secret)."""
    view = {name: _shown(row.get(name)) for name in ENDPOINT_FIELDS}
    view["event_types"] = _json_list(row.get("event_types"))
    view["license_ids"] = _json_list(row.get("license_ids"))
    view["pending"] = row.get("pending") or 0
    return view


def attempt_view(row: dict[str, Any]) -> dict[str, Any]:
    return {name: _shown(row[name]) for name in ATTEMPT_FIELDS if name in row}


def _endpoint(tenant_id: str, endpoint_id: str) -> dict[str, Any]:
    """The tenant's endpoint; ``NotFound`` for another tenant's as for one that does not
    exist (naming the tenant when the tenant itself does not)."""
    try:
        return webhooks.get_endpoint(tenant_id, endpoint_id)
    except NotFound:
        records.get_tenant(tenant_id)  # NotFound: "tenant 'acm' not found"
        raise


def check_url(url: str) -> str:
    """The URL as stored, or ``InvalidRequest`` naming the field: where this deployment
    may send (the local stack also allows its own loopback: ``urls.local_stack``)."""
    return urls.check_url(url.strip(), local=urls.local_stack())


# -- the actions ----------------------------------------------------------------------


def _create(req: WebhookCreate) -> tuple[int, dict[str, Any]]:
    records.get_tenant(req.tenant_id)  # NotFound before the URL is even resolved
    for license_id in req.license_ids:  # a mistyped license is a 404, not a silent filter
        require_license(req.tenant_id, license_id)
    url = check_url(req.url)  # refused: nothing is stored, nothing is ever sent
    # the store checks it again, and bounds the tenant's endpoints (Conflict)
    row, secret = webhooks.create_endpoint(
        req.tenant_id, url, list(req.event_types), list(req.license_ids)
    )
    # "secret" is in this answer only: the store keeps it sealed and never lists it
    return 201, {"endpoint": endpoint_view(row), "secret": secret}


def _list(req: WebhookList) -> tuple[int, dict[str, Any]]:
    rows = webhooks.list_endpoints(req.tenant_id)
    if not rows:
        records.get_tenant(req.tenant_id)  # an unknown tenant is an error, not an empty list
    return 200, {"tenant_id": req.tenant_id, "endpoints": [endpoint_view(r) for r in rows]}


def _delete(req: WebhookDelete) -> tuple[int, dict[str, Any]]:
    _endpoint(req.tenant_id, req.endpoint_id)
    webhooks.delete_endpoint(req.tenant_id, req.endpoint_id)
    return 200, {"tenant_id": req.tenant_id, "endpoint_id": req.endpoint_id, "deleted": True}


def _rotate_secret(req: WebhookRotateSecret) -> tuple[int, dict[str, Any]]:
    _endpoint(req.tenant_id, req.endpoint_id)
    secret = webhooks.rotate_secret(req.tenant_id, req.endpoint_id)
    row = _endpoint(req.tenant_id, req.endpoint_id)
    return 200, {
        "endpoint_id": req.endpoint_id,
        "secret": secret,  # in this answer only
        "old_secret_until": _shown(row.get("old_secret_until")),
    }


def webhook_test_event(tenant_id: str, endpoint_id: str) -> dict[str, Any]:
    """A ``webhook.test`` event in the audit's JSON shape, for one endpoint: its id is new
    each time (a receiver dedupes by it), its metadata names the endpoint."""
    return {
        "event_id": f"test-{secrets.token_hex(12)}",
        "type": TEST_TYPE,
        "tenant_id": tenant_id,
        "license_id": None,
        "session_id": None,
        "client_id": None,
        "occurred_at": clock.iso_utc(clock.now()),
        "seats_used": None,
        "seats_total": None,
        "metadata": {"endpoint_id": endpoint_id},
    }


def _test(req: WebhookTest) -> tuple[int, dict[str, Any]]:
    endpoint = _endpoint(req.tenant_id, req.endpoint_id)
    check_url(endpoint["url"])  # an address that turned private since: refused, not sent
    event = webhook_test_event(req.tenant_id, req.endpoint_id)
    webhooks.enqueue([event], endpoint_id=req.endpoint_id)  # its filters aside
    # (this endpoint's deliveries alone: a tenant's test never sends, nor waits on,
    # anybody else's)
    deliver.deliver_due(budget_seconds=TEST_BUDGET_SECONDS, endpoint_id=req.endpoint_id)
    tried = [
        a
        for a in webhooks.deliveries(req.tenant_id, req.endpoint_id, limit=MAX_DELIVERIES_LIMIT)
        if a.get("event_id") == event["event_id"]
    ]
    # oldest first: the last is how it went (the store lists the newest first)
    attempts = [attempt_view(a) for a in reversed(tried) if a.get("at") is not None]
    state = tried[0].get("state") if tried else "pending"
    return 202 if state == "pending" else 200, {
        "endpoint_id": req.endpoint_id,
        "event_id": event["event_id"],
        "state": state,  # pending: retried on the delivery schedule
        "attempts": attempts,
    }


def _deliveries(req: WebhookDeliveries) -> tuple[int, dict[str, Any]]:
    if req.endpoint_id is not None:
        _endpoint(req.tenant_id, req.endpoint_id)
    else:
        records.get_tenant(req.tenant_id)
    rows = webhooks.deliveries(req.tenant_id, req.endpoint_id, limit=req.limit)
    return 200, {
        "tenant_id": req.tenant_id,
        "endpoint_id": req.endpoint_id,
        "attempts": [attempt_view(r) for r in rows],
    }


def _rekey(_req: WebhookRekey) -> tuple[int, dict[str, Any]]:
    return 200, webhooks.reseal_secrets()


HANDLERS = {
    WebhookCreate: _create,
    WebhookList: _list,
    WebhookDelete: _delete,
    WebhookRotateSecret: _rotate_secret,
    WebhookTest: _test,
    WebhookDeliveries: _deliveries,
    WebhookRekey: _rekey,
}
