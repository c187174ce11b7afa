"""The catalogue: the products, with their stock."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    text,
)

from commerce_api.storage.tables.schema import SortableId, UTCDateTime, metadata

products = Table(
    "products",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("price_minor", BigInteger, nullable=False),
    Column("category", String(100), nullable=False),
    Column("inventory_count", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("archived_at", UTCDateTime, nullable=True),
    # The catalogue change that last wrote the row (``catalog.repository.next_change``): each
    # process's in-memory catalogue reads the rows above the last change it applied.
    Column("change_seq", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("price_minor >= 0", name="price_not_negative"),
    CheckConstraint("inventory_count >= 0", name="inventory_not_negative"),
    # The two list queries: all active products, and active products of one category, both in
    # (created_at, id) order. Partial indexes keep archived rows out of them.
    Index(
        "ix_products_active_order",
        "created_at",
        "id",
        sqlite_where=text("archived_at IS NULL"),
        postgresql_where=text("archived_at IS NULL"),
    ),
    Index(
        "ix_products_active_category_order",
        "category",
        "created_at",
        "id",
        sqlite_where=text("archived_at IS NULL"),
        postgresql_where=text("archived_at IS NULL"),
    ),
    Index("ix_products_change_seq", "change_seq", "id"),
    # No index holds ``inventory_count``: every order changes it, and on PostgreSQL a change of
    # an indexed column cannot be a HOT update (each of the row's indexes gets a new entry).
    # The console's low-stock list reads the active products instead.
)
