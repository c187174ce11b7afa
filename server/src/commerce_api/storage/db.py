"""Database access: one async engine per process, on SQLite or PostgreSQL.

SQLite runs in WAL mode with a busy timeout. Python's sqlite3 module would open transactions
lazily and as DEFERRED, so two writers can both read and then fail with "database is locked"
when they upgrade; we take over transaction control instead and start write transactions with
``BEGIN IMMEDIATE``, which makes concurrent writers queue on the busy timeout. Reads use a plain
``BEGIN`` and, thanks to WAL, never wait for writers.

The request (or the job) owns the transaction: ``async with db.write() as conn`` commits on
success and rolls back on any exception. Services and repositories never commit.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import orjson
from sqlalchemy import Connection, Engine, Table, bindparam, create_engine, event, text
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, CursorResult, Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.base import Executable

SQLITE_BUSY_TIMEOUT_SECONDS = 30
_IMMEDIATE = "commerce_begin_immediate"
_MIGRATION_LOCK_ID = 7_310_420_113  # arbitrary; serialises concurrent `migrate` on PostgreSQL


class Executor(Protocol):
    """What a batch writes through (``Database.write_batch``): an ``AsyncConnection``, or on
    SQLite a connection whose statements run inline on the event loop."""

    @property
    def dialect(self) -> Dialect: ...

    async def execute(self, statement: Executable, parameters: Any = None) -> CursorResult[Any]: ...

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any: ...

    @property
    def info(self) -> dict[Any, Any]: ...


# Where a write transaction records what it changed (``freshness.touch``) for the
# process's own caches, told at its commit (``Database.on_commit``). The key lives in the
# DBAPI connection's ``info``, which outlives the checkout: ``write`` clears it either way.
CHANGED = "commerce_changed"
# Per database URL, what this process's caches want told at such a commit (``on_commit``).
_COMMIT_LISTENERS: dict[str, list[Callable[[set[str]], None]]] = {}


async def insert_rows(conn: Executor, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) in one executemany.

    Hand-written because it is on the order path's hot loop: SQLAlchemy's executemany runs every
    value of every row through its general parameter machinery (measured: ~2 ms for a batch of
    16 orders' rows), while this converts them with the very same per-column bind processors
    of the connection's dialect, looked up once per table and column set.
    """
    if not rows:
        return
    sql, converters = _compiled_insert(table, conn.dialect, tuple(rows[0]))
    await conn.exec_driver_sql(sql, [_converted(row, converters) for row in rows])


async def insert_returning(
    conn: Executor,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    conflict: Sequence[str],
    returning: Sequence[str],
) -> list[Any]:
    """``INSERT … VALUES (…), (…) ON CONFLICT (conflict) DO NOTHING RETURNING returning`` for
    ``rows`` (dicts with the same keys), one statement; the rows inserted.

    Compiled once per row count, each value a ``bindparam`` named here (``r<row>_<column>``,
    looked up, never parsed): ``Compiled.positiontup`` gives their order, and the values are
    converted as :func:`insert_rows` converts them. SQLAlchemy's own executemany with
    RETURNING ("insertmanyvalues") sends the same statement but costs ~25% more per batch on
    the order path (docs/decisions.md, "Storage on public interfaces").
    """
    if not rows:
        return []
    names = tuple(rows[0])
    cache_key = (table.name, id(conn.dialect), names, len(rows), tuple(conflict), tuple(returning))
    found = _MULTI_INSERTS.get(cache_key)
    if found is None:
        found = _MULTI_INSERTS[cache_key] = _compiled_multi_insert(
            conn, table, names, len(rows), conflict, returning
        )
    sql, slots = found
    params = []
    for index, column, convert in slots:
        value = rows[index][column]
        params.append(value if convert is None or value is None else convert(value))
    result = await conn.exec_driver_sql(sql, tuple(params))
    return list(result.all())


def _compiled_multi_insert(
    conn: Executor,
    table: Table,
    names: tuple[str, ...],
    count: int,
    conflict: Sequence[str],
    returning: Sequence[str],
) -> tuple[str, list[tuple[int, str, Any]]]:
    """The SQL of :func:`insert_returning` for ``count`` rows, and for each of its positional
    parameters: the row, the column and the column's bind processor."""
    dialect = conn.dialect
    slot_of: dict[str, tuple[int, str, Any]] = {}
    values = []
    for index in range(count):
        row = {}
        for name in names:
            key = f"r{index}_{name}"
            column_type = table.c[name].type
            slot_of[key] = (index, name, column_type.dialect_impl(dialect).bind_processor(dialect))
            row[name] = bindparam(key, type_=column_type)
        values.append(row)
    statement = (
        dialect_insert(conn)(table)
        .values(values)
        .on_conflict_do_nothing(index_elements=list(conflict))
        .returning(*(table.c[name] for name in returning))
    )
    compiled = statement.compile(dialect=dialect)
    assert compiled.positiontup is not None, "a positional paramstyle (qmark, numeric_dollar)"
    return compiled.string, [slot_of[key] for key in compiled.positiontup]


_MULTI_INSERTS: dict[tuple[Any, ...], tuple[str, list[tuple[int, str, Any]]]] = {}


async def execute_many(
    conn: Executor, statement: Executable, rows: Sequence[Mapping[str, Any]]
) -> None:
    """``statement`` (a module-level constant with named bind parameters) once per row, in one
    executemany, with its parameters converted as :func:`insert_rows` converts columns."""
    if not rows:
        return
    cache_key = (id(statement), id(conn.dialect))
    found = _STATEMENTS.get(cache_key)
    if found is None:
        compiled = statement.compile(dialect=conn.dialect)  # type: ignore[attr-defined]
        order = compiled.positiontup
        assert order is not None, "a positional paramstyle (qmark, numeric_dollar)"
        converters = [
            (
                name,
                compiled.binds[name].type.dialect_impl(conn.dialect).bind_processor(conn.dialect),
            )
            for name in order
        ]
        found = _STATEMENTS[cache_key] = (compiled.string, converters, statement)
    sql, converters, _ = found
    await conn.exec_driver_sql(sql, [_converted(row, converters) for row in rows])


def _converted(row: Mapping[str, Any], converters: list[tuple[str, Any]]) -> tuple[Any, ...]:
    values = []
    for name, convert in converters:
        value = row[name]
        values.append(value if convert is None or value is None else convert(value))
    return tuple(values)


# Keeps each statement alive with its entry: the key is its id().
_STATEMENTS: dict[tuple[int, int], tuple[str, list[tuple[str, Any]], Any]] = {}
_INSERTS: dict[tuple[str, int, tuple[str, ...]], tuple[str, list[tuple[str, Any]]]] = {}


def _compiled_insert(
    table: Table, dialect: Dialect, names: tuple[str, ...]
) -> tuple[str, list[tuple[str, Any]]]:
    cache_key = (table.name, id(dialect), names)
    found = _INSERTS.get(cache_key)
    if found is None:
        compiled = table.insert().compile(dialect=dialect, column_keys=list(names))
        order = compiled.positiontup
        assert order is not None, "a positional paramstyle (qmark, numeric_dollar)"
        converters = [
            (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in order
        ]
        found = _INSERTS[cache_key] = (compiled.string, converters)
    return found


def dialect_insert(conn: AsyncConnection | Executor) -> Any:
    """The backend's ``insert`` construct, which has ``on_conflict_do_nothing/update``."""
    if conn.dialect.name == "postgresql":
        return postgresql_insert
    return sqlite_insert


class UnsupportedDatabaseURL(ValueError):
    pass


def async_url(url: str) -> URL:
    """Map the contract's URLs (``sqlite:///…``, ``postgresql://…``) to our async drivers."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise UnsupportedDatabaseURL(f"not a database URL: {url!r}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise UnsupportedDatabaseURL("SQLite needs a file path, e.g. sqlite:///./commerce.db")
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in {"postgresql", "postgres"}:
        return parsed.set(drivername="postgresql+asyncpg")
    raise UnsupportedDatabaseURL(
        f"unsupported database {backend!r}: use sqlite:///path or postgresql://user@host/db"
    )


class Database:
    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = async_url(url)
        self.backend = self.url.get_backend_name()
        # The database file on SQLite (for the connections made beside the engine), else None.
        self.sqlite_path: str | None = self.url.database if self.is_sqlite else None
        if self.sqlite_path is not None:
            Path(self.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: AsyncEngine = create_async_engine(
                self.url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
                json_serializer=_json_text,
            )
            _configure_sqlite(self.engine)
        else:
            self.engine = create_async_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size,
                pool_pre_ping=True,
                json_serializer=_json_text,
            )
        self._write_engine = self.engine.execution_options(**{_IMMEDIATE: True})
        self._batch_engine: Engine | None = None  # SQLite: see write_batch
        self._batch_io: ThreadPoolExecutor | None = None
        self._batch_turn: _WriterTurn | None = None
        self._writers_lock = asyncio.Lock()
        self._writers_loop: asyncio.AbstractEventLoop | None = None
        self._url_key = self.url.render_as_string(hide_password=False)

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads; its transaction is rolled back at the end."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed when the block succeeds, rolled back otherwise.

        On SQLite the writers of a process queue on one lock before their ``BEGIN IMMEDIATE``
        (SQLite admits one writer at a time anyway): waiting there, each starts the moment the
        one before it commits, where SQLite's busy handler would poll with sleeps of up to
        100 ms. A write transaction must not wait for another one of the same process.
        """
        if not self.is_sqlite:
            async with self._write_engine.begin() as conn:
                conn.info.pop(CHANGED, None)
                try:
                    yield conn
                finally:
                    changed: set[str] | None = conn.info.pop(CHANGED, None)
            if changed:  # committed: this process's caches learn it before the caller goes on
                for callback in list(_COMMIT_LISTENERS.get(self._url_key, ())):
                    callback(changed)
            return
        async with self._writers(), self._write_engine.begin() as conn:
            yield conn

    def on_commit(self, callback: Callable[[set[str]], None]) -> Callable[[], None]:
        """Call ``callback`` with what a committed PostgreSQL write transaction of this process
        changed (``freshness.touch``), through any ``Database`` of the same URL (the CLI
        and the app may each have one): read-your-writes for the process's caches, which learn
        of other processes' commits from PostgreSQL's notifications. Returns the undo."""
        listeners = _COMMIT_LISTENERS.setdefault(self._url_key, [])
        listeners.append(callback)
        return lambda: listeners.remove(callback)

    def _writers(self) -> asyncio.Lock:
        """The lock the SQLite writers of this process queue on (one per event loop: a lock
        belongs to the loop it was first waited on in)."""
        loop = asyncio.get_running_loop()
        if self._writers_loop is not loop:
            self._writers_lock, self._writers_loop = asyncio.Lock(), loop
        return self._writers_lock

    @asynccontextmanager
    async def write_batch(self) -> AsyncIterator[Executor]:
        """A write transaction for a batch of many small writes (``group_commit``).

        On PostgreSQL, :meth:`write`. On SQLite the transaction holds the file's write lock
        from its ``BEGIN IMMEDIATE`` to its ``COMMIT``, so every other writer — the other
        processes too — waits for the whole batch: its statements run inline on the event loop
        (microseconds each, on a connection of the standard library's driver) instead of
        yielding to it between statements, as the async driver would, with every other request
        of the process served while the lock is held. ``BEGIN IMMEDIATE`` (which may wait for
        another process) and the ``COMMIT`` (the fsync) still run on a thread of their own.
        The batches of the processes on one file take turns (:class:`_WriterTurn`); one that
        waits longer than the busy timeout fails with SQLite's "database is locked".
        """
        if not self.is_sqlite:
            async with self.write() as conn:
                yield conn
            return
        # In the queue of the process's writers (see write); the batch engine has one
        # connection, so this is also one batch at a time.
        async with self._writers(), self._sqlite_batch() as conn:
            yield conn

    @asynccontextmanager
    async def _sqlite_batch(self) -> AsyncIterator[Executor]:
        loop = asyncio.get_running_loop()
        engine, io, turn = self._batch_writer()
        begin = _Begin(engine, turn)
        begun = loop.run_in_executor(io, begin.run)
        try:
            inline = await asyncio.wait_for(asyncio.shield(begun), SQLITE_BUSY_TIMEOUT_SECONDS)
        except BaseException as exc:
            begin.abandon(io)
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
            yield _InlineConnection(inline)
        except BaseException:
            await asyncio.shield(loop.run_in_executor(io, _end, inline, False, turn))
            raise
        await asyncio.shield(loop.run_in_executor(io, _end, inline, True, turn))

    def _batch_writer(self) -> tuple[Engine, ThreadPoolExecutor, _WriterTurn]:
        if self._batch_engine is None or self._batch_io is None or self._batch_turn is None:
            assert self.sqlite_path is not None
            self._batch_turn = _WriterTurn(self.sqlite_path)
            self._batch_engine = create_engine(
                self.url.set(drivername="sqlite+pysqlite"),
                poolclass=StaticPool,  # one connection: a process writes one batch at a time
                json_serializer=_json_text,
                connect_args={
                    "timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
                    "check_same_thread": False,  # the loop and the thread take turns, never at once
                },
            )
            _configure_sqlite(self._batch_engine)
            self._batch_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-batch")
        return self._batch_engine, self._batch_io, self._batch_turn

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def migrate(self) -> None:
        """Apply pending migrations (safe to run from several processes at once)."""
        from commerce_api.storage.migrations import upgrade_to_head

        async with self.write() as conn:
            if not self.is_sqlite:
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID}
                )
            await conn.run_sync(upgrade_to_head)

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._batch_engine is not None and self._batch_io is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._batch_io, self._batch_engine.dispose
            )
            self._batch_io.shutdown(wait=True)
            self._batch_engine = self._batch_io = None
        if self._batch_turn is not None:
            self._batch_turn.close()
            self._batch_turn = None


def _ensure_wal(cursor: Any) -> None:
    """Switch the file to WAL (a persistent setting) unless it already is.

    Changing the journal mode needs a moment of exclusive access and SQLite does not apply the
    busy timeout to it, so several processes opening a new file at once would see "database is
    locked". Retry for as long as the busy timeout would have waited.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_SECONDS
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
            if str(mode).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)  # runs on the driver's own thread, not the event loop
            delay = min(delay * 2, 0.2)


# After a checkpoint the WAL file is truncated to at most this size, so a burst of writes does
# not keep its space for ever (and a full disk can recover once the WAL is checkpointed).
SQLITE_JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
# Pages in the WAL that trigger an automatic checkpoint (SQLite's default, set explicitly).
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 1000


def configure_sqlite_connection(conn: Any) -> None:
    """The settings of every connection this process opens on the file (the engine's and the
    order writer's): ``conn`` is a DB-API connection or cursor. The file is in WAL mode already
    (see :func:`_ensure_wal`)."""
    # FULL: every commit is fsynced to the WAL, so a committed order survives power loss.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SECONDS * 1000}")
    conn.execute(f"PRAGMA journal_size_limit={SQLITE_JOURNAL_SIZE_LIMIT_BYTES}")
    conn.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}")


def _json_text(value: Any) -> str:
    """JSON columns' text: orjson (several times faster than the standard library's encoder,
    which SQLAlchemy would use; an order's event carries the whole order)."""
    return orjson.dumps(value).decode()


class _InlineConnection:
    """A synchronous connection that runs each statement at once, on the caller's thread."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect
        self.info = conn.info

    async def execute(self, statement: Executable, parameters: Any = None) -> CursorResult[Any]:
        return self._conn.execute(statement, parameters)

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any:
        return self._conn.exec_driver_sql(statement, parameters)


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
                conn.execution_options(**{_IMMEDIATE: True}).begin()
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


def _configure_sqlite(engine: AsyncEngine | Engine) -> None:
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module (see the module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        _ensure_wal(cursor)
        configure_sqlite_connection(cursor)
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
