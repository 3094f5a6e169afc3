"""The values a lease token and its answer carry, read the same way by the held lease
(``_lease``), the borrowed seat (``_borrow``) and the verifier (``_verify``): the service's
RFC 3339 times and the weight a verified token signs. It imports nothing of the client,
so those modules depend on it and never on each other for these."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

# A verified token's claims (exp, aud, sub, sid, seats, borrowed, cnf, ...), by name.
Claims = dict[str, Any]

_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)")


def _parse_time(value: str) -> datetime:
    """An RFC 3339 timestamp as an aware UTC datetime. Python 3.9's ``fromisoformat``
    takes neither ``Z`` nor a fraction of other than 3 or 6 digits: both are normalised."""
    parts = _RFC3339.fullmatch(value)
    if parts is None:
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
    date, clock, fraction, zone = parts.groups()
    micros = (fraction or "")[:6].ljust(6, "0")
    zone = "+00:00" if zone in ("Z", "z") else zone
    return datetime.fromisoformat(f"{date}T{clock}.{micros}{zone}").astimezone(timezone.utc)


def claimed_seats(claims: Claims) -> int:
    """The lease's weight a verified token signs (its ``seats`` claim; absent: 1)."""
    seats = claims.get("seats", 1)
    if isinstance(seats, int) and not isinstance(seats, bool) and seats >= 1:
        return seats
    return 1
