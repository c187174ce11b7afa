"""Orders and their lines, the event outbox, and idempotency keys.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import SortableId, UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "orders",
        sa.Column("id", SortableId, nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("customer_id", sa.String(255), nullable=False),
        sa.Column("shipping_address", sa.JSON(), nullable=False),
        sa.Column("total_minor", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("fulfilled_at", UTCDateTime(), nullable=True),
        sa.Column("canceled_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'fulfilled', 'canceled')", name=op.f("ck_orders_status")
        ),
        sa.CheckConstraint("total_minor >= 0", name=op.f("ck_orders_total_not_negative")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_orders_account_id_accounts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_orders")),
    )
    op.create_index("ix_orders_account_order", "orders", ["account_id", "created_at", "id"])
    op.create_index(
        "ix_orders_account_status_order", "orders", ["account_id", "status", "created_at", "id"]
    )
    op.create_index(
        "ix_orders_account_customer_order",
        "orders",
        ["account_id", "customer_id", "created_at", "id"],
    )
    op.create_index("ix_orders_created_order", "orders", ["created_at", "id"])

    op.create_table(
        "order_items",
        sa.Column("order_id", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("product_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("unit_price_minor", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("quantity > 0", name=op.f("ck_order_items_quantity_positive")),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_order_items_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["product_id"], ["products.id"], name=op.f("fk_order_items_product_id_products")
        ),
        sa.PrimaryKeyConstraint("order_id", "position", name=op.f("pk_order_items")),
    )
    op.create_index("ix_order_items_product_id", "order_items", ["product_id"])

    op.create_table(
        "events",
        sa.Column("id", SortableId, nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_events_account_id_accounts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_account_order", "events", ["account_id", "created_at", "id"])
    op.create_index("ix_events_created_at", "events", ["created_at"])

    op.create_table(
        "idempotency_keys",
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("locked_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.CheckConstraint(
            "state IN ('in_flight', 'done')", name=op.f("ck_idempotency_keys_state")
        ),
        sa.PrimaryKeyConstraint("scope", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("events")
    op.drop_table("order_items")
    op.drop_table("orders")
