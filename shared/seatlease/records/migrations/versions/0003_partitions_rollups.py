"""Usage rollups and a monthly-partitioned ``lease_events`` (issue 12).

PostgreSQL: ``lease_events`` becomes a table partitioned by month on ``occurred_at``
(unique ``(event_id, occurred_at)``: a partitioned table's keys must include the
partition key; no primary key: ``id``, from its sequence, only orders ties, and one index
less is about a tenth of the insert's time), with one partition per month that holds
events, this month and the next ``AHEAD_MONTHS``, and a default partition; its rows are
copied over and the old table dropped. SQLite keeps its single table.

The index on ``session_id`` goes: a lease's two ends are paired in ``usage_leases`` now
(one row per session, its own key), and the index cost a tenth of each insert.

Both: ``usage_rollups`` (per license and hour), ``usage_client_rollups`` (per license,
client and day), ``usage_leases`` (both ends of each lease) and
``audit_retention`` (the pruned horizon), filled from the existing events by the
insert code the audit function ran at this revision: a frozen copy of it in
``seatlease.records.migrations._frozen_0003`` (never the live ``seatlease.records.rollups``,
which writes
columns and tables of later revisions).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from seatlease.records.migrations import _frozen_0003 as frozen

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.String(128)
COPY_BATCH = 100_000


def _rollup_tables() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "usage_rollups",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("hour", tz, primary_key=True),
        *(sa.Column(c, sa.Integer, nullable=False, server_default="0")
          for c in ("acquired", "released", "reclaimed", "revoked")),
        sa.Column("denials", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("net", sa.Integer, nullable=False, server_default="0"),
        sa.Column("dsec_ms", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("max_used", sa.Integer, nullable=True),
        sa.Column("last_at", tz, nullable=True),
        sa.Column("last_id", sa.String(64), nullable=True),
        sa.Column("last_used", sa.Integer, nullable=True),
        sa.Column("last_total", sa.Integer, nullable=True),
    )  # fmt: skip
    op.create_table(
        "usage_client_rollups",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("client_id", ID, primary_key=True),
        sa.Column("day", tz, primary_key=True),
        *(sa.Column(c, sa.Integer, nullable=False, server_default="0")
          for c in ("acquired", "ended", "reclaimed")),
        sa.Column("total_ms", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("max_ms", sa.BigInteger, nullable=True),
    )  # fmt: skip
    op.create_table(
        "usage_leases",
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("license_id", ID, nullable=False),
        sa.Column("client_id", ID, nullable=True),
        sa.Column("acquired_at", tz, nullable=True),
        sa.Column("ended_at", tz, nullable=True),
        sa.Column("end_type", sa.String(32), nullable=True),
    )
    # Partial: a lease whose ending arrived first (or whose acquire is not in the log)
    # costs no entry; the reports look leases up by acquisition time only.
    op.create_index(
        "ix_usage_leases_acquired",
        "usage_leases",
        ["tenant_id", "license_id", "acquired_at"],
        postgresql_where=sa.text("acquired_at IS NOT NULL"),
        sqlite_where=sa.text("acquired_at IS NOT NULL"),
    )
    op.create_table(
        "audit_retention",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("pruned_before", tz, nullable=False),
        sa.Column("pruned_at", tz, nullable=False, server_default=sa.func.now()),
    )


def _postgres(bind: sa.Connection) -> None:
    op.execute("ALTER TABLE lease_events RENAME TO lease_events_0002")
    op.execute("ALTER INDEX ix_lease_events_license_time RENAME TO ix_lease_events_0002_time")
    op.execute("ALTER INDEX ix_lease_events_session RENAME TO ix_lease_events_0002_session")
    op.execute(
        """
        CREATE TABLE lease_events (
            id bigint NOT NULL DEFAULT nextval('lease_events_id_seq'),
            event_id varchar(64) NOT NULL,
            type varchar(32) NOT NULL,
            tenant_id varchar(128) NOT NULL,
            license_id varchar(128) NOT NULL,
            session_id varchar(128),
            client_id varchar(128),
            occurred_at timestamptz NOT NULL,
            seats_used integer,
            seats_total integer,
            count integer NOT NULL DEFAULT 1,
            metadata jsonb,
            received_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT uq_lease_events_event UNIQUE (event_id, occurred_at)
        ) PARTITION BY RANGE (occurred_at)"""
    )
    op.execute("ALTER SEQUENCE lease_events_id_seq OWNED BY lease_events.id")
    op.execute(
        "CREATE INDEX ix_lease_events_license_time ON lease_events "
        "(tenant_id, license_id, occurred_at)"
    )
    op.execute("CREATE TABLE lease_events_default PARTITION OF lease_events DEFAULT")
    months = [
        row[0]
        for row in bind.execute(
            sa.text(
                "SELECT DISTINCT date_trunc('month', occurred_at, 'UTC') FROM lease_events_0002"
            )
        )
    ]
    frozen.ensure_partitions(bind, [*months, *frozen.months_ahead(datetime.now(UTC))])
    _rollup_tables()
    # The old rows through the audit path's statement of this revision: same events, same
    # rollups.
    columns = ", ".join(frozen.EVENT_COLUMNS)
    statement = sa.text(
        frozen.insert_statement(
            f"SELECT {columns} FROM lease_events_0002 WHERE id > :lo AND id <= :hi"
        )
    )
    top = bind.execute(sa.text("SELECT coalesce(max(id), 0) FROM lease_events_0002")).scalar()
    for lo in range(0, int(top), COPY_BATCH):
        frozen.run_insert(bind, statement, {"lo": lo, "hi": lo + COPY_BATCH})
    op.execute("DROP TABLE lease_events_0002")


def _sqlite(bind: sa.Connection) -> None:
    op.drop_index("ix_lease_events_session", "lease_events")
    _rollup_tables()
    events = sa.table("lease_events", *(sa.column(c) for c in ("id", *frozen.EVENT_COLUMNS)))
    last = 0
    while True:
        rows = (
            bind.execute(
                sa.select(events).where(events.c.id > last).order_by(events.c.id).limit(COPY_BATCH)
            )
            .mappings()
            .all()
        )
        if not rows:
            break
        last = rows[-1]["id"]
        frozen.fold_sqlite(bind, [dict(r) for r in rows])


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _postgres(bind)
    else:
        _sqlite(bind)


def downgrade() -> None:
    for table in ("audit_retention", "usage_leases", "usage_client_rollups",
                  "usage_rollups"):  # fmt: skip
        op.drop_table(table)
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        _downgrade_sqlite()
        return
    op.execute("ALTER TABLE lease_events RENAME TO lease_events_0003")
    op.execute("ALTER INDEX ix_lease_events_license_time RENAME TO ix_lease_events_0003_time")
    op.create_table(
        "lease_events",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False,
                  server_default=sa.text("nextval('lease_events_id_seq')")),
        sa.Column("event_id", sa.String(64), nullable=False, unique=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("license_id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("client_id", ID, nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seats_used", sa.Integer, nullable=True),
        sa.Column("seats_total", sa.Integer, nullable=True),
        sa.Column("count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("metadata", JSONB(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
    )  # fmt: skip
    op.execute("ALTER SEQUENCE lease_events_id_seq OWNED BY lease_events.id")
    op.execute(
        "INSERT INTO lease_events SELECT * FROM lease_events_0003 ON CONFLICT (event_id) DO NOTHING"
    )
    op.execute("DROP TABLE lease_events_0003")
    op.create_index(
        "ix_lease_events_license_time", "lease_events", ["tenant_id", "license_id", "occurred_at"]
    )
    op.create_index("ix_lease_events_session", "lease_events", ["session_id"])


def _downgrade_sqlite() -> None:
    op.create_index("ix_lease_events_session", "lease_events", ["session_id"])
