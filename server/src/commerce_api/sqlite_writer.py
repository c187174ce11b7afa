"""Group commit for SQLite: many write jobs, one transaction, one fsync.

Every commit with ``synchronous=FULL`` waits for an fsync (~0.5 ms on an SSD, far more on a
busy disk), and SQLite has one writer at a time, so one commit per request caps writes at a
few hundred a second whatever the CPU. :class:`SQLiteWriter` runs write *jobs* — plain
functions of a ``sqlite3.Connection`` — in batches on its own connection:

- It takes every job waiting, opens one ``BEGIN IMMEDIATE`` transaction, runs each job inside
  its own ``SAVEPOINT`` (a job that raises is rolled back to it, alone), then ``COMMIT`` s.
- A job's result is handed back only after that commit has returned: a caller never sees
  success for a change that is not durable. If the commit fails, every job of the batch gets
  the error and nothing of the batch is kept.
- While a batch commits, the next requests queue up and form the next batch, so the batch
  grows with the load and an fsync is shared by all the jobs it carries.

Where the work runs: ``BEGIN IMMEDIATE`` (which may wait for another process's write lock) and
``COMMIT`` (the fsync) on a thread of their own, so the event loop goes on serving meanwhile;
the jobs themselves inline on the event loop — their statements take microseconds each, and a
thread running them would fight the loop for the GIL around every statement (measured: ~25 µs
a statement that way, against ~5 µs inline).

Durability is unchanged: the WAL is fsynced at every commit (``synchronous=FULL``), exactly as
for one job per transaction. Other processes (and the engine's own connections) take the same
file lock, so the writer is one more writer among them, serialised by SQLite.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from commerce_api.db import SQLITE_BUSY_TIMEOUT_SECONDS, configure_sqlite_connection

logger = logging.getLogger("commerce_api.db")

T = TypeVar("T")
MAX_BATCH = 256


@dataclass(slots=True)
class _Job(Generic[T]):
    run: Callable[[sqlite3.Connection], T]
    future: asyncio.Future[T]


class SQLiteWriter:
    def __init__(self, path: str) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._pending: list[_Job[Any]] = []
        self._runner: asyncio.Task[None] | None = None
        self._cancelled = False
        self.batches = 0  # for tests and the benchmark: how many commits carried the jobs
        self.jobs = 0

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job`` in the next batch; its result once the batch is committed.

        The job must not commit, roll back or change the connection's settings; it may raise,
        which undoes its own statements only. It runs on the event loop: it must be quick.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append(_Job(job, future))
        if self._runner is None:
            self._runner = asyncio.create_task(self._drain(), name="sqlite-writer")
        # Not cancelled with the caller: the job may already be running or committed.
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Finish the jobs already submitted, then release the connection and the thread."""
        if self._runner is not None:
            await asyncio.shield(self._runner)
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._io, conn.close)
        self._io.shutdown(wait=True)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # the loop and the I/O thread take turns, never at once
            timeout=SQLITE_BUSY_TIMEOUT_SECONDS,
        )
        configure_sqlite_connection(conn)  # the engine's settings, once (db.py)
        return conn

    def _begin(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        if self._conn.in_transaction:  # left open by a batch that was interrupted
            self._conn.execute("ROLLBACK")
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    async def _on_thread(self, call: Callable[..., T], *args: Any) -> T:
        """Run ``call`` on the writer's thread and wait for it *whatever happens*: if this task
        is cancelled meanwhile (the event loop is closing), the call goes on in the thread, and
        its outcome — did the COMMIT happen? — must be known before anyone is answered. The
        cancellation is re-raised once the batch is settled (see ``_drain``)."""
        future = asyncio.get_running_loop().run_in_executor(self._io, call, *args)
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._cancelled = True
                    return future.result()
                self._cancelled = True

    async def _drain(self) -> None:
        self._cancelled = False
        try:
            while self._pending and not self._cancelled:
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                outcomes: list[tuple[Any, BaseException | None]] = []
                conn: sqlite3.Connection | None = None
                try:
                    conn = await self._on_thread(self._begin)
                    outcomes = [_run_job(conn, job) for job in batch]
                    await self._on_thread(conn.execute, "COMMIT")
                except Exception as exc:
                    logger.exception("a batch of %d writes failed; none of it was kept", len(batch))
                    if conn is not None and conn.in_transaction:
                        await self._on_thread(_rollback, conn)
                    outcomes = [(None, exc)] * len(batch)
                finally:
                    self.batches += 1
                    self.jobs += len(batch)
                    for job, (result, error) in zip(batch, outcomes, strict=False):
                        _settle(job.future, result, error)
                    for job in batch:  # only if a job raised past Exception (KeyboardInterrupt)
                        _settle(job.future, None, RuntimeError("the writer stopped"))
            if self._cancelled:
                raise asyncio.CancelledError
        finally:
            self._runner = None
            for job in self._pending:  # only after a cancellation: nobody will run them
                _settle(job.future, None, RuntimeError("the writer stopped"))
            self._pending.clear()


def _run_job(conn: sqlite3.Connection, job: _Job[Any]) -> tuple[Any, BaseException | None]:
    conn.execute("SAVEPOINT job")
    try:
        result = job.run(conn)
    except Exception as exc:  # the job's own failure: undo it alone
        conn.execute("ROLLBACK TO job")
        conn.execute("RELEASE job")
        return None, exc
    conn.execute("RELEASE job")
    return result, None


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        logger.exception("rollback failed")


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
