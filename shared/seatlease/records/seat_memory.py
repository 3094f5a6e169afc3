"""What the database remembers for the seat engine across a loss of Redis's data
(docs/design.md, "A region lost"; the engine's ``SeatHistory``, seatlease/seats/failover.py):

- which Redis shards have served seats (``seat_shards``): a shard without its mark in
  Redis that is listed here lost its data, and a recovery window opens for its licenses;
- how a session ended (``usage_leases``, one row per lease, both of its ends, kept by
  every audit insert; and a client's release that left it lingering, a ``lease_events``
  row): after such a loss, the memory of what the service ended that Redis kept (its
  ``ended`` notes) went with the data, and the audit trail says instead. Read only while
  a token's lease is being re-admitted on a shard whose data is younger than the token."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from seatlease import clock
from seatlease.records.db import transaction
from seatlease.records.tables import lease_events, seat_shards, usage_leases

REVOKED = "lease.revoked"
LINGERING = "lease.lingering"


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def shard_listed(shard: int, engine: Engine | None = None) -> bool:
    """Whether ``shard`` is listed as one that served seats."""
    with transaction(engine) as conn:
        found = conn.execute(select(seat_shards.c.shard).where(seat_shards.c.shard == shard))
        return found.first() is not None


def list_shard(shard: int, engine: Engine | None = None) -> None:
    """List ``shard`` as one that serves seats (once: a second listing is no error)."""
    try:
        with transaction(engine) as conn:
            conn.execute(insert(seat_shards).values(shard=shard, first_seen_at=clock.now()))
    except IntegrityError:  # another instance listed it just now
        pass


def session_ended_before(
    tenant_id: str,
    license_id: str,
    session_id: str,
    since_ms: int,
    before_ms: int,
    engine: Engine | None = None,
) -> str | None:
    """How the audit trail says the session ended before ``before_ms``: ``revoked`` (an
    operator's revoke), ``ended`` (released, reclaimed, or released to linger after
    ``since_ms``, the token's iat), or None (no end stored before then: the lease was
    live when the data was lost, or its end was still on its way). One primary-key read,
    and one range of the license's events from the token's iat (at most a lease length
    of them) for a lingering release."""
    leases, events = usage_leases.c, lease_events.c
    before = _at(before_ms)
    with transaction(engine) as conn:
        row = conn.execute(
            select(leases.ended_at, leases.end_type).where(
                leases.session_id == session_id,
                leases.tenant_id == tenant_id,
                leases.license_id == license_id,
            )
        ).first()
        if row is not None and row.ended_at is not None and _utc(row.ended_at) < before:
            return "revoked" if row.end_type == REVOKED else "ended"
        lingering = conn.execute(
            select(events.id)
            .where(
                events.tenant_id == tenant_id,
                events.license_id == license_id,
                events.occurred_at >= _at(since_ms),
                events.occurred_at < before,
                events.session_id == session_id,
                events.type == LINGERING,
            )
            .limit(1)
        ).first()
    return "ended" if lingering is not None else None
