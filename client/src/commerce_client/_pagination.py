"""Pagination: one :class:`Page`, and walking all of them lazily — by offset, or (the
newest-first lists: orders, events) by the cursor ``starting_after``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, Self, TypeVar

__all__ = ["Page", "Pagination"]

T = TypeVar("T")


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


ItemT = TypeVar("ItemT", bound=_Identified)

MAX_PAGE_SIZE = 100
"""The server's largest page; ``list_all()`` asks for it to make the fewest requests."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pagination:
    total: int
    """Number of matching items."""
    limit: int
    """Page size applied (a ``limit`` above 100 is clamped to 100)."""
    offset: int
    """Number of items skipped."""
    has_more: bool
    """True when more items remain after this page."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            total=data["total"],
            limit=data["limit"],
            offset=data["offset"],
            has_more=data["has_more"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Generic[T]):
    """One page of a list: ``data`` and ``pagination``."""

    data: list[T]
    pagination: Pagination

    @property
    def has_more(self) -> bool:
        return self.pagination.has_more

    @property
    def next_offset(self) -> int | None:
        """The ``offset`` of the next page, or None on the last one."""
        if not self.pagination.has_more or not self.data:
            return None
        return self.pagination.offset + len(self.data)

    def __iter__(self) -> Iterator[T]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def parse_page(body: Mapping[str, Any], item: Callable[[Mapping[str, Any]], T]) -> Page[T]:
    return Page(
        data=[item(entry) for entry in body["data"]],
        pagination=Pagination.from_dict(body["pagination"]),
    )


def iterate_pages(fetch: Callable[[int], Page[T]]) -> Iterator[T]:
    """Every item of every page, fetching each page only when the previous one is used up.
    ``fetch(offset)`` returns the page at ``offset``."""
    offset: int | None = 0
    while offset is not None:
        page = fetch(offset)
        yield from page.data
        offset = page.next_offset


async def aiterate_pages(fetch: Callable[[int], Awaitable[Page[T]]]) -> AsyncIterator[T]:
    """The ``async for`` twin of :func:`iterate_pages`."""
    offset: int | None = 0
    while offset is not None:
        page = await fetch(offset)
        for item in page.data:
            yield item
        offset = page.next_offset


def iterate_after(fetch: Callable[[str | None], Page[ItemT]]) -> Iterator[ItemT]:
    """Every item of a newest-first list, each page fetched with the cursor when the previous
    one is used up: ``fetch(starting_after)`` returns the page after the item with that id
    (None: the first page). Items created meanwhile never shift the pages: each item comes
    once."""
    starting_after: str | None = None
    while True:
        page = fetch(starting_after)
        yield from page.data
        if not page.has_more or not page.data:
            return
        starting_after = page.data[-1].id


async def aiterate_after(
    fetch: Callable[[str | None], Awaitable[Page[ItemT]]],
) -> AsyncIterator[ItemT]:
    """The ``async for`` twin of :func:`iterate_after`."""
    starting_after: str | None = None
    while True:
        page = await fetch(starting_after)
        for item in page.data:
            yield item
        if not page.has_more or not page.data:
            return
        starting_after = page.data[-1].id


@dataclass(frozen=True, slots=True)
class NewestFirstQuery:
    """What ``list()`` and ``list_all()`` of a newest-first list (orders, events) ask for but
    the page: the list's own filters (None: not filtered) and a ``created_gte`` /
    ``created_lt`` range."""

    filters: Mapping[str, str | None]
    created_gte: datetime | str | None
    created_lt: datetime | str | None

    def params(
        self, *, limit: int | None, offset: int | None = None, starting_after: str | None = None
    ) -> dict[str, str | int | None]:
        """The query parameters of one page."""
        return {
            **self.filters,
            "created_gte": timestamp_param(self.created_gte, "created_gte"),
            "created_lt": timestamp_param(self.created_lt, "created_lt"),
            "limit": limit,
            "offset": offset,
            "starting_after": starting_after,
        }


def timestamp_param(value: datetime | str | None, name: str) -> str | None:
    """A ``created_gte`` / ``created_lt`` as the API takes it: RFC 3339 with its zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware, e.g. datetime.now(timezone.utc)")
        return value.isoformat()
    return value
