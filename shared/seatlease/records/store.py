"""The database side: tenants, API keys and licenses (the lease event log is
``event_log``). The runtime's
SQL lives here (and in ``reports``' queries, ``audit``'s insert path); callers get rows as
dicts and domain errors (the ``.importlinter`` contracts keep it so).

Every function takes an optional SQLAlchemy ``Engine`` (default:
``seatlease.records.db.get_engine()``)
and raises ``Conflict``/``NotFound``/``StoreError`` (``seatlease.errors``, re-exported
here) for domain problems. Connection failures raise ``BackendUnavailable('database')``
so the HTTP layer answers 503 and the CLI exits 5.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from seatlease import apikeys, clock

# Conflict, NotFound, StoreError and LICENSE_FIELDS stay importable from here, as before.
from seatlease.errors import Conflict, NotFound, StoreError
from seatlease.licenses import (
    IDLE_RECLAIM,
    LICENSE_FIELDS,
    MAX_BORROW_SECONDS,
    MAX_GRACE_SECONDS,
    MAX_IDLE_SECONDS,
    MAX_LINGER_SECONDS,
    MAX_SHARE_LIMIT,
    MIN_IDLE_SECONDS,
    ON_EXPIRY,
    ON_FAILOVER,
    SHARE,
    LicenseConfig,
)
from seatlease.records.db import (  # transaction: also used as store.transaction
    get_engine,
    transaction,
)
from seatlease.records.tables import (
    api_keys,
    licenses,
    portal_actions,
    tenants,
)


def upgrade(engine: Engine | None = None, revision: str = "head") -> None:
    """Apply the Alembic migrations (``seatlease db upgrade``)."""
    _migrate("upgrade", engine, revision)


def downgrade(engine: Engine | None, revision: str) -> None:
    """Undo the Alembic migrations after ``revision`` (the migration tests)."""
    _migrate("downgrade", engine, revision)


def _migrate(direction: str, engine: Engine | None, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    engine = engine or get_engine()
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("seatlease.records") / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, direction)(cfg, revision)


# -- tenants -------------------------------------------------------------------------


def create_tenant(
    tenant_id: str,
    name: str = "",
    engine: Engine | None = None,
    rate_limit_per_second: int | None = None,
) -> None:
    """A new tenant; ``rate_limit_per_second`` None: the column's default."""
    values: dict[str, Any] = {"tenant_id": tenant_id, "name": name}
    if rate_limit_per_second is not None:
        values["rate_limit_per_second"] = rate_limit_per_second
    try:
        with transaction(engine) as conn:
            conn.execute(insert(tenants).values(**values))
    except IntegrityError as exc:
        raise Conflict(f"tenant {tenant_id!r} already exists") from exc


def update_tenant(tenant_id: str, engine: Engine | None = None, **changes: Any) -> None:
    """Change a tenant's ``name`` and/or ``rate_limit_per_second``; ``NotFound`` when
    there is no such tenant."""
    with transaction(engine) as conn:
        done = conn.execute(
            update(tenants).where(tenants.c.tenant_id == tenant_id).values(**changes)
        )
    if done.rowcount == 0:
        raise NotFound(f"tenant {tenant_id!r} not found")


def tenant_rate_limit(tenant_id: str, engine: Engine | None = None) -> int | None:
    """The tenant's calls per second (0: no limit), None for an unknown tenant."""
    with transaction(engine) as conn:
        return conn.execute(
            select(tenants.c.rate_limit_per_second).where(tenants.c.tenant_id == tenant_id)
        ).scalar()


def get_tenant(tenant_id: str, engine: Engine | None = None) -> dict[str, Any]:
    """The tenant's row; ``NotFound`` when there is none."""
    with transaction(engine) as conn:
        found = conn.execute(select(tenants).where(tenants.c.tenant_id == tenant_id)).mappings()
        row = found.first()
    if row is None:
        raise NotFound(f"tenant {tenant_id!r} not found")
    return dict(row)


def list_tenants(engine: Engine | None = None) -> list[dict[str, Any]]:
    with transaction(engine) as conn:
        rows = conn.execute(select(tenants).order_by(tenants.c.tenant_id)).mappings()
        return [dict(r) for r in rows]


def _require_tenant(conn: Connection, tenant_id: str) -> None:
    if conn.execute(select(tenants.c.tenant_id).where(tenants.c.tenant_id == tenant_id)).first():
        return
    raise NotFound(f"tenant {tenant_id!r} not found")


# -- API keys ------------------------------------------------------------------------


SCOPES = ("seat", "admin")  # a seat key takes seats; an admin key runs the tenant's portal


@dataclass(frozen=True, slots=True)
class NewApiKey:
    key: str  # shown once, never stored
    prefix: str
    tenant_id: str
    scope: str = "seat"


def create_api_key(
    tenant_id: str, label: str = "", engine: Engine | None = None, scope: str = "seat"
) -> NewApiKey:
    if scope not in SCOPES:
        raise StoreError(f"scope must be one of {', '.join(SCOPES)}")
    key, prefix = apikeys.generate()
    with transaction(engine) as conn:
        _require_tenant(conn, tenant_id)
        conn.execute(
            insert(api_keys).values(
                tenant_id=tenant_id,
                prefix=prefix,
                key_hash=apikeys.hash_key(key),
                label=label,
                scope=scope,
            )
        )
    return NewApiKey(key, prefix, tenant_id, scope)


def list_api_keys(
    tenant_id: str, engine: Engine | None = None, scope: str | None = None
) -> list[dict[str, Any]]:
    """A tenant's keys, oldest first; only those of ``scope`` when it is given."""
    query = (
        select(
            api_keys.c.prefix,
            api_keys.c.label,
            api_keys.c.scope,
            api_keys.c.created_at,
            api_keys.c.revoked_at,
        )
        .where(api_keys.c.tenant_id == tenant_id)
        .order_by(api_keys.c.created_at, api_keys.c.key_id)
    )
    if scope is not None:
        query = query.where(api_keys.c.scope == scope)
    with transaction(engine) as conn:
        _require_tenant(conn, tenant_id)
        return [dict(r) for r in conn.execute(query).mappings()]


def revoke_api_key(
    prefix: str,
    engine: Engine | None = None,
    *,
    tenant_id: str | None = None,
    scope: str | None = None,
) -> str:
    """Revoke a key by its prefix; returns its key hash (to drop it from caches). With
    ``tenant_id`` / ``scope``, a key of another tenant or scope is ``NotFound``, the same
    answer as a prefix that does not exist."""
    query = select(api_keys.c.key_hash, api_keys.c.revoked_at).where(api_keys.c.prefix == prefix)
    if tenant_id is not None:
        query = query.where(api_keys.c.tenant_id == tenant_id)
    if scope is not None:
        query = query.where(api_keys.c.scope == scope)
    with transaction(engine) as conn:
        row = conn.execute(query).first()
        if row is None:
            raise NotFound(f"API key {prefix!r} not found")
        if row.revoked_at is None:
            conn.execute(
                update(api_keys).where(api_keys.c.prefix == prefix).values(revoked_at=clock.now())
            )
        return str(row.key_hash)


def tenant_for_key_hash(key_hash: str, engine: Engine | None = None) -> str | None:
    """The tenant owning a live (unrevoked) key, or None."""
    found = key_for_hash(key_hash, engine)
    return None if found is None else found[0]


def key_for_hash(key_hash: str, engine: Engine | None = None) -> tuple[str, str] | None:
    """``(tenant, scope)`` of a live (unrevoked) key, or None."""
    query = select(api_keys.c.tenant_id, api_keys.c.scope).where(
        api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
    )
    with transaction(engine) as conn:
        row = conn.execute(query).first()
    return None if row is None else (str(row.tenant_id), str(row.scope))


PORTAL_TARGETS = ("license_id", "session_id", "target_prefix", "endpoint_id")


def record_portal_action(
    tenant_id: str,
    key_prefix: str,
    action: str,
    status: int,
    engine: Engine | None = None,
    **target: str | None,
) -> None:
    """One row of the portal's audit trail (``license_id``, ``session_id``,
    ``target_prefix``, ``endpoint_id`` when the action names them)."""
    with transaction(engine) as conn:
        conn.execute(
            insert(portal_actions).values(
                tenant_id=tenant_id,
                key_prefix=key_prefix,
                action=action,
                status=status,
                at=clock.now(),
                # only what is set: a column an older schema lacks is named only when used
                **{k: target[k] for k in PORTAL_TARGETS if target.get(k) is not None},
            )
        )


def list_portal_actions(tenant_id: str, engine: Engine | None = None) -> list[dict[str, Any]]:
    """A tenant's portal audit trail, oldest first."""
    query = (
        select(portal_actions)
        .where(portal_actions.c.tenant_id == tenant_id)
        .order_by(portal_actions.c.at, portal_actions.c.id)
    )
    with transaction(engine) as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


# -- licenses ------------------------------------------------------------------------


def create_license(
    tenant_id: str,
    license_id: str,
    seats: int,
    lease_seconds: int = 360,
    max_lease_seconds: int | None = None,
    overage_percent: int = 0,
    engine: Engine | None = None,
    max_borrow_seconds: int = 0,
    linger_seconds: int = 0,
    policy: dict[str, Any] | None = None,
    **terms: Any,
) -> dict[str, Any]:
    """``terms``: starts_at, expires_at, grace_seconds, on_expiry, entitlements,
    max_version, on_failover, idle_timeout_seconds, idle_reclaim, share, share_limit
    (seatlease.licenses; absent: none, or off)."""
    unknown = set(terms) - set(LICENSE_FIELDS[7:])
    if unknown:
        raise StoreError(f"unknown license field(s): {', '.join(sorted(unknown))}")
    terms = {k: v for k, v in terms.items() if v is not None}
    if "entitlements" in terms:
        terms["entitlements"] = sorted(set(terms["entitlements"])) or None
    values = {
        "tenant_id": tenant_id,
        "license_id": license_id,
        "seats": seats,
        "lease_seconds": lease_seconds,
        "max_lease_seconds": max_lease_seconds or max(3600, lease_seconds),
        "overage_percent": overage_percent,
        "max_borrow_seconds": max_borrow_seconds,
        "linger_seconds": linger_seconds,
        "policy": policy or None,
        **terms,
    }
    validate_license(values)
    try:
        with transaction(engine) as conn:
            _require_tenant(conn, tenant_id)
            conn.execute(insert(licenses).values(**values))
    except IntegrityError as exc:
        raise Conflict(f"license {license_id!r} already exists for {tenant_id!r}") from exc
    return get_license(tenant_id, license_id, engine) or values


def validate_license(values: dict[str, Any]) -> None:
    """The same rules as the table's CHECK constraints, as readable errors."""
    if values["seats"] < 0:
        raise StoreError("seats must be 0 or more")
    if values["lease_seconds"] < 1:
        raise StoreError("lease_seconds must be at least 1")
    if values["max_lease_seconds"] < values["lease_seconds"]:
        raise StoreError("max_lease_seconds must be at least lease_seconds")
    if not 0 <= values["overage_percent"] <= 1000:
        raise StoreError("overage_percent must be between 0 and 1000")
    if not 0 <= values.get("max_borrow_seconds", 0) <= MAX_BORROW_SECONDS:
        raise StoreError(f"max_borrow_seconds must be between 0 and {MAX_BORROW_SECONDS}")
    if not 0 <= values.get("linger_seconds", 0) <= MAX_LINGER_SECONDS:
        raise StoreError(f"linger_seconds must be between 0 and {MAX_LINGER_SECONDS}")
    if not 0 <= (values.get("grace_seconds") or 0) <= MAX_GRACE_SECONDS:
        raise StoreError(f"grace_seconds must be between 0 and {MAX_GRACE_SECONDS}")
    if (values.get("on_expiry") or "end_leases") not in ON_EXPIRY:
        raise StoreError(f"on_expiry must be one of {', '.join(ON_EXPIRY)}")
    if (values.get("on_failover") or "hold") not in ON_FAILOVER:
        raise StoreError(f"on_failover must be one of {', '.join(ON_FAILOVER)}")
    _validate_idle_share(values)
    starts, expires = values.get("starts_at"), values.get("expires_at")
    if starts is not None and expires is not None and clock.utc(expires) <= clock.utc(starts):
        raise StoreError("expires_at must be after starts_at")
    if values.get("policy"):
        problem = policy_problem(values["policy"], values["seats"])
        if problem:
            raise StoreError(f"policy: {problem}")


def _validate_idle_share(values: dict[str, Any]) -> None:
    """Idle seats and shared seats (migration 0017's CHECK constraints, in words)."""
    idle = _or_default(values, "idle_timeout_seconds", 0)
    if not _whole(idle) or not (idle == 0 or MIN_IDLE_SECONDS <= idle <= MAX_IDLE_SECONDS):
        raise StoreError(
            f"idle_timeout_seconds must be 0 (off) or between {MIN_IDLE_SECONDS} and "
            f"{MAX_IDLE_SECONDS}, got {idle!r}"
        )
    for field, allowed, default in (
        ("idle_reclaim", IDLE_RECLAIM, "when_needed"),
        ("share", SHARE, "none"),
    ):
        value = _or_default(values, field, default)
        if value not in allowed:
            raise StoreError(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
    limit = _or_default(values, "share_limit", 0)
    if not _whole(limit) or not 0 <= limit <= MAX_SHARE_LIMIT:
        raise StoreError(
            f"share_limit must be between 0 (no limit) and {MAX_SHARE_LIMIT}, got {limit!r}"
        )


def _or_default(values: dict[str, Any], field: str, default: Any) -> Any:
    """The field's value; its default when absent or None (never when falsy: "" is
    refused as given, not stored as the default)."""
    value = values.get(field)
    return default if value is None else value


def _whole(value: Any) -> bool:
    """An int that is not a bool (True is not a number of seconds)."""
    return isinstance(value, int) and not isinstance(value, bool)


def policy_problem(policy: dict[str, Any], seats: int) -> str | None:
    """Why a stored policy cannot go with ``seats`` (reservations over the seat count, or
    a policy seatlease.seats.policy refuses), or None."""
    from pydantic import ValidationError

    from seatlease.seats.policy import parse_policy

    try:
        parsed = parse_policy(policy)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]) for e in exc.errors(include_url=False))
    return parsed.problem_with_seats(seats) if parsed else None


def update_license(
    tenant_id: str,
    license_id: str,
    engine: Engine | None = None,
    cleared: tuple[str, ...] = (),
    **changes: Any,
) -> dict[str, Any]:
    # policy: a dict replaces the license's policy; {} clears it (None: unchanged).
    # cleared: fields set back to none (the term's times, entitlements, max_version).
    changes = {k: v for k, v in changes.items() if v is not None}
    changes.update(dict.fromkeys(cleared))
    if "entitlements" in changes and changes["entitlements"] is not None:
        changes["entitlements"] = sorted(set(changes["entitlements"])) or None
    if "policy" in changes:
        changes["policy"] = changes["policy"] or None
    unknown = set(changes) - {*LICENSE_FIELDS, "policy"}
    if unknown:
        raise StoreError(f"unknown license field(s): {', '.join(sorted(unknown))}")
    with transaction(engine) as conn:
        current = _license_row(conn, tenant_id, license_id)
        if current is None:
            tenant = select(tenants.c.tenant_id).where(tenants.c.tenant_id == tenant_id)
            if conn.execute(tenant).first() is None:  # a mistyped tenant is not a missing license
                raise NotFound(f"tenant {tenant_id!r} not found")
            raise NotFound(f"license {license_id!r} not found for {tenant_id!r}")
        validate_license({**current, **changes})
        if changes:
            conn.execute(
                update(licenses)
                .where(licenses.c.tenant_id == tenant_id, licenses.c.license_id == license_id)
                .values(**changes, updated_at=clock.now())
            )
        return {**current, **changes}


def _license_row(conn: Connection, tenant_id: str, license_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        select(licenses).where(
            licenses.c.tenant_id == tenant_id, licenses.c.license_id == license_id
        )
    ).mappings()
    first = row.first()
    return dict(first) if first else None


def get_license(
    tenant_id: str, license_id: str, engine: Engine | None = None
) -> dict[str, Any] | None:
    with transaction(engine) as conn:
        return _license_row(conn, tenant_id, license_id)


def list_licenses(
    tenant_id: str | None = None, engine: Engine | None = None
) -> list[dict[str, Any]]:
    query = select(licenses).order_by(licenses.c.tenant_id, licenses.c.license_id)
    if tenant_id is not None:
        query = query.where(licenses.c.tenant_id == tenant_id)
    with transaction(engine) as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def lease_lengths(engine: Engine | None = None) -> list[tuple[str, str, int]]:
    """``(tenant_id, license_id, lease_seconds)`` of every license: what a failover's
    recovery windows fall back on (seatlease.admin.failover), in one query."""
    query = select(licenses.c.tenant_id, licenses.c.license_id, licenses.c.lease_seconds)
    with transaction(engine) as conn:
        return [(t, lic, int(n)) for t, lic, n in conn.execute(query)]


def license_config(
    tenant_id: str, license_id: str, engine: Engine | None = None
) -> LicenseConfig | None:
    row = get_license(tenant_id, license_id, engine)
    if row is None:
        return None
    config = LicenseConfig.from_row(row)
    if row.get("policy"):
        from seatlease.seats.policy import parse_policy

        policy = parse_policy(row["policy"])
        if policy is not None:
            config = replace(config, policy=policy.redis_form())
    return config


def license_ids(tenant_id: str, engine: Engine | None = None) -> list[str]:
    """The ids of a tenant's licenses, sorted (the seat functions' known set:
    seatlease/api/tenantlicenses.py)."""
    query = (
        select(licenses.c.license_id)
        .where(licenses.c.tenant_id == tenant_id)
        .order_by(licenses.c.license_id)
    )
    with transaction(engine) as conn:
        return [row.license_id for row in conn.execute(query)]


def tenants_with_license(license_id: str, engine: Engine | None = None) -> list[str]:
    """The tenants that have a license with this id, sorted."""
    query = (
        select(licenses.c.tenant_id)
        .where(licenses.c.license_id == license_id)
        .order_by(licenses.c.tenant_id)
    )
    with transaction(engine) as conn:
        return [row.tenant_id for row in conn.execute(query)]


# -- license alerts (issue 51) ---------------------------------------------------------

# The admin actions' and the CLI's names (``--alert-full-percent`` ...) of
# ``license_alerts``' columns, and what a license without a row has: every alert off.
ALERT_COLUMNS = {
    "alert_full_percent": "full_percent",
    "alert_full_minutes": "full_minutes",
    "alert_denials": "denials",
}
ALERT_DEFAULTS = {"alert_full_percent": 0, "alert_full_minutes": 5, "alert_denials": 0}


def set_license_alerts(
    tenant_id: str, license_id: str, engine: Engine | None = None, **settings: int
) -> dict[str, int]:
    """Change the license's alert settings (``ALERT_COLUMNS``' names; those not given
    stay); returns them all. ``NotFound`` when there is no such license."""
    from seatlease.records.tables import license_alerts

    values = {ALERT_COLUMNS[name]: value for name, value in settings.items()}
    key = (license_alerts.c.tenant_id == tenant_id, license_alerts.c.license_id == license_id)
    with transaction(engine) as conn:
        if _license_row(conn, tenant_id, license_id) is None:
            raise NotFound(f"license {license_id!r} not found for {tenant_id!r}")
        if values:
            values["updated_at"] = clock.now()
            done = conn.execute(update(license_alerts).where(*key).values(**values))
            if done.rowcount == 0:
                conn.execute(
                    insert(license_alerts).values(
                        tenant_id=tenant_id, license_id=license_id, **values
                    )
                )
    return license_alerts_of(tenant_id, license_id, engine).get(
        (tenant_id, license_id), dict(ALERT_DEFAULTS)
    )


def license_alerts_of(
    tenant_id: str | None = None, license_id: str | None = None, engine: Engine | None = None
) -> dict[tuple[str, str], dict[str, int]]:
    """The alert settings stored, by ``(tenant_id, license_id)`` (a license missing here
    has ``ALERT_DEFAULTS``): of one license, one tenant's or all."""
    from seatlease.records.tables import license_alerts

    t = license_alerts.c
    query = select(t.tenant_id, t.license_id, *[t[c] for c in ALERT_COLUMNS.values()])
    if tenant_id is not None:
        query = query.where(t.tenant_id == tenant_id)
    if license_id is not None:
        query = query.where(t.license_id == license_id)
    with transaction(engine) as conn:
        return {
            (row.tenant_id, row.license_id): {
                name: int(getattr(row, column)) for name, column in ALERT_COLUMNS.items()
            }
            for row in conn.execute(query)
        }
