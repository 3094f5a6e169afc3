"""The webhook claims' index in their order (issue 51): ``ix_webhook_deliveries_due``
becomes ``(endpoint_id, next_attempt_at, id)`` over pending deliveries. A claim takes an
endpoint's first due deliveries in ``(next_attempt_at, id)`` order; one enqueue gives a
whole burst the same ``next_attempt_at``, so an index without ``id`` made PostgreSQL read
and sort the burst's every waiting row to find the first few (it showed as a slow
endpoint's backlog slowing a fast one's claims). An index is rebuilt; no row changes.

The rebuild reads the whole table (the deliveries of the last 30 days) and holds writes
to it meanwhile: about a second per million rows on the development machine. Enqueues
wait (the webhooks function's push is answered later, or retried by Pub/Sub), sends
wait; nothing is lost. Not ``CONCURRENTLY``: the migrations run in one transaction.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

PENDING = "state = 'pending'"


def _due_index(columns: list[str]) -> None:
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        columns,
        postgresql_where=sa.text(PENDING),
        sqlite_where=sa.text(PENDING),
    )


def upgrade() -> None:
    _due_index(["endpoint_id", "next_attempt_at", "id"])


def downgrade() -> None:
    _due_index(["endpoint_id", "next_attempt_at"])
