"""The SQLite batch writer: a batch of many small writes in one transaction, taking turns with
the batches of the other processes on the same file (``Database.write_batch``)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import StaticPool

from commerce_api.storage.inline import InlineConnection
from commerce_api.storage.sqlite import BEGIN_IMMEDIATE, configure_sqlite_engine


class SQLiteBatchWriter:
    """One connection of the standard library's driver on the file, and the thread that
    begins and ends its transactions: one batch at a time."""

    def __init__(
        self,
        url: URL,
        *,
        json_serializer: Callable[[Any], str],
        busy_seconds: float,
        autocheckpoint: bool = True,
    ) -> None:
        assert url.database is not None
        self._turn = _WriterTurn(url.database)
        self.engine = create_engine(
            url.set(drivername="sqlite+pysqlite"),
            poolclass=StaticPool,  # one connection: a process writes one batch at a time
            json_serializer=json_serializer,
            connect_args={
                "timeout": busy_seconds,
                "check_same_thread": False,  # the loop and the thread take turns, never at once
            },
        )
        configure_sqlite_engine(self.engine, busy_seconds, autocheckpoint)
        # The batch thread: BEGIN IMMEDIATE, COMMIT and ROLLBACK, which may block, run on it.
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-batch")

    @asynccontextmanager
    async def batch(self, wait: float) -> AsyncIterator[InlineConnection]:
        """A batch's transaction, begun within ``wait`` seconds (the turn among the processes,
        then SQLite's lock), else "database is locked"."""
        loop = asyncio.get_running_loop()
        engine, io, turn = self.engine, self.io, self._turn
        begin = _Begin(engine, turn)
        begun = loop.run_in_executor(io, begin.run)
        try:
            inline = await asyncio.wait_for(asyncio.shield(begun), max(wait, 0.001))
        except BaseException as exc:
            begin.abandon(io)
            begun.add_done_callback(_retrieved)  # a BEGIN that fails later, unheard: no warning
            if isinstance(exc, TimeoutError):
                raise sqlite3.OperationalError("database is locked") from None
            raise
        assert inline is not None  # None only once abandoned
        # The end of the transaction is shielded: a caller cancelled while it waits for the
        # batch thread must not cancel the work item before the thread takes it up (a
        # cancelled concurrent future is skipped), or the transaction would stay open with
        # SQLite's write lock and the writers' turn held, every other process's (and every
        # other Database's) batch waiting the busy timeout for them, until this Database's
        # next batch rolled it back. The COMMIT (or ROLLBACK) runs; the caller still sees its
        # cancellation.
        try:
            yield InlineConnection(inline)
        except BaseException:
            await asyncio.shield(loop.run_in_executor(io, _end, inline, False, turn))
            raise
        await asyncio.shield(loop.run_in_executor(io, _end, inline, True, turn))

    async def dispose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self.io, self.engine.dispose)
        self.io.shutdown(wait=True)
        self._turn.close()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _WriterTurn:
    """Whose turn it is to write a batch, among the processes on one SQLite file.

    Without it, a process whose ``BEGIN IMMEDIATE`` finds the file locked by another process's
    batch waits in SQLite's busy handler, which polls with sleeps growing to 100 ms: the file
    stands idle between the other batch's COMMIT and the next poll, and an unlucky process
    waits for seconds. An exclusive ``flock`` on a file beside the database is a queue the
    kernel wakes the moment the holder lets go (``flock`` and SQLite's POSIX locks never
    interfere). Only the batch writers take it; any other writer still meets them at SQLite's
    own lock, as before. The lock goes with the process if it dies; the file stays (removing
    it while another process holds it would let a third lock a new file).
    """

    def __init__(self, database_path: str) -> None:
        self._fd = os.open(f"{database_path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)

    def take(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def give_back(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


class _Begin:
    """A batch's ``BEGIN IMMEDIATE`` after its turn, run on the batch thread, which its caller
    may give up waiting for (the busy timeout, or a cancellation). Whichever side comes second
    ends what the thread began, so the turn and the write lock are never left held: the thread
    if the caller gave up first, else the caller, on the same thread, before any later batch.
    """

    def __init__(self, engine: Engine, turn: _WriterTurn) -> None:
        self._engine = engine
        self._turn = turn
        self._guard = threading.Lock()
        self._abandoned = False
        self._begun: Connection | None = None

    def run(self) -> Connection | None:
        self._turn.take()
        try:
            conn = self._engine.connect()
            try:
                _roll_back_leftover(conn)
                conn.execution_options(**{BEGIN_IMMEDIATE: True}).begin()
            except BaseException:
                conn.close()
                raise
        except BaseException:
            self._turn.give_back()
            raise
        with self._guard:
            if not self._abandoned:
                self._begun = conn
                return conn
        _end(conn, False, self._turn)
        return None  # nobody waits for it any more

    def abandon(self, io: ThreadPoolExecutor) -> None:
        with self._guard:
            self._abandoned = True
            begun, self._begun = self._begun, None
        if begun is not None:
            io.submit(_end, begun, False, self._turn)


def _end(conn: Connection, commit: bool, turn: _WriterTurn) -> None:
    try:
        if commit:
            conn.commit()
        else:
            conn.rollback()
    finally:
        try:
            _roll_back_leftover(conn)
        finally:
            try:
                conn.close()
            finally:
                turn.give_back()


def _roll_back_leftover(conn: Connection) -> None:
    """SQLite keeps a transaction open after a COMMIT that failed (a deferred constraint, a
    full disk): end it, or the next batch's BEGIN fails."""
    raw = conn.connection.dbapi_connection
    if raw is not None and raw.in_transaction:
        raw.execute("ROLLBACK")
