"""What the database remembers for the seat engine across a loss of Redis's data
(docs/design.md, "A region lost"; the engine's ``SeatHistory``, seatlease/seats/failover.py):

- which Redis shards have served seats (``seat_shards``): a shard without its mark in
  Redis that is listed here lost its data, and a recovery window opens for its licenses;
- how a session ended (``usage_leases``, one row per lease, both of its ends, kept by
  every audit insert): after such a loss, the memory of what the service ended that Redis
  kept (its ``ended`` notes) went with the data, and the audit trail says instead. One
  primary-key read, made only while a token's lease is being re-admitted on a shard
  whose data is younger than the token."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from seatlease.records.db import transaction
from seatlease.records.tables import seat_shards, usage_leases

REVOKED = "lease.revoked"


def shard_seen_before(shard: int, engine: Engine | None = None) -> bool:
    """Whether ``shard`` had served seats before; from now on it has."""
    with transaction(engine) as conn:
        if conn.execute(select(seat_shards.c.shard).where(seat_shards.c.shard == shard)).first():
            return True
    try:
        with transaction(engine) as conn:
            conn.execute(insert(seat_shards).values(shard=shard))
    except IntegrityError:  # another instance listed it just now: it is new all the same
        pass
    return False


def session_ended_before(
    tenant_id: str, license_id: str, session_id: str, before_ms: int, engine: Engine | None = None
) -> str | None:
    """How the audit trail says the session ended before ``before_ms``: ``revoked`` (an
    operator's revoke), ``ended`` (released, reclaimed), or None (no end stored before
    then: the lease was live when the data was lost, or its end was still on its way)."""
    leases = usage_leases.c
    query = select(leases.ended_at, leases.end_type).where(
        leases.session_id == session_id,
        leases.tenant_id == tenant_id,
        leases.license_id == license_id,
    )
    with transaction(engine) as conn:
        row = conn.execute(query).first()
    if row is None or row.ended_at is None:
        return None
    ended_at = row.ended_at if row.ended_at.tzinfo else row.ended_at.replace(tzinfo=UTC)
    if ended_at >= datetime.fromtimestamp(before_ms / 1000, UTC):
        return None
    return "revoked" if row.end_type == REVOKED else "ended"
