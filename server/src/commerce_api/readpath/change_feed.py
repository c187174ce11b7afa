"""Reading the catalogue's change feed into an index (``CatalogIndex.apply``), a page at a
time, handing the event loop back between small batches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.reader import Reader

FEED_PAGE = 2000  # products read from the change feed at a time
APPLY_BATCH = 200  # products applied between two returns to the event loop (~5 ms)
REBUILD_ABOVE = 50_000  # a catch-up past this many products builds the index again instead


class TooManyChanges(Exception):
    """More than ``REBUILD_ABOVE`` products changed: building the index anew costs less."""


async def catch_up(
    reader: Reader,
    index: CatalogIndex,
    applying: Callable[[str], None],
    applied_page: Callable[[], None],
) -> None:
    """Apply the change feed after ``index.applied`` to ``index``, up to its end; then
    ``index.applied`` is the last change read. ``applying(id)`` is told of each product
    before it is applied, ``applied_page()`` after each page."""
    # After every product of change ``applied`` (ids are never empty).
    seq, last_id = index.applied + 1, ""
    read_to = index.applied
    count = 0
    while rows := await reader.changes(seq, last_id, FEED_PAGE):
        count += len(rows)
        if count > REBUILD_ABOVE:
            raise TooManyChanges(count)
        for at in range(0, len(rows), APPLY_BATCH):
            if at:
                await asyncio.sleep(0)
            for row in rows[at : at + APPLY_BATCH]:
                applying(row.id)
                index.apply(row)
        applied_page()
        seq, last_id = rows[-1].change_seq, rows[-1].id
        read_to = seq
        if len(rows) < FEED_PAGE:
            break
    # Every change up to the last one read is complete: the feed is read in (change, id)
    # order to its end, and a change is visible only whole, after every smaller one.
    index.applied = max(index.applied, read_to)
