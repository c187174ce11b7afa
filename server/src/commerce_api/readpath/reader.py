"""Single-row reads and searches for the hot path, without the ORM's per-query cost.

SQLite: the standard library's sqlite3, called inline on a private read-only connection — a
primary-key lookup takes microseconds, less than handing it to a thread would (WAL readers
never wait for writers); a search, which may read many index entries, on a thread of its own.
PostgreSQL: an asyncpg pool. The SQL is not written here: it is the catalogue's and the keys' own
statements (``catalog/repository.py``, ``accounts/repository.py``) compiled for each driver,
once (at import, or a search's at its first use).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Protocol

import asyncpg
import orjson

from commerce_api.catalog import search_repository
from commerce_api.core.coalescing import Rounds
from commerce_api.core.timestamps import from_sqlite
from commerce_api.readpath.rows import (
    KeyColumns,
    KeyRow,
    ListRow,
    Text,
    key_columns_postgresql,
    key_columns_sqlite,
    key_row,
    list_row,
    open_sqlite,
    texts_postgresql,
    texts_sqlite,
)
from commerce_api.readpath.statements import (
    CHANGES_POSTGRESQL,
    CHANGES_SQLITE,
    COUNT_ACTIVE_POSTGRESQL,
    COUNT_ACTIVE_SQLITE,
    ITEMS_POSTGRESQL,
    ITEMS_SQLITE,
    KEY_POSTGRESQL,
    KEY_SQLITE,
    PRODUCT_SQLITE,
    PRODUCT_TIMESTAMPS,
    PRODUCTS_POSTGRESQL,
    search_ids_statement,
    search_statements,
    search_values,
)
from commerce_api.storage.db import Database


class Reader(Protocol):
    """The read path's reads, one implementation per backend (chosen once: ``ReadPath.open``)."""

    async def product(self, product_id: str) -> SimpleNamespace | None: ...

    async def key(self, key_hash: str) -> SimpleNamespace | None: ...

    def key_columns(self) -> AsyncIterator[KeyColumns]:
        """Every active product's ``KeyColumns`` in list order, a partition at a time, from
        one read snapshot (to build the in-memory catalogue)."""
        ...

    def texts(self) -> AsyncIterator[list[Text]]:
        """Every active product's words, a partition at a time, from one read snapshot (to
        build the in-memory search)."""
        ...

    async def changes(self, seq: int, product_id: str, limit: int) -> list[KeyRow]:
        """The change feed after product ``product_id`` of change ``seq``: up to ``limit``
        products, in (change, id) order (``catalog.repository.CHANGES``)."""
        ...

    async def count_active(self) -> int:
        """How many products are active."""
        ...

    async def list_items(self, ids: list[str]) -> list[ListRow]:
        """The list fields of the products ``ids`` (archived ones too), in no order."""
        ...

    async def search(
        self, words: list[str], category: str | None, sort: str, limit: int, offset: int
    ) -> tuple[int, Sequence[Any]]:
        """The number of active products (of ``category``) holding ``words`` (each as a
        word's beginning), and a page of their list fields in ``sort`` order."""
        ...

    async def search_ids(self, words: list[str]) -> list[str]:
        """The ids of the products holding ``words``, in no order (on SQLite archived ones
        too: the snapshot has only the active ones)."""
        ...

    async def close(self) -> None: ...


class SQLiteReader:
    def __init__(self, path: str) -> None:
        self._path = path
        self._conn = open_sqlite(path)
        # Searches may read many index entries: on a thread of their own, with a connection of
        # its own, so the event loop never waits for one.
        self._searches = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-search")
        self._search_conn: sqlite3.Connection | None = None

    async def search(
        self, words: list[str], category: str | None, sort: str, limit: int, offset: int
    ) -> tuple[int, list[ListRow]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._searches, self._search, words, category, sort, limit, offset
        )

    def _search(
        self, words: list[str], category: str | None, sort: str, limit: int, offset: int
    ) -> tuple[int, list[ListRow]]:
        conn = self._search_connection()
        page, count = search_statements("sqlite", sort, category is not None)
        values = search_values("sqlite", words, category, limit, offset)
        conn.execute("BEGIN")  # the count and the page from one read snapshot
        try:
            total = int(conn.execute(count.sql, count.arguments(values)).fetchone()[0])
            rows = []
            if offset < total:
                rows = conn.execute(page.sql, page.arguments(values)).fetchall()
        finally:
            conn.execute("COMMIT")
        return total, [list_row(row) for row in rows]

    async def search_ids(self, words: list[str]) -> list[str]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._searches, self._search_ids, words)

    def _search_ids(self, words: list[str]) -> list[str]:
        statement = search_ids_statement("sqlite")
        values = {"match": search_repository.search_match("sqlite", words)}
        rows = self._search_connection().execute(statement.sql, statement.arguments(values))
        return [product_id for (product_id,) in rows]

    def _search_connection(self) -> sqlite3.Connection:
        if self._search_conn is None:
            self._search_conn = open_sqlite(self._path)
            self._search_conn.row_factory = None
        return self._search_conn

    def _close_search(self) -> None:
        if self._search_conn is not None:
            self._search_conn.close()

    def key_columns(self) -> AsyncIterator[KeyColumns]:
        # The standard library's sqlite3 on a connection of its own: 4x faster than
        # SQLAlchemy + aiosqlite, and without their per-row garbage.
        return key_columns_sqlite(self._path)

    def texts(self) -> AsyncIterator[list[Text]]:
        return texts_sqlite(self._path)

    async def changes(self, seq: int, product_id: str, limit: int) -> list[KeyRow]:
        cursor = self._conn.execute(CHANGES_SQLITE, (seq, product_id, limit, 0))
        return [key_row(row) for row in cursor]

    async def count_active(self) -> int:
        return int(self._conn.execute(COUNT_ACTIVE_SQLITE).fetchone()[0])

    async def list_items(self, ids: list[str]) -> list[ListRow]:
        cursor = self._conn.execute(ITEMS_SQLITE, (orjson.dumps(ids).decode(),))
        return [list_row(row) for row in cursor]

    async def product(self, product_id: str) -> SimpleNamespace | None:
        row = self._conn.execute(PRODUCT_SQLITE, (product_id,)).fetchone()
        if row is None:
            return None
        values = dict(row)
        for name in PRODUCT_TIMESTAMPS:
            values[name] = from_sqlite(values[name])
        return SimpleNamespace(**values)

    async def key(self, key_hash: str) -> SimpleNamespace | None:
        row = self._conn.execute(KEY_SQLITE, (key_hash,)).fetchone()
        if row is None:
            return None
        record = SimpleNamespace(**dict(row))
        record.revoked_at = from_sqlite(record.revoked_at)
        return record

    async def close(self) -> None:
        self._conn.close()
        await asyncio.get_running_loop().run_in_executor(self._searches, self._close_search)
        self._searches.shutdown()


async def _keep_as_is(_connection: asyncpg.Connection) -> None:
    """The read pool's reset on release: no statement. asyncpg's default sends one more
    (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``), a second round trip for
    every read round. This pool only runs single autocommit SELECTs, so no session setting,
    advisory lock, cursor or LISTEN is ever left behind; asyncpg still rolls back an open
    transaction and drops listeners itself before calling this."""


class PostgresReader:
    """Product reads in shared rounds (``coalescing.Rounds``): the ids asked for while a read is in
    flight go in the next one, ``WHERE id = ANY(...)`` — one round trip for all of them, each
    answer read after its request arrived."""

    def __init__(self, pool: asyncpg.Pool, db: Database) -> None:
        self.pool = pool
        self._db = db
        self._products: Rounds[str, dict[str, SimpleNamespace]] = Rounds(self._read_products)

    @classmethod
    async def connect(cls, dsn: str, db: Database) -> PostgresReader:
        # Through a pooler no statement is prepared by name
        # (``storage.connecting.POOLED_CONNECT_ARGS``).
        cache = {} if db.pooler is None else {"statement_cache_size": 0}
        pool = await asyncpg.create_pool(
            dsn, min_size=1, max_size=10, reset=_keep_as_is, **cache, **db.driver_options()
        )
        return cls(pool, db)

    async def key_columns(self) -> AsyncIterator[KeyColumns]:
        async with self.pool.acquire() as conn:
            async for columns in key_columns_postgresql(conn):
                yield columns

    async def texts(self) -> AsyncIterator[list[Text]]:
        async with self.pool.acquire() as conn:
            async for partition in texts_postgresql(conn):
                yield partition

    async def changes(self, seq: int, product_id: str, limit: int) -> list[KeyRow]:
        with self._db.reachability.waiting():
            rows = await self.pool.fetch(CHANGES_POSTGRESQL, seq, product_id, limit, 0)
        return [KeyRow(*row) for row in rows]

    async def count_active(self) -> int:
        with self._db.reachability.waiting():
            return int(await self.pool.fetchval(COUNT_ACTIVE_POSTGRESQL))

    async def list_items(self, ids: list[str]) -> list[ListRow]:
        with self._db.reachability.waiting():
            rows = await self.pool.fetch(ITEMS_POSTGRESQL, ids)
        return [ListRow(*row) for row in rows]

    async def search(
        self, words: list[str], category: str | None, sort: str, limit: int, offset: int
    ) -> tuple[int, list[SimpleNamespace]]:
        page, count = search_statements("postgresql", sort, category is not None)
        values = search_values("postgresql", words, category, limit, offset)
        with self._db.reachability.waiting():
            async with (
                self.pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read"),
            ):
                total = int(await conn.fetchval(count.sql, *count.arguments(values)))
                rows = await conn.fetch(page.sql, *page.arguments(values)) if offset < total else []
        return total, [SimpleNamespace(**dict(row)) for row in rows]

    async def search_ids(self, words: list[str]) -> list[str]:
        statement = search_ids_statement("postgresql")
        values = {"match": search_repository.search_match("postgresql", words)}
        with self._db.reachability.waiting():
            rows = await self.pool.fetch(statement.sql, *statement.arguments(values))
        return [row[0] for row in rows]

    async def _read_products(self, ids: list[str]) -> dict[str, SimpleNamespace]:
        with self._db.reachability.waiting():
            rows = await self.pool.fetch(PRODUCTS_POSTGRESQL, list(set(ids)))
        return {row["id"]: SimpleNamespace(**dict(row)) for row in rows}

    async def product(self, product_id: str) -> SimpleNamespace | None:
        found, _ = await self._products.join(product_id)
        return found.get(product_id)

    async def key(self, key_hash: str) -> SimpleNamespace | None:
        with self._db.reachability.waiting():
            row = await self.pool.fetchrow(KEY_POSTGRESQL, key_hash)
        return None if row is None else SimpleNamespace(**dict(row))

    async def close(self) -> None:
        try:
            await self.pool.close()
        except (TimeoutError, OSError):  # a connection cut off while it closed: drop them all
            self.pool.terminate()
