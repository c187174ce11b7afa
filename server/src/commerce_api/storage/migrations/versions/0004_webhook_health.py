"""Webhook endpoint health and interrupted attempts (issue 18).

- ``webhook_endpoints.failing_since`` instead of a consecutive-failure count: an endpoint is
  disabled only after its attempts have all failed for a period. Endpoints start healthy.
- ``webhook_deliveries.claimed_at``: when the current claim (and so its attempt) started.
- ``webhook_attempts.duration_ms`` nullable: an interrupted attempt's end is unknown.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import UTCDateTime

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
    with op.batch_alter_table("webhook_deliveries", recreate="never") as batch:
        batch.add_column(sa.Column("claimed_at", UTCDateTime(), nullable=True))
    # Nothing points at webhook_attempts: SQLite may recreate it to change the column.
    with op.batch_alter_table("webhook_attempts") as batch:
        batch.alter_column("duration_ms", existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE webhook_attempts SET duration_ms = 0 WHERE duration_ms IS NULL")
    with op.batch_alter_table("webhook_attempts") as batch:
        batch.alter_column("duration_ms", existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table("webhook_deliveries", recreate="never") as batch:
        batch.drop_column("claimed_at")
    with op.batch_alter_table("webhook_endpoints", recreate="never") as batch:
        batch.add_column(
            sa.Column("consecutive_failures", sa.Integer(), nullable=False, server_default="0")
        )
        batch.drop_column("failing_since")
