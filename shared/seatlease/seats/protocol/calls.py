"""Each seat script's KEYS and ARGV by name, in one place.

A ``ScriptSpec`` names a script's keys and arguments; their order lives here alone. The
Python side builds a call's lists from names (``ScriptSpec.build``: a missing or unknown
name is refused), and scripts.py puts the spec's generated Lua binding
(``ScriptSpec.lua_binding``) before the script's own code, so a script reads ``k.leases``
and ``a.tenant_id``, never ``KEYS[2]`` or ``ARGV[1]``. A script that takes a batch (the
reaper's, or a configuration's fields) declares it as a named tail of records of named
fields: ``k.candidates[i].leases``, ``a.candidates[i].session_id``.

The builders below (``acquire_call`` and the rest) are what the engine, the reaper and
the benchmarks call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

from seatlease.licenses import version_text
from seatlease.seats.ids import new_event_prefix, new_request_id, new_session_id
from seatlease.seats.keys import (
    LicenseKeys,
    deadlines_key,
    denials_key,
    notices_key,
    outbox_key,
    refused_due_key,
    ticket_index_key,
)
from seatlease.seats.protocol.spec import ProtocolError, ScriptSpec, Tail
from seatlease.seats.values import TokenGrant

# How long a seat call's reply answers a repeat of its request id, at least: a repeat comes
# at most the client's retry window (seatlease_client's defaults: 6 attempts of 10 s and
# the pauses between them, 68 s from the first send to the last) plus redis-py's retries
# of the script on the server (4 tries of 2 + 2 s timeouts and 1 s pauses, 19 s) after
# the first run: 87 s (tests/test_reply_store.py computes both from the code). A reply
# lives between this and twice this (lua/_replies.lua, ``remember``: two generations).
REPLY_TTL_SECONDS = 90
_REPLY_TTL_MS = REPLY_TTL_SECONDS * 1000


_LEASE = ("cfg", "leases", "sessions", "clients", "deadlines", "outbox")  # keys.lease_keys
_POLICY = ("users", "queue", "tickets", "tdl", "tix")  # keys.policy_keys
_WEIGHT = ("units", "wsum")  # keys.weight_keys
_REFUSAL = ("refused", "refusing", "refused_due")  # keys.refusal_keys

SPECS: dict[str, ScriptSpec] = {
    spec.name: spec
    for spec in (
        ScriptSpec(
            "acquire",
            keys=(
                *_LEASE,
                "denials",
                "reply0",
                "rate",
                "reply1",
                *_POLICY,
                *_WEIGHT,
                *_REFUSAL,
                "ended",
                "lmax",
                "mark",
                "recovered",
                "idlers",
            ),
            args=(
                "tenant_id",
                "license_id",
                "client_id",
                "new_session_id",  # the session id of a new lease (random)
                "lease_seconds",  # 0: the license's default
                "metadata",
                "event_prefix",
                "reply_ttl_ms",
                "borrow_seconds",  # 0: a lease that heartbeats
                "rate_limit",  # the tenant's calls per second, 0: none
                "reply_field",  # this call's field in the reply hashes
                "user",
                "queue",
                "ticket",
                "new_ticket",  # a new place in line's ticket (random)
                "entitlements",  # space separated
                "version",  # comparable text (version_text)
                "seats",  # '': not said
                "fingerprint",
                "failover_began_ms",
                "shown_user",
                # a verified lease token's lease, to re-admit ('' and zeros: none)
                "token_session_id",
                "token_exp_ms",
                "token_iat_ms",
                "token_seats",
                "token_borrowed",
                "token_machine",
                "readmit_for",  # 'heartbeat': a heartbeat's re-admission, '': an acquire
                "audit_verdict",
                "token_user",
                # the share group's user and host ('' for none: lua/_acquire.lua's sharing)
                "share_user",
                "share_host",
            ),
        ),
        ScriptSpec(
            "heartbeat",
            keys=(*_LEASE, "reply0", "rate", "reply1", "users", *_WEIGHT, "ended", "idlers"),
            args=(
                "tenant_id",
                "license_id",
                "session_id",
                "event_prefix",
                "reply_ttl_ms",
                "rate_limit",
                "reply_field",
                # the product's activity ('' for not said: active; lua/_idle.lua)
                "idle_seconds",
                "busy",
            ),
        ),
        ScriptSpec(
            "release",
            keys=(*_LEASE, "reply0", "rate", "reply1", *_POLICY, *_WEIGHT, "ended", "idlers"),
            args=(
                "tenant_id",
                "license_id",
                "session_id",
                "event_prefix",
                "event_type",
                "reply_ttl_ms",
                "rate_limit",
                "reply_field",
            ),
        ),
        ScriptSpec(
            "reclaim",
            keys=("deadlines", "outbox", "tix"),
            args=("event_prefix",),
            key_tail=Tail(
                "candidates",
                (
                    "leases",
                    "sessions",
                    "clients",
                    "cfg",
                    "users",
                    *_WEIGHT,
                    "queue",
                    "tickets",
                    "tdl",
                    "ended",
                    "idlers",
                ),
            ),
            arg_tail=Tail("candidates", ("tenant_id", "license_id", "session_id")),
        ),
        ScriptSpec("flush_denials", keys=("denials", "outbox"), args=("event_prefix",)),
        ScriptSpec(
            "cache_config",
            keys=(
                "cfg",
                "queue",
                "tickets",
                "tdl",
                "tix",
                "outbox",
                "leases",
                "sessions",
                "deadlines",
                *_WEIGHT,
            ),
            # queue_reason: '' to keep the queue, else why its tickets leave
            args=("tenant_id", "license_id", "ttl_seconds", "queue_reason", "event_prefix"),
            arg_tail=Tail("fields", ("field", "value")),  # the cfg hash's
        ),
        ScriptSpec(
            "sweep_tickets",
            keys=("tix", "outbox"),
            args=("event_prefix",),
            key_tail=Tail("candidates", ("queue", "tickets", "tdl")),
            arg_tail=Tail("candidates", ("tenant_id", "license_id", "client_id")),
        ),
        ScriptSpec(
            "arm_notice",
            keys=("notice", "notices"),
            args=("license_key", "expires_ms", "grace_ms"),
        ),
        ScriptSpec(
            "notices",
            keys=("notices", "outbox"),
            args=("event_prefix", "thresholds"),  # thresholds: ms, largest first, commas
            key_tail=Tail("notice_hashes", ("notice",)),
            arg_tail=Tail("licenses", ("license_key",)),
        ),
        ScriptSpec(
            "cut_held",
            keys=("cfg", "leases", "sessions", "deadlines", *_WEIGHT),
            args=("tenant_id", "license_id", "limit"),
        ),
        ScriptSpec(
            "flush_refusals",
            keys=("refused_due", "outbox"),
            args=("event_prefix", "window_ms", "budget"),
            key_tail=Tail("licenses", ("refused", "refusing")),
            arg_tail=Tail("licenses", ("license_key",)),
        ),
    )
}


def _license(keys: LicenseKeys, names: Sequence[str]) -> dict[str, str]:
    """A license's keys by their protocol names."""
    return {name: _KEY_OF[name](keys) for name in names}


# Each license key's LicenseKeys attribute by its protocol name (the reply hashes are a
# pair, below), read by attribute getters so a batch's keys come out in one call a record
_KEY_ATTR = {
    "cfg": "cfg",
    "leases": "leases",
    "sessions": "sessions",
    "clients": "clients",
    "deadlines": "deadlines",
    "outbox": "outbox",
    "denials": "denials",
    "rate": "rate",
    "users": "users",
    "queue": "queue",
    "tickets": "tickets",
    "tdl": "ticket_deadlines",
    "tix": "ticket_index",
    "units": "units",
    "wsum": "wsum",
    "refused": "refused",
    "refusing": "refusing",
    "refused_due": "refused_due",
    "ended": "ended",
    "idlers": "idlers",
    "lmax": "lmax",
    "mark": "mark",
    "recovered": "recovered",
    "notice": "notice",
    "notices": "notices",
}
_KEY_OF: dict[str, Callable[[LicenseKeys], str]] = {
    **{name: attrgetter(attr) for name, attr in _KEY_ATTR.items()},
    "reply0": lambda k: k.replies[0],
    "reply1": lambda k: k.replies[1],
}


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
    share_user: str | None = None,
    share_host: str | None = None,
) -> tuple[list[str], list[Any]]:
    """acquire.lua's KEYS and ARGV. ``rate_limit``: the tenant's calls per second (0:
    none, as for an operator's call). ``seats``: the lease's weight (None: not said).
    ``fingerprint``: the machine asking (a borrow is bound to it). ``failover_began_ms``:
    a failover's recovery under way (seats/failover.py). ``shown_user``: the user as the
    metadata shows it (a refusal's note keeps it). ``recover``: a verified lease token's
    lease, to re-admit if this Redis lost it; ``on_heartbeat``: the re-admission of a
    heartbeat (answers ``not_readmitted`` rather than a new lease); ``audit_verdict``: the
    audit trail's word on that session, once the script asked for it
    (``consult_audit``). ``share_user``, ``share_host``: who asks, as a license that
    shares seats groups leases (None: not said)."""
    keys = LicenseKeys.of(tenant_id, license_id)
    spec = SPECS["acquire"]
    return spec.build(
        _license(keys, spec.keys),
        {
            "tenant_id": tenant_id,
            "license_id": license_id,
            "client_id": client_id,
            "new_session_id": session_id or new_session_id(),
            "lease_seconds": lease_seconds or 0,
            "metadata": metadata_json,
            "event_prefix": event_prefix or new_event_prefix(),
            "reply_ttl_ms": _REPLY_TTL_MS,
            "borrow_seconds": borrow_seconds or 0,
            "rate_limit": rate_limit,
            "reply_field": keys.reply_field("acquire", client_id, request_id),
            "user": user or "",
            "queue": 1 if queue else 0,
            "ticket": ticket or "",
            "new_ticket": new_request_id(),
            "entitlements": " ".join(entitlements or ()),
            "version": version_text(version) if version else "",
            "seats": "" if seats is None else seats,
            "fingerprint": fingerprint or "",
            "failover_began_ms": "" if failover_began_ms is None else failover_began_ms,
            "shown_user": shown_user or "",
            **_token_args(recover),
            "readmit_for": "heartbeat" if on_heartbeat else "",
            "audit_verdict": audit_verdict,
            "share_user": share_user or "",
            "share_host": share_host or "",
        },
    )


def _token_args(grant: TokenGrant | None) -> dict[str, Any]:
    """acquire.lua's token_* arguments: the token's lease (none: '' and zeros)."""
    if grant is None:
        return {
            "token_session_id": "",
            "token_exp_ms": 0,
            "token_iat_ms": 0,
            "token_seats": 1,
            "token_borrowed": 0,
            "token_machine": "",
            "token_user": "",
        }
    return {
        "token_session_id": grant.session_id,
        "token_exp_ms": grant.expires_at_ms,
        "token_iat_ms": grant.issued_at_ms,
        "token_seats": grant.seats,
        "token_borrowed": 1 if grant.borrowed else 0,
        "token_machine": grant.machine or "",
        "token_user": grant.user or "",
    }


def heartbeat_call(
    tenant_id: str,
    license_id: str,
    session_id: str,
    *,
    request_id: str,
    rate_limit: int = 0,
    idle_seconds: int | None = None,
    busy: bool = False,
) -> tuple[list[str], list[Any]]:
    """heartbeat.lua's KEYS and ARGV. ``idle_seconds``: how long the product saw no user
    activity (None: not said, an active lease); ``busy``: it works and must not be
    interrupted (lua/_idle.lua)."""
    keys = LicenseKeys.of(tenant_id, license_id)
    spec = SPECS["heartbeat"]
    return spec.build(
        _license(keys, spec.keys),
        {
            "tenant_id": tenant_id,
            "license_id": license_id,
            "session_id": session_id,
            "event_prefix": new_event_prefix(),
            "reply_ttl_ms": _REPLY_TTL_MS,
            "rate_limit": rate_limit,
            "reply_field": keys.reply_field("heartbeat", session_id, request_id),
            "idle_seconds": "" if idle_seconds is None else idle_seconds,
            "busy": 1 if busy else "",
        },
    )


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
    spec = SPECS["release"]
    return spec.build(
        _license(keys, spec.keys),
        {
            "tenant_id": tenant_id,
            "license_id": license_id,
            "session_id": session_id,
            "event_prefix": new_event_prefix(),
            "event_type": event,
            "reply_ttl_ms": _REPLY_TTL_MS,
            "rate_limit": rate_limit,
            "reply_field": keys.reply_field(event, session_id, request_id),
        },
    )


def cache_config_call(
    keys: LicenseKeys, ttl_seconds: int, queue_reason: str, fields: Mapping[str, Any]
) -> tuple[list, list]:
    """cache_config.lua's KEYS and ARGV: the license's cfg hash ``fields`` to store for
    ``ttl_seconds``; ``queue_reason``: '' to keep the wait queue, else why it empties."""
    spec = SPECS["cache_config"]
    return spec.build(
        _license(keys, spec.keys),
        {
            "tenant_id": keys.tenant_id,
            "license_id": keys.license_id,
            "ttl_seconds": ttl_seconds,
            "queue_reason": queue_reason,
            "event_prefix": new_event_prefix(),
            "fields": [{"field": f, "value": str(v)} for f, v in fields.items()],
        },
    )


def cut_held_call(keys: LicenseKeys, limit: int) -> tuple[list, list]:
    """cut_held.lua's KEYS and ARGV: cut at most ``limit`` held deadlines to the term."""
    spec = SPECS["cut_held"]
    return spec.build(
        _license(keys, spec.keys),
        {"tenant_id": keys.tenant_id, "license_id": keys.license_id, "limit": limit},
    )


def arm_notice_call(keys: LicenseKeys, expires_ms: int, grace_ms: int) -> tuple[list, list]:
    """arm_notice.lua's KEYS and ARGV: the license's end, for its notices."""
    spec = SPECS["arm_notice"]
    return spec.build(
        _license(keys, spec.keys),
        {"license_key": keys.license_key, "expires_ms": expires_ms, "grace_ms": grace_ms},
    )


# A shard index's own keys by their protocol names (a batch script's fixed KEYS)
_SHARD_KEY_OF: dict[str, Callable[[int], str]] = {
    "deadlines": deadlines_key,
    "outbox": outbox_key,
    "tix": ticket_index_key,
}

IndexBatchCall = Callable[[int, Iterable[str], str], tuple[list, list]]


def index_batch(spec: ScriptSpec, id_field: str) -> IndexBatchCall:
    """The KEYS and ARGV builder of a batch script over shard index members
    ``"<tenant>/<license>|<id>"``: the reaper builds one of these lists per candidate of a
    crash wave (a million leases), so the order is read from the spec here, once, as
    getters, and each member's keys and arguments go straight onto the flat lists (a
    fifth of ``ScriptSpec.build``'s cost a member; tests/test_protocol.py holds the two
    to the same lists). ``id_field``: the arg tail's name for the part after ``|``."""
    key_tail, arg_tail = spec.key_tail, spec.arg_tail
    parts = ("tenant_id", "license_id", id_field)
    if (
        key_tail is None
        or arg_tail is None
        or len(key_tail.fields) < 2  # attrgetter of one name gives no tuple
        or spec.args != ("event_prefix",)
        or sorted(arg_tail.fields) != sorted(parts)
    ):
        raise ProtocolError(f"{spec.name}.lua: not a batch over index members")
    head = tuple(_SHARD_KEY_OF[key] for key in spec.keys)
    record_keys = attrgetter(*(_KEY_ATTR[field] for field in key_tail.fields))
    # the member's own order, when the spec's is that, needs no reordering
    record_args = (
        None if arg_tail.fields == parts else itemgetter(*map(parts.index, arg_tail.fields))
    )
    license_keys = LicenseKeys.of

    def call(shard: int, members: Iterable[str], event_prefix: str) -> tuple[list, list]:
        keys = [key(shard) for key in head]
        args = [event_prefix]
        for member in members:
            lk, _, rest = member.partition("|")
            tenant_id, _, license_id = lk.partition("/")
            keys += record_keys(license_keys(tenant_id, license_id))
            if record_args is None:
                args += (tenant_id, license_id, rest)
            else:
                args += record_args((tenant_id, license_id, rest))
        return keys, args

    return call


_reclaim = index_batch(SPECS["reclaim"], "session_id")
_sweep_tickets = index_batch(SPECS["sweep_tickets"], "client_id")


def reclaim_call(shard: int, members: Iterable[str], event_prefix: str) -> tuple[list, list]:
    """reclaim.lua's KEYS and ARGV for these deadline-index members
    (``"<tenant>/<license>|<session_id>"``)."""
    return _reclaim(shard, members, event_prefix)


def sweep_tickets_call(shard: int, members: Iterable[str], event_prefix: str) -> tuple[list, list]:
    """sweep_tickets.lua's KEYS and ARGV for these ticket-index members
    (``"<tenant>/<license>|<client_id>"``)."""
    return _sweep_tickets(shard, members, event_prefix)


def notices_call(
    shard: int, members: Sequence[str], thresholds: str, event_prefix: str
) -> tuple[list, list]:
    """notices.lua's KEYS and ARGV for these notice-index members ("<tenant>/<license>")."""
    hashes = []
    for member in members:
        tenant_id, _, license_id = member.partition("/")
        hashes.append(LicenseKeys.of(tenant_id, license_id).notice)
    return SPECS["notices"].build(
        {"notices": notices_key(shard), "outbox": outbox_key(shard), "notice_hashes": hashes},
        {"event_prefix": event_prefix, "thresholds": thresholds, "licenses": list(members)},
    )


def flush_denials_call(shard: int, event_prefix: str) -> tuple[list, list]:
    """flush_denials.lua's KEYS and ARGV."""
    return SPECS["flush_denials"].build(
        {"denials": denials_key(shard), "outbox": outbox_key(shard)},
        {"event_prefix": event_prefix},
    )


def flush_refusals_call(
    shard: int, licenses: Sequence[str], window_ms: int, budget: int, event_prefix: str
) -> tuple[list, list]:
    """flush_refusals.lua's KEYS and ARGV for these licenses ("<tenant>/<license>")."""
    records = []
    for member in licenses:
        tenant_id, _, license_id = member.partition("/")
        lic = LicenseKeys.of(tenant_id, license_id)
        records.append({"refused": lic.refused, "refusing": lic.refusing})
    return SPECS["flush_refusals"].build(
        {"refused_due": refused_due_key(shard), "outbox": outbox_key(shard), "licenses": records},
        {
            "event_prefix": event_prefix,
            "window_ms": window_ms,
            "budget": budget,
            "licenses": list(licenses),
        },
    )
