"""Database access: one async engine per process, on SQLite or PostgreSQL.

On SQLite, ``sqlite`` sets up every connection (WAL, ``BEGIN IMMEDIATE`` for writes) and
``sqlite_writer`` runs the batches of ``Database.write_batch``.

The request (or the job) owns the transaction: ``async with db.write() as conn`` commits on
success and rolls back on any exception. Services and repositories never commit. With
``deadlines`` (the app's, from the settings), no wait for the database is unbounded
(``storage.deadlines``; a PostgreSQL transaction's, ``storage.watched``).

The URLs it takes are ``storage.urls``; what a committed write changed is told to the process's
caches through ``storage.commit_listeners``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from commerce_api.core import tracing
from commerce_api.storage import commit_listeners
from commerce_api.storage.checkpoints import WalCheckpointer
from commerce_api.storage.connecting import SERVER_SETTINGS, ping_when_idle, postgres_connect_args
from commerce_api.storage.deadlines import (
    UNBOUNDED_SQLITE_BUSY_SECONDS,
    Deadlines,
    Reachability,
    milliseconds,
)
from commerce_api.storage.executor import CHANGED, json_text
from commerce_api.storage.executor import Executor as Executor
from commerce_api.storage.sqlite import BEGIN_IMMEDIATE, BUSY_TIMEOUT_MS, configure_sqlite_engine
from commerce_api.storage.sqlite_writer import SQLiteBatchWriter
from commerce_api.storage.urls import UnsupportedDatabaseURL as UnsupportedDatabaseURL
from commerce_api.storage.urls import async_url as async_url
from commerce_api.storage.urls import asyncpg_dsn, pooler_of
from commerce_api.storage.watched import watched
from commerce_api.storage.writers_queue import WritersQueue

_MIGRATION_LOCK_ID = 7_310_420_113  # arbitrary; serialises concurrent `migrate` on PostgreSQL


class Database:
    """``deadlines``: how long the service waits for the database (``storage.deadlines``); the
    app passes the settings' (``app.services``). Without them (operator tools, tests), waits are
    unbounded, but for SQLite's busy timeout of 30 s.

    ``listen_url``: where the change notifications are listened for (``freshness``), when
    ``url`` goes through a pooler (``?pooler=pgbouncer``): LISTEN needs a session of its own,
    which only a direct connection to PostgreSQL gives. Without it, a pooled database has no
    listener (every request then reads the change stamps; nothing is cached).

    ``background_checkpoints`` (SQLite; the serving process's): a thread checkpoints the
    write-ahead log while the process writes little, its commits only past a larger threshold
    (``storage.checkpoints``)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        deadlines: Deadlines | None = None,
        listen_url: str | None = None,
        background_checkpoints: bool = False,
    ) -> None:
        self.url = async_url(url)
        self.backend = self.url.get_backend_name()
        self.pooler = pooler_of(url) if self.backend == "postgresql" else None
        direct = listen_url if self.pooler is not None else url
        # The DSN of the listening connection (asyncpg's), or None: do not listen.
        self.listen_dsn: str | None = None if direct is None else asyncpg_dsn(async_url(direct))
        self.deadlines = deadlines
        self._transaction_seconds = None if deadlines is None else deadlines.transaction
        # Bounded waits fail at once for a moment after one ran out (``deadlines``).
        self.reachability = Reachability()
        # The database file on SQLite (for the connections made beside the engine), else None.
        self.sqlite_path: str | None = self.url.database if self.is_sqlite else None
        # SQLite: do its commits checkpoint at SQLite's 1,000 pages (else only past 4,000).
        self._autocheckpoint = not background_checkpoints
        self._checkpointer: WalCheckpointer | None = None
        self.busy_seconds = UNBOUNDED_SQLITE_BUSY_SECONDS if deadlines is None else deadlines.lock
        write_options: dict[str, Any] = {BEGIN_IMMEDIATE: True}
        if self.sqlite_path is not None:
            Path(self.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: AsyncEngine = create_async_engine(
                self.url,
                connect_args={"timeout": self.busy_seconds},
                json_serializer=json_text,
            )
            configure_sqlite_engine(
                self.engine.sync_engine, self.busy_seconds, self._autocheckpoint
            )
            write_options[BUSY_TIMEOUT_MS] = milliseconds(self.busy_seconds)
            if background_checkpoints:
                self._checkpointer = WalCheckpointer(self.sqlite_path)
                self._checkpointer.count_commits(self.engine.sync_engine)
                self._checkpointer.start()
        else:
            connect_args = postgres_connect_args(self.pooler is not None, deadlines)
            bounded: dict[str, Any] = {"connect_args": connect_args}
            if deadlines is not None and deadlines.transaction is not None:
                bounded["pool_timeout"] = deadlines.transaction
            self.engine = create_async_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size,
                json_serializer=json_text,
                **bounded,
            )
            ping_when_idle(self.engine)
        self._write_engine = self.engine.execution_options(**write_options)
        self._batch_writer: SQLiteBatchWriter | None = None  # SQLite: see write_batch
        self._writers = WritersQueue()  # SQLite: see write
        self._url_key = self.url.render_as_string(hide_password=False)

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"

    def driver_options(self) -> dict[str, Any]:
        """asyncpg's connect arguments for the process's other PostgreSQL connections (the read
        pool, the listener): the same deadlines as the engine's (through a pooler, without the
        session settings, which the pooler refuses: they are set on the role)."""
        options = {} if self.deadlines is None else self.deadlines.pool_options()
        if self.pooler is not None:
            options.pop("server_settings", None)
        return options

    @property
    def dsn(self) -> str:
        """The PostgreSQL URL for asyncpg's own connections (``readpath.reader``)."""
        return asyncpg_dsn(self.url)

    async def unapplied_settings(self) -> dict[str, str]:
        """Through a pooler, the ``SERVER_SETTINGS`` PostgreSQL does not have (the setting and
        its value there): they must be set on the role or the database (docs/deployment.md).
        Direct connections send them at connect: nothing is missing."""
        if self.pooler is None:
            return {}
        async with self.engine.connect() as conn:
            found = {
                name: str(await conn.scalar(text("SELECT current_setting(:name)"), {"name": name}))
                for name in SERVER_SETTINGS
            }
        return {name: value for name, value in found.items() if value != SERVER_SETTINGS[name]}

    def _watched(
        self, engine: AsyncEngine, *, begin: bool, bounded: bool, by: float | None = None
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """A PostgreSQL connection, in a transaction committed at the end when ``begin``: held
        to the transaction's deadline (``storage.watched``) when ``bounded`` and there is one."""
        seconds = self._transaction_seconds
        if not bounded or seconds is None or self.deadlines is None:
            return engine.begin() if begin else engine.connect()
        return watched(engine, self.deadlines, seconds, self.reachability, begin=begin, by=by)

    @asynccontextmanager
    async def read(self, *, bounded: bool = True) -> AsyncIterator[AsyncConnection]:
        """A connection for reads; its transaction is rolled back at the end. On PostgreSQL
        within the transaction deadline unless not ``bounded`` (a read of the whole catalogue)."""
        if self.is_sqlite:
            async with self.engine.connect() as conn:
                yield conn
            return
        async with self._watched(self.engine, begin=False, bounded=bounded) as conn:
            yield conn

    @tracing.traced_transaction  # in a span inside a traced request or delivery (core.tracing)
    @asynccontextmanager
    async def write(
        self, *, bounded: bool = True, by: float | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed when the block succeeds, rolled back otherwise.

        On SQLite the writers of a process queue on one lock before their ``BEGIN IMMEDIATE``
        (SQLite admits one writer at a time): each starts the moment the one before it commits,
        where SQLite's busy handler would poll with sleeps of up to 100 ms. A write transaction
        must not wait for another one of the same process.

        With deadlines (``bounded``, the default), the transaction ends by its deadline: on
        PostgreSQL its connection is terminated then; on SQLite the wait for the file's lock,
        in the process's queue and then for another process, ends by it ("database is
        locked", or :class:`DatabaseTimeout`). ``by``: a deadline of the caller's (the loop's
        time), if sooner: its request's, begun before this transaction (``group_commit``).
        """
        if not self.is_sqlite:
            transaction = self._watched(self._write_engine, begin=True, bounded=bounded, by=by)
            async with transaction as conn:
                conn.info.pop(CHANGED, None)  # a failed transaction's notes, left behind
                yield conn
                # Not on an error: a connection lost meanwhile has no info left to read.
                changed: set[str] | None = conn.info.pop(CHANGED, None)
            if changed:  # committed: this process's caches learn it before the caller goes on
                commit_listeners.tell(self._url_key, changed)
            return
        deadline = sooner(self.deadline(bounded), by)
        async with self._writers.turn(deadline):
            engine = self._write_engine
            if deadline is not None:
                left = deadline - asyncio.get_running_loop().time()
                if left < self.busy_seconds:  # waited in the queue: wait less for the file
                    engine = engine.execution_options(**{BUSY_TIMEOUT_MS: milliseconds(left)})
            async with engine.begin() as conn:
                yield conn

    def deadline(self, bounded: bool = True) -> float | None:
        """The loop's time by which a write begun now must be done (PostgreSQL) or have its
        lock (SQLite), if any: ``Deadlines.transaction`` from now."""
        if not bounded or self._transaction_seconds is None:
            return None
        return asyncio.get_running_loop().time() + self._transaction_seconds

    def on_commit(self, callback: Callable[[set[str]], None]) -> Callable[[], None]:
        """Call ``callback`` with what a committed PostgreSQL write transaction of this process
        changed (``freshness.touch``), through any ``Database`` of the same URL (the CLI
        and the app may each have one): read-your-writes for the process's caches, which learn
        of other processes' commits from PostgreSQL's notifications. Returns the undo."""
        return commit_listeners.listen(self._url_key, callback)

    @asynccontextmanager
    async def write_batch(self, by: float | None = None) -> AsyncIterator[Executor]:
        """A write transaction for a batch of many small writes (``group_commit``).

        On PostgreSQL, :meth:`write`. On SQLite the transaction holds the file's write lock from
        its ``BEGIN IMMEDIATE`` to its ``COMMIT``, so every other writer — the other processes too
        — waits for the whole batch: its statements run inline on the event loop (microseconds
        each, on a connection of the standard library's driver) instead of yielding between
        statements, as the async driver would, serving the process's other requests while the lock
        is held. ``BEGIN IMMEDIATE`` (which may wait for another process) and the ``COMMIT`` (the
        fsync) still run on a thread of their own. The batches of the processes on one file take
        turns (``sqlite_writer``); one that waits longer than the busy timeout fails with SQLite's
        "database is locked". ``by``: as for :meth:`write`.
        """
        if not self.is_sqlite:
            async with self.write(by=by) as conn:
                yield conn
            return
        # In the queue of the process's writers (see write); the batch engine has one
        # connection, so this is also one batch at a time.
        deadline = sooner(self.deadline(), by)
        async with self._writers.turn(deadline):
            if self._batch_writer is None:
                self._batch_writer = SQLiteBatchWriter(
                    self.url,
                    json_serializer=json_text,
                    busy_seconds=self.busy_seconds,
                    autocheckpoint=self._autocheckpoint,
                )
                if self._checkpointer is not None:
                    self._checkpointer.count_commits(self._batch_writer.engine)
            wait = self.busy_seconds
            if deadline is not None:
                wait = min(wait, deadline - asyncio.get_running_loop().time())
            async with self._batch_writer.batch(wait) as conn:
                yield conn

    async def ping(self) -> None:
        async with self.read() as conn:  # within the deadline: /readyz never hangs
            await conn.execute(text("SELECT 1"))

    async def migrate(self) -> list[str]:
        """Apply pending migrations (safe to run from several processes at once); the
        revisions applied, oldest first."""
        from commerce_api.storage.migrations import upgrade_to_head

        async with self.write(bounded=False) as conn:
            if not self.is_sqlite:
                # A migration may wait for another process's, and rewrite a large table.
                for setting in _UNBOUNDED_SETTINGS:
                    await conn.execute(text(f"SET LOCAL {setting} = 0"))
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID}
                )
            return await conn.run_sync(upgrade_to_head)

    async def dispose(self) -> None:
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.stop)
            self._checkpointer = None
        await self.engine.dispose()
        if self._batch_writer is not None:
            await self._batch_writer.dispose()
            self._batch_writer = None


_UNBOUNDED_SETTINGS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


def sooner(deadline: float | None, other: float | None) -> float | None:
    """The sooner of two deadlines (None: none)."""
    return other if deadline is None else deadline if other is None else min(deadline, other)
