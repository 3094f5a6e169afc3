"""Licenses: create, update, suspend and resume, show, list. Every change refreshes the
license's cached config in Redis at once (or says it could not)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator
from redis.exceptions import RedisError

from seatlease import clock
from seatlease.admin.common import (
    Action,
    BorrowSeconds,
    LeaseSeconds,
    LingerSeconds,
    OptionalTime,
    OveragePercent,
    Seats,
    iso_time,
    license_rows,
    require_license,
)
from seatlease.errors import BackendUnavailable, InvalidRequest, StoreError
from seatlease.fields import Entitlements, Identifier, Version
from seatlease.licenses import (
    LICENSE_FIELDS,
    MAX_GRACE_SECONDS,
    MAX_IDLE_SECONDS,
    MAX_SHARE_LIMIT,
    MIN_IDLE_SECONDS,
    LicenseConfig,
    term_problem,
)
from seatlease.logs import log
from seatlease.records import store
from seatlease.seats.engine import CONFIG_TTL_SECONDS
from seatlease.seats.policy import LicensePolicy, parse_policy

GraceSeconds = Annotated[int, Field(ge=0, le=MAX_GRACE_SECONDS)]
OnExpiry = Literal["end_leases", "keep_leases"]
OnFailover = Literal["hold", "grant"]


def _idle_timeout(value: int) -> int:
    # one message with both bounds: 1..59 is refused although it lies within 0..max
    if value != 0 and not MIN_IDLE_SECONDS <= value <= MAX_IDLE_SECONDS:
        raise ValueError(f"must be 0 (off) or between {MIN_IDLE_SECONDS} and {MAX_IDLE_SECONDS}")
    return value


IdleTimeoutSeconds = Annotated[int, AfterValidator(_idle_timeout)]  # 0: never idle
IdleReclaim = Literal["when_needed", "always"]
Share = Literal["none", "user", "host", "user_host"]
ShareLimit = Annotated[int, Field(ge=0, le=MAX_SHARE_LIMIT)]  # sessions a seat; 0: no limit
# --renew-for: at most ten years at a time
RenewSeconds = Annotated[int, Field(ge=1, le=10 * 366 * 24 * 3600)]
# Alerts (issue 51; seatlease.webhooks.alerts): 0 is off. A share of the seats sold (an
# overage license runs past 100 %), minutes in a row, true denials in an hour.
AlertFullPercent = Annotated[int, Field(ge=0, le=1000)]
AlertFullMinutes = Annotated[int, Field(ge=1, le=1440)]
AlertDenials = Annotated[int, Field(ge=0, le=1_000_000)]


class AlertSettings(Action):
    """The alert fields of license.create and license.update (None: unchanged)."""

    alert_full_percent: AlertFullPercent | None = None
    alert_full_minutes: AlertFullMinutes | None = None
    alert_denials: AlertDenials | None = None

    def alert_settings(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in store.ALERT_COLUMNS if getattr(self, f) is not None}


def _check_term(starts: datetime | None, expires: datetime | None) -> datetime | None:
    if starts is not None and expires is not None and expires <= starts:
        raise ValueError("must be after starts_at")
    return expires


def check_term_range(starts: datetime | None, expires: datetime | None, grace_seconds: int) -> None:
    """A 400 naming the field when the term names a moment out of range (its start, its
    end, its end + grace: seatlease.licenses.term_problem), before anything is stored."""
    problem = term_problem(starts, expires, grace_seconds)
    if problem is not None:
        field, text = problem
        raise InvalidRequest(
            f"Invalid request: {field}: {text}.", details=[{"field": field, "problem": text}]
        )


class LicenseCreate(AlertSettings):
    action: Literal["license.create"]
    tenant_id: Identifier
    license_id: Identifier
    seats: Seats
    lease_seconds: LeaseSeconds = 360
    max_lease_seconds: LeaseSeconds | None = None
    overage_percent: OveragePercent = 0
    max_borrow_seconds: BorrowSeconds = 0
    linger_seconds: LingerSeconds = 0
    policy: LicensePolicy | None = None  # seatlease.seats.policy; absent: none
    starts_at: OptionalTime = None
    expires_at: OptionalTime = None
    grace_seconds: GraceSeconds = 0
    on_expiry: OnExpiry = "end_leases"
    entitlements: Entitlements | None = None
    max_version: Version | None = None
    on_failover: OnFailover = "hold"
    idle_timeout_seconds: IdleTimeoutSeconds = 0
    idle_reclaim: IdleReclaim = "when_needed"
    share: Share = "none"
    share_limit: ShareLimit = 0

    @field_validator("expires_at")
    @classmethod
    def _after_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        return _check_term(info.data.get("starts_at"), value)

    @model_validator(mode="after")
    def _in_range(self) -> LicenseCreate:
        check_term_range(self.starts_at, self.expires_at, self.grace_seconds)
        return self

    def terms(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in LICENSE_FIELDS[7:]}


class LicenseUpdate(AlertSettings):
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
    starts_at: OptionalTime = None
    expires_at: OptionalTime = None
    grace_seconds: GraceSeconds | None = None
    on_expiry: OnExpiry | None = None
    entitlements: Entitlements | None = None  # replaces the set
    max_version: Version | None = None
    on_failover: OnFailover | None = None
    idle_timeout_seconds: IdleTimeoutSeconds | None = None
    idle_reclaim: IdleReclaim | None = None
    share: Share | None = None
    share_limit: ShareLimit | None = None
    clear_term: bool = False  # no starts_at, no expires_at: perpetual again
    clear_entitlements: bool = False
    clear_max_version: bool = False
    # expires_at moves this much later, from the later of now and the current end
    renew_for_seconds: RenewSeconds | None = None

    @field_validator("expires_at")
    @classmethod
    def _after_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        return _check_term(info.data.get("starts_at"), value)

    @model_validator(mode="after")
    def _changes_something(self) -> LicenseUpdate:
        if self.policy is not None and self.clear_policy:
            raise ValueError("give policy or clear_policy, not both")
        pairs = (
            ("expires_at", "clear_term"),
            ("starts_at", "clear_term"),
            ("renew_for_seconds", "clear_term"),
            ("expires_at", "renew_for_seconds"),
            ("entitlements", "clear_entitlements"),
            ("max_version", "clear_max_version"),
        )
        for one, other in pairs:
            if getattr(self, one) not in (None, False) and getattr(self, other):
                raise ValueError(f"give {one} or {other}, not both")
        if (
            not self.changes()
            and not self.cleared()
            and self.renew_for_seconds is None
            and not self.alert_settings()
        ):
            fields = ", ".join(
                (
                    *LICENSE_FIELDS,
                    *("policy", "clear_policy", "clear_term", "renew_for_seconds"),
                    *store.ALERT_COLUMNS,
                )
            )
            raise ValueError(f"give at least one of {fields}")
        return self

    def changes(self) -> dict[str, Any]:
        changes = {f: getattr(self, f) for f in LICENSE_FIELDS if getattr(self, f) is not None}
        if self.policy is not None:
            changes["policy"] = self.policy.as_dict()
        if self.clear_policy:
            changes["policy"] = {}
        if self.clear_term and self.grace_seconds is None:
            changes["grace_seconds"] = 0  # a grace is the term's: none without one
        return changes

    def cleared(self) -> tuple[str, ...]:
        """The fields set back to none."""
        cleared: list[str] = []
        if self.clear_term:
            cleared += ["starts_at", "expires_at"]
        if self.clear_entitlements:
            cleared.append("entitlements")
        if self.clear_max_version:
            cleared.append("max_version")
        return tuple(cleared)


class LicenseSuspend(Action):
    action: Literal["license.suspend", "license.resume"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseShow(Action):
    action: Literal["license.show"]
    tenant_id: Identifier
    license_id: Identifier


class LicenseList(Action):
    action: Literal["license.list"]
    tenant_id: Identifier | None = None
    # only licenses whose term ends within this many seconds (or ended and are in grace)
    expiring_within_seconds: RenewSeconds | None = None


def license_view(row: dict[str, Any]) -> dict[str, Any]:
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
        **term_view(config),
        "on_failover": config.on_failover,
        "idle_timeout_seconds": config.idle_timeout_seconds,
        "idle_reclaim": config.idle_reclaim,
        "share": config.share,
        "share_limit": config.share_limit,
        "created_at": iso_time(row.get("created_at")),
        "updated_at": iso_time(row.get("updated_at")),
    }


def term_view(config: LicenseConfig, now: datetime | None = None) -> dict[str, Any]:
    """The license's term, entitlements and version range, and where it stands now:
    ``term_state`` is ``perpetual``, ``not_started``, ``active``, ``in_grace`` or
    ``expired``; ``expires_in_days`` counts days to ``expires_at``, rounded up (0 or
    negative from it on)."""
    now = now or clock.now()
    expires = config.expires_at and clock.utc(config.expires_at)
    starts = config.starts_at and clock.utc(config.starts_at)
    view: dict[str, Any] = {
        "starts_at": iso_time(starts),
        "expires_at": iso_time(expires),
        "grace_seconds": config.grace_seconds,
        "on_expiry": config.on_expiry,
        "entitlements": list(config.entitlements),
        "max_version": config.max_version,
    }
    if starts and now < starts:
        state = "not_started"
    elif expires is None:
        state = "perpetual"
    elif now < expires:
        state = "active"
    elif now < clock.later(expires, config.grace_seconds):
        state = "in_grace"
    else:
        state = "expired"
    view["term_state"] = state
    if expires is not None:
        view["grace_ends_at"] = iso_time(clock.later(expires, config.grace_seconds))
        view["expires_in_days"] = -((now - expires) // timedelta(days=1))  # rounded up
    view["term_text"] = term_text(view)
    return view


def term_text(view: dict[str, Any]) -> str:
    """The term in words, as ``license show``, ``status`` and the portal say it:
    ``expires 2027-11-25 (in 364 days)`` (``expires 2026-11-28 03:12 UTC`` within a day),
    ``in grace: expired 2026-11-20 00:00 UTC, stops 2026-11-27 00:00 UTC``, ``expired
    2026-10-01 00:00 UTC, stopped 2026-10-08 00:00 UTC`` (without a grace: ``expired
    2026-10-01 00:00 UTC``), ``starts 2027-01-01``, or ``perpetual``."""
    parts = []
    state, expires = view["term_state"], (view.get("expires_at") or "")[:10]
    if state == "not_started":
        parts.append(f"starts {(view['starts_at'] or '')[:10]}")
    if state in ("in_grace", "expired"):
        # both ends to the minute, in one format: a grace may be minutes long
        ended = f"expired {_to_minute(view['expires_at'])}"
        stops = _to_minute(view["grace_ends_at"])
        if state == "in_grace":
            parts.append(f"in grace: {ended}, stops {stops}")
        elif stops != _to_minute(view["expires_at"]):
            parts.append(f"{ended}, stopped {stops}")
        else:
            parts.append(ended)
    elif expires:
        days = view["expires_in_days"]
        if days <= 1:  # today or tomorrow: the hour matters
            parts.append(f"expires {_to_minute(view['expires_at'])}")
        else:
            parts.append(f"expires {expires} (in {days} day{'' if days == 1 else 's'})")
    elif state != "not_started":
        parts.append("perpetual")
    return ", ".join(parts)


def _to_minute(iso: str) -> str:
    """``2026-11-28T03:12:24Z`` as ``2026-11-28 03:12 UTC``."""
    return iso[:16].replace("T", " ") + " UTC"


def _policy_view(stored: Any) -> dict[str, Any] | None:
    """The license's policy with every field (defaults included), None for none."""
    policy = parse_policy(stored)
    return None if policy is None else policy.as_dict()


def _refresh_cache(tenant_id: str, license_id: str) -> dict[str, Any]:
    """Write the database's view of a license into Redis now; a Redis outage only
    delays the change until the cached copy expires."""
    from seatlease.api.runtime import refresh_license_cache

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
        **req.terms(),
    )
    view = {**license_view(row), **_alerts(req.tenant_id, req.license_id, req.alert_settings())}
    return 201, {"license": view, **_refresh_cache(req.tenant_id, req.license_id)}


def _alerts(tenant_id: str, license_id: str, settings: dict[str, int]) -> dict[str, int]:
    """The license's alert settings after ``settings`` (none: as stored)."""
    if settings:
        return store.set_license_alerts(tenant_id, license_id, **settings)
    found = store.license_alerts_of(tenant_id, license_id)
    return found.get((tenant_id, license_id), dict(store.ALERT_DEFAULTS))


def _license_change(
    tenant_id: str,
    license_id: str,
    changes: dict[str, Any],
    cleared: tuple[str, ...] = (),
    alerts: dict[str, int] | None = None,
) -> dict[str, Any]:
    store.update_license(tenant_id, license_id, cleared=cleared, **changes)
    row = require_license(tenant_id, license_id)  # as stored (updated_at included)
    view = {**license_view(row), **_alerts(tenant_id, license_id, alerts or {})}
    return {"license": view, **_refresh_cache(tenant_id, license_id)}


def _license_update(req: LicenseUpdate) -> tuple[int, dict[str, Any]]:
    changes = req.changes()
    row = require_license(req.tenant_id, req.license_id)
    if req.renew_for_seconds is not None:
        current = row["expires_at"]
        now = clock.now()
        if current is None:
            raise StoreError("renew_for_seconds: the license has no expires_at to renew")
        start = max(now, clock.utc(current))
        renewed = clock.later(start, req.renew_for_seconds)
        if term_problem(None, renewed, 0) or renewed - start < timedelta(
            seconds=req.renew_for_seconds
        ):
            text = "the renewed end would pass 9999-12-31T23:59:59Z (the latest a license may end)"
            raise InvalidRequest(
                f"Invalid request: renew_for_seconds: {text}.",
                details=[{"field": "renew_for_seconds", "problem": text}],
            )
        changes["expires_at"] = renewed
    # the term as it will be (the stored one, changed): every moment of it in range
    after = {**row, **changes, **dict.fromkeys(req.cleared())}
    check_term_range(
        after.get("starts_at"), after.get("expires_at"), after.get("grace_seconds") or 0
    )
    if after.get("starts_at") and after.get("expires_at"):
        if clock.utc(after["expires_at"]) <= clock.utc(after["starts_at"]):
            field = "expires_at" if "expires_at" in changes else "starts_at"
            text = "expires_at must be after starts_at"
            raise InvalidRequest(
                f"Invalid request: {field}: {text}.", details=[{"field": field, "problem": text}]
            )
    return 200, _license_change(
        req.tenant_id, req.license_id, changes, req.cleared(), req.alert_settings()
    )


def _license_suspend(req: LicenseSuspend) -> tuple[int, dict[str, Any]]:
    suspended = req.action == "license.suspend"
    return 200, _license_change(req.tenant_id, req.license_id, {"suspended": suspended})


def _license_show(req: LicenseShow) -> tuple[int, dict[str, Any]]:
    view = license_view(require_license(req.tenant_id, req.license_id))
    return 200, {"license": {**view, **_alerts(req.tenant_id, req.license_id, {})}}


def _license_list(req: LicenseList) -> tuple[int, dict[str, Any]]:
    rows = license_rows(req.tenant_id)
    if req.expiring_within_seconds is not None:
        now = clock.now()
        horizon = now + timedelta(seconds=req.expiring_within_seconds)
        rows = [r for r in rows if _ends_between(r, now, horizon)]
        rows.sort(key=lambda r: clock.utc(r["expires_at"]))
    alerts = store.license_alerts_of(req.tenant_id)
    views = [
        {
            **license_view(r),
            **alerts.get((r["tenant_id"], r["license_id"]), store.ALERT_DEFAULTS),
        }
        for r in rows
    ]
    return 200, {"licenses": views}


def _ends_between(row: dict[str, Any], now: datetime, horizon: datetime) -> bool:
    """The license's term ends by ``horizon`` and it still works now (before its end or
    in its grace)."""
    if row.get("expires_at") is None:
        return False
    expires = clock.utc(row["expires_at"])
    return expires <= horizon and now <= clock.later(expires, row.get("grace_seconds") or 0)


HANDLERS = {
    LicenseCreate: _license_create,
    LicenseUpdate: _license_update,
    LicenseSuspend: _license_suspend,
    LicenseShow: _license_show,
    LicenseList: _license_list,
}
