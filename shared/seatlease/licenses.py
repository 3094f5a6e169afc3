"""A license's configuration, as the database stores it and the seat engine caches it in
Redis: the one shape both ``seatlease.records.store`` and ``seatlease.seats.engine`` speak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

# The settable fields, in the order the CLI and the admin answers list them.
LICENSE_FIELDS = (
    "seats",
    "lease_seconds",
    "max_lease_seconds",
    "overage_percent",
    "suspended",
    "max_borrow_seconds",
    "linger_seconds",
    # the term (migration 0011): none of them set is a perpetual license, as before
    "starts_at",
    "expires_at",
    "grace_seconds",
    "on_expiry",
    # what the license entitles to (migration 0011): none, no check
    "entitlements",
    "max_version",
    # a failover's recovery window (migration 0013): "hold" new grants, or "grant"
    "on_failover",
    # idle seats and shared seats (migration 0017): 0 / "none" is off, as before
    "idle_timeout_seconds",
    "idle_reclaim",
    "share",
    "share_limit",
)
ON_FAILOVER = ("hold", "grant")
# Idle reclaim (docs/design.md, "Idle seats"): a lease whose product reports no user
# activity for idle_timeout_seconds (0: off; else at least MIN_IDLE_SECONDS) is warned,
# then reclaimed "when_needed" (only while another client is refused or waits) or
# "always".
IDLE_RECLAIM = ("when_needed", "always")
MIN_IDLE_SECONDS = 60
MAX_IDLE_SECONDS = 7 * 24 * 3600
# Shared seats (docs/design.md, "Shared seats"): leases of the same user, host, or both
# count as one seat; share_limit sessions a seat (0: no limit).
SHARE = ("none", "user", "host", "user_host")
MAX_SHARE_LIMIT = 10_000
# A borrowed seat needs no heartbeats until it ends: at most 30 days (0 = no borrowing).
MAX_BORROW_SECONDS = 30 * 24 * 3600
# A released seat stays held for its client this long: at most a day (0 = no linger).
MAX_LINGER_SECONDS = 24 * 3600
# After expires_at a license keeps working this long (the grace): at most 90 days.
MAX_GRACE_SECONDS = 90 * 24 * 3600
ON_EXPIRY = ("end_leases", "keep_leases")
# Entitlement names: what a product asks for (acquire's "entitlements").
ENTITLEMENT_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
MAX_ENTITLEMENTS = 64
# Versions: dotted numbers, compared part by part (2026.10 > 2026.4).
VERSION_PATTERN = r"^[0-9]{1,9}(\.[0-9]{1,9}){0,7}$"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Every moment a license names (its start, its end, its end + grace, a renewed end) lies
# in [EARLIEST_TIME, LATEST_TIME]: what every view, answer and token can write (a later
# end + grace overflowed Python's datetime after it was stored, and every admin view of
# the license answered 500). 9999-12-31 is the latest "never" an operator may type.
EARLIEST_TIME = _EPOCH
LATEST_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def term_problem(
    starts_at: datetime | None, expires_at: datetime | None, grace_seconds: int
) -> tuple[str, str] | None:
    """The field at fault and why, when a term names a moment out of range (see
    LATEST_TIME); None when every moment is in range."""
    latest = LATEST_TIME.isoformat().replace("+00:00", "Z")
    for field, value in (("starts_at", starts_at), ("expires_at", expires_at)):
        if value is None:
            continue
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        if not EARLIEST_TIME <= aware <= LATEST_TIME:
            return field, f"must lie between 1970-01-01T00:00:00Z and {latest}"
    if expires_at is not None:
        aware = expires_at if expires_at.tzinfo else expires_at.replace(tzinfo=UTC)
        if LATEST_TIME - aware < timedelta(seconds=grace_seconds):
            return "grace_seconds", (
                f"expires_at + grace_seconds must end by {latest} (the latest a license may "
                f"end); at most {int((LATEST_TIME - aware).total_seconds())} with this expires_at"
            )
    return None


def epoch_ms(value: datetime | None) -> int:
    """Milliseconds since the epoch of an aware (or naive UTC) time; 0 for None."""
    if value is None:
        return 0
    if value.tzinfo is None:  # SQLite hands back naive UTC times
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def version_key(version: str) -> tuple[int, ...]:
    """A dotted version's parts as numbers: compare with ``<``. Trailing zeros do not
    count (2026.4 == 2026.4.0)."""
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_text(version: str) -> str:
    """A dotted version as text that compares as the version does (byte by byte, as
    Lua's ``<`` compares strings): eight parts of nine digits, zero-padded (2026.4 ->
    "000002026000000004000000000..."), so the seat scripts compare with one ``>``."""
    parts = version.split(".")
    return "".join(p.zfill(9) for p in parts) + "000000000" * (8 - len(parts))


@dataclass(frozen=True, slots=True)
class LicenseConfig:
    seats: int
    lease_seconds: int = 360
    max_lease_seconds: int = 3600
    overage_percent: int = 0
    suspended: bool = False
    max_borrow_seconds: int = 0  # 0: borrowing is off
    linger_seconds: int = 0  # 0: a release frees the seat at once
    # The term: None for no start (usable at once) and no end (perpetual).
    starts_at: datetime | None = None
    expires_at: datetime | None = None
    grace_seconds: int = 0  # the license works this long after expires_at
    on_expiry: str = "end_leases"  # or keep_leases: held leases live on after the end
    entitlements: tuple[str, ...] = ()  # names, sorted
    max_version: str | None = None  # dotted numbers; None: any version
    on_failover: str = "hold"  # or grant: new seats in a failover's recovery window
    idle_timeout_seconds: int = 0  # 0: a lease is never reclaimed for being idle
    idle_reclaim: str = "when_needed"  # or always
    share: str = "none"  # or user, host, user_host: their leases share one seat
    share_limit: int = 0  # sessions a shared seat (0: no limit)
    # The license policy as acquire.lua reads it (seatlease.seats.policy.LicensePolicy's
    # redis_form()); "" for none: acquire then takes the path it always took.
    policy: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LicenseConfig:
        """From a ``licenses`` row (or any mapping with the ``LICENSE_FIELDS``; a row from
        before migration 0011 lacks the term's: none)."""
        values = {f: row[f] for f in LICENSE_FIELDS if f in row}
        values["entitlements"] = tuple(sorted(values.get("entitlements") or ()))
        values["grace_seconds"] = values.get("grace_seconds") or 0
        values["on_expiry"] = values.get("on_expiry") or "end_leases"
        values["on_failover"] = values.get("on_failover") or "hold"
        values["idle_timeout_seconds"] = values.get("idle_timeout_seconds") or 0
        values["idle_reclaim"] = values.get("idle_reclaim") or "when_needed"
        values["share"] = values.get("share") or "none"
        values["share_limit"] = values.get("share_limit") or 0
        return cls(**values)

    @property
    def seat_limit(self) -> int:
        """Seats plus the overage allowance (Keygen-style: 25 -> 1.25x)."""
        return self.seats * (100 + self.overage_percent) // 100

    @property
    def ends_at_ms(self) -> int:
        """When the license stops working: expires_at + grace (ms); 0 for perpetual."""
        if self.expires_at is None:
            return 0
        return epoch_ms(self.expires_at) + self.grace_seconds * 1000

    @property
    def has_terms(self) -> bool:
        """Any of the term, entitlements or version set: the seat scripts check them and
        answer them (a license without any takes the path it always took)."""
        return bool(self.starts_at or self.expires_at or self.entitlements or self.max_version)
