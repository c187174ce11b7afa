"""Turning the API's JSON into Python values: exact money and aware datetimes."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any


def loads(content: bytes | str) -> Any:
    """JSON with every non-integer number as an exact :class:`~decimal.Decimal` (``19.99``
    stays ``19.99``; a float would be ``19.989999…``)."""
    return json.loads(content, parse_float=Decimal)


def money(value: Any) -> Decimal:
    """An amount as an exact Decimal. A float (JSON parsed without :func:`loads`) is read by
    its shortest repr, which is the decimal the API sent: ``19.99``, not ``19.989999…``."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
        raise TypeError(f"expected a decimal amount, got {value!r}")
    return Decimal(value)


def timestamp(value: Any) -> datetime:
    """``2026-11-21T08:12:41.123Z`` → an aware UTC datetime."""
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 timestamp, got {value!r}")
    return datetime.fromisoformat(value)


def optional_timestamp(value: Any) -> datetime | None:
    return None if value is None else timestamp(value)
