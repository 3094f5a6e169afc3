"""License terms, entitlements and versions: licenses gain ``starts_at`` and
``expires_at`` (NULL: from the start, for ever), ``grace_seconds`` (0 to 90 days) and
``on_expiry`` (``end_leases`` or ``keep_leases``), ``entitlements`` (a JSON array of
names, NULL for none) and ``max_version`` (dotted numbers, NULL for any). Every existing
license gets none of them: it behaves as before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.add_column(sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("grace_seconds", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("on_expiry", sa.String(16), nullable=False, server_default="end_leases")
        )
        batch.add_column(sa.Column("entitlements", sa.JSON, nullable=True))
        batch.add_column(sa.Column("max_version", sa.String(96), nullable=True))
        batch.create_check_constraint("ck_licenses_grace", "grace_seconds BETWEEN 0 AND 7776000")
        batch.create_check_constraint(
            "ck_licenses_on_expiry", "on_expiry IN ('end_leases', 'keep_leases')"
        )
        batch.create_check_constraint(
            "ck_licenses_term", "starts_at IS NULL OR expires_at IS NULL OR expires_at > starts_at"
        )


def downgrade() -> None:
    with op.batch_alter_table("licenses") as batch:
        batch.drop_constraint("ck_licenses_term", type_="check")
        batch.drop_constraint("ck_licenses_on_expiry", type_="check")
        batch.drop_constraint("ck_licenses_grace", type_="check")
        for column in (
            "max_version",
            "entitlements",
            "on_expiry",
            "grace_seconds",
            "expires_at",
            "starts_at",
        ):
            batch.drop_column(column)
