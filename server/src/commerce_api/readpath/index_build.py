"""Building the in-memory catalogue from the whole of it: in the serving process for a small
catalogue, in a process of its own for a large one.

A build reads every active product once and sorts them three ways: at a million products
several seconds of CPU and, for a moment, a few hundred megabytes of Python objects (the sorts'
keys). In the serving process that would hold its event loop (requests waiting seconds at
start) and leave its memory fragmented well above what the finished index needs. So past
``IN_PROCESS_BELOW`` active products the build runs in a child process (the standard library's
``ProcessPoolExecutor`` with the ``spawn`` start method: nothing of the server's threads or
connections is inherited), on the machine's other core, while the server answers lists from
the database; the child sends back only the finished index's compact arrays (pickled: ~100
bytes per product) and exits, its memory returned with it.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import asyncpg

from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.columns import TextColumn
from commerce_api.readpath.rows import (
    KeyColumns,
    Text,
    key_columns_postgresql,
    key_columns_sqlite,
    texts_postgresql,
    texts_sqlite,
)
from commerce_api.readpath.search_index import SearchBuilder, SearchIndex

IN_PROCESS_BELOW = 50_000  # active products: below, built in the serving process (< ~0.5 s)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a child process reads the catalogue: a SQLite file, or a PostgreSQL DSN."""

    sqlite_path: str | None = None
    dsn: str | None = None
    pooled: bool = False  # through PgBouncer: no named prepared statements


async def build(columns: AsyncIterator[KeyColumns], applied: int) -> CatalogIndex:
    """The index of every product ``columns`` gives (in list order), as of change
    ``applied``; the event loop gets control back between partitions."""
    index = CatalogIndex(applied)
    async for partition in columns:
        index.extend(partition)
        await asyncio.sleep(0)
    index.finish()
    return index


async def build_elsewhere(source: Source, applied: int) -> CatalogIndex:
    """``build`` in a child process (see the module's docstring)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(_build_in_child, source, applied)
        return await asyncio.wrap_future(future)


def _build_in_child(source: Source, applied: int) -> CatalogIndex:
    # A short-lived process that makes no reference cycles worth collecting: without the
    # cyclic garbage collector, whose passes over the million rows' tuples as they come would
    # double the build's time.
    gc.disable()
    return asyncio.run(build(_columns(source), applied))


async def _columns(source: Source) -> AsyncIterator[KeyColumns]:
    if source.sqlite_path is not None:
        async for partition in key_columns_sqlite(source.sqlite_path):
            yield partition
        return
    assert source.dsn is not None
    options = {"statement_cache_size": 0} if source.pooled else {}
    connection = await asyncpg.connect(source.dsn, **options)
    try:
        async for partition in key_columns_postgresql(connection):
            yield partition
    finally:
        await connection.close()


# --- the search's words -------------------------------------------------------------------------


async def build_search_here(texts: AsyncIterator[list[Text]], ids: TextColumn) -> SearchIndex:
    """The search index over the slots of ``ids`` (an index's ids column), from ``texts``
    (every active product's words); the event loop gets control back between partitions."""
    size = len(ids)
    slot_of = {ids.text(slot): slot for slot in range(size)}  # a restored id: its last slot
    builder = SearchBuilder(size)
    async for partition in texts:
        for product_id, name, description in partition:
            slot = slot_of.get(product_id)
            if slot is not None:  # None: made after the index (its change feed brings it)
                builder.add(slot, name, description)
        await asyncio.sleep(0)
    return builder.finish()


async def build_search_elsewhere(source: Source, ids: TextColumn) -> SearchIndex:
    """``build_search_here`` in a child process (see the module's docstring)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(_search_in_child, source, ids)
        return await asyncio.wrap_future(future)


def _search_in_child(source: Source, ids: TextColumn) -> SearchIndex:
    gc.disable()
    return asyncio.run(build_search_here(_texts(source), ids))


async def _texts(source: Source) -> AsyncIterator[list[Text]]:
    if source.sqlite_path is not None:
        async for partition in texts_sqlite(source.sqlite_path):
            yield partition
        return
    assert source.dsn is not None
    options = {"statement_cache_size": 0} if source.pooled else {}
    connection = await asyncpg.connect(source.dsn, **options)
    try:
        async for partition in texts_postgresql(connection):
            yield partition
    finally:
        await connection.close()
