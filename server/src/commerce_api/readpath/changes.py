"""Version stamps for cached data, and how each process learns they changed.

A write that changes cached data calls :func:`bump` inside its transaction: a new random value
for ``auth_version`` (keys) or ``catalog_version`` (the product list) in ``instance_values``.

- SQLite (one file, possibly several processes): ``PRAGMA data_version`` on a private read-only
  connection tells, in about a microsecond, whether *any* other connection committed since the
  last look; only then are the two stamps read again. Every request checks, so a revocation is
  seen by the very next request in every process.
- PostgreSQL: the stamps are read for each request (one indexed round trip, shared by the
  requests waiting at the same moment: see ``rounds.py``). A LISTEN/NOTIFY feed would save it,
  but a notification arrives *after* the commit, so the next request — even the writer's own —
  could still see the old data; exactness wins.
"""

from __future__ import annotations

import logging
import mmap
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.instance import set_value
from commerce_api.rounds import Rounds
from commerce_api.wal_index import HEADER_BYTES

logger = logging.getLogger("commerce_api.readpath")

AUTH = "auth_version"
CATALOG = "catalog_version"


@dataclass(frozen=True, slots=True)
class Versions:
    auth: str | None
    catalog: str | None
    # SQLite's ``PRAGMA data_version`` when these were read: it changes with every commit of
    # any other connection, so data read under one value is current until it changes.
    # None on PostgreSQL (no such cheap signal).
    data_version: int | None = None


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
    """Re-reads the stamps only when another connection committed.

    Two signals, the cheap one first: the WAL-index header, read from the ``-shm`` file's
    shared memory (no system call: ~0.2 µs), changes with every commit of any connection of
    any process; only when it changed is ``PRAGMA data_version`` asked (~3-6 µs under load,
    it takes the WAL's read locks), and only when that changed are the stamps read. The header
    is taken *before* the exact check, so a commit landing in between makes the next call look
    again — never the other way round. Without the shared memory (it cannot be mapped) every
    call asks ``PRAGMA data_version``.

    ``wal_index`` maps the header (``Database.wal_index``, which owns the mapping: see
    ``wal_index.py`` for why its descriptor must outlive every connection); it is asked once,
    after the first read has opened the WAL.
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        wal_index: Callable[[], mmap.mmap | None] | None = None,
    ) -> None:
        self._conn = connection
        self._wal_index = wal_index
        self._shm: mmap.mmap | None = None
        self._header: bytes | None = None
        self._data_version: int | None = None
        self._versions: Versions | None = None

    async def current(self) -> Versions | None:
        shm = self._shm
        header = None
        if shm is not None:
            header = shm[:HEADER_BYTES]
            if header == self._header and self._versions is not None:
                return self._versions
        try:
            data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if data_version != self._data_version or self._versions is None:
                stamps = dict(self._conn.execute(_SELECT_STAMPS).fetchall())
                self._versions = Versions(stamps.get(AUTH), stamps.get(CATALOG), data_version)
                self._data_version = data_version
        except sqlite3.Error:
            logger.exception("could not read the change stamps")
            self._header = None
            return None
        if self._wal_index is not None:
            self._shm = self._wal_index()  # the connection has opened the WAL now
            self._wal_index = None
        self._header = header
        return self._versions

    def close(self) -> None:
        self._shm = None  # its owner unmaps it
        self._conn.close()


class PostgresTracker:
    """Reads the stamps for every request, in shared rounds (``rounds.Rounds``): a request
    gets a read that started after it arrived — exact in every process — and one round trip
    serves every request that was waiting for it."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._rounds: Rounds[None, Versions] = Rounds(self._read)

    async def _read(self, _callers: list[None]) -> Versions:
        stamps = dict(await self._pool.fetch(_SELECT_STAMPS))
        return Versions(stamps.get(AUTH), stamps.get(CATALOG))

    async def current(self) -> Versions | None:
        try:
            versions, _ = await self._rounds.join(None)
        except Exception:
            logger.exception("could not read the change stamps")
            return None
        return versions
