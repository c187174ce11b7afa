"""UTC timestamps: one clock and one wire format (ISO 8601, millisecond precision, ``Z``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from commerce_api.core.validation_messages import TIMESTAMP_FORMAT, TIMESTAMP_RULE


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """``2026-11-21T08:12:41.123Z``: ISO 8601 in UTC, as the spec's ``<timestamp>``."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


# A timestamp the API answers with (the text of :func:`format_timestamp`), declared as JSON
# Schema's ``date-time`` so that clients generated from the OpenAPI document know it is one.
TimestampText = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


def format_optional_timestamp(value: datetime | None) -> str | None:
    """:func:`format_timestamp`, or None for a moment that has not come (``fulfilled_at``…)."""
    return None if value is None else format_timestamp(value)


def from_sqlite(value: str | None) -> datetime | None:
    """A timestamp column as SQLite stores it (naive ISO 8601, UTC), read with the standard
    library's ``sqlite3`` rather than the engine."""
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


# RFC 3339's date-time: a date, a time and a zone (``Z`` or an offset), nothing else (pydantic
# alone also takes Unix times and naive ones).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339_text(value: object) -> object:
    if isinstance(value, datetime) or (isinstance(value, str) and _RFC3339.fullmatch(value)):
        return value
    # Our own error type: the message is worded where it is rendered, with the query-string
    # hint only for a query parameter (core/validation_messages.py).
    raise PydanticCustomError(TIMESTAMP_FORMAT, TIMESTAMP_RULE)


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC: as early as any
        return (datetime.min if value.year == 1 else datetime.max).replace(tzinfo=UTC)


# A timestamp a request gives (``created_gte``…), as UTC.
Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text), AfterValidator(_in_utc)]
