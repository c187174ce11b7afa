"""The product list from memory, kept current by the database's change feed.

Each process holds a ``CatalogIndex`` (every active product's place in each order) built once
at start from the whole catalogue. Every catalogue write takes a change number in its
transaction and stamps the products it writes with it (``catalog.repository.next_change``);
the number is the ``catalog`` stamp the tracker reads (``storage.freshness``: on SQLite after
``PRAGMA data_version`` moves, on PostgreSQL after the change notification). A read that finds
the stamp above the last change the index applied first reads the products written since —
``WHERE (change_seq, id) > (last, id)``, a page at a time — and applies them (O(log n) each),
so the freshness is what it was when the whole list was rebuilt after each change, at the cost
of the changed products only. Reads arriving meanwhile wait for the same catch-up. Only a
catch-up of more than ``REBUILD_ABOVE`` products (a large import) builds the index again; the
old one is dropped first, and until the new one is built the lists are read from the database.

A page's items are rendered from the product's row (``list_item``) and kept by id, dropped
when the product changes; joined pages are kept by (category, sort, limit, offset) until the
next change. Neither holds more than a bounded number of entries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

import orjson

from commerce_api.catalog.service import category_item
from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.change_feed import TooManyChanges, catch_up
from commerce_api.readpath.index_build import IN_PROCESS_BELOW, Source, build, build_elsewhere
from commerce_api.readpath.reader import Reader
from commerce_api.readpath.rendering import RenderedItems, page_body
from commerce_api.readpath.search_build import SearchBuilds
from commerce_api.readpath.search_index import REBUILD_ABOVE as SEARCH_REBUILD_ABOVE
from commerce_api.readpath.search_index import SearchIndex
from commerce_api.readpath.search_pages import ids_window, search_window
from commerce_api.storage.freshness import ChangeTracker, Versions

logger = logging.getLogger("commerce_api.readpath")

PAGE_MEMO_BYTES = 4 * 1024 * 1024  # a client walking every page cannot make it grow past this
CHEAP_OFFSET = 1000  # a page in creation order up to here is read from the database meanwhile
BUILD_WAIT_SECONDS = 30.0  # how long a page the database cannot answer cheaply waits for a build


def change_number(stamp: str | None) -> int | None:
    """The change number a ``catalog`` stamp says, or None (no stamp, or one that is not a
    number: written before the change feed, so the index is built again)."""
    if stamp is None or not stamp.isdigit():
        return None
    return int(stamp)


class CatalogCache:
    def __init__(self, reader: Reader, tracker: ChangeTracker, source: Source) -> None:
        self._reader = reader
        self._source = source
        self._tracker = tracker
        self._index: CatalogIndex | None = None
        self._stamp: str | None = None  # the catalog stamp the index is known current for
        self._build: asyncio.Task[None] | None = None
        self._searches = SearchBuilds(reader, source, self._attach_search)
        self._catch_up: asyncio.Task[None] | None = None
        self._pages: dict[tuple[str | None, str, int, int], bytes] = {}
        self._pages_bytes = 0
        self._items = RenderedItems(reader)
        self._categories: bytes | None = None
        self.on_rebuilt: Callable[[], None] | None = None  # for tests

    async def _current(self, versions: Versions | None) -> CatalogIndex | None:
        """The index, brought up to the stamp of ``versions``; None while there is none (a
        build starts, if none is running)."""
        if versions is None or versions.catalog is None:
            return None
        index = self._index
        if index is not None and versions.catalog == self._stamp:
            return index
        target = change_number(versions.catalog)
        if target is None:  # a stamp from before the change feed: build from scratch
            if index is not None:
                self._forget()
            self._start_build()
            return None
        while index is not None:
            if index.applied >= target:
                self._stamp = versions.catalog
                return index
            running = self._catch_up
            fresh = running is None or running.done()
            if running is None or fresh:
                running = self._catch_up = asyncio.create_task(
                    self._catching_up(index), name="catalog-catch-up"
                )
            await asyncio.shield(running)
            if self._index is not index:  # dropped for a build (a large change)
                break
            if fresh:
                # Read to the feed's end after change ``target`` was known: every product it
                # wrote is applied (or it wrote none).
                index.applied = max(index.applied, target)
        self._start_build()
        return None

    async def page(
        self,
        versions: Versions | None,
        category: str | None,
        limit: int,
        offset: int,
        sort: str = "created_at",
    ) -> bytes | None:
        """The page's response body, or None while there is no index (and the database can
        answer the page cheaply; a page it cannot waits for the build, up to
        ``BUILD_WAIT_SECONDS``)."""
        index = await self._current(versions)
        if index is None:
            cheap = offset <= CHEAP_OFFSET and sort.removeprefix("-") == "created_at"
            if cheap or not await self._built_within(BUILD_WAIT_SECONDS):
                return None
            index = await self._current(versions)
            if index is None:
                return None
        key = (category, sort, limit, offset)
        body = self._pages.get(key)
        if body is None:
            slots, total = index.window(category, sort, offset, limit)
            applied = index.applied
            items = await self._rendered(index, slots)
            body = page_body(items, total, limit, offset)
            if self._index is index and index.applied == applied:
                if self._pages_bytes + len(body) > PAGE_MEMO_BYTES:
                    self._pages.clear()
                    self._pages_bytes = 0
                self._pages[key] = body
                self._pages_bytes += len(body)
        return body

    async def categories(self, versions: Versions | None) -> bytes | None:
        """The category list's response body, or None while there is no index."""
        index = await self._current(versions)
        if index is None:
            return None
        if self._categories is None:
            counts = index.categories()
            self._categories = orjson.dumps({"data": [category_item(*c) for c in counts]})
        return self._categories

    async def ready(self, versions: Versions | None) -> bool:
        """Whether there is an index (brought up to ``versions``)."""
        return await self._current(versions) is not None

    async def search_page(
        self,
        versions: Versions | None,
        matched: Iterable[str],
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes | None:
        """The page of a search whose matches (product ids, from the full-text index) are
        ``matched``, in ``sort`` order, or None while there is no index."""
        index = await self._current(versions)
        if index is None:
            return None
        slots, total = ids_window(index, matched, category, sort, limit, offset)
        return page_body(await self._rendered(index, slots), total, limit, offset)

    async def search(
        self,
        versions: Versions | None,
        words: list[str],
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes | None:
        """The page of a search for ``words`` (at least one) from the in-memory search, or None
        while it is not built."""
        index = await self._current(versions)
        if index is None or index.search is None:
            return None
        matches = index.search.matches(words)
        slots, total = search_window(index, matches, category, sort, limit, offset)
        return page_body(await self._rendered(index, slots), total, limit, offset)

    async def _rendered(self, index: CatalogIndex, slots: list[int]) -> list[bytes]:
        """The list items of ``slots``, from memory or else from their rows."""
        applied = index.applied
        return await self._items.of(
            [index.ids.text(slot) for slot in slots],
            lambda: self._index is index and index.applied == applied,  # nothing changed
        )

    async def _catching_up(self, index: CatalogIndex) -> None:
        """Apply the change feed after ``index.applied``, up to its end."""
        try:
            await catch_up(self._reader, index, self._items.forget, self._changed)
        except TooManyChanges as exc:
            logger.info("the catalogue changed in %s+ products: building it again", exc)
            self._forget()
            return
        except Exception:
            logger.exception("could not read the catalogue's changes: building it again")
            self._forget()
            return
        if index.search is not None and index.search.drift() > SEARCH_REBUILD_ABOVE:
            self._searches.start(index)

    def _changed(self) -> None:
        self._pages.clear()
        self._pages_bytes = 0
        self._categories = None

    def _forget(self) -> None:
        """Drop the index (before a build: two are never in memory together)."""
        self._index = None
        self._stamp = None
        self._items.clear()
        self._changed()

    async def _built_within(self, seconds: float) -> bool:
        """Whether a running build finished within ``seconds``. A deep or sorted page would
        cost the database an ``OFFSET`` scan or a sort of the whole catalogue (seconds, at a
        million products), slowing the build it waits for as much as itself: it waits for the
        build instead."""
        building = self._build
        if building is None or building.done():
            return False
        try:
            await asyncio.wait_for(asyncio.shield(building), seconds)
        except TimeoutError:
            return False
        return True

    def _start_build(self) -> None:
        if self._build is None or self._build.done():
            self._build = asyncio.create_task(self._building(), name="catalog-build")

    async def warm(self, search: bool = False) -> None:
        """Build the index now (at start-up), if the stamp is known; the same single build a
        read would start, never a second one beside it. ``search``: its search too."""
        self._start_build()
        if self._build is not None:
            await asyncio.shield(self._build)
        if search:
            await self._searches.wait()

    async def _building(self) -> None:
        versions = await self._tracker.current()
        if versions is None or versions.catalog is None:
            return
        self._forget()
        # The stamp is read before the rows: a change landing during the read is applied
        # again after it (applying is idempotent), never missed.
        applied = change_number(versions.catalog) or 0
        started = time.monotonic()
        try:
            if await self._reader.count_active() < IN_PROCESS_BELOW:
                index = await build(self._reader.key_columns(), applied)
            else:
                index = await build_elsewhere(self._source, applied)
        except Exception:
            logger.exception("could not build the catalogue")
            return
        self._index = index
        self._stamp = versions.catalog
        _, count = index.window(None, "created_at", 0, 0)
        logger.info("built the catalogue: %s products in %.1f s", count, time.monotonic() - started)
        self._changed()
        self._searches.start(index)
        if self.on_rebuilt is not None:
            self.on_rebuilt()

    async def _attach_search(self, index: CatalogIndex, search: SearchIndex, applied: int) -> None:
        """Search ``index`` with ``search``, whose words were read after change ``applied``
        (perhaps well after): the next read catches the index up from ``applied`` again, so
        every change since reaches the search too (applying is idempotent)."""
        # No catch-up may run across the swap: it would mark the index current past changes
        # the new search has not seen.
        while self._catch_up is not None and not self._catch_up.done():
            await asyncio.shield(self._catch_up)
        if self._index is not index:  # built again meanwhile
            return
        index.attach(search)
        index.applied = min(index.applied, applied)
        self._stamp = None

    async def close(self) -> None:
        self._searches.cancel()
        for task in (self._build, self._catch_up):
            if task is not None:
                task.cancel()
