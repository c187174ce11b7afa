"""Accounts, API keys and the product catalogue.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import SortableId, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("tier", sa.String(20), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("tier IN ('development', 'production')", name=op.f("ck_accounts_tier")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accounts")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("prefix", sa.String(20), nullable=False),
        sa.Column("last4", sa.String(4), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint("role IN ('client', 'admin')", name=op.f("ck_api_keys_role")),
        sa.CheckConstraint(
            "role = 'admin' OR account_id IS NOT NULL", name=op.f("ck_api_keys_client_has_account")
        ),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_api_keys_account_id_accounts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index("ix_api_keys_account_id", "api_keys", ["account_id"])
    op.create_table(
        "products",
        sa.Column("id", SortableId, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("price_minor", sa.BigInteger(), nullable=False),
        sa.Column("category", sa.String(100), nullable=False),
        sa.Column("inventory_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("archived_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint("inventory_count >= 0", name=op.f("ck_products_inventory_not_negative")),
        sa.CheckConstraint("price_minor >= 0", name=op.f("ck_products_price_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_products")),
    )
    active = sa.text("archived_at IS NULL")
    op.create_index(
        "ix_products_active_order",
        "products",
        ["created_at", "id"],
        sqlite_where=active,
        postgresql_where=active,
    )
    op.create_index(
        "ix_products_active_category_order",
        "products",
        ["category", "created_at", "id"],
        sqlite_where=active,
        postgresql_where=active,
    )


def downgrade() -> None:
    op.drop_index("ix_products_active_category_order", table_name="products")
    op.drop_index("ix_products_active_order", table_name="products")
    op.drop_table("products")
    op.drop_index("ix_api_keys_account_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("accounts")
