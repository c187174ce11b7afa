"""Offset pagination, the same for every list: limits, the query parameters, the object."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Offsets beyond 2**53 - 1 cannot be represented by JavaScript clients; no list gets there.
MAX_OFFSET = 2**53 - 1

Limit = Annotated[int, Query(ge=1, description="Page size; values above 100 are clamped to 100.")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Number of items to skip.")]


def clamp(limit: int) -> int:
    return min(limit, MAX_PAGE_SIZE)


def pagination(total: int, limit: int, offset: int, count: int) -> dict[str, Any]:
    """The spec's pagination object for a page of ``count`` items."""
    return {"total": total, "limit": limit, "offset": offset, "has_more": offset + count < total}


def page(items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {"data": items, "pagination": pagination(total, limit, offset, len(items))}
