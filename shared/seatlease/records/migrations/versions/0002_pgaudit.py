"""Create the pgaudit extension where the server offers it (Cloud SQL does, with the
``cloudsql.enable_pgaudit`` flag Terraform sets); the ``pgaudit.log`` flag logs nothing
until the extension exists. A server without it (a laptop's PostgreSQL, SQLite) is left
as it is.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _offered(bind: sa.Connection) -> bool:
    query = sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'pgaudit'")
    return bind.execute(query).first() is not None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and _offered(bind):
        op.execute("CREATE EXTENSION IF NOT EXISTS pgaudit")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and _offered(bind):
        op.execute("DROP EXTENSION IF EXISTS pgaudit")
