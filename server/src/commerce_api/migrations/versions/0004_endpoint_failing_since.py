"""Webhook endpoint health: ``failing_since`` instead of a consecutive-failure count.

An endpoint is now disabled only after its attempts have all failed for a period (issue 18);
the count of consecutive failures is dropped. Endpoints start healthy (``failing_since`` NULL).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.tables import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # recreate="never": SQLite (>= 3.35) adds and drops a column in place. Recreating the
    # table would drop it while webhook_deliveries' foreign keys point at it.
    with op.batch_alter_table("webhook_endpoints", recreate="never") as batch:
        batch.add_column(sa.Column("failing_since", UTCDateTime(), nullable=True))
        batch.drop_column("consecutive_failures")


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints", recreate="never") as batch:
        batch.add_column(
            sa.Column("consecutive_failures", sa.Integer(), nullable=False, server_default="0")
        )
        batch.drop_column("failing_since")
