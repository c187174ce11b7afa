"""The pending-order sweep's index (issue 31).

``ix_orders_pending_created`` ``(created_at, id) WHERE status = 'pending'``: the sweep
(``orders.service.expire_pending_orders``) now runs every 5 % of the TTL, down to every second;
the partial index lets it find the expired pending orders without walking every fulfilled and
canceled order older than the TTL.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.create_index(
        "ix_orders_pending_created",
        "orders",
        ["created_at", "id"],
        sqlite_where=_PENDING,
        postgresql_where=_PENDING,
    )


def downgrade() -> None:
    op.drop_index("ix_orders_pending_created", table_name="orders")
