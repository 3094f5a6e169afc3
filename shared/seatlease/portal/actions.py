"""The tenant portal's actions: what a customer's IT admin does with a tenant admin key
(``functions/portal``). Every action is bound to the key's tenant and runs the operator's
implementation of it (``seatlease.admin``) with that tenant filled in, so there is one
status, one revoke, one usage report and one key store.

A request is ``{"action": "<name>", ...fields}``:

- ``status`` (``license_id``?): the tenant's licenses, seats in use and live leases;
- ``revoke`` (``license_id``, ``session_id``): end a live lease now (``lease.revoked``);
- ``usage`` (``days`` 1..``MAX_USAGE_DAYS``, ``license_id``?, ``period``?): the usage
  report with each license's timeline, over the last ``days`` days up to the next whole
  hour (``period`` ``hour`` or ``exact``) or day (``day``); without ``period``, exact
  steps when the window holds at most 1,500 changes (as ``--by auto``), else hours up to
  7 days and days beyond; with ``sizing``, each license's recommended seats over the
  same window (``report.sizing``: the fewest seats meeting 95/99/100 % of the busy
  minutes' demand), its verdict and its sentence;
- ``keys.list``, ``keys.create`` (``label``?), ``keys.revoke`` (``prefix``): the tenant's
  **seat** keys; a new key is in the answer once (only its hash is stored). Admin keys are
  the vendor's to issue and revoke (``seatlease apikey``), never the portal's;
- ``webhook_create`` (``url``, ``event_types``?, ``license_ids``?), ``webhook_list``,
  ``webhook_delete`` (``endpoint_id``), ``webhook_rotate_secret`` (``endpoint_id``),
  ``webhook_test`` (``endpoint_id``), ``webhook_deliveries`` (``endpoint_id``?,
  ``limit``?): the tenant's webhook endpoints (issue 51), as the operator's actions of
  the same names; a new secret is in the answer of create and rotate only.

Another tenant's license, session, key or webhook endpoint is ``NotFound``: the same
answer as one that does not exist, since every lookup is made within the key's tenant.
Each action is recorded (``record``) in ``portal_actions`` with the admin key's prefix.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seatlease import admin, clock
from seatlease.admin import keys as admin_keys
from seatlease.admin import reports as admin_reports
from seatlease.admin import seats as admin_seats
from seatlease.admin import webhooks as admin_webhooks
from seatlease.admin.common import KeyPrefix
from seatlease.admin.webhooks import EndpointId
from seatlease.api.auth import SEAT
from seatlease.fields import Identifier, Label
from seatlease.logs import log
from seatlease.records import store
from seatlease.seats import ratelimit
from seatlease.seats.redisconn import get_redis

MAX_USAGE_DAYS = 90
RATE_LIMIT_ENV = "PORTAL_RATE_LIMIT"  # calls per key per minute
DEFAULT_RATE_LIMIT = 120
RATE_PERIOD_SECONDS = 60


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Status(_Action):
    action: Literal["status"]
    license_id: Identifier | None = None


class Revoke(_Action):
    action: Literal["revoke"]
    license_id: Identifier
    session_id: Identifier


class Usage(_Action):
    action: Literal["usage"]
    days: Annotated[int, Field(ge=1, le=MAX_USAGE_DAYS)] = 7
    license_id: Identifier | None = None
    # default: exact steps when the window holds at most reports.AUTO_POINTS changes (as
    # the CLI's --by auto), else hour up to 7 days, else day
    period: Literal["exact", "hour", "day"] | None = None

    def bucket(self) -> str:
        """The period of the window's bounds (whole hours or days): hours for exact."""
        if self.period in ("hour", "day"):
            return self.period
        return "hour" if self.days <= 7 or self.period == "exact" else "day"


class KeysList(_Action):
    action: Literal["keys.list"]


class KeysCreate(_Action):
    action: Literal["keys.create"]
    label: Label = ""


class KeysRevoke(_Action):
    action: Literal["keys.revoke"]
    prefix: KeyPrefix


class WebhookCreate(_Action):
    action: Literal["webhook_create"]
    url: str
    event_types: list[str] = []
    license_ids: list[str] = []


class WebhookList(_Action):
    action: Literal["webhook_list"]


class WebhookDelete(_Action):
    action: Literal["webhook_delete"]
    endpoint_id: EndpointId


class WebhookRotateSecret(_Action):
    action: Literal["webhook_rotate_secret"]
    endpoint_id: EndpointId


class WebhookTest(_Action):
    action: Literal["webhook_test"]
    endpoint_id: EndpointId


class WebhookDeliveries(_Action):
    action: Literal["webhook_deliveries"]
    endpoint_id: EndpointId | None = None
    limit: int = 100


MODELS: dict[str, type[_Action]] = {
    "status": Status,
    "revoke": Revoke,
    "usage": Usage,
    "keys.list": KeysList,
    "keys.create": KeysCreate,
    "keys.revoke": KeysRevoke,
    "webhook_create": WebhookCreate,
    "webhook_list": WebhookList,
    "webhook_delete": WebhookDelete,
    "webhook_rotate_secret": WebhookRotateSecret,
    "webhook_test": WebhookTest,
    "webhook_deliveries": WebhookDeliveries,
}
# The webhook actions' operator models, which validate the fields (bounds, known event
# types, endpoint ids) once the key's tenant is filled in.
WEBHOOK_ACTIONS: dict[type[_Action], type[Any]] = {
    WebhookCreate: admin_webhooks.WebhookCreate,
    WebhookList: admin_webhooks.WebhookList,
    WebhookDelete: admin_webhooks.WebhookDelete,
    WebhookRotateSecret: admin_webhooks.WebhookRotateSecret,
    WebhookTest: admin_webhooks.WebhookTest,
    WebhookDeliveries: admin_webhooks.WebhookDeliveries,
}
ACTIONS = tuple(MODELS)


def parse(data: Any) -> _Action:
    """Validate a request object; bad input raises ``InvalidRequest`` naming each field."""
    return admin.parse_action(data, MODELS)


def limit(key_prefix: str) -> None:
    """Count one call of this admin key; ``RateLimited`` over the per-minute limit."""
    allowed = int(os.environ.get(RATE_LIMIT_ENV) or DEFAULT_RATE_LIMIT)
    ratelimit.hit(get_redis(), "portal", key_prefix, allowed, RATE_PERIOD_SECONDS)


# -- the actions: the operator's implementations, bound to the key's tenant --------------


def _status(tenant_id: str, req: Status) -> tuple[int, dict[str, Any]]:
    status, body = admin.execute(
        admin_seats.Status(action="status", tenant_id=tenant_id, license_id=req.license_id)
    )
    return status, {"tenant_id": tenant_id, **body}


def _revoke(tenant_id: str, req: Revoke) -> tuple[int, dict[str, Any]]:
    return admin.execute(
        admin_seats.Revoke(
            action="revoke",
            tenant_id=tenant_id,
            license_id=req.license_id,
            session_id=req.session_id,
        )
    )


def _usage(tenant_id: str, req: Usage) -> tuple[int, dict[str, Any]]:
    bucket = req.bucket()
    now = clock.now()
    if bucket == "hour":
        until = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    else:
        until = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    since = until - timedelta(days=req.days)
    period = req.period or bucket
    if req.period is None:
        from seatlease.records import reports

        window = reports.Window(tenant_id, req.license_id, since, until)
        if reports.resolve_period(window, reports.AUTO) == reports.EXACT:
            period = reports.EXACT
    status, body = admin.execute(
        admin_reports.ReportUsage(
            action="report.usage",
            tenant_id=tenant_id,
            license_id=req.license_id,
            since=since,
            until=until,
            period=period,
            timelines=True,
        )
    )
    # How many seats each license needed over the same window (the chart's recommended
    # line and its sentence): the operator's report.sizing, for this tenant only.
    _status, sized = admin.execute(
        admin_reports.ReportSizing(
            action="report.sizing",
            tenant_id=tenant_id,
            license_id=req.license_id,
            since=since,
            until=until,
        )
    )
    sizing = {
        line["license_id"]: {
            name: line[name]
            for name in ("seats", "recommended_seats", "verdict", "sentence", "refused_clients")
        }
        for line in sized["licenses"]
    }
    return status, {**body, "days": req.days, "sizing": sizing}


def _keys_list(tenant_id: str, _req: KeysList) -> tuple[int, dict[str, Any]]:
    return 200, {"api_keys": admin.api_key_views(tenant_id, scope=SEAT)}


def _keys_create(tenant_id: str, req: KeysCreate) -> tuple[int, dict[str, Any]]:
    status, body = admin.execute(
        admin_keys.ApiKeyCreate(action="apikey.create", tenant_id=tenant_id, label=req.label)
    )
    return status, body  # "key" is in this answer only: the store keeps its hash


def _keys_revoke(tenant_id: str, req: KeysRevoke) -> tuple[int, dict[str, Any]]:
    return 200, admin.revoke_api_key(req.prefix, tenant_id=tenant_id, scope=SEAT)


def _webhook(tenant_id: str, req: _Action) -> tuple[int, dict[str, Any]]:
    """The operator's webhook action of the same name, for the key's tenant only: its
    model validates the fields (``InvalidRequest`` naming each), and every endpoint is
    looked up within that tenant (another tenant's is ``NotFound``)."""
    model = WEBHOOK_ACTIONS[type(req)]
    fields = {**req.model_dump(exclude_unset=True), "tenant_id": tenant_id}
    return admin.execute(admin.parse_action(fields, {req.action: model}))  # type: ignore[attr-defined]


HANDLERS: dict[type[_Action], Callable[[str, Any], tuple[int, dict[str, Any]]]] = {
    Status: _status,
    Revoke: _revoke,
    Usage: _usage,
    KeysList: _keys_list,
    KeysCreate: _keys_create,
    KeysRevoke: _keys_revoke,
    **dict.fromkeys(WEBHOOK_ACTIONS, _webhook),
}


# The actions that change something (their log lines are NOTICE; a look is INFO).
CHANGES = frozenset({"revoke", "keys.create", "keys.revoke", "webhook_create", "webhook_delete",
                     "webhook_rotate_secret", "webhook_test"})  # fmt: skip


def execute(tenant_id: str, request: _Action) -> tuple[int, dict[str, Any]]:
    """Run one validated action for the key's tenant: ``(status, JSON body)``."""
    return HANDLERS[type(request)](tenant_id, request)


def targets(request: _Action) -> dict[str, str | None]:
    """What the action names, for its audit row and log line (never a key)."""
    return {
        "license_id": getattr(request, "license_id", None),
        "session_id": getattr(request, "session_id", None),
        "target_prefix": getattr(request, "prefix", None),
        "endpoint_id": getattr(request, "endpoint_id", None),  # EndpointId: fits its column
    }


def record(
    tenant_id: str,
    key_prefix: str,
    request: _Action,
    status: int,
    answer: dict[str, Any] | None = None,
) -> None:
    """The action's row in the audit trail (``portal_actions``), with what it made, from
    its ``answer``: a new key's prefix, a new endpoint's id. A database that cannot take
    it does not undo the action: the row's content goes to an ERROR log line instead,
    which the logs keep."""
    fields = targets(request)
    action = request.action  # type: ignore[attr-defined]
    if answer and action == "keys.create":
        fields["target_prefix"] = answer.get("prefix")
    elif answer and action == "webhook_create":
        fields["endpoint_id"] = (answer.get("endpoint") or {}).get("id")
    try:
        store.record_portal_action(tenant_id, key_prefix, action, status, **fields)
    except Exception as exc:
        log(
            "ERROR",
            "portal: action not recorded in portal_actions",
            tenant_id=tenant_id,
            key_prefix=key_prefix,
            action=action,
            status=status,
            error=type(exc).__name__,
            **fields,
        )
