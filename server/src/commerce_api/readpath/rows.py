"""The rows the read path reads: a product's list fields, and what the in-memory catalogue is
built and changed from (its keys, a partition at a time as columns)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import floordiv, sub
from typing import Any, NamedTuple

import asyncpg

from commerce_api.core.timestamps import from_sqlite
from commerce_api.readpath.statements import (
    KEYS_AFTER_POSTGRESQL,
    KEYS_SQLITE,
    TEXTS_AFTER_POSTGRESQL,
    TEXTS_SQLITE,
)


def open_sqlite(path: str) -> sqlite3.Connection:
    """A read-only, autocommit connection (each statement sees the latest commit)."""
    conn = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class ListRow(NamedTuple):
    """A row of ``LIST_ROWS_SQLITE`` (``catalog.repository.LIST_COLUMNS``, in their order)."""

    id: str
    name: str
    description: str | None
    price_minor: int
    category: str
    created_at: datetime | None


def list_row(row: Sequence[Any]) -> ListRow:
    """The ``ListRow`` of a row of sqlite3 that begins with the list columns."""
    return ListRow(row[0], row[1], row[2], row[3], row[4], from_sqlite(row[5]))


class KeyRow(NamedTuple):
    """A product's place in each order (``catalog.repository.KEY_COLUMNS``), and from the
    change feed whether it is archived and the change that wrote it."""

    id: str
    name: str
    price_minor: int
    category: str
    created_at: datetime
    archived_at: datetime | None = None
    change_seq: int = 0
    description: str | None = None


def key_row(row: Sequence[Any]) -> KeyRow:
    """The ``KeyRow`` of a row of sqlite3 (timestamps as SQLite stores them)."""
    created = from_sqlite(row[4])
    assert created is not None  # NOT NULL
    return KeyRow(row[0], row[1], row[2], row[3], created, from_sqlite(row[5]), row[6], row[7])


KEY_PARTITION = 5000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = _EPOCH.replace(tzinfo=None)  # SQLite's texts are UTC without a zone
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """Microseconds since 1970 (exact, unlike a float's ``timestamp()``)."""
    return (moment - _EPOCH) // _MICROSECOND


def _all_micros(moments: Sequence[datetime], epoch: datetime) -> list[int]:
    """``micros`` of each of ``moments`` (since ``epoch``, naive or aware as they are), in the
    C code of ``map`` and ``datetime``: a third of the time of a Python call each."""
    since = map(sub, moments, repeat(epoch))
    return list(map(floordiv, since, repeat(_MICROSECOND)))


class KeyColumns(NamedTuple):
    """A partition of ``KeyRow``s, a column each (creation times in ``micros``)."""

    ids: Sequence[str]
    names: Sequence[str]
    prices: Sequence[int]
    categories: Sequence[str]
    created: Sequence[int]


_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)


async def key_columns_postgresql(conn: asyncpg.Connection) -> AsyncIterator[KeyColumns]:
    """Every active product's ``KeyColumns`` in list order, a partition at a time, from one
    repeatable-read transaction (one snapshot; the whole catalogue at any size, so no
    transaction deadline)."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        after: tuple[datetime, str] = (_EARLIEST, "")
        while rows := await conn.fetch(KEYS_AFTER_POSTGRESQL, *after, KEY_PARTITION):
            ids, names, prices, categories, created = zip(*rows, strict=True)
            yield KeyColumns(ids, names, prices, categories, _all_micros(created, _EPOCH))
            after = (created[-1], ids[-1])


def _sqlite_micros(moment: datetime) -> int:
    """``micros`` of a timestamp as SQLite stores it: UTC without a zone as the engine writes
    it (``UTCDateTime``). A zone a hand-written row may carry is dropped, as ``from_sqlite``
    drops it (the change feed's rows are read with it): one product, one creation time."""
    if moment.tzinfo is not None:
        moment = moment.replace(tzinfo=None)
    return (moment - _NAIVE_EPOCH) // _MICROSECOND


def _all_sqlite_micros(moments: list[datetime]) -> list[int]:
    """``_sqlite_micros`` of each of ``moments``: ``_all_micros`` while none has a zone."""
    try:
        return _all_micros(moments, _NAIVE_EPOCH)
    except TypeError:  # a zone: each on its own
        return [_sqlite_micros(moment) for moment in moments]


async def key_columns_sqlite(path: str) -> AsyncIterator[KeyColumns]:
    """Every active product's ``KeyColumns`` in list order, a partition at a time, from one
    statement (one read snapshot); the event loop gets control back between partitions."""
    conn = open_sqlite(path)
    conn.row_factory = None
    parse = datetime.fromisoformat
    try:
        cursor = conn.execute(KEYS_SQLITE)
        while rows := cursor.fetchmany(KEY_PARTITION):
            ids, names, prices, categories, texts = zip(*rows, strict=True)
            created = _all_sqlite_micros(list(map(parse, texts)))
            yield KeyColumns(ids, names, prices, categories, created)
            await asyncio.sleep(0)
    finally:
        conn.close()


TEXT_PARTITION = 2000  # ~10 ms of words to index in the serving process
Text = tuple[str, str, str | None]  # a product's id, name and description


async def texts_postgresql(conn: asyncpg.Connection) -> AsyncIterator[list[Text]]:
    """Every active product's words (``Text``), a partition at a time in list order, from one
    repeatable-read transaction."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        after: tuple[datetime, str] = (_EARLIEST, "")
        while rows := await conn.fetch(TEXTS_AFTER_POSTGRESQL, *after, TEXT_PARTITION):
            yield [(row[0], row[1], row[2]) for row in rows]
            after = (rows[-1][3], rows[-1][0])


async def texts_sqlite(path: str) -> AsyncIterator[list[Text]]:
    """Every active product's words (``Text``), a partition at a time, from one statement."""
    conn = open_sqlite(path)
    conn.row_factory = None
    try:
        cursor = conn.execute(TEXTS_SQLITE)
        while rows := cursor.fetchmany(TEXT_PARTITION):
            yield rows
            await asyncio.sleep(0)
    finally:
        conn.close()
