"""Building the in-memory catalogue from the whole of it: in the serving process for a small
catalogue, in a process of its own for a large one.

A build reads every active product once and sorts them three ways: at a million products
several seconds of CPU and, for a moment, a few hundred megabytes of Python objects (the sorts'
keys). In the serving process that would hold its event loop (requests waiting seconds at
start) and leave its memory fragmented well above what the finished index needs. So past
``IN_PROCESS_BELOW`` active products the build runs in a child process (the standard library's
``multiprocessing.Process`` with the ``spawn`` start method: nothing of the server's threads or
connections is inherited), on the machine's other core, while the server answers lists from
the database; the child sends back only the finished index's compact arrays (pickled through
a pipe: ~100 bytes per product) and exits, its memory returned with it.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TypeVar, cast

import asyncpg

from commerce_api.core.processes import die_with_parent
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

T = TypeVar("T")
R = TypeVar("R")

IN_PROCESS_BELOW = 50_000  # active products: below, built in the serving process (< ~0.5 s)
# A build's process runs at this nice(2) value above the worker's: a worker that shares its core
# with a build (one pinned to a core, or a host with every core busy) answers requests first,
# and the build has what they leave. On an idle core the build runs at full speed all the same.
BUILD_NICENESS = 10


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
    return await _in_child(_build_in_child, source, applied)


def _build_in_child(source: Source, applied: int) -> CatalogIndex:
    columns = _read(source, key_columns_sqlite, key_columns_postgresql)
    return asyncio.run(build(columns, applied))


async def _in_child(work: Callable[..., T], *arguments: object) -> T:
    """``work(*arguments)`` in a spawned child process, which exits after it. Cancelled (a
    build given up, or the server stopping), the child is terminated at once: a process pool
    would wait for it to finish, holding the event loop for the rest of the build."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(
        target=_run_child,
        args=(os.getpid(), sending, work, arguments),
        name="commerce-api-build",
        daemon=True,
    )
    child.start()
    sending.close()  # the child's end: this process keeps only its own
    try:
        return cast("T", await asyncio.to_thread(_receive, receiving, child))
    finally:
        if child.is_alive():
            child.terminate()  # its end of the pipe closes: the receiving thread returns too
        await asyncio.to_thread(child.join)
        receiving.close()


def _run_child(
    parent: int, sending: Connection, work: Callable[..., object], arguments: tuple[object]
) -> None:
    die_with_parent(parent)  # a killed worker leaves no build running on
    os.nice(BUILD_NICENESS)
    # A short-lived process that makes no reference cycles worth collecting: without the
    # cyclic garbage collector, whose passes over the million rows' tuples as they come would
    # double the build's time.
    gc.disable()
    try:
        result: tuple[bool, object] = (True, work(*arguments))
    except Exception as exc:  # given to the parent, which raises it
        result = (False, exc)
    sending.send(result)
    sending.close()


def _receive(receiving: Connection, child: BaseProcess) -> object:
    try:
        ok, value = receiving.recv()
    except EOFError:
        child.join()
        raise ChildProcessError(
            f"the build's process ended without a result (exit code {child.exitcode})"
        ) from None
    if not ok:
        raise value
    return value


async def _read(
    source: Source,
    from_sqlite: Callable[[str], AsyncIterator[R]],
    from_postgresql: Callable[[asyncpg.Connection], AsyncIterator[R]],
) -> AsyncIterator[R]:
    """The partitions a reader gives from ``source``'s database (PostgreSQL: on a connection
    of its own, closed after)."""
    if source.sqlite_path is not None:
        async for partition in from_sqlite(source.sqlite_path):
            yield partition
        return
    assert source.dsn is not None
    options = {"statement_cache_size": 0} if source.pooled else {}
    connection = await asyncpg.connect(source.dsn, **options)
    try:
        async for partition in from_postgresql(connection):
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
    return await _in_child(_search_in_child, source, ids)


def _search_in_child(source: Source, ids: TextColumn) -> SearchIndex:
    texts = _read(source, texts_sqlite, texts_postgresql)
    return asyncio.run(build_search_here(texts, ids))
