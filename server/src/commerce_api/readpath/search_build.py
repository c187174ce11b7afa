"""Building a catalogue index's search (``search_index``) beside the catalogue: one build at a
time, for the current index; a build for an index since dropped is given up."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.index_build import (
    IN_PROCESS_BELOW,
    Source,
    build_search_elsewhere,
    build_search_here,
)
from commerce_api.readpath.reader import Reader
from commerce_api.readpath.search_index import SearchIndex

logger = logging.getLogger("commerce_api.readpath")

# What is called with a finished search: the index it was built for, the search, and the
# change the index had applied when the build began (its words were read after it).
Attach = Callable[[CatalogIndex, SearchIndex, int], Awaitable[None]]


class SearchBuilds:
    def __init__(self, reader: Reader, source: Source, attach: Attach) -> None:
        self._reader = reader
        self._source = source
        self._attach = attach
        self._task: asyncio.Task[None] | None = None
        self._for: CatalogIndex | None = None

    def start(self, index: CatalogIndex) -> None:
        """Build ``index``'s search, unless it is being built."""
        running = self._task
        if running is not None and not running.done():
            if self._for is index:
                return
            running.cancel()
        self._for = index
        self._task = asyncio.create_task(self._building(index), name="catalog-search-build")

    async def wait(self) -> None:
        """Until the running build (if any) has ended."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _building(self, index: CatalogIndex) -> None:
        applied = index.applied
        started = time.monotonic()
        try:
            if len(index.ids) < IN_PROCESS_BELOW:
                search = await build_search_here(self._reader.texts(), index.ids)
            else:
                search = await build_search_elsewhere(self._source, index.ids)
        except Exception:
            logger.exception("could not build the catalogue's search")
            return
        await self._attach(index, search, applied)
        logger.info("built the catalogue's search in %.1f s", time.monotonic() - started)
