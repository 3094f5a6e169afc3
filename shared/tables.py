"""The relational schema (SQLAlchemy Core). Alembic migrations in shared/migrations/
create it; keep both in step (tests/test_store.py compares them)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()
ID = String(128)

tenants = Table(
    "tenants",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("name", String(256), nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", Integer, primary_key=True, autoincrement=True),
    Column("tenant_id", ID, ForeignKey("tenants.tenant_id"), nullable=False, index=True),
    Column("prefix", String(16), nullable=False, unique=True),  # shown to humans
    Column("key_hash", String(64), nullable=False, unique=True),  # sha256 hex of the key
    Column("label", String(256), nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

licenses = Table(
    "licenses",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.tenant_id"), primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("seats", Integer, nullable=False),
    Column("lease_seconds", Integer, nullable=False, server_default="360"),
    Column("max_lease_seconds", Integer, nullable=False, server_default="3600"),
    Column("overage_percent", Integer, nullable=False, server_default="0"),
    Column("suspended", Boolean, nullable=False, server_default=false()),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("seats >= 0", name="ck_licenses_seats"),
    CheckConstraint("lease_seconds >= 1", name="ck_licenses_lease"),
    CheckConstraint("max_lease_seconds >= lease_seconds", name="ck_licenses_max_lease"),
    CheckConstraint("overage_percent BETWEEN 0 AND 1000", name="ck_licenses_overage"),
)

lease_events = Table(
    "lease_events",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("event_id", String(64), nullable=False, unique=True),
    Column("type", String(32), nullable=False),
    Column("tenant_id", ID, nullable=False),
    Column("license_id", ID, nullable=False),
    Column("session_id", ID, nullable=True),
    Column("client_id", ID, nullable=True),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Column("seats_used", Integer, nullable=True),
    Column("seats_total", Integer, nullable=True),
    Column("count", Integer, nullable=False, server_default="1"),  # >1 only for lease.denied
    Column("metadata", JSON().with_variant(JSONB(), "postgresql"), nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_lease_events_license_time", "tenant_id", "license_id", "occurred_at"),
    Index("ix_lease_events_session", "session_id"),
)
