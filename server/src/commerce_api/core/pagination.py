"""Pagination, the same for every list: limits and the object; and the window of the
newest-first lists (orders, events): a creation-time range and a cursor. The query parameters
that carry them are declared in ``http/paging.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypedDict, TypeVar

from commerce_api.core.errors import APIError, not_found

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Offsets beyond 2**53 - 1 cannot be represented by JavaScript clients; no list gets there.
MAX_OFFSET = 2**53 - 1
MAX_ID_LENGTH = 64  # the ids' column


def clamp(limit: int) -> int:
    return min(limit, MAX_PAGE_SIZE)


def pagination(total: int, limit: int, offset: int, count: int) -> dict[str, Any]:
    """The spec's pagination object for a page of ``count`` items."""
    return {"total": total, "limit": limit, "offset": offset, "has_more": offset + count < total}


def page(items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {"data": items, "pagination": pagination(total, limit, offset, len(items))}


@dataclass(frozen=True, slots=True)
class Position:
    """Where an item stands in a list ordered by (created_at, id)."""

    created_at: datetime
    id: str


@dataclass(frozen=True, slots=True)
class NewestFirst:
    """The window of a newest-first list: items created in ``[created_gte, created_lt)``, and
    with a cursor (``starting_after``), only those after ``after`` — older, or as old with a
    smaller id."""

    created_gte: datetime | None = None
    created_lt: datetime | None = None
    after: Position | None = None


WHOLE_LIST = NewestFirst()  # no range, no cursor


class NewestFirstPaging(TypedDict):
    """The paging arguments of a newest-first list's service (``list_orders``, ``list_events``)."""

    chosen: NewestFirst
    limit: int
    offset: int
    starting_after: str | None


def newest_first_paging(
    limit: int,
    offset: int,
    starting_after: str | None,
    created_gte: datetime | None,
    created_lt: datetime | None,
) -> NewestFirstPaging:
    """The paging arguments from a list endpoint's query parameters (the limit clamped)."""
    return {
        "chosen": NewestFirst(created_gte, created_lt),
        "limit": clamp(limit),
        "offset": offset,
        "starting_after": starting_after,
    }


RowT = TypeVar("RowT")


async def newest_first_rows(
    chosen: NewestFirst,
    offset: int,
    starting_after: str | None,
    *,
    count: Callable[[NewestFirst], Awaitable[int]],
    fetch: Callable[[NewestFirst, int], Awaitable[Sequence[RowT]]],
    load: Callable[[str], Awaitable[Any]],
    noun: str,
) -> tuple[Sequence[RowT], int, int]:
    """One page of a newest-first list: its rows, the list's total, and the page's offset in
    the list. ``count(window)`` counts the items of a window, ``fetch(window, skip)`` reads a
    page of them, ``load(id)`` reads an item the caller can see (an :class:`APIError`
    otherwise): the ``starting_after`` one, a 404 naming the parameter when it cannot. With a
    cursor, ``offset`` counts from it."""
    total = await count(chosen)
    skip = offset
    if starting_after is not None:
        try:
            cursor = await load(starting_after)
        except APIError:
            raise not_found(
                f"No {noun} with id `{starting_after}` to start after.", "starting_after"
            ) from None
        chosen = replace(chosen, after=Position(cursor.created_at, cursor.id))
        offset = max(total - await count(chosen), 0) + skip  # the items before the page
    rows = await fetch(chosen, skip) if offset < total else []
    return rows, total, offset
