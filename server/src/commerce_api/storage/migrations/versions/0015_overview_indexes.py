"""The console overview's indexes and its rollup of closed hours (issue 29).

- ``order_hour_figures`` ``(hour, currency, orders, revenue_minor)``: per closed hour (ended
  over an hour ago, no pending order in it: its figures final) and currency, the orders placed
  and the revenue; the overview reads the closed hours of its 30 days from it and scans only
  the hours since (docs/performance.md, "Console overview").

- ``ix_orders_created_figures`` ``(created_at, status, currency, total_minor)``: orders and
  revenue per hour over the last 30 days are one range scan on ``created_at`` that finds
  everything it counts and sums in the index (an index-only scan on PostgreSQL, a covering
  index on SQLite), never the orders' rows (docs/performance.md, "Console overview").
- No index on products' stock for the low-stock list: every order changes the stock, and an
  indexed stock would make each of those changes write every index of the row on PostgreSQL
  (no HOT update); the list reads the active products (one pass, at the overview's pace).
- ``ix_webhook_endpoints_failing`` ``(created_at, id) WHERE deleted_at IS NULL AND (enabled =
  false OR failing_since IS NOT NULL)``: the endpoints failing now, however many are healthy.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# tables.ENDPOINT_IS_FAILING, copied: a migration does not change with the code.
_FAILING = sa.text("deleted_at IS NULL AND (enabled = false OR failing_since IS NOT NULL)")


def upgrade() -> None:
    op.create_table(
        "order_hour_figures",
        sa.Column("hour", UTCDateTime(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("orders", sa.Integer(), nullable=False),
        sa.Column("revenue_minor", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("hour", "currency", name=op.f("pk_order_hour_figures")),
    )
    op.create_index(
        "ix_orders_created_figures", "orders", ["created_at", "status", "currency", "total_minor"]
    )
    op.create_index(
        "ix_webhook_endpoints_failing",
        "webhook_endpoints",
        ["created_at", "id"],
        sqlite_where=_FAILING,
        postgresql_where=_FAILING,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_endpoints_failing", table_name="webhook_endpoints")
    op.drop_index("ix_orders_created_figures", table_name="orders")
    op.drop_table("order_hour_figures")
    op.execute("DELETE FROM instance_values WHERE name = 'order_hour_figures_until'")
