"""Bulk writes: many rows in one statement, in one executemany, or in one ``COPY``.

Each statement is compiled once per shape (table, dialect, columns, row count) and its values
converted with the very bind processors of the connection's dialect, skipping SQLAlchemy's
general parameter machinery, which costs more than the write itself on the hot loop. And
``dialect_insert``: the backend's ``insert``, which has ``ON CONFLICT``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.types import TypeDecorator, TypeEngine

from commerce_api.storage.executor import Executor

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection


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


async def copy_rows(conn: Executor, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert many ``rows`` (dicts with the same keys) in bulk, in the caller's transaction:
    PostgreSQL's ``COPY`` (asyncpg's ``copy_records_to_table``, on the driver connection that
    SQLAlchemy's ``get_raw_connection`` hands out), SQLite's executemany of one prepared
    ``INSERT``. Each row becomes a tuple in C (``itemgetter``); only the columns whose type has
    a bind processor (timestamps, JSON) go through it, so both write what SQLAlchemy would."""
    if not rows:
        return
    names = tuple(rows[0])
    cache_key = (table.name, id(conn.dialect), names)
    found = _COPIES.get(cache_key)
    if found is None:
        found = _COPIES[cache_key] = _compiled_copy(table, conn.dialect, names)
    sql, order, getter, converters = found
    records = [getter(row) for row in rows]
    if converters:
        records = [_patched(record, converters) for record in records]
    if sql is not None:
        await conn.exec_driver_sql(sql, records)
        return
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None, "a connection in use has its driver's"
    await driver.copy_records_to_table(table.name, columns=order, records=records)


async def copy_columns(
    conn: Executor,
    table: Table,
    columns: Mapping[str, Sequence[Any]],
    constants: Mapping[str, Any],
) -> None:
    """:func:`copy_rows`, given a column at a time: ``columns``, each a sequence (all of one
    length), and ``constants``, one value for every row (converted once). The rows are
    zipped together in C."""
    names = (*columns, *constants)
    cache_key = (table.name, id(conn.dialect), names)
    found = _COPIES.get(cache_key)
    if found is None:
        found = _COPIES[cache_key] = _compiled_copy(table, conn.dialect, names)
    sql, order, _, converters = found
    convert = dict(converters)
    in_order: list[Iterable[Any]] = []
    for index, name in enumerate(order):
        if name in constants:
            value = constants[name]
            if value is not None and index in convert:
                value = convert[index](value)
            in_order.append(repeat(value))
        elif index in convert:
            in_order.append([None if v is None else convert[index](v) for v in columns[name]])
        else:
            in_order.append(columns[name])
    # A constant's repeat() ends with the columns (of one length: the caller's).
    records = list(zip(*in_order, strict=False))
    if not records:
        return
    if sql is not None:
        await conn.exec_driver_sql(sql, records)
        return
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None, "a connection in use has its driver's"
    await driver.copy_records_to_table(table.name, columns=order, records=records)


def _compiled_copy(
    table: Table, dialect: Dialect, names: tuple[str, ...]
) -> tuple[str | None, tuple[str, ...], Any, list[tuple[int, Any]]]:
    """For :func:`copy_rows`: the ``INSERT`` (None: ``COPY``), the columns in its order, a
    getter of a row's values in that order, and the (position, bind processor) of the values
    to convert."""
    sql: str | None = None
    order = names
    if dialect.name != "postgresql":
        sql, in_order = _compiled_insert(table, dialect, names)
        order = tuple(name for name, _ in in_order)
    converters = [
        (index, convert)
        for index, name in enumerate(order)
        if (convert := processor(table.c[name].type, dialect)) is not None
    ]
    return sql, order, itemgetter(*order), converters


def _patched(record: tuple[Any, ...], converters: list[tuple[int, Any]]) -> tuple[Any, ...]:
    values = list(record)
    for index, convert in converters:
        value = values[index]
        if value is not None:
            values[index] = convert(value)
    return tuple(values)


_COPIES: dict[tuple[str, int, tuple[str, ...]], tuple[Any, ...]] = {}


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
    the order path (docs/performance.md, "An order").
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
            slot_of[key] = (index, name, processor(column_type, dialect))
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
        converters = [(name, processor(compiled.binds[name].type, conn.dialect)) for name in order]
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
        converters = [(name, processor(table.c[name].type, dialect)) for name in order]
        found = _INSERTS[cache_key] = (compiled.string, converters)
    return found


def processor(column_type: TypeEngine[Any], dialect: Dialect) -> Any:
    """The dialect's bind processor of ``column_type`` (None: values go as they are); for a
    timestamp, one that remembers its last conversion (see :class:`_LastConverted`)."""
    convert = column_type.dialect_impl(dialect).bind_processor(dialect)
    # A TypeDecorator (``UTCDateTime``) names no Python type of its own: its ``impl`` does.
    named = column_type.impl if isinstance(column_type, TypeDecorator) else column_type
    try:
        timestamp = named.python_type is datetime
    except NotImplementedError:  # a type that names no Python type
        timestamp = False
    return _LastConverted(convert) if convert is not None and timestamp else convert


class _LastConverted:
    """A bind processor that converts the very object it converted last without running again:
    a batch's rows share one ``now`` (orders, lines, events, deliveries, keys), and SQLite's
    timestamp processor (to naive UTC, then to text) costs more than the rest of a row.
    Exact: the remembered object is held, so ``is`` cannot match another one; the pair is
    replaced as one, so a thread reads a consistent one."""

    __slots__ = ("convert", "last")

    def __init__(self, convert: Any) -> None:
        self.convert = convert
        self.last: tuple[Any, Any] = (None, None)

    def __call__(self, value: Any) -> Any:
        seen, converted = self.last
        if value is seen:
            return converted
        converted = self.convert(value)
        self.last = (value, converted)
        return converted


def dialect_insert(conn: AsyncConnection | Executor) -> Any:
    """The backend's ``insert`` construct, which has ``on_conflict_do_nothing/update``. Each
    dialect's is imported at its first use: a command on SQLite never loads PostgreSQL's."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert
