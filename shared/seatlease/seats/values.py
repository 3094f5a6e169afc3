"""What the seat engine takes and answers: ``SeatRequest`` in; ``Lease`` (or a
``QueuePlace`` in the wait queue), ``Renewal`` and ``Release`` out. Plain values, no I/O:
seats/protocol/replies.py fills them from the scripts' answers, by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatlease.seats.terms import Terms


@dataclass(frozen=True, slots=True)
class SeatRequest:
    """One acquire, as the engine takes it: who asks for a seat of which license, for how
    long, and how. Fields after ``client_id`` are optional.

    ``lease_seconds``: None for the license's own length. ``metadata``: a flat object kept
    with the lease and its events. ``request_id``: the call's idempotency key (a repeat is
    answered from the first run); None makes one. ``borrow_seconds``: a borrowed seat, no
    heartbeats until it ends (not with ``lease_seconds``). ``rate_limit``: the tenant's
    calls per second (0: none, as for an operator's call). ``user``/``host``: who asks,
    judged by the license's policy and recorded in the lease's metadata. ``queue``: wait in
    the license's queue rather than be refused; ``ticket``: the place a previous call gave.
    """

    tenant_id: str
    license_id: str
    client_id: str
    lease_seconds: int | None = None
    metadata: dict[str, Any] | None = None
    request_id: str | None = None
    borrow_seconds: int | None = None
    rate_limit: int = 0
    user: str | None = None
    host: str | None = None
    queue: bool = False
    ticket: str | None = None
    # what the product needs: entitlement names the license must all have, and its
    # version (dotted numbers), at most the license's max_version
    entitlements: tuple[str, ...] = ()
    version: str | None = None
    # how many seats the lease counts as (a render node: 4); None: 1 for a new lease, the
    # held lease's own for a renewal (another weight for a held lease: SeatsMismatch)
    seats: int | None = None
    # the machine asking (the hex SHA-256 fingerprint): a borrowed lease is bound to the
    # machine it was borrowed for (another one's re-acquire: MachineMismatch)
    fingerprint: str | None = None
    # a failover's recovery under way: when it began (ms; seats/failover.py), or None
    failover_began_ms: int | None = None
    # the verified lease token the client sent (its lease, re-admitted if this Redis lost
    # it: acquire.lua's re-admission), or None
    recover: TokenGrant | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    session_id: str
    license_id: str
    client_id: str
    created: bool  # False: the client already held this live lease (extended)
    expires_at_ms: int
    lease_seconds: int
    seats_used: int
    seats_total: int
    seat_limit: int
    borrowed: bool = False  # lease_seconds is then the borrow's length
    now_ms: int = 0  # when the script ran, on the Redis clock (a token's iat)
    terms: Terms | None = None  # the license's term and entitlements, when it has some
    seats: int = 1  # the seats this lease counts as (its weight)
    machine: str | None = None  # a borrowed lease's machine (its token's cnf.machine)
    # granted in a failover's recovery window (a license that chose to grant): its end
    recovering_until_ms: int | None = None
    recovered: bool = False  # re-admitted by its lease token (it was lost here)
    user: str | None = None  # the user the license's policy judged it as (its tokens' usr)
    # on a license that shares seats: the sessions on this lease's share group, itself
    # included (None: not in one)
    shared_sessions: int | None = None

    @property
    def overage(self) -> bool:
        return self.seats_used > self.seats_total

    @property
    def heartbeat_interval_seconds(self) -> int:
        cut = self.expires_at_ms - self.now_ms if self.terms and self.terms.cut else None
        return heartbeat_interval(self.lease_seconds, self.borrowed, cut)


@dataclass(frozen=True, slots=True)
class QueuePlace:
    """An acquire with ``queue`` on a full license: a place in its wait queue. The client
    keeps it by calling acquire again (same client_id, this ticket) within the license's
    ``queue_ticket_seconds``; ``retry_after_seconds`` says when."""

    license_id: str
    client_id: str
    position: int  # 1: the head
    ticket: str
    retry_after_seconds: int
    seats_used: int
    seats_total: int
    seats: int = 1  # the seats the ticket waits for


@dataclass(frozen=True, slots=True)
class Renewal:
    session_id: str
    expires_at_ms: int
    lease_seconds: int
    borrowed: bool = False  # the deadline did not move: a borrow ends when it ends
    now_ms: int = 0  # when the script ran, on the Redis clock
    client_id: str | None = None
    terms: Terms | None = None  # the license's term and entitlements, when it has some
    seats: int = 1  # the seats the lease counts as (its weight)
    machine: str | None = None  # a borrowed lease's machine (its token's cnf.machine)
    user: str | None = None  # the user the license's policy judged it as (its tokens' usr)
    recovered: bool = False  # re-admitted by its lease token in this call
    # warned for being idle: when it is reclaimed unless used (ms; None: not warned)
    idle_reclaim_at_ms: int | None = None

    @property
    def heartbeat_interval_seconds(self) -> int:
        cut = self.expires_at_ms - self.now_ms if self.terms and self.terms.cut else None
        return heartbeat_interval(self.lease_seconds, self.borrowed, cut)


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """What a verified lease token says of its lease (seatlease.api.recovery): enough to
    re-create it on a Redis that lost it (acquire.lua's re-admission)."""

    session_id: str
    client_id: str
    expires_at_ms: int  # the token's exp
    seats: int = 1
    borrowed: bool = False
    machine: str | None = None  # cnf.machine
    issued_at_ms: int = 0  # the token's iat
    user: str | None = None  # usr: the user the license's policy judged the lease as

    @property
    def lease_seconds(self) -> int:
        """The lease's length as its token shows it (exp - iat), at least 1 s."""
        return max(1, (self.expires_at_ms - self.issued_at_ms) // 1000)


@dataclass(frozen=True, slots=True)
class Release:
    released: bool
    seats_used: int
    seats_total: int
    lingering: bool = False  # released, and the seat stays held for its client (linger)
    now_ms: int = 0  # when the script ran, on the Redis clock


def heartbeat_interval(
    lease_seconds: int, borrowed: bool = False, cut_ms: int | None = None
) -> int:
    """About a third of the lease: two heartbeats can be missed before the seat is lost.
    A borrowed lease needs none: its interval is the whole borrow. A lease cut to its
    license's end (``cut_ms`` away) comes back by then, to learn whether it was renewed."""
    if borrowed:
        return max(1, lease_seconds)
    if cut_ms is not None:
        return max(1, min(lease_seconds // 3, -(-cut_ms // 1000)))
    return max(1, lease_seconds // 3)
