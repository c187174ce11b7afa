"""Version stamps for cached data, and how each process learns they changed.

A write that changes cached data calls :func:`bump` inside its transaction: a new random value
for ``auth_version`` (keys) or ``catalog_version`` (the product list) in ``instance_values``.

- SQLite (one file, possibly several processes): ``PRAGMA data_version`` on a private read-only
  connection tells, in about a microsecond, whether *any* other connection committed since the
  last look; only then are the two stamps read again. Every request checks, so a revocation is
  seen by the very next request in every process.
- PostgreSQL: the stamps are read on each request (one indexed round trip). A LISTEN/NOTIFY
  feed would save it, but a notification arrives *after* the commit, so the next request — even
  the writer's own — could still see the old data; exactness wins.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Protocol

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.instance import set_value

logger = logging.getLogger("commerce_api.readpath")

AUTH = "auth_version"
CATALOG = "catalog_version"


@dataclass(frozen=True, slots=True)
class Versions:
    auth: str | None
    catalog: str | None


async def bump(conn: AsyncConnection, *names: str) -> None:
    """Mark cached data as changed, inside the caller's transaction."""
    for name in names:
        await set_value(conn, name, secrets.token_hex(8))


class ChangeTracker(Protocol):
    async def current(self) -> Versions | None:
        """The stamps now; None when they cannot be known (then trust no cache)."""
        ...


# Constant names, no input: not an injection vector.
_SELECT_STAMPS = f"SELECT name, value FROM instance_values WHERE name IN ('{AUTH}', '{CATALOG}')"  # noqa: S608


class SQLiteTracker:
    """Re-reads the stamps only when ``PRAGMA data_version`` says another connection committed."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection
        self._data_version: int | None = None
        self._versions: Versions | None = None

    async def current(self) -> Versions | None:
        try:
            data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if data_version != self._data_version or self._versions is None:
                stamps = dict(self._conn.execute(_SELECT_STAMPS).fetchall())
                self._versions = Versions(stamps.get(AUTH), stamps.get(CATALOG))
                self._data_version = data_version
        except sqlite3.Error:
            logger.exception("could not read the change stamps")
            return None
        return self._versions


class PostgresTracker:
    """Reads the stamps on every call: one indexed round trip, exact in every process."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def current(self) -> Versions | None:
        try:
            stamps = dict(await self._pool.fetch(_SELECT_STAMPS))
        except Exception:
            logger.exception("could not read the change stamps")
            return None
        return Versions(stamps.get(AUTH), stamps.get(CATALOG))
