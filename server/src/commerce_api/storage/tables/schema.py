"""The schema's ``metadata`` (with the naming convention of its constraints and indexes) and the
column types its tables share.

Timestamps are timezone-aware UTC everywhere (``timestamptz`` on PostgreSQL; ISO text on
SQLite, where :class:`UTCDateTime` restores the zone that SQLite does not keep).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect, MetaData, String, TypeDecorator

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


# Lists are ordered by (created_at, id). Ids are mixed-case ASCII: compare them bytewise on
# PostgreSQL too (SQLite already does), so both backends order pages identically.
SortableId = String(64).with_variant(String(64, collation="C"), "postgresql")
