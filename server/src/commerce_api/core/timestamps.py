"""UTC timestamps: one clock and one wire format (ISO 8601, millisecond precision, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """``2026-11-21T08:12:41.123Z``: ISO 8601 in UTC, as the spec's ``<timestamp>``."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def format_optional_timestamp(value: datetime | None) -> str | None:
    """:func:`format_timestamp`, or None for a moment that has not come (``fulfilled_at``…)."""
    return None if value is None else format_timestamp(value)


def from_sqlite(value: str | None) -> datetime | None:
    """A timestamp column as SQLite stores it (naive ISO 8601, UTC), read with the standard
    library's ``sqlite3`` rather than the engine."""
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)
