"""The orders: an order, its lines, and the console overview's closed hours."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    text,
)

from commerce_api.storage.tables.schema import SortableId, UTCDateTime, metadata

# The condition of the pending orders' partial index, spelled as a query must spell it for
# the planner to use the index: a literal, never a bound parameter.
ORDER_IS_PENDING = "status = 'pending'"

orders = Table(
    "orders",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("customer_id", String(255), nullable=False),
    Column("shipping_address", JSON, nullable=False),
    Column("total_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("fulfilled_at", UTCDateTime, nullable=True),
    Column("canceled_at", UTCDateTime, nullable=True),
    # 1 at creation, one more per change (each status change adds 1, in its own UPDATE), so a
    # webhook receiver can tell a stale delivery of the order from a fresh one.
    Column("version", Integer, nullable=False, server_default="1"),
    # {carrier, number, url} given at fulfilment (issue 29); NULL until then, or without one.
    Column("tracking", JSON(none_as_null=True), nullable=True),
    CheckConstraint("status IN ('pending', 'fulfilled', 'canceled')", name="status"),
    CheckConstraint("total_minor >= 0", name="total_not_negative"),
    # The list queries: an account's orders, optionally by status or customer, in order.
    Index("ix_orders_account_order", "account_id", "created_at", "id"),
    Index("ix_orders_account_status_order", "account_id", "status", "created_at", "id"),
    Index("ix_orders_account_customer_order", "account_id", "customer_id", "created_at", "id"),
    Index("ix_orders_created_order", "created_at", "id"),
    # The console overview's orders and revenue per hour: a range scan on created_at that
    # reads everything it sums from the index (an index-only scan on PostgreSQL).
    Index("ix_orders_created_figures", "created_at", "status", "currency", "total_minor"),
    # The pending-order sweep: only the pending orders, oldest first.
    Index(
        "ix_orders_pending_created",
        "created_at",
        "id",
        sqlite_where=text(ORDER_IS_PENDING),
        postgresql_where=text(ORDER_IS_PENDING),
    ),
)

# The console overview's closed hours (console/figures.py): per hour and currency, the orders
# placed and the revenue (totals of those not canceled). An hour is closed once it ended over
# an hour ago and no order in it is pending: fulfilled and canceled are final, and orders are
# never deleted nor moved, so its figures never change again. How far the rows reach is the
# instance value ``ORDER_HOURS_UNTIL``.
order_hour_figures = Table(
    "order_hour_figures",
    metadata,
    Column("hour", UTCDateTime, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("orders", Integer, nullable=False),
    Column("revenue_minor", BigInteger, nullable=False),
    PrimaryKeyConstraint("hour", "currency"),
)
ORDER_HOURS_UNTIL = "order_hour_figures_until"

order_items = Table(
    "order_items",
    metadata,
    Column("order_id", String(64), ForeignKey("orders.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("product_id", String(64), ForeignKey("products.id"), nullable=False),
    # Copied from the catalogue when the order is placed: later edits don't change the order.
    Column("name", String(200), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("unit_price_minor", BigInteger, nullable=False),
    PrimaryKeyConstraint("order_id", "position"),
    CheckConstraint("quantity > 0", name="quantity_positive"),
    Index("ix_order_items_product_id", "product_id"),
)
