"""An operator command's database (the CLI's but for ``serve`` and ``worker``): one connection
and its transactions, without the async engine. ``sqlalchemy.ext.asyncio`` imports the ORM,
which took longer to import than the rest of such a command's start; the repositories run on
these connections unchanged (:class:`~commerce_api.storage.executor.Executor`).

- SQLite: SQLAlchemy Core's engine on the standard library's ``sqlite3``, each connection set up
  as every one of the service's is (``storage.sqlite``: WAL, ``BEGIN IMMEDIATE`` for writes);
  statements run inline (``storage.inline``), as the batch writer's do.
- PostgreSQL: one asyncpg connection. Each Core statement is compiled for SQLAlchemy's asyncpg
  dialect, its values converted by its bind parameters' own processors and its columns' by
  their result processors (as ``storage.bulk`` and ``readpath`` do), rows given back as
  SQLAlchemy's are used (:class:`Row`); JSON has the codecs SQLAlchemy's dialect sets, and
  ``bulk.copy_rows`` its ``COPY`` on the asyncpg connection.

No migration is applied here: :meth:`revision` says where the database stands, and a caller
that finds it behind ``migrations.head_revision()`` migrates through ``Database.migrate``.
Waits are the operator tools' (``Database`` without deadlines): unbounded, but for SQLite's
busy timeout.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.sql.base import Executable

from commerce_api.storage.bulk import processor
from commerce_api.storage.connecting import POOLED_CONNECT_ARGS, SERVER_SETTINGS
from commerce_api.storage.deadlines import UNBOUNDED_SQLITE_BUSY_SECONDS
from commerce_api.storage.executor import Executor, json_text
from commerce_api.storage.inline import InlineConnection
from commerce_api.storage.sqlite import BEGIN_IMMEDIATE, configure_sqlite_engine
from commerce_api.storage.urls import async_url, asyncpg_dsn, pooler_of

if TYPE_CHECKING:
    import asyncpg


class DirectDatabase(Protocol):
    async def revision(self) -> str | None:
        """The revision the database is at (None: none applied yet)."""
        ...

    def read(self) -> AbstractAsyncContextManager[Executor]:
        """A connection for reads; its transaction is rolled back at the end."""
        ...

    def write(self) -> AbstractAsyncContextManager[Executor]:
        """A write transaction: committed when the block succeeds, rolled back otherwise."""
        ...

    async def close(self) -> None: ...


async def open_direct(url: str) -> DirectDatabase:
    """The database of ``url`` (the contract's: ``sqlite:///…``, ``postgresql://…``), open.
    Raises ``UnsupportedDatabaseURL`` for any other."""
    parsed = async_url(url)
    if parsed.get_backend_name() == "sqlite":
        return SQLiteDirect(parsed)
    import asyncpg

    pooled = pooler_of(url) is not None
    # Through a pooler, what ``connecting.postgres_connect_args`` sends there: nothing kept.
    options: dict[str, Any] = (
        {"statement_cache_size": POOLED_CONNECT_ARGS["statement_cache_size"]}
        if pooled
        else {"server_settings": SERVER_SETTINGS}
    )
    connection = await asyncpg.connect(asyncpg_dsn(parsed), **options)
    # JSON in binary, as on the engine's connections (SQLAlchemy's asyncpg dialect sets these
    # codecs on each, decoding with the standard library's): its JSON types leave results to
    # the codec, and ``COPY`` is binary. A ``jsonb`` value is its text after a version byte, 1.
    await connection.set_type_codec(
        "json", encoder=str.encode, decoder=json.loads, schema="pg_catalog", format="binary"
    )
    await connection.set_type_codec(
        "jsonb",
        encoder=lambda text: b"\x01" + text.encode(),
        decoder=lambda data: json.loads(data[1:]),
        schema="pg_catalog",
        format="binary",
    )
    return PostgresDirect(connection)


class SQLiteDirect:
    def __init__(self, url: URL) -> None:
        assert url.database is not None
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        busy = UNBOUNDED_SQLITE_BUSY_SECONDS
        self._engine = create_engine(
            url.set(drivername="sqlite+pysqlite"),
            json_serializer=json_text,
            connect_args={"timeout": busy},
        )
        configure_sqlite_engine(self._engine, busy)

    async def revision(self) -> str | None:
        from commerce_api.storage.migrations import current_revision

        with self._engine.connect() as conn:
            return current_revision(conn)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Executor]:
        with self._engine.connect() as conn:
            yield InlineConnection(conn)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Executor]:
        with self._engine.execution_options(**{BEGIN_IMMEDIATE: True}).begin() as conn:
            yield InlineConnection(conn)

    async def close(self) -> None:
        self._engine.dispose()


# What ``migrations.current_revision`` asks SQLAlchemy's inspector, in one statement: alembic's
# version table (its default name, which env.py keeps), found on the search path, or NULL.
_VERSION_TABLE = text("SELECT to_regclass('alembic_version') IS NOT NULL")
_VERSION = text("SELECT version_num FROM alembic_version")


class PostgresDirect:
    def __init__(self, connection: asyncpg.Connection) -> None:
        self._connection = connection

    async def revision(self) -> str | None:
        async with self.read() as conn:
            if not await conn.scalar(_VERSION_TABLE):
                return None
            version = await conn.scalar(_VERSION)
        return None if version is None else str(version)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Executor]:
        transaction = self._connection.transaction()
        await transaction.start()
        try:
            yield AsyncpgConnection(self._connection)
        finally:
            await transaction.rollback()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Executor]:
        async with self._connection.transaction():
            yield AsyncpgConnection(self._connection)

    async def close(self) -> None:
        await self._connection.close()


class AsyncpgConnection:
    """An asyncpg connection that runs Core statements (see the module's docstring)."""

    def __init__(self, connection: asyncpg.Connection) -> None:
        self._connection = connection
        self.dialect = _asyncpg_dialect()
        self.info: dict[Any, Any] = {}

    async def execute(self, statement: Executable, parameters: Any = None) -> Any:
        compiled = statement.compile(dialect=self.dialect)  # type: ignore[attr-defined]
        # The SQL and its values for these parameters: an ``IN`` of a list (an expanding
        # parameter) has one parameter per value, converted as the list's type has them.
        expanded = compiled.construct_expanded_state(parameters)
        arguments = []
        for name in expanded.positiontup or ():
            value = expanded.parameters[name]
            convert = (
                expanded.processors.get(name)
                if name not in compiled.binds
                else processor(compiled.binds[name].type, self.dialect)
            )
            arguments.append(value if convert is None or value is None else convert(value))
        if getattr(statement, "is_dml", False) and not compiled.effective_returning:
            status = await self._connection.execute(expanded.statement, *arguments)
            return Result([], _rowcount(status))
        records = await self._connection.fetch(expanded.statement, *arguments)
        columns = getattr(statement, "selected_columns", None)
        if columns is None:  # text: the values as asyncpg gives them
            return Result([Row(tuple(record.values()), list(record.keys())) for record in records])
        keys = [column.key for column in columns]
        converters = [
            column.type.dialect_impl(self.dialect).result_processor(self.dialect, None)
            for column in columns
        ]
        rows = [
            Row(
                tuple(
                    value if convert is None else convert(value)
                    for value, convert in zip(record.values(), converters, strict=True)
                ),
                keys,
            )
            for record in records
        ]
        return Result(rows)

    async def scalar(self, statement: Executable, parameters: Any = None) -> Any:
        return (await self.execute(statement, parameters)).scalar()

    async def get_raw_connection(self) -> Any:
        """What SQLAlchemy's ``AsyncConnection.get_raw_connection`` gives: an object whose
        ``driver_connection`` is the asyncpg connection (``bulk.copy_rows``'s ``COPY``)."""
        return SimpleNamespace(driver_connection=self._connection)

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any:
        """``statement`` (asyncpg's SQL) once with a tuple of values, or once per tuple of a
        list (an executemany)."""
        if isinstance(parameters, list):
            await self._connection.executemany(statement, parameters)
            return Result([])
        records = await self._connection.fetch(statement, *(parameters or ()))
        return Result([Row(tuple(record.values()), list(record.keys())) for record in records])


class Row(tuple[Any, ...]):
    """A result row as the repositories use SQLAlchemy's ``Row``: a tuple whose values are
    also its columns' attributes and its ``_mapping``."""

    _keys: dict[str, int]

    def __new__(cls, values: tuple[Any, ...], keys: Sequence[str]) -> Row:
        row = super().__new__(cls, values)
        row._keys = {key: index for index, key in enumerate(keys)}
        return row

    def __getattr__(self, name: str) -> Any:
        index = self.__dict__.get("_keys", {}).get(name)
        if index is None:
            raise AttributeError(name)
        return self[index]

    @property
    def _mapping(self) -> dict[str, Any]:
        return {key: self[index] for key, index in self._keys.items()}


class Result:
    """A statement's rows, read as a ``CursorResult`` is here."""

    def __init__(self, rows: list[Any], rowcount: int | None = None) -> None:
        self._rows = rows
        self.rowcount = len(rows) if rowcount is None else rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return list(self._rows)

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalars(self) -> Result:
        return Result([row[0] for row in self._rows])


@cache
def _asyncpg_dialect() -> Dialect:
    """SQLAlchemy's asyncpg dialect: the SQL (``$1`` parameters) and the values asyncpg takes
    (imported here: a command on SQLite never loads PostgreSQL's dialects)."""
    from sqlalchemy.dialects.postgresql.asyncpg import dialect

    return dialect(json_serializer=json_text)  # type: ignore[no-untyped-call]


def _rowcount(status: str) -> int:
    """The rows a command's status names (``UPDATE 3``, ``INSERT 0 1``), or 0."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0
