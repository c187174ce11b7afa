"""UTC timestamps: one clock and one wire format (ISO 8601, millisecond precision, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """``2026-11-21T08:12:41.123Z``: ISO 8601 in UTC, as the spec's ``<timestamp>``."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
