"""Operator actions, in one place: the ``admin`` HTTP function and the ``seatlease`` CLI's
direct mode both call ``execute(parse(body))``, so both validate with the same models,
change the same rows and answer the same JSON (see docs/admin.md).

A request is a JSON object ``{"action": "<name>", ...fields}``; ``execute`` returns
``(status, body)``. Both raise domain errors (``seatlease.errors``) and nothing
HTTP-shaped: the admin function's boundary (``seatlease.api.http.to_api_error``) turns them
into the contract's ``{"error": {...}}`` statuses (400, 404, 409, 503), the CLI into exit
codes. The database is reached only through ``seatlease.records.store``.

Every license change refreshes the Redis config cache at once. If Redis cannot be reached
the database change stands, the answer says ``"cache_refreshed": false`` and the cached
copy expires within ``CONFIG_TTL_SECONDS``. Revoking an API key drops its Redis cache
entry at once; running function instances keep their in-process copy for at most
``seatlease.api.auth.LOCAL_TTL`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from seatlease.admin import failover, keys, licenses, reports, seats, tenants, webhooks
from seatlease.admin.common import Action, parse_time
from seatlease.admin.keys import api_key_views, revoke_api_key
from seatlease.errors import InvalidRequest
from seatlease.fields import invalid_request

__all__ = [
    "ACTIONS",
    "MODELS",
    "Action",
    "api_key_views",
    "execute",
    "parse",
    "parse_action",
    "parse_time",
    "revoke_api_key",
]

# The one dispatch table: each resource's module answers its own actions.
HANDLERS: dict[type[Action], Callable[[Any], tuple[int, dict[str, Any]]]] = {
    **tenants.HANDLERS,
    **keys.HANDLERS,
    **licenses.HANDLERS,
    **seats.HANDLERS,
    **reports.HANDLERS,
    **failover.HANDLERS,
    **webhooks.HANDLERS,
}
MODELS: dict[str, type[Action]] = {
    name: model
    for model in HANDLERS
    for name in model.model_fields["action"].annotation.__args__  # its Literal's names
}
ACTIONS = tuple(MODELS)


def parse(data: Any) -> Action:
    """Validate a request object; bad input raises ``InvalidRequest`` naming each field."""
    return parse_action(data, MODELS)


def parse_action(data: Any, models: dict[str, type[BaseModel]]) -> Any:
    """``data`` as the model its ``action`` names among ``models`` (the admin function's
    and the tenant portal's); bad input raises ``InvalidRequest`` naming each field."""
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.")
    action = data.get("action")
    model = models.get(action) if isinstance(action, str) else None
    if model is None:
        names = ", ".join(models)
        raise InvalidRequest(
            f"Unknown or missing action {str(action)[:40]!r}; one of: {names}.",
            details=[{"field": "action", "problem": f"must be one of {names}"}],
            actions=list(models),
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc, f"{action} request") from None


def execute(request: Action) -> tuple[int, dict[str, Any]]:
    """Run one validated action: ``(status, JSON body)``."""
    return HANDLERS[type(request)](request)
