"""Operator actions, in one place: the ``admin`` HTTP function and the ``seatlease`` CLI's
direct mode both call ``execute(parse(body))``, so both validate with the same models,
change the same rows and answer the same JSON (see docs/admin.md).

A request is a JSON object ``{"action": "<name>", ...fields}``; ``execute`` returns
``(status, body)``. Both raise domain errors (``seatlease.errors``) and nothing
HTTP-shaped: the admin function's boundary (``seatlease.http.to_api_error``) turns them
into the contract's ``{"error": {...}}`` statuses (400, 404, 409, 503), the CLI into exit
codes. The database is reached only through ``seatlease.store``.

Every license change refreshes the Redis config cache at once. If Redis cannot be reached
the database change stands, the answer says ``"cache_refreshed": false`` and the cached
copy expires within ``CONFIG_TTL_SECONDS``. Revoking an API key drops its Redis cache
entry at once; running function instances keep their in-process copy for at most
``seatlease.auth.LOCAL_TTL`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic import model_validator as _model_validator
from redis.exceptions import RedisError

from seatlease import apikeys, store
from seatlease.auth import LOCAL_TTL, REDIS_TTL
from seatlease.clock import iso_utc, rfc3339, server_time_ms, utc
from seatlease.engine import CONFIG_TTL_SECONDS
from seatlease.errors import (
    AmbiguousLicense,
    BackendUnavailable,
    InvalidRequest,
    NotFound,
    SessionNotLive,
)
from seatlease.licenses import (
    LICENSE_FIELDS,
    MAX_BORROW_SECONDS,
    MAX_LINGER_SECONDS,
    LicenseConfig,
)
from seatlease.logs import log
from seatlease.policy import LicensePolicy, parse_policy
from seatlease.schemas import MAX_LEASE_SECONDS, Identifier, invalid_request

if TYPE_CHECKING:
    from seatlease.reports import Timeline, Window

MAX_SEATS = 1_000_000
MAX_RATE_LIMIT = 1_000_000  # the tenants table's CHECK constraint
Seats = Annotated[int, Field(ge=0, le=MAX_SEATS)]
LeaseSeconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)]
OveragePercent = Annotated[int, Field(ge=0, le=1000)]
BorrowSeconds = Annotated[int, Field(ge=0, le=MAX_BORROW_SECONDS)]  # 0: no borrowing
LingerSeconds = Annotated[int, Field(ge=0, le=MAX_LINGER_SECONDS)]  # 0: no linger
Label = Annotated[str, StringConstraints(max_length=256)]
RateLimit = Annotated[int, Field(ge=0, le=MAX_RATE_LIMIT)]  # calls per second; 0: no limit
KeyPrefix = Annotated[str, StringConstraints(pattern=rf"^{apikeys.PREFIX_PATTERN}$")]


def parse_time(value: Any) -> datetime:
    """An ISO 8601 time as an aware UTC datetime: a date means its midnight UTC, no
    offset means UTC (``2026-11-22``, ``2026-11-22T09:30:00Z``, ``...+01:00``)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value[:40]!r} is not an ISO 8601 time (e.g. 2026-11-22 or 2026-11-22T09:30:00Z)"
            ) from None
    else:
        raise ValueError("must be an ISO 8601 time string")
    try:
        return utc(parsed)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise ValueError(f"{str(value)[:40]!r} is out of range") from None


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value)


OptionalTime = Annotated[datetime | None, BeforeValidator(_optional_time)]


# -- requests ------------------------------------------------------------------------


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TenantCreate(_Action):
    action: Literal["tenant.create"]
    tenant_id: Identifier
    name: Label = ""
    rate_limit_per_second: RateLimit | None = None  # None: DEFAULT_RATE_LIMIT


class TenantList(_Action):
    action: Literal["tenant.list"]


Scope = Literal["seat", "admin"]  # store.SCOPES


class TenantShow(_Action):
    action: Literal["tenant.show"]
    tenant_id: Identifier


class TenantUpdate(_Action):
    action: Literal["tenant.update"]
    tenant_id: Identifier
    name: Label | None = None
    rate_limit_per_second: RateLimit | None = None

    @_model_validator(mode="after")
    def _changes_something(self) -> TenantUpdate:
        if not self.changes():
            raise ValueError("give at least one of name, rate_limit_per_second")
        return self

    def changes(self) -> dict[str, Any]:
        fields = ("name", "rate_limit_per_second")
        return {f: getattr(self, f) for f in fields if getattr(self, f) is not None}


class ApiKeyCreate(_Action):
    action: Literal["apikey.create"]
    tenant_id: Identifier
    label: Label = ""
    scope: Scope = "seat"  # admin: the tenant's portal key


class ApiKeyList(_Action):
    action: Literal["apikey.list"]
    tenant_id: Identifier


class ApiKeyRevoke(_Action):
    action: Literal["apikey.revoke"]
    prefix: KeyPrefix


class LicenseCreate(_Action):
    action: Literal["license.create"]
    tenant_id: Identifier
    license_id: Identifier
    seats: Seats
    lease_seconds: LeaseSeconds = 360
    max_lease_seconds: LeaseSeconds | None = None
    overage_percent: OveragePercent = 0
    max_borrow_seconds: BorrowSeconds = 0
    linger_seconds: LingerSeconds = 0
    policy: LicensePolicy | None = None  # seatlease.policy; absent: none


class LicenseUpdate(_Action):
    action: Literal["license.update"]
    tenant_id: Identifier
    license_id: Identifier
    seats: Seats | None = None
    lease_seconds: LeaseSeconds | None = None
    max_lease_seconds: LeaseSeconds | None = None
    overage_percent: OveragePercent | None = None
    suspended: bool | None = None
    max_borrow_seconds: BorrowSeconds | None = None
    linger_seconds: LingerSeconds | None = None
    policy: LicensePolicy | None = None  # replaces the license's policy as a whole
    clear_policy: bool = False  # the license has no policy any more

    @_model_validator(mode="after")
    def _changes_something(self) -> LicenseUpdate:
        if self.policy is not None and self.clear_policy:
            raise ValueError("give policy or clear_policy, not both")
        if not self.changes():
            fields = ", ".join((*LICENSE_FIELDS, "policy", "clear_policy"))
            raise ValueError(f"give at least one of {fields}")
        return self

    def changes(self) -> dict[str, Any]:
        changes = {f: getattr(self, f) for f in LICENSE_FIELDS if getattr(self, f) is not None}
        if self.policy is not None:
            changes["policy"] = self.policy.as_dict()
        if self.clear_policy:
            changes["policy"] = {}
        return changes


class LicenseSuspend(_Action):
    action: Literal["license.suspend", "license.resume"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseShow(_Action):
    action: Literal["license.show"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseList(_Action):
    action: Literal["license.list"]
    tenant_id: Identifier | None = None


class Status(_Action):
    action: Literal["status"]
    tenant_id: Identifier | None = None
    license_id: Identifier | None = None

    @_model_validator(mode="after")
    def _license_needs_tenant(self) -> Status:
        if self.license_id is not None and self.tenant_id is None:
            raise ValueError("license_id needs tenant_id")
        return self


class Capacity(_Action):
    action: Literal["capacity"]


class Revoke(_Action):
    action: Literal["revoke"]
    tenant_id: Identifier | None = None  # absent: the one tenant that has license_id
    license_id: Identifier
    session_id: Identifier


class ReportUsage(_Action):
    action: Literal["report.usage"]
    tenant_id: Identifier
    license_id: Identifier | None = None
    since: OptionalTime = None  # inclusive
    until: OptionalTime = None  # exclusive
    # auto: the finest period keeping a chart under reports.AUTO_POINTS points
    period: Literal["auto", "minute", "hour", "day"] = "auto"
    timelines: bool = False  # also seats in use per period (peak, average), for a chart

    @_model_validator(mode="after")
    def _window_is_valid(self) -> ReportUsage:
        self.window()  # since must be before until
        return self

    def window(self) -> Window:
        from seatlease.reports import Window

        return Window(self.tenant_id, self.license_id, self.since, self.until)


class ReportUsers(_Action):
    """Leases and queue waits per license and user (``--by user``)."""

    action: Literal["report.users"]
    tenant_id: Identifier
    license_id: Identifier | None = None
    since: OptionalTime = None  # inclusive
    until: OptionalTime = None  # exclusive

    @_model_validator(mode="after")
    def _window_is_valid(self) -> ReportUsers:
        self.window()
        return self

    def window(self) -> Window:
        from seatlease.reports import Window

        return Window(self.tenant_id, self.license_id, self.since, self.until)


MODELS: dict[str, type[_Action]] = {
    "tenant.create": TenantCreate,
    "tenant.list": TenantList,
    "tenant.show": TenantShow,
    "tenant.update": TenantUpdate,
    "apikey.create": ApiKeyCreate,
    "apikey.list": ApiKeyList,
    "apikey.revoke": ApiKeyRevoke,
    "license.create": LicenseCreate,
    "license.update": LicenseUpdate,
    "license.suspend": LicenseSuspend,
    "license.resume": LicenseSuspend,
    "license.show": LicenseShow,
    "license.list": LicenseList,
    "status": Status,
    "capacity": Capacity,
    "revoke": Revoke,
    "report.usage": ReportUsage,
    "report.users": ReportUsers,
}
ACTIONS = tuple(MODELS)


def parse(data: Any) -> _Action:
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


# -- answers ---------------------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    # utc(): SQLite hands back naive UTC datetimes
    return utc(value).isoformat(timespec="seconds").replace("+00:00", "Z")


def _license_view(row: dict[str, Any]) -> dict[str, Any]:
    config = LicenseConfig.from_row(row)
    return {
        "tenant_id": row["tenant_id"],
        "license_id": row["license_id"],
        "seats": config.seats,
        "seat_limit": config.seat_limit,
        "overage_percent": config.overage_percent,
        "lease_seconds": config.lease_seconds,
        "max_lease_seconds": config.max_lease_seconds,
        "max_borrow_seconds": config.max_borrow_seconds,
        "linger_seconds": config.linger_seconds,
        "suspended": bool(config.suspended),
        "policy": _policy_view(row.get("policy")),
        "created_at": _time(row.get("created_at")),
        "updated_at": _time(row.get("updated_at")),
    }


def _policy_view(stored: Any) -> dict[str, Any] | None:
    """The license's policy with every field (defaults included), None for none."""
    policy = parse_policy(stored)
    return None if policy is None else policy.as_dict()


def _refresh_cache(tenant_id: str, license_id: str) -> dict[str, Any]:
    """Write the database's view of a license into Redis now; a Redis outage only
    delays the change until the cached copy expires."""
    from seatlease.runtime import refresh_license_cache

    try:
        refresh_license_cache(tenant_id, license_id)
    except (RedisError, BackendUnavailable) as exc:
        log(
            "WARNING",
            "admin: license cache refresh failed",
            tenant_id=tenant_id,
            license_id=license_id,
            error=type(exc).__name__,
        )
        return {
            "cache_refreshed": False,
            "warning": f"saved in the database, but Redis is unreachable: the license cache "
            f"refreshes within {CONFIG_TTL_SECONDS} s",
        }
    return {"cache_refreshed": True}


def _tenant_create(req: TenantCreate) -> tuple[int, dict[str, Any]]:
    store.create_tenant(req.tenant_id, req.name, rate_limit_per_second=req.rate_limit_per_second)
    return 201, {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}


def _tenant_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "tenant_id": row["tenant_id"],
        "name": row["name"],
        "rate_limit_per_second": row["rate_limit_per_second"],
        "created_at": _time(row["created_at"]),
    }


def _tenant_show(req: TenantShow) -> tuple[int, dict[str, Any]]:
    return 200, {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}


def _tenant_update(req: TenantUpdate) -> tuple[int, dict[str, Any]]:
    """A new rate limit reaches every function instance within ``LOCAL_TTL``: the shared
    Redis copy is dropped now, the instances' own copies expire."""
    from seatlease import tenantlimits

    changes = req.changes()
    store.update_tenant(req.tenant_id, **changes)
    body: dict[str, Any] = {"tenant": _tenant_view(store.get_tenant(req.tenant_id))}
    if "rate_limit_per_second" not in changes:
        return 200, body
    try:
        tenantlimits.forget(req.tenant_id)
        body["cache_refreshed"] = True
    except (RedisError, BackendUnavailable) as exc:
        log("WARNING", "admin: tenant rate cache drop failed", error=type(exc).__name__)
        body["cache_refreshed"] = False
        body["warning"] = (
            f"saved in the database, but Redis is unreachable: the new rate limit applies "
            f"within {REDIS_TTL + LOCAL_TTL:.0f} s"
        )
    return 200, body


def _tenant_list(_req: TenantList) -> tuple[int, dict[str, Any]]:
    return 200, {"tenants": [_tenant_view(r) for r in store.list_tenants()]}


def _apikey_create(req: ApiKeyCreate) -> tuple[int, dict[str, Any]]:
    new = store.create_api_key(req.tenant_id, req.label, scope=req.scope)
    return 201, {
        "tenant_id": new.tenant_id,
        "prefix": new.prefix,
        "label": req.label,
        "scope": new.scope,
        "key": new.key,  # shown once: only its hash is stored
    }


def _apikey_list(req: ApiKeyList) -> tuple[int, dict[str, Any]]:
    return 200, {"tenant_id": req.tenant_id, "api_keys": api_key_views(req.tenant_id)}


def api_key_views(tenant_id: str, scope: str | None = None) -> list[dict[str, Any]]:
    """A tenant's keys as the answers show them (never a hash)."""
    return [
        {
            "prefix": k["prefix"],
            "label": k["label"],
            "scope": k["scope"],
            "active": k["revoked_at"] is None,
            "created_at": _time(k["created_at"]),
            "revoked_at": _time(k["revoked_at"]),
        }
        for k in store.list_api_keys(tenant_id, scope=scope)
    ]


def _apikey_revoke(req: ApiKeyRevoke) -> tuple[int, dict[str, Any]]:
    return 200, revoke_api_key(req.prefix)


def revoke_api_key(
    prefix: str, tenant_id: str | None = None, scope: str | None = None
) -> dict[str, Any]:
    """Revoke a key and drop it from the caches; with ``tenant_id``/``scope`` only a key
    of that tenant and scope (any other is ``NotFound``)."""
    from seatlease import auth

    key_hash = store.revoke_api_key(prefix, tenant_id=tenant_id, scope=scope)
    body: dict[str, Any] = {
        "prefix": prefix,
        "revoked": True,
        "local_cache_seconds": LOCAL_TTL,
    }
    try:
        auth.forget(key_hash)
        body["cache_refreshed"] = True
    except RedisError as exc:
        log("WARNING", "admin: API key cache drop failed", error=type(exc).__name__)
        body["cache_refreshed"] = False
        body["warning"] = (
            f"revoked in the database, but Redis is unreachable: cached copies of the key "
            f"expire within {REDIS_TTL + LOCAL_TTL:.0f} s"
        )
    return body


def _license_create(req: LicenseCreate) -> tuple[int, dict[str, Any]]:
    row = store.create_license(
        req.tenant_id,
        req.license_id,
        req.seats,
        lease_seconds=req.lease_seconds,
        max_lease_seconds=req.max_lease_seconds,
        overage_percent=req.overage_percent,
        max_borrow_seconds=req.max_borrow_seconds,
        linger_seconds=req.linger_seconds,
        policy=req.policy.as_dict() if req.policy and not req.policy.is_empty else None,
    )
    return 201, {"license": _license_view(row), **_refresh_cache(req.tenant_id, req.license_id)}


def _license_change(tenant_id: str, license_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    store.update_license(tenant_id, license_id, **changes)
    row = _require_license(tenant_id, license_id)  # as stored (updated_at included)
    return {"license": _license_view(row), **_refresh_cache(tenant_id, license_id)}


def _license_update(req: LicenseUpdate) -> tuple[int, dict[str, Any]]:
    return 200, _license_change(req.tenant_id, req.license_id, req.changes())


def _license_suspend(req: LicenseSuspend) -> tuple[int, dict[str, Any]]:
    suspended = req.action == "license.suspend"
    return 200, _license_change(req.tenant_id, req.license_id, {"suspended": suspended})


def _require_license(tenant_id: str, license_id: str) -> dict[str, Any]:
    row = store.get_license(tenant_id, license_id)
    if row is None:
        raise NotFound(f"license {license_id!r} not found for tenant {tenant_id!r}")
    return row


def _license_show(req: LicenseShow) -> tuple[int, dict[str, Any]]:
    return 200, {"license": _license_view(_require_license(req.tenant_id, req.license_id))}


def _license_rows(tenant_id: str | None) -> list[dict[str, Any]]:
    """Every license, or a tenant's (an unknown tenant is an error, not an empty list)."""
    if tenant_id is not None:
        store.get_tenant(tenant_id)
    return store.list_licenses(tenant_id)


def _license_list(req: LicenseList) -> tuple[int, dict[str, Any]]:
    return 200, {"licenses": [_license_view(r) for r in _license_rows(req.tenant_id)]}


def _lease_view(lease: dict[str, Any], now_ms: int) -> dict[str, Any]:
    metadata = lease["metadata"] if isinstance(lease["metadata"], dict) else {}
    return {
        "session_id": lease["session_id"],
        "client_id": lease["client_id"],
        "user": metadata.get("user"),
        "host": metadata.get("host"),
        "metadata": metadata,
        "acquired_at": rfc3339(int(lease["acquired_at_ms"])),
        "expires_at": rfc3339(lease["expires_at_ms"]),
        "expires_in_seconds": max(0, round((lease["expires_at_ms"] - now_ms) / 1000)),
        "lease_seconds": lease["lease_seconds"],
        # Borrowed: no heartbeats until it expires. Lingering: released by its client,
        # the seat held for that client alone until it expires.
        "borrowed": bool(lease.get("borrowed")),
        "lingering": bool(lease.get("lingering")),
    }


def _waiting_view(ticket: dict[str, Any], now_ms: int) -> dict[str, Any]:
    held = ticket["held_since_ms"]
    return {
        "position": ticket["position"],
        "client_id": ticket["client_id"],
        "user": ticket["user"],
        "host": ticket["host"],
        "waiting_seconds": max(0, round((now_ms - ticket["joined_at_ms"]) / 1000)),
        "expires_in_seconds": max(0, round((ticket["expires_at_ms"] - now_ms) / 1000)),
        # a freed seat waits for this ticket (until expires_in_seconds)
        "seat_held": held is not None,
    }


def _status(req: Status) -> tuple[int, dict[str, Any]]:
    """``lmstat -a``: each license with its seats in use and its live leases."""
    from seatlease.runtime import seat_engine

    if req.license_id is not None and req.tenant_id is not None:
        rows = [_require_license(req.tenant_id, req.license_id)]
    else:
        rows = _license_rows(req.tenant_id)
    engine = seat_engine()
    now_ms = server_time_ms(engine.redis)  # the clock the lease deadlines are on
    licenses = []
    for row in rows:
        view = _license_view(row)
        leases = engine.live_leases(view["tenant_id"], view["license_id"])
        entry = {
            **view,
            "seats_used": len(leases),
            "overage_in_use": len(leases) > view["seats"],
            "leases": [_lease_view(lease, now_ms) for lease in leases],
        }
        if view["policy"] and view["policy"]["queue"]:
            entry["queue"] = [
                _waiting_view(ticket, now_ms)
                for ticket in engine.waiting(view["tenant_id"], view["license_id"])
            ]
        licenses.append(entry)
    return 200, {"at": rfc3339(now_ms), "licenses": licenses}


def _license_tenant(tenant_id: str | None, license_id: str) -> str:
    """The tenant a request means: the one given (which must have the license), else the
    only tenant with a license of that id. Several: 400 ``ambiguous_license`` listing
    them (``tenants``), so the caller can name one."""
    if tenant_id is not None:
        _require_license(tenant_id, license_id)
        return tenant_id
    found = store.tenants_with_license(license_id)
    if not found:
        raise NotFound(f"license {license_id!r} not found in any tenant")
    if len(found) > 1:
        raise AmbiguousLicense(license_id, found)
    return found[0]


def _capacity(_req: Capacity) -> tuple[int, dict[str, Any]]:
    """Redis used and maximum memory and what holds it (seatlease/capacity.py)."""
    from seatlease.capacity import capacity
    from seatlease.runtime import seat_engine

    return 200, capacity(seat_engine().redis)


def _revoke(req: Revoke) -> tuple[int, dict[str, Any]]:
    """``lmremove``: end a live lease now, recorded as ``lease.revoked``; the client's
    next heartbeat answers 410."""
    from seatlease.runtime import seat_engine

    tenant_id = _license_tenant(req.tenant_id, req.license_id)
    engine = seat_engine()
    before = next(
        (
            lease
            for lease in engine.live_leases(tenant_id, req.license_id)
            if lease["session_id"] == req.session_id
        ),
        None,
    )
    result = engine.release(tenant_id, req.license_id, req.session_id, revoke=True)
    if not result.released:
        raise SessionNotLive(
            f"session {req.session_id!r} holds no seat on {tenant_id}/{req.license_id} "
            "(unknown, released, expired or already revoked)"
        )
    body: dict[str, Any] = {
        "revoked": True,
        "tenant_id": tenant_id,
        "license_id": req.license_id,
        "session_id": req.session_id,
        "seats_used": result.seats_used,
        "seats_total": result.seats_total,
    }
    if before is not None:
        lease = _lease_view(before, before["expires_at_ms"])
        body.update({k: lease[k] for k in ("client_id", "user", "host", "metadata", "acquired_at")})
    log(
        "NOTICE",
        "admin: lease revoked",
        tenant_id=tenant_id,
        license_id=req.license_id,
        session_id=req.session_id,
        client_id=body.get("client_id"),
    )
    return 200, body


def _report_usage(req: ReportUsage) -> tuple[int, dict[str, Any]]:
    """Usage of a tenant's licenses from the usage rollups (shared/seatlease/reports.py),
    as ``UsageReport.as_dict()``; with ``timelines``, also each license's peak seats in use
    per period and its configured seats, which is what a chart needs. A window beyond the
    report's bounds is a 400 naming the limit (``InvalidRequest`` from reports)."""
    from seatlease import reports

    store.get_tenant(req.tenant_id)  # unknown tenant or license: 404, not an empty report
    if req.license_id is not None:
        _require_license(req.tenant_id, req.license_id)
    window = req.window()
    report = reports.usage_report(window, req.period)
    body = report.as_dict()
    if req.timelines:
        seats = {row["license_id"]: row["seats"] for row in store.list_licenses(req.tenant_id)}
        body["timelines"] = [_timeline_view(t, seats) for t in report.timelines]
    return 200, body


def _report_users(req: ReportUsers) -> tuple[int, dict[str, Any]]:
    """Per license and user: leases, their seat time, and time spent in the wait queue
    (``reports.user_usage``, from the raw events of the window)."""
    from seatlease import reports

    store.get_tenant(req.tenant_id)
    if req.license_id is not None:
        _require_license(req.tenant_id, req.license_id)
    window = req.window()
    rows = reports.user_usage(window)
    return 200, {
        "tenant_id": req.tenant_id,
        "license_id": req.license_id,
        "since": _time(window.since),
        "until": _time(window.until),
        "users": [{name: getattr(row, name) for name in row.__dataclass_fields__} for row in rows],
    }


def _timeline_view(line: Timeline, seats: dict[str, int]) -> dict[str, Any]:
    """A ``reports.Timeline`` as JSON; points are compact ``[period start, peak seats,
    seats_total, average seats]`` and denials ``[period start, count]`` arrays, one per
    period (the report's bounds keep them few); ``end``: where the last point stops
    (never after now)."""
    return {
        "license_id": line.license_id,
        "seats": seats.get(line.license_id),
        "start_level": line.start_level,
        "start_total": line.start_total,
        "points": [[iso_utc(at), peak, total, average] for at, peak, total, average in line.points],
        "denials": [[iso_utc(at), count] for at, count in line.denials],
        "end": iso_utc(line.end) if line.end else None,
    }


HANDLERS: dict[type[_Action], Callable[[Any], tuple[int, dict[str, Any]]]] = {
    ReportUsers: _report_users,
    TenantCreate: _tenant_create,
    TenantList: _tenant_list,
    Capacity: _capacity,
    TenantShow: _tenant_show,
    TenantUpdate: _tenant_update,
    ApiKeyCreate: _apikey_create,
    ApiKeyList: _apikey_list,
    ApiKeyRevoke: _apikey_revoke,
    LicenseCreate: _license_create,
    LicenseUpdate: _license_update,
    LicenseSuspend: _license_suspend,
    LicenseShow: _license_show,
    LicenseList: _license_list,
    Status: _status,
    Revoke: _revoke,
    ReportUsage: _report_usage,
}


def execute(request: _Action) -> tuple[int, dict[str, Any]]:
    """Run one validated action: ``(status, JSON body)``."""
    return HANDLERS[type(request)](request)
