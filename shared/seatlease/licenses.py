"""A license's configuration, as the database stores it and the seat engine caches it in
Redis: the one shape both ``seatlease.records.store`` and ``seatlease.seats.engine`` speak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
)
# A borrowed seat needs no heartbeats until it ends: at most 30 days (0 = no borrowing).
MAX_BORROW_SECONDS = 30 * 24 * 3600
# A released seat stays held for its client this long: at most a day (0 = no linger).
MAX_LINGER_SECONDS = 24 * 3600


@dataclass(frozen=True, slots=True)
class LicenseConfig:
    seats: int
    lease_seconds: int = 360
    max_lease_seconds: int = 3600
    overage_percent: int = 0
    suspended: bool = False
    max_borrow_seconds: int = 0  # 0: borrowing is off
    linger_seconds: int = 0  # 0: a release frees the seat at once
    # The license policy as acquire.lua reads it (seatlease.seats.policy.LicensePolicy's
    # redis_form()); "" for none: acquire then takes the path it always took.
    policy: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LicenseConfig:
        """From a ``licenses`` row (or any mapping with the ``LICENSE_FIELDS``)."""
        return cls(**{f: row[f] for f in LICENSE_FIELDS})

    @property
    def seat_limit(self) -> int:
        """Seats plus the overage allowance (Keygen-style: 25 -> 1.25x)."""
        return self.seats * (100 + self.overage_percent) // 100
