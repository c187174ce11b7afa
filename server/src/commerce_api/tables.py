"""The schema, as SQLAlchemy Core tables. Migrations under ``migrations/`` create it.

Timestamps are timezone-aware UTC everywhere (``timestamptz`` on PostgreSQL; ISO text on
SQLite, where :class:`UTCDateTime` restores the zone that SQLite does not keep).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """A datetime that is always timezone-aware UTC in Python, on both backends."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use timestamps.utcnow()")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


accounts = Table(
    "accounts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("tier", String(20), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    CheckConstraint("tier IN ('development', 'production')", name="tier"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=True),
    Column("role", String(20), nullable=False),
    Column("prefix", String(20), nullable=False),
    Column("last4", String(4), nullable=False),
    # SHA-256 of the whole key, hex. The key itself is never stored.
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    CheckConstraint("role IN ('client', 'admin')", name="role"),
    CheckConstraint("role = 'admin' OR account_id IS NOT NULL", name="client_has_account"),
    Index("ix_api_keys_account_id", "account_id"),
)

# Lists are ordered by (created_at, id). Ids are mixed-case ASCII: compare them bytewise on
# PostgreSQL too (SQLite already does), so both backends order pages identically.
SortableId = String(64).with_variant(String(64, collation="C"), "postgresql")

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
)
