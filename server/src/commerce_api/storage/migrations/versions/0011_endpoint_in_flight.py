"""The claimed deliveries' index (issue 32: attempts in flight per endpoint).

``ix_webhook_deliveries_claimed`` ``(endpoint_id, claimed_until) WHERE claim_token IS NOT
NULL``: every claim now counts each endpoint's attempts in flight (claims that have not
lapsed), to keep them under ``COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT``; the partial index
holds only the claimed deliveries, so the count never walks an endpoint's delivered history.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_CLAIMED = sa.text("claim_token IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_webhook_deliveries_claimed",
        "webhook_deliveries",
        ["endpoint_id", "claimed_until"],
        sqlite_where=_CLAIMED,
        postgresql_where=_CLAIMED,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_claimed", table_name="webhook_deliveries")
