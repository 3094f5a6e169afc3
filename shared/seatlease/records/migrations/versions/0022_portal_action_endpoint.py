"""The portal's audit trail names the webhook endpoint an action touched (issue 51):
``portal_actions.endpoint_id``, the endpoint a ``webhook_delete``, ``webhook_rotate_secret``,
``webhook_test`` or ``webhook_deliveries`` named, or the one ``webhook_create`` made.
(``target_prefix`` holds a key's 16-character prefix; an endpoint's id is longer.) A new
nullable column: earlier rows keep none.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("portal_actions") as batch:
        batch.add_column(sa.Column("endpoint_id", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("portal_actions") as batch:
        batch.drop_column("endpoint_id")
