"""Single-row reads for the hot path, without the ORM's per-query cost.

SQLite: the standard library's sqlite3, called inline on a private read-only connection — a
primary-key lookup takes microseconds, less than handing it to a thread would (WAL readers
never wait for writers). PostgreSQL: an asyncpg pool. The SQL is the same on both.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Protocol

import asyncpg

_PRODUCT = (
    "SELECT id, name, description, price_minor, category, created_at, inventory_count, "
    "updated_at FROM products WHERE id = {0} AND archived_at IS NULL"
)
_KEY = (
    "SELECT k.id, k.account_id, k.role, k.key_hash, k.revoked_at, a.tier FROM api_keys k "
    "LEFT JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = {0}"
)


class Reader(Protocol):
    async def product(self, product_id: str) -> SimpleNamespace | None: ...

    async def key(self, key_hash: str) -> SimpleNamespace | None: ...

    async def close(self) -> None: ...


def _sqlite_time(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class SQLiteReader:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection

    async def product(self, product_id: str) -> SimpleNamespace | None:
        row = self._conn.execute(_PRODUCT.format("?"), (product_id,)).fetchone()
        if row is None:
            return None
        record = SimpleNamespace(**dict(row))
        record.created_at = _sqlite_time(record.created_at)
        record.updated_at = _sqlite_time(record.updated_at)
        return record

    async def key(self, key_hash: str) -> SimpleNamespace | None:
        row = self._conn.execute(_KEY.format("?"), (key_hash,)).fetchone()
        if row is None:
            return None
        record = SimpleNamespace(**dict(row))
        record.revoked_at = _sqlite_time(record.revoked_at)
        return record

    async def close(self) -> None:
        self._conn.close()


def open_sqlite(path: str) -> sqlite3.Connection:
    """A read-only, autocommit connection (each statement sees the latest commit)."""
    conn = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class PostgresReader:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def connect(cls, dsn: str) -> PostgresReader:
        return cls(await asyncpg.create_pool(dsn, min_size=1, max_size=10))

    async def product(self, product_id: str) -> SimpleNamespace | None:
        row = await self.pool.fetchrow(_PRODUCT.format("$1"), product_id)
        return None if row is None else SimpleNamespace(**dict(row))

    async def key(self, key_hash: str) -> SimpleNamespace | None:
        row = await self.pool.fetchrow(_KEY.format("$1"), key_hash)
        return None if row is None else SimpleNamespace(**dict(row))

    async def close(self) -> None:
        await self.pool.close()
