"""The relational schema (SQLAlchemy Core). Alembic migrations in
shared/seatlease/records/migrations/
create it; keep both in step (tests/test_store.py compares them).

On PostgreSQL ``lease_events`` is partitioned by month on ``occurred_at`` (migration 0003,
``seatlease.records.rollups``): its unique key includes the partition key there (``(event_id,
occurred_at)``) and ``id`` (from a sequence) is not a key; on SQLite it is one table with
``event_id`` unique. The usage rollups (``usage_rollups``, ``usage_minute_rollups``,
``usage_client_rollups``) and
the leases (``usage_leases``: both ends of each lease) are plain tables on both,
maintained with every event insert (``seatlease.records.rollups``)."""

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
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()
ID = String(128)
QUEUE_OUTCOMES = "type IN ('queue.granted', 'queue.left')"

tenants = Table(
    "tenants",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("name", String(256), nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Calls per second on acquire, heartbeat and release; 0 is no limit (migration 0007;
    # the default, seatlease.api.tenantlimits.DEFAULT_RATE_LIMIT, is sized in docs/operations.md).
    Column("rate_limit_per_second", Integer, nullable=False, server_default="500"),
    CheckConstraint("rate_limit_per_second BETWEEN 0 AND 1000000", name="ck_tenants_rate_limit"),
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
    # Migration 0009: 'seat' takes seats (every older key), 'admin' runs the tenant's portal.
    Column("scope", String(16), nullable=False, server_default="seat"),
    CheckConstraint("scope IN ('seat', 'admin')", name="ck_api_keys_scope"),
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
    # Borrowing and linger (migration 0004): 0 is off; at most 30 days and one day.
    Column("max_borrow_seconds", Integer, nullable=False, server_default="0"),
    Column("linger_seconds", Integer, nullable=False, server_default="0"),
    # The license policy (migration 0006; seatlease.seats.policy checks it): NULL for none.
    Column("policy", JSON, nullable=True),
    # The term, entitlements and version range (migration 0011): NULL / 0 for none.
    Column("starts_at", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("grace_seconds", Integer, nullable=False, server_default="0"),
    Column("on_expiry", String(16), nullable=False, server_default="end_leases"),
    Column("entitlements", JSON, nullable=True),
    Column("max_version", String(96), nullable=True),
    # A failover's recovery window (migration 0013): hold new grants, or grant
    Column("on_failover", String(8), nullable=False, server_default="hold"),
    # Idle seats and shared seats (migration 0017): 0 / 'none' is off, as before.
    Column("idle_timeout_seconds", Integer, nullable=False, server_default="0"),
    Column("idle_reclaim", String(16), nullable=False, server_default="when_needed"),
    Column("share", String(16), nullable=False, server_default="none"),
    Column("share_limit", Integer, nullable=False, server_default="0"),
    CheckConstraint("seats >= 0", name="ck_licenses_seats"),
    CheckConstraint("lease_seconds >= 1", name="ck_licenses_lease"),
    CheckConstraint("max_lease_seconds >= lease_seconds", name="ck_licenses_max_lease"),
    CheckConstraint("overage_percent BETWEEN 0 AND 1000", name="ck_licenses_overage"),
    CheckConstraint("max_borrow_seconds BETWEEN 0 AND 2592000", name="ck_licenses_max_borrow"),
    CheckConstraint("linger_seconds BETWEEN 0 AND 86400", name="ck_licenses_linger"),
    CheckConstraint("grace_seconds BETWEEN 0 AND 7776000", name="ck_licenses_grace"),
    CheckConstraint("on_expiry IN ('end_leases', 'keep_leases')", name="ck_licenses_on_expiry"),
    CheckConstraint("on_failover IN ('hold', 'grant')", name="ck_licenses_on_failover"),
    CheckConstraint(
        "idle_timeout_seconds = 0 OR idle_timeout_seconds BETWEEN 60 AND 604800",
        name="ck_licenses_idle_timeout",
    ),
    CheckConstraint("idle_reclaim IN ('when_needed', 'always')", name="ck_licenses_idle_reclaim"),
    CheckConstraint("share IN ('none', 'user', 'host', 'user_host')", name="ck_licenses_share"),
    CheckConstraint("share_limit BETWEEN 0 AND 10000", name="ck_licenses_share_limit"),
    CheckConstraint(
        "starts_at IS NULL OR expires_at IS NULL OR expires_at > starts_at",
        name="ck_licenses_term",
    ),
)

lease_events = Table(
    "lease_events",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    # Unique on SQLite; unique with occurred_at (the partition key) on PostgreSQL.
    Column("event_id", String(64), nullable=False),
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
    # The lease's (or queue ticket's) weight: how many seats it counts as (migration 0012;
    # 1 for every event stored before weights, and for license.* and lease.denied).
    Column("seats", Integer, nullable=False, server_default="1"),
    Index("ix_lease_events_license_time", "tenant_id", "license_id", "occurred_at"),
    # Migration 0010: the wait queue's outcomes alone, for the per-user report (a few
    # rows a day where the license has a queue; the other events cost no entry).
    Index(
        "ix_lease_events_queue",
        "tenant_id",
        "license_id",
        "occurred_at",
        postgresql_where=text(QUEUE_OUTCOMES),
        sqlite_where=text(QUEUE_OUTCOMES),
    ),
    # Migration 0018: the idle warnings alone (lease.idle, lease.active), for the sizing
    # report's idle seat-hours (only licenses with an idle rule have them)
    Index(
        "ix_lease_events_idle",
        "tenant_id",
        "license_id",
        "occurred_at",
        postgresql_where=text("type IN ('lease.idle', 'lease.active')"),
        sqlite_where=text("type IN ('lease.idle', 'lease.active')"),
    ),
)


def _period_counters() -> list[Column]:
    """The counters of one license's period (hour or minute) that the usage rollups keep:
    the same in both tables (seatlease.records.rollups explains each and why they commute).
    A function, not a list: a Column belongs to one table."""
    return [
        Column("acquired", Integer, nullable=False, server_default="0"),
        Column("borrowed", Integer, nullable=False, server_default="0"),  # hourly: 0005
        Column("released", Integer, nullable=False, server_default="0"),
        Column("reclaimed", Integer, nullable=False, server_default="0"),  # crashes
        Column("revoked", Integer, nullable=False, server_default="0"),
        Column("denials", BigInteger, nullable=False, server_default="0"),
        Column("net", Integer, nullable=False, server_default="0"),
        Column("dsec_ms", BigInteger, nullable=False, server_default="0"),
        Column("max_used", Integer, nullable=True),
        Column("last_at", DateTime(timezone=True), nullable=True),
        Column("last_id", String(64), nullable=True),
        Column("last_used", Integer, nullable=True),
        Column("last_total", Integer, nullable=True),
        # lease.reclaimed by the license's term (migration 0015): not in ``reclaimed``
        Column("ended_by_term", Integer, nullable=False, server_default="0"),
        # lease.reclaimed for idleness (migration 0018): not in ``reclaimed`` either
        Column("ended_by_idle", Integer, nullable=False, server_default="0"),
    ]


# Per license and UTC hour: what the usage reports read (seatlease.records.rollups explains each
# column and why they commute). Outlives the raw events (``seatlease audit prune``).
usage_rollups = Table(
    "usage_rollups",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("hour", DateTime(timezone=True), primary_key=True),
    *_period_counters(),
)

# The same per license and UTC minute (migration 0008), for minute periods: kept
# ``rollups.MINUTE_RETENTION`` (14 days), pruned by ``seatlease audit prune``.
usage_minute_rollups = Table(
    "usage_minute_rollups",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("minute", DateTime(timezone=True), primary_key=True),
    *_period_counters(),
)

# Per license, client and UTC day of acquisition: leases acquired, and of those the ones
# whose ending is stored (count, reclaimed, ended by the term (migration 0015), total and
# longest duration).
usage_client_rollups = Table(
    "usage_client_rollups",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("client_id", ID, primary_key=True),  # '' when the acquire had none
    Column("day", DateTime(timezone=True), primary_key=True),
    Column("acquired", Integer, nullable=False, server_default="0"),
    Column("ended", Integer, nullable=False, server_default="0"),
    Column("reclaimed", Integer, nullable=False, server_default="0"),
    Column("total_ms", BigInteger, nullable=False, server_default="0"),
    Column("max_ms", BigInteger, nullable=True),
    Column("ended_by_term", Integer, nullable=False, server_default="0"),
    Column("ended_by_idle", Integer, nullable=False, server_default="0"),  # migration 0018
)

# One row per lease (session): its acquire and its first ending, each filled when its
# event arrives (in any order). Both set = the lease is counted in usage_client_rollups;
# the reports read it for the window's partial days, and the per-user report for the
# whole window. Pruned with the raw events.
usage_leases = Table(
    "usage_leases",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("license_id", ID, nullable=False),
    Column("client_id", ID, nullable=True),  # the acquire's
    Column("acquired_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    # The first ending's event type; ``lease.reclaimed:term`` (rollups.TERM_END_TYPE, since
    # migration 0015) for a lease.reclaimed whose reason was the license's term.
    Column("end_type", String(32), nullable=True),
    # The acquire's ``metadata.user`` when it is a string (migration 0010), else NULL:
    # what the per-user report groups by. Filled with acquired_at, from the same event.
    Column("user_name", Text, nullable=True),
    # The lease's weight (migration 0012), from the same acquire as acquired_at (1 until
    # that acquire is stored): the per-user report's seat-seconds are duration x seats.
    Column("seats", Integer, nullable=False, server_default="1"),
    Index(
        "ix_usage_leases_acquired",
        "tenant_id",
        "license_id",
        "acquired_at",
        postgresql_where=text("acquired_at IS NOT NULL"),
        sqlite_where=text("acquired_at IS NOT NULL"),
    ),
    # Migration 0018: the leases with a user, for the sizing report's sharing savings
    Index(
        "ix_usage_leases_user",
        "tenant_id",
        "license_id",
        "acquired_at",
        postgresql_where=text("user_name IS NOT NULL"),
        sqlite_where=text("user_name IS NOT NULL"),
    ),
)

# Who was refused a seat (migration 0014): one row per license, UTC minute and client,
# from its ``lease.refused`` event (lua/flush_refusals.lua judged it once the minute's
# true-denial window had passed), and one row of client '' per minute that refused more
# distinct clients than Redis keeps (``refusals``: those not kept, ``lower_bound``). The
# sizing report reads it with the minute and hour rollups. Kept as the hourly rollups are.
usage_refusals = Table(
    "usage_refusals",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("minute", DateTime(timezone=True), primary_key=True),
    Column("client_id", ID, primary_key=True),
    Column("user_name", Text, nullable=True),
    Column("seats", Integer, nullable=False, server_default="1"),  # the most it asked
    Column("refusals", Integer, nullable=False, server_default="1"),
    Column("served", Boolean, nullable=False, server_default=false()),  # in the minute
    Column("true_denial", Boolean, nullable=False, server_default=false()),  # it gave up
    Column("waiting", Boolean, nullable=False, server_default=false()),  # held a place
    Column("lower_bound", Boolean, nullable=False, server_default=false()),
)

# Per ended wait-queue ticket (migration 0014): how long it waited, from its
# queue.granted or queue.left event (keyed by the event id: stored once). The sizing
# report's queue waits; kept as the hourly rollups are.
usage_queue_waits = Table(
    "usage_queue_waits",
    metadata,
    Column("event_id", String(64), primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("license_id", ID, nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=False),
    Column("outcome", String(32), nullable=False),  # queue.granted or queue.left
    Column("waited_ms", BigInteger, nullable=False),
    Index("ix_usage_queue_waits_license", "tenant_id", "license_id", "ended_at"),
)

# The Redis shards that have served seats (migration 0016): a shard whose mark Redis lost
# (seatlease.seats.failover) but that is listed here lost its data, and a recovery window
# opens for its licenses; one that is not is new. At most 256 rows.
seat_shards = Table(
    "seat_shards",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("first_seen_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# One row (id 1): events older than ``pruned_before`` were pruned and are not stored again.
audit_retention = Table(
    "audit_retention",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("pruned_before", DateTime(timezone=True), nullable=False),
    Column("pruned_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# What each tenant admin did through the portal (migration 0009): one row per action,
# refused ones included, with the admin key's prefix (its public id, never the key).
portal_actions = Table(
    "portal_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("tenant_id", ID, nullable=False),
    Column("key_prefix", String(16), nullable=False),
    Column("action", String(32), nullable=False),
    Column("status", Integer, nullable=False),
    Column("license_id", ID, nullable=True),
    Column("session_id", ID, nullable=True),
    Column("target_prefix", String(16), nullable=True),  # keys.create / keys.revoke
    Column("endpoint_id", String(64), nullable=True),  # the webhook actions (migration 0022)
    Index("ix_portal_actions_tenant_at", "tenant_id", "at"),
)


# Webhooks (issue 51, migration 0019; seatlease.webhooks.store). No foreign key to
# ``tenants``: an endpoint's tenant is checked when it is made, and a tenant's rows are
# removed with it by the operator's tools, never by a cascade through the seat tables.
WEBHOOK_ID = String(64)
PENDING = "state = 'pending'"
CLAIMED = "claim IS NOT NULL"

# A tenant's receivers: the URL, which events (empty lists: all), the signing secret
# (AES-256-GCM, seatlease.webhooks.crypto; the old one kept beside it for 24 h after a
# rotation), and whether its deliveries are failing (then why, and since when).
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", WEBHOOK_ID, primary_key=True),  # whe_ + random
    Column("tenant_id", ID, nullable=False, index=True),
    Column("url", Text, nullable=False),
    Column("event_types", JSON, nullable=False),
    Column("license_ids", JSON, nullable=False),
    Column("secret_enc", Text, nullable=False),
    Column("old_secret_enc", Text, nullable=True),
    Column("old_secret_until", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("state", String(16), nullable=False, server_default="ok"),
    Column("failing_reason", Text, nullable=True),
    Column("failing_since", DateTime(timezone=True), nullable=True),
    CheckConstraint("state IN ('ok', 'failing')", name="ck_webhook_endpoints_state"),
)

# One event for one endpoint: its payload (bounded) and where its delivery stands. A
# worker claims a due one (``claim``, ``claimed_until``: its send's deadline with a margin;
# ``next_attempt_at`` moves there too, so a worker that dies mid-send leaves it due again
# then), sends it outside any transaction, then records the outcome under its claim.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column(
        "endpoint_id",
        WEBHOOK_ID,
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("tenant_id", ID, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("type", String(64), nullable=False),
    Column("license_id", ID, nullable=True),
    Column("payload", Text, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("state", String(16), nullable=False, server_default="pending"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("claim", String(32), nullable=True),
    Column("claimed_until", DateTime(timezone=True), nullable=True),
    UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_deliveries_event"),
    CheckConstraint(
        "state IN ('pending', 'delivered', 'failed', 'final')", name="ck_webhook_deliveries_state"
    ),
    # The claims' scan (due, per endpoint, in their order: migration 0021) and the
    # queue's bound (pending per endpoint).
    Index(
        "ix_webhook_deliveries_due",
        "endpoint_id",
        "next_attempt_at",
        "id",
        postgresql_where=text(PENDING),
        sqlite_where=text(PENDING),
    ),
    # The sends in flight per endpoint (its concurrency bound): a handful of rows.
    Index(
        "ix_webhook_deliveries_claimed",
        "endpoint_id",
        "claimed_until",
        postgresql_where=text(CLAIMED),
        sqlite_where=text(CLAIMED),
    ),
    Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at"),
    Index("ix_webhook_deliveries_tenant_created", "tenant_id", "created_at"),
)

# Every attempt of a delivery: when, the HTTP status (none for a timeout or a refused
# connection), how long it took, and the error (bounded text).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column(
        "delivery_id",
        BigInteger().with_variant(Integer, "sqlite"),
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("endpoint_id", WEBHOOK_ID, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("status", Integer, nullable=True),
    Column("latency_ms", Integer, nullable=False),
    Column("error", Text, nullable=True),
)

# Alert settings per license (issue 51, migration 0020; seatlease.webhooks.alerts reads
# them): 0 is off. ``full_percent``: seats in use at or above this share of the seats sold
# (up to 1000: an overage license runs past 100 %) for ``full_minutes`` in a row sends
# license.nearly_full; ``denials``: this many true denials in one hour sends
# license.denials. No foreign key: the tests' TRUNCATE of ``licenses`` stays possible.
license_alerts = Table(
    "license_alerts",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    Column("full_percent", Integer, nullable=False, server_default="0"),
    Column("full_minutes", Integer, nullable=False, server_default="5"),
    Column("denials", Integer, nullable=False, server_default="0"),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("full_percent BETWEEN 0 AND 1000", name="ck_license_alerts_full_percent"),
    CheckConstraint("full_minutes BETWEEN 1 AND 1440", name="ck_license_alerts_full_minutes"),
    CheckConstraint("denials BETWEEN 0 AND 1000000", name="ck_license_alerts_denials"),
)

# What the alerts already said, per license (migration 0020): where each check stopped,
# so a run reads only what is new and an alert is sent once (a re-run after a crash
# sends the same event ids again: the webhook store keeps one delivery per id).
license_alert_state = Table(
    "license_alert_state",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("license_id", ID, primary_key=True),
    # minutes before this were judged full or not
    Column("full_checked_to", DateTime(timezone=True), nullable=True),
    # the first minute of the current run of full minutes (NULL: the last one was not)
    Column("full_run_start", DateTime(timezone=True), nullable=True),
    # set while an episode's license.nearly_full is out and its capacity_ok is not
    Column("full_episode_start", DateTime(timezone=True), nullable=True),
    Column("full_episode_peak", Integer, nullable=True),
    # seats in use at full_checked_to (NULL: read it from the rollups again)
    Column("full_level", Integer, nullable=True),
    # hours of true denials before this were counted
    Column("denials_checked_to", DateTime(timezone=True), nullable=True),
    # the term end the notices are for, and the fewest days before it already told
    Column("term_end", DateTime(timezone=True), nullable=True),
    Column("term_notified_days", Integer, nullable=True),
)
