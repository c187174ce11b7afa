"""The product list, in memory: every active product's list item pre-rendered as JSON, in list
order, overall and per category. A page is a slice, so its cost does not depend on the offset.

The snapshot is stamped with the catalogue version it was built under (read *before* loading
the rows, so a write that lands during the load makes it stale, never wrongly fresh). A stale
snapshot is never served: callers fall back to the database while a rebuild runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from commerce_api.catalog.service import list_item
from commerce_api.core.pagination import pagination
from commerce_api.readpath.reader import Reader
from commerce_api.storage.freshness import ChangeTracker, Versions

logger = logging.getLogger("commerce_api.readpath")


PAGE_MEMO_BYTES = 4 * 1024 * 1024  # a client walking every page cannot make it grow past this


@dataclass(slots=True)
class Snapshot:
    version: str | None
    items: list[bytes] = field(default_factory=list)
    by_category: dict[str, list[bytes]] = field(default_factory=dict)
    # Pages already joined, by (category, limit, offset): clients poll the same few pages.
    pages: dict[tuple[str | None, int, int], bytes] = field(default_factory=dict)
    pages_bytes: int = 0


def page_body(items: list[bytes], total: int, limit: int, offset: int) -> bytes:
    """The list response, byte for byte what ``orjson.dumps`` makes of the page dict."""
    meta = orjson.dumps(pagination(total, limit, offset, len(items)))
    return b'{"data":[' + b",".join(items) + b'],"pagination":' + meta + b"}"


class CatalogCache:
    def __init__(self, reader: Reader, tracker: ChangeTracker) -> None:
        self._reader = reader
        self._tracker = tracker
        self._snapshot: Snapshot | None = None
        self._rebuild: asyncio.Task[None] | None = None
        self.on_rebuilt: Callable[[], None] | None = None  # for tests

    def page(
        self, versions: Versions | None, category: str | None, limit: int, offset: int
    ) -> bytes | None:
        """The page's response body, or None when the snapshot is not current."""
        snapshot = self._snapshot
        if versions is None or versions.catalog is None:
            return None
        if snapshot is None or snapshot.version != versions.catalog:
            self._start_rebuild()
            return None
        key = (category, limit, offset)
        body = snapshot.pages.get(key)
        if body is None:
            items = snapshot.items if category is None else snapshot.by_category.get(category, [])
            body = page_body(items[offset : offset + limit], len(items), limit, offset)
            if snapshot.pages_bytes + len(body) > PAGE_MEMO_BYTES:
                snapshot.pages.clear()
                snapshot.pages_bytes = 0
            snapshot.pages[key] = body
            snapshot.pages_bytes += len(body)
        return body

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
        try:
            # Streamed in partitions: the rows are rendered as they come, never all held at once.
            async for rows in self._reader.list_rows():
                for row in rows:
                    # orjson (>= 3.12) returns bytes whose allocation is >= 4 KiB whatever
                    # their length; kept for good, 100,000 of them would take 400 MB. A copy is
                    # right-sized (~230 bytes here).
                    item = bytes(memoryview(orjson.dumps(list_item(row))))
                    snapshot.items.append(item)
                    snapshot.by_category.setdefault(row.category, []).append(item)
        except Exception:
            logger.exception("could not build the catalogue snapshot")
            return
        self._snapshot = snapshot
        if self.on_rebuilt is not None:
            self.on_rebuilt()

    async def close(self) -> None:
        if self._rebuild is not None:
            self._rebuild.cancel()
