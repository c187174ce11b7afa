"""The product list, in memory: every active product's list item pre-rendered as JSON, in each
order a list can be sorted in (created_at, price, name; each one's reverse is read backwards),
overall and per category, and the category list. A page is a slice, so its cost does not
depend on the offset, nor on the order.

The snapshot is stamped with the catalogue version it was built under (read *before* loading
the rows, so a write that lands during the load makes it stale, never wrongly fresh). A stale
snapshot is never served: callers fall back to the database while a rebuild runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from commerce_api.catalog.service import category_item, list_item
from commerce_api.core.pagination import pagination
from commerce_api.readpath.reader import Reader
from commerce_api.storage.freshness import ChangeTracker, Versions

logger = logging.getLogger("commerce_api.readpath")


T = TypeVar("T")
PAGE_MEMO_BYTES = 4 * 1024 * 1024  # a client walking every page cannot make it grow past this


# The orders kept, by the key a sort names; ``-key`` reads the key's order backwards (ties
# included: the database's ``ORDER BY key DESC, created_at DESC, id DESC``).
SORT_KEYS = ("created_at", "price", "name")


@dataclass(slots=True)
class Snapshot:
    version: str | None
    # The list items in each order, overall (category None) and per category, by (category,
    # sort key); every key's lists share the same item objects.
    orders: dict[tuple[str | None, str], list[bytes]] = field(default_factory=dict)
    categories: bytes = b'{"data":[]}'  # the body of GET /v1/categories
    # For searches (``search_page``): each product's index in list order, its category by that
    # index, and per sort key each index's place in that key's overall order.
    index_of: dict[str, int] = field(default_factory=dict)
    category_at: list[str] = field(default_factory=list)
    place: dict[str, list[int]] = field(default_factory=dict)
    # Pages already joined, by (category, sort, limit, offset): clients poll the same few pages.
    pages: dict[tuple[str | None, str, int, int], bytes] = field(default_factory=dict)
    pages_bytes: int = 0


def page_body(items: list[bytes], total: int, limit: int, offset: int) -> bytes:
    """The list response, byte for byte what ``orjson.dumps`` makes of the page dict."""
    meta = orjson.dumps(pagination(total, limit, offset, len(items)))
    return b'{"data":[' + b",".join(items) + b'],"pagination":' + meta + b"}"


def _window(items: list[T], reverse: bool, limit: int, offset: int) -> list[T]:
    """The page's items: from the start of ``items``, or (``reverse``) from their end."""
    if not reverse:
        return items[offset : offset + limit]
    end = max(len(items) - offset, 0)
    return items[max(end - limit, 0) : end][::-1]


def _add_order(
    snapshot: Snapshot, key: str, items: list[bytes], categories: list[str], ranks: Iterable[int]
) -> None:
    """The items in the order ``ranks`` gives (indexes into ``items``), overall and per
    category."""
    everything: list[bytes] = []
    per_category: dict[str, list[bytes]] = {}
    for index in ranks:
        item = items[index]
        everything.append(item)
        per_category.setdefault(categories[index], []).append(item)
    snapshot.orders[None, key] = everything
    for category, ordered in per_category.items():
        snapshot.orders[category, key] = ordered


class CatalogCache:
    def __init__(self, reader: Reader, tracker: ChangeTracker) -> None:
        self._reader = reader
        self._tracker = tracker
        self._snapshot: Snapshot | None = None
        self._rebuild: asyncio.Task[None] | None = None
        self.on_rebuilt: Callable[[], None] | None = None  # for tests

    def _current(self, versions: Versions | None) -> Snapshot | None:
        """The snapshot, if it is current (else a rebuild starts)."""
        snapshot = self._snapshot
        if versions is None or versions.catalog is None:
            return None
        if snapshot is None or snapshot.version != versions.catalog:
            self._start_rebuild()
            return None
        return snapshot

    def is_current(self, versions: Versions | None) -> bool:
        """Whether the snapshot is current (if not, a rebuild starts)."""
        return self._current(versions) is not None

    def categories(self, versions: Versions | None) -> bytes | None:
        """The category list's response body, or None when the snapshot is not current."""
        snapshot = self._current(versions)
        return None if snapshot is None else snapshot.categories

    def page(
        self,
        versions: Versions | None,
        category: str | None,
        limit: int,
        offset: int,
        sort: str = "created_at",
    ) -> bytes | None:
        """The page's response body, or None when the snapshot is not current."""
        snapshot = self._current(versions)
        if snapshot is None:
            return None
        key = (category, sort, limit, offset)
        body = snapshot.pages.get(key)
        if body is None:
            items = snapshot.orders.get((category, sort.removeprefix("-")), [])
            window = _window(items, sort.startswith("-"), limit, offset)
            body = page_body(window, len(items), limit, offset)
            if snapshot.pages_bytes + len(body) > PAGE_MEMO_BYTES:
                snapshot.pages.clear()
                snapshot.pages_bytes = 0
            snapshot.pages[key] = body
            snapshot.pages_bytes += len(body)
        return body

    def search_page(
        self,
        versions: Versions | None,
        matched: Iterable[str],
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes | None:
        """The page of a search whose matches (product ids, from the full-text index) are
        ``matched``, in ``sort`` order, or None when the snapshot is not current. Its cost
        grows with the matches, never with the offset: their places in the order are sorted,
        and the page is a window of them. A match the snapshot does not have yet (made since)
        is left out until it has, as the lists leave it out."""
        snapshot = self._current(versions)
        if snapshot is None:
            return None
        key = sort.removeprefix("-")
        index_of, category_at, place = snapshot.index_of, snapshot.category_at, snapshot.place[key]
        places = sorted(
            place[index]
            for index in map(index_of.get, matched)
            if index is not None and (category is None or category_at[index] == category)
        )
        ordered = snapshot.orders[None, key]
        window = _window(places, sort.startswith("-"), limit, offset)
        return page_body([ordered[at] for at in window], len(places), limit, offset)

    def _start_rebuild(self) -> None:
        if self._rebuild is None or self._rebuild.done():
            self._rebuild = asyncio.create_task(self._build(), name="catalog-snapshot")

    async def warm(self) -> None:
        """Build the snapshot now (at start-up), if the version is known; the same single
        build a stale page would start, never a second one beside it."""
        self._start_rebuild()
        if self._rebuild is not None:
            await asyncio.shield(self._rebuild)

    async def _build(self) -> None:
        versions = await self._tracker.current()
        if versions is None or versions.catalog is None:
            return
        # The old snapshot is stale (never served again): free it before building the next, so
        # the two are never in memory together.
        self._snapshot = None
        snapshot = Snapshot(versions.catalog)
        items: list[bytes] = []
        categories: list[str] = []
        keys: dict[str, list[Any]] = {"price": [], "name": []}  # the other orders' sort keys
        try:
            # Streamed in partitions: the rows are rendered as they come, never all held at once.
            async for rows in self._reader.list_rows():
                for row in rows:
                    # orjson (>= 3.12) returns bytes whose allocation is >= 4 KiB whatever
                    # their length; kept for good, 100,000 of them would take 400 MB. A copy is
                    # right-sized (~230 bytes here).
                    items.append(bytes(memoryview(orjson.dumps(list_item(row)))))
                    categories.append(row.category)
                    snapshot.index_of[row.id] = len(items) - 1
                    keys["price"].append(row.price_minor)
                    keys["name"].append(row.name)
            _add_order(snapshot, "created_at", items, categories, range(len(items)))
            snapshot.category_at = categories
            snapshot.place["created_at"] = list(range(len(items)))
            for key, values in keys.items():
                await asyncio.sleep(0)  # the event loop between sorts
                # A stable sort of items in list order: ties stay in (created_at, id) order.
                ranks = sorted(range(len(items)), key=values.__getitem__)
                _add_order(snapshot, key, items, categories, ranks)
                place = [0] * len(items)
                for at, index in enumerate(ranks):
                    place[index] = at
                snapshot.place[key] = place
        except Exception:
            logger.exception("could not build the catalogue snapshot")
            return
        counts = sorted(
            (name, len(ordered))
            for (name, key), ordered in snapshot.orders.items()
            if name is not None and key == "created_at"
        )
        snapshot.categories = orjson.dumps({"data": [category_item(*count) for count in counts]})
        self._snapshot = snapshot
        if self.on_rebuilt is not None:
            self.on_rebuilt()

    async def close(self) -> None:
        if self._rebuild is not None:
            self._rebuild.cancel()
