"""What each seat script answers, by name: the one spec of the answers of acquire.lua,
heartbeat.lua and release.lua, the table that turns a refusal into its domain error, and
the decoding of an answer into the engine's values (``Lease``, ``QueuePlace``,
``Renewal``, ``Release``).

A script builds its answer as a table ``{code, value, ...}`` and the reply store keeps it
in that form (lua/_replies.lua, ``remember``): the *stored form*, version
``STORED_FORM``, which two releases sharing one Redis during a rolling deploy both write
and both read (tests/test_replies_by_name.py replays replies stored by the release before
names). On its way out every answer is named once, in Lua (``named_reply``), by the field
lists below, which ``lua_spec`` writes out as the Lua the seat scripts are assembled with
(seats/scripts.py): Python receives ``[code, 'name name ...', value, value, ...]`` (the
answer's field names in one text, then their values), decoded here by name. A field a
stored reply of an older release lacks is absent, and takes its default.

Adding a refusal: the script's step returns ``{'<code>', ...}``; one row in ``REFUSALS``
(its code, its fields, its error); the error in seatlease/errors.py; its HTTP mapping
(seatlease/api/errormap.py); the clients' error tables (docs/design.md, "Adding a
refusal").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seatlease.errors import (
    InvalidRequest,
    LeaseTooLong,
    LicenseExpired,
    LicenseNotFound,
    LicenseNotStarted,
    LicenseSuspended,
    MachineMismatch,
    NoSeatsAvailable,
    NotEntitled,
    QueueFull,
    Recovering,
    SeatError,
    SeatsMismatch,
    SessionExpired,
    TenantRateLimited,
    UserDenied,
    UserLimitReached,
    VersionNotEntitled,
)
from seatlease.seats.terms import Terms
from seatlease.seats.values import Lease, QueuePlace, Release, Renewal

# The stored form's version: the answer table as the scripts build it, packed by
# lua/_replies.lua's pack_reply (its first byte a status letter or word, or '[' for JSON).
# Both releases of a deploy read and write it; a new form needs a release that reads it
# before one that writes it.
STORED_FORM = 1

_LEASE = (
    "session_id",
    "expires_at_ms",
    "lease_ms",
    "seats_used",
    "seats_total",
    "seat_limit",
    "now_ms",
    "borrowed",
)
_RENEWAL = ("expires_at_ms", "lease_ms", "now_ms", "borrowed", "client_id")
_RELEASE = ("seats_used", "seats_total", "lingering", "now_ms")


@dataclass(frozen=True, slots=True)
class Answer:
    """A script's answer: its code and its named fields (an absent field: None)."""

    code: str
    fields: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        # (a name no answer has is a mistake, not an absent field)
        if name not in FIELD_NAMES:
            raise AttributeError(name)
        return self.fields.get(name)

    def number(self, name: str, default: int = 0) -> int:
        value = self.fields.get(name)
        return default if value is None else value

    def retry_seconds(self) -> int:
        """``retry_ms`` in whole seconds, at least 1 (1 when absent)."""
        return max(1, math.ceil(self.number("retry_ms") / 1000))


@dataclass(frozen=True, slots=True)
class Call:
    """What a refusal's error says of the call itself, not of the answer."""

    license_id: str
    client_id: str = ""
    user: str | None = None
    version: str | None = None
    weight: int = 1  # the seats asked (a new lease's 1, a token's own)


def too_many_seats(seats: int) -> InvalidRequest:
    """The 400 for a lease counting more seats than its license has."""
    problem = f"may be at most {seats} (the license's seats)"
    return InvalidRequest(
        f"Invalid request: seats: {problem}.",
        details=[{"field": "seats", "problem": problem}],
    )


def borrow_too_long(max_borrow_seconds: int) -> InvalidRequest:
    """The 400 for a borrow beyond the license's maximum, naming the field and the max."""
    if max_borrow_seconds <= 0:
        problem = "borrowing is off for this license (max_borrow_seconds is 0)"
    else:
        problem = f"may be at most {max_borrow_seconds} (max_borrow_seconds) for this license"
    return InvalidRequest(
        f"Invalid request: borrow_seconds: {problem}.",
        max_borrow_seconds=max_borrow_seconds,
        details=[{"field": "borrow_seconds", "problem": problem}],
    )


def user_required() -> InvalidRequest:
    return InvalidRequest(
        "Invalid request: user: required on this license (its policy judges users).",
        details=[{"field": "user", "problem": "required by the license's policy"}],
    )


# The answers the engine makes a value of (and consult_audit, which asks it for the audit
# trail's word): each code and its fields, in the order the script's table holds them.
VALUES: dict[str, tuple[str, ...]] = {
    "acquired": _LEASE,
    "renewed": _LEASE,
    "recovered": _LEASE,
    "queued": ("position", "ticket", "retry_ms", "seats_used", "seats_total"),
    "consult_audit": ("data_since_ms",),
    "ok": _RENEWAL,
    "released": _RELEASE,
    "gone": _RELEASE,
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal's row: the fields of its answer (in the order the script's table holds
    them) and its error, made of the answer (a) and the call (c)."""

    fields: tuple[str, ...]
    error: Callable[[Answer, Call], SeatError]


# Every refusal a seat script answers: one row each (docs/design.md, "Adding a refusal").
REFUSALS: dict[str, Refusal] = {
    # any seat call
    "missing": Refusal((), lambda a, c: LicenseNotFound(f"license {c.license_id!r} not found")),
    "not_found": Refusal((), lambda a, c: LicenseNotFound(f"license {c.license_id!r} not found")),
    "rate_limited": Refusal(("retry_ms",), lambda a, c: TenantRateLimited(a.retry_seconds())),
    "not_started": Refusal(("starts_at_ms",), lambda a, c: LicenseNotStarted(a.starts_at_ms)),
    "license_expired": Refusal(
        ("expires_at_ms", "ended_at_ms"),
        lambda a, c: LicenseExpired(a.expires_at_ms, a.ended_at_ms),
    ),
    # acquire.lua
    "suspended": Refusal(
        (), lambda a, c: LicenseSuspended(f"license {c.license_id!r} is suspended")
    ),
    "not_entitled": Refusal(("missing",), lambda a, c: NotEntitled(a.missing.split())),
    "version_not_entitled": Refusal(
        ("max_version",), lambda a, c: VersionNotEntitled(c.version or "", a.max_version)
    ),
    "lease_too_long": Refusal(
        ("max_lease_seconds",), lambda a, c: LeaseTooLong(a.max_lease_seconds)
    ),
    "borrow_too_long": Refusal(
        ("max_borrow_seconds",), lambda a, c: borrow_too_long(a.max_borrow_seconds)
    ),
    "too_many_seats": Refusal(("license_seats",), lambda a, c: too_many_seats(a.license_seats)),
    "seats_mismatch": Refusal(
        ("held_seats", "seats"), lambda a, c: SeatsMismatch(c.client_id, a.held_seats, a.seats)
    ),
    "machine_mismatch": Refusal((), lambda a, c: MachineMismatch(c.client_id)),
    "denied": Refusal(
        ("seats_used", "seats_total", "seat_limit", "retry_ms", "seats_held", "seats_reserved"),
        lambda a, c: NoSeatsAvailable(
            a.seats_used,
            a.seats_total,
            a.retry_seconds(),
            a.number("seats_held"),
            a.number("seats_reserved"),
            c.weight,
        ),
    ),
    "queue_full": Refusal(
        ("queue_max", "queue_waiting", "seats_used", "seats_total"),
        lambda a, c: QueueFull(a.queue_max, a.seats_used, a.seats_total),
    ),
    "user_required": Refusal((), lambda a, c: user_required()),
    "user_denied": Refusal((), lambda a, c: UserDenied(c.user or "")),
    "user_limit": Refusal(
        ("max_per_user", "sessions", "retry_ms"),
        lambda a, c: UserLimitReached(
            c.user or "", a.max_per_user, a.sessions, a.retry_seconds(), c.weight
        ),
    ),
    "recovering": Refusal(("retry_ms",), lambda a, c: Recovering(a.retry_seconds())),
    "not_readmitted": Refusal(
        ("why",),
        lambda a, c: SessionExpired(a.why if a.why in ("revoked", "idle") else "unknown"),
    ),
    # heartbeat.lua
    "expired": Refusal((), lambda a, c: SessionExpired("expired")),
    "unknown": Refusal((), lambda a, c: SessionExpired("unknown")),
    "revoked": Refusal((), lambda a, c: SessionExpired("revoked")),
    "idle": Refusal((), lambda a, c: SessionExpired("idle")),
}

# Each answer code and its fields, in the order the script's table holds them.
ANSWERS: dict[str, tuple[str, ...]] = {
    **VALUES,
    **{code: refusal.fields for code, refusal in REFUSALS.items()},
}

# A lease's answer (acquired, renewed, recovered; a heartbeat's ok) may go on past its
# fields, each part only when it applies, in this order: the license's terms (TERMS), the
# lease's weight when more than 1 (a number), then texts with a prefix: 'm:' the machine a
# borrow is bound to, 'u:' the user the policy judged it as, 'r:' the end (ms) of the
# failover window it was granted in, 's:' the sessions on its share group, 'i:' when it is
# reclaimed for being idle (ms). named_reply names them.
LEASE_ANSWERS = ("acquired", "renewed", "recovered", "ok")
TERMS = ("term_expires_ms", "term_ends_ms", "term_flags", "entitlements", "max_version")
TAGGED = (  # from the end
    ("i:", "idle_reclaim_at_ms"),
    ("s:", "shared_sessions"),
    ("r:", "recovering_until_ms"),
    ("u:", "user"),
    ("m:", "machine"),
)
WEIGHT = "weight"

FIELD_NAMES = frozenset(
    {name for names in ANSWERS.values() for name in names}
    | set(TERMS)
    | {name for _, name in TAGGED}
    | {WEIGHT}
)

# Fields that are texts; every other is an integer.
TEXTS = frozenset(
    {"session_id", "client_id", "ticket", "missing", "max_version", "entitlements", "why"}
    | {"machine", "user"}
)


def lua_spec() -> str:
    """The spec as Lua, for lua/_replies.lua (seats/scripts.py puts it before that file):
    ``reply_spec()`` returns the fields of each code; for each code, a function naming an
    answer that has all of them (one table constructor); the codes of a lease's answer;
    the terms' fields; the tagged parts; the weight's name. A function, so the tables are
    made at a call's first answer (once per library load for FCALL), not at every
    EVALSHA's top level."""

    def strings(names: tuple[str, ...]) -> str:
        return "{" + ", ".join(f"'{name}'" for name in names) + "}"

    def whole(code: str, names: tuple[str, ...]) -> str:
        if not names:
            return f"{code} = function(r) return {{'{code}'}} end"
        values = "".join(f", r[{i}]" for i in range(2, len(names) + 2))
        return f"{code} = function(r) return {{'{code}', '{' '.join(names)}'{values}}} end"

    fields = ",\n    ".join(f"{code} = {strings(names)}" for code, names in ANSWERS.items())
    wholes = ",\n    ".join(whole(code, names) for code, names in ANSWERS.items())
    tails = ", ".join(f"{code} = true" for code in LEASE_ANSWERS)
    tagged = ", ".join(f"{{'{prefix}', '{name}'}}" for prefix, name in TAGGED)
    return (
        "-- generated by seatlease.seats.protocol.replies.lua_spec (the answers' fields)\n"
        "local function reply_spec()\n"
        f"  return {{\n    {fields}}},\n"
        f"  {{\n    {wholes}}},\n"
        f"    {{{tails}}},\n"
        f"    {strings(TERMS)}, {{{tagged}}}, '{WEIGHT}'\n"
        "end\n"
    )


def decode(reply: list) -> Answer:
    """``[code, 'name name ...', value, ...]`` (named_reply's) as an Answer."""
    names = reply[1].split() if len(reply) > 1 else ()
    return Answer(
        reply[0],
        {
            name: value if name in TEXTS else int(value)
            for name, value in zip(names, reply[2:], strict=True)
        },
    )


def refuse(answer: Answer, call: Call) -> None:
    """Raises the answer's refusal, if it is one."""
    refusal = REFUSALS.get(answer.code)
    if refusal is not None:
        raise refusal.error(answer, call)


def _terms(a: Answer) -> Terms | None:
    if a.term_flags is None:
        return None
    return Terms(
        expires_at_ms=a.term_expires_ms,
        ends_at_ms=a.term_ends_ms,
        in_grace=bool(a.term_flags & 1),
        cut=bool(a.term_flags & 2),
        entitlements=tuple(a.entitlements.split(",")) if a.entitlements else (),
        max_version=a.max_version or None,
    )


def lease_of(a: Answer, call: Call) -> Lease | QueuePlace:
    """acquire.lua's answer: a Lease, a QueuePlace, or its refusal raised."""
    refuse(a, call)
    if a.code == "queued":
        return QueuePlace(
            license_id=call.license_id,
            client_id=call.client_id,
            position=a.position,
            ticket=a.ticket,
            retry_after_seconds=a.retry_seconds(),
            seats_used=a.seats_used,
            seats_total=a.seats_total,
            seats=call.weight,
        )
    if a.code not in ("acquired", "renewed", "recovered"):
        raise ValueError(f"acquire.lua answered {a.code!r}, which the protocol does not know")
    return Lease(
        session_id=a.session_id,
        license_id=call.license_id,
        client_id=call.client_id,
        created=a.code == "acquired",
        recovered=a.code == "recovered",
        user=a.user,
        expires_at_ms=a.expires_at_ms,
        lease_seconds=a.lease_ms // 1000,
        seats_used=a.seats_used,
        seats_total=a.seats_total,
        seat_limit=a.seat_limit,
        borrowed=a.borrowed == 1,
        now_ms=a.now_ms,
        terms=_terms(a),
        seats=a.number(WEIGHT, 1),
        machine=a.machine,
        recovering_until_ms=a.recovering_until_ms,
        shared_sessions=a.shared_sessions,
    )


def renewal_of(a: Answer, call: Call, session_id: str) -> Renewal:
    """heartbeat.lua's answer: a Renewal, or its refusal raised."""
    refuse(a, call)
    if a.code != "ok":
        raise ValueError(f"heartbeat.lua answered {a.code!r}, which the protocol does not know")
    return Renewal(
        session_id,
        a.expires_at_ms,
        a.lease_ms // 1000,
        a.borrowed == 1,
        now_ms=a.now_ms,
        client_id=a.client_id,
        terms=_terms(a),
        seats=a.number(WEIGHT, 1),
        machine=a.machine,
        user=a.user,
        idle_reclaim_at_ms=a.idle_reclaim_at_ms,
    )


def release_of(a: Answer, call: Call) -> Release:
    """release.lua's answer: a Release, or its refusal raised."""
    refuse(a, call)
    if a.code not in ("released", "gone"):
        raise ValueError(f"release.lua answered {a.code!r}, which the protocol does not know")
    return Release(
        a.code == "released",
        a.seats_used,
        a.seats_total,
        a.lingering == 1,
        now_ms=a.number("now_ms"),
    )


def answering_lua(code: str) -> str:
    """A seat script's code as an EVAL script answering by name (as the library's function
    does: lua/_replies.lua's ``answering``)."""
    return f"return answering(function(KEYS, ARGV)\n{code}\nend)(KEYS, ARGV)\n"
