"""Each seat script's KEYS and ARGV, in one place: the engine (engine.py) and the
benchmarks (bench/redis_cost.py) build every call with these, so the scripts' headers
(shared/seatlease/seats/lua/*.lua) are followed in one module."""

from __future__ import annotations

from typing import Any

from seatlease.licenses import version_text
from seatlease.seats.ids import new_event_prefix, new_request_id, new_session_id
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.values import TokenGrant

# How long a seat call's reply answers a repeat of its request id, at least: a repeat comes
# at most the client's retry window (seatlease_client's defaults: 6 attempts of 10 s and
# the pauses between them, 68 s from the first send to the last) plus redis-py's retries
# of the script on the server (4 tries of 2 + 2 s timeouts and 1 s pauses, 19 s) after
# the first run: 87 s (tests/test_reply_store.py computes both from the code). A reply
# lives between this and twice this (lua/_lib.lua, ``remember``: two generations).
REPLY_TTL_SECONDS = 90
_REPLY_TTL_MS = REPLY_TTL_SECONDS * 1000


def acquire_call(
    tenant_id: str,
    license_id: str,
    client_id: str,
    *,
    lease_seconds: int | None = None,
    metadata_json: str = "{}",
    request_id: str,
    session_id: str | None = None,
    event_prefix: str | None = None,
    borrow_seconds: int | None = None,
    rate_limit: int = 0,
    user: str | None = None,
    queue: bool = False,
    ticket: str | None = None,
    entitlements: tuple[str, ...] | list[str] | None = None,
    version: str | None = None,
    seats: int | None = None,
    fingerprint: str | None = None,
    failover_began_ms: int | None = None,
    shown_user: str | None = None,
    recover: TokenGrant | None = None,
    on_heartbeat: bool = False,
    audit_verdict: str = "",
) -> tuple[list[str], list[Any]]:
    """acquire.lua's KEYS and ARGV (documented in its header). ``rate_limit``: the
    tenant's calls per second (0: none, as for an operator's call). ``seats``: the lease's
    weight (None: not said). ``fingerprint``: the machine asking (a borrow is bound to
    it). ``failover_began_ms``: a failover's recovery under way (seats/failover.py).
    ``shown_user``: the user as the metadata shows it (a refusal's note keeps it).
    ``recover``: a verified lease token's lease, to re-admit if this Redis lost it;
    ``on_heartbeat``: the re-admission of a heartbeat (answers ``not_readmitted`` rather
    than a new lease); ``audit_verdict``: the audit trail's word on that session, once the
    script asked for it (``consult_audit``)."""
    keys = LicenseKeys.of(tenant_id, license_id)
    return [
        *keys.lease_keys,
        keys.denials,
        keys.replies[0],
        keys.rate,
        keys.replies[1],
        *keys.policy_keys,
        *keys.weight_keys,
        *keys.refusal_keys,
        keys.ended,
        keys.lmax,
        keys.mark,
        keys.recovered,
    ], [
        tenant_id,
        license_id,
        client_id,
        session_id or new_session_id(),
        lease_seconds or 0,
        metadata_json,
        event_prefix or new_event_prefix(),
        _REPLY_TTL_MS,
        borrow_seconds or 0,
        rate_limit,
        keys.reply_field("acquire", client_id, request_id),
        user or "",
        1 if queue else 0,
        ticket or "",
        new_request_id(),  # a new place in line's ticket
        " ".join(entitlements or ()),
        version_text(version) if version else "",
        "" if seats is None else seats,
        fingerprint or "",
        "" if failover_began_ms is None else failover_began_ms,
        shown_user or "",
        *_recovery_args(recover),
        "heartbeat" if on_heartbeat else "",
        audit_verdict,
        (recover.user or "") if recover is not None else "",
    ]


def _recovery_args(grant: TokenGrant | None) -> list[Any]:
    """ARGV[22..27] of acquire.lua: the token's lease (none: '' and zeros)."""
    if grant is None:
        return ["", 0, 0, 1, 0, ""]
    return [
        grant.session_id,
        grant.expires_at_ms,
        grant.issued_at_ms,
        grant.seats,
        1 if grant.borrowed else 0,
        grant.machine or "",
    ]


def heartbeat_call(
    tenant_id: str, license_id: str, session_id: str, *, request_id: str, rate_limit: int = 0
) -> tuple[list[str], list[Any]]:
    """heartbeat.lua's KEYS and ARGV."""
    keys = LicenseKeys.of(tenant_id, license_id)
    return [
        *keys.lease_keys,
        keys.replies[0],
        keys.rate,
        keys.replies[1],
        keys.users,
        *keys.weight_keys,
        keys.ended,
    ], [
        tenant_id,
        license_id,
        session_id,
        new_event_prefix(),
        _REPLY_TTL_MS,
        rate_limit,
        keys.reply_field("heartbeat", session_id, request_id),
    ]


def release_call(
    tenant_id: str,
    license_id: str,
    session_id: str,
    *,
    request_id: str,
    revoke: bool = False,
    rate_limit: int = 0,
) -> tuple[list[str], list[Any]]:
    """release.lua's KEYS and ARGV (``revoke``: an operator's ``lease.revoked``)."""
    keys = LicenseKeys.of(tenant_id, license_id)
    event = "lease.revoked" if revoke else "lease.released"
    return [
        *keys.lease_keys,
        keys.replies[0],
        keys.rate,
        keys.replies[1],
        *keys.policy_keys,
        *keys.weight_keys,
        keys.ended,
    ], [
        tenant_id,
        license_id,
        session_id,
        new_event_prefix(),
        event,
        _REPLY_TTL_MS,
        rate_limit,
        keys.reply_field(event, session_id, request_id),
    ]
