"""Alerts per license (issue 51): ``license_alerts`` holds the settings (``seatlease
license update --alert-full-percent P --alert-full-minutes M --alert-denials N``; 0 is
off) and ``license_alert_state`` what ``seatlease.webhooks.alerts.run_alerts`` already
said (where each check stopped, the open nearly-full episode, the term notices sent).
Two new, empty tables: nothing is rewritten or backfilled.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

ID = sa.String(128)


def upgrade() -> None:
    op.create_table(
        "license_alerts",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("full_percent", sa.Integer, nullable=False, server_default="0"),
        sa.Column("full_minutes", sa.Integer, nullable=False, server_default="5"),
        sa.Column("denials", sa.Integer, nullable=False, server_default="0"),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "full_percent BETWEEN 0 AND 1000", name="ck_license_alerts_full_percent"
        ),
        sa.CheckConstraint(
            "full_minutes BETWEEN 1 AND 1440", name="ck_license_alerts_full_minutes"
        ),
        sa.CheckConstraint("denials BETWEEN 0 AND 1000000", name="ck_license_alerts_denials"),
    )
    op.create_table(
        "license_alert_state",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("license_id", ID, primary_key=True),
        sa.Column("full_checked_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("full_run_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("full_episode_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("full_episode_peak", sa.Integer, nullable=True),
        sa.Column("full_level", sa.Integer, nullable=True),
        sa.Column("denials_checked_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("term_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("term_notified_days", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("license_alert_state")
    op.drop_table("license_alerts")
