"""Many rows as one array parameter per column, ``unnest``-ed (PostgreSQL): the order batch's
writes in a few statements whatever its size, each statement one round trip.

Hand-written because SQLAlchemy has no construct for it: its multi-row ``VALUES`` compiles a
statement per row count, and its executemany sends the rows in one round trip but runs one
statement, where the order batch needs several tables written by one statement (data-modifying
``WITH``, so that a batch's writes wait on the wire once). The SQL names the tables' own
columns and types, compiled by SQLAlchemy's PostgreSQL dialect; the values are converted with
the dialect's own bind processors (``bulk.processor``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from commerce_api.storage.bulk import processor


@dataclass(frozen=True)
class Columns:
    """Columns of ``table`` given as arrays: ``unnest($1::t1[], $2::t2[], …) AS alias(c1, …)``."""

    table: Table
    names: tuple[str, ...]
    alias: str
    _converters: dict[int, list[Any]] = field(default_factory=dict, compare=False, repr=False)

    def source(self, dialect: Dialect, first: int, *, numbered: bool = False) -> str:
        """The ``unnest`` of this set's columns, its parameters numbered from ``first``
        (``numbered``: with a last column ``row_number``, the rows' order in the arrays)."""
        arrays = [
            f"${first + offset}::{_array_type(self.table.c[name].type, dialect)}"
            for offset, name in enumerate(self.names)
        ]
        columns = [*self.names, "row_number"] if numbered else self.names
        ordinality = " WITH ORDINALITY" if numbered else ""
        return f"unnest({', '.join(arrays)}){ordinality} AS {self.alias}({', '.join(columns)})"

    def insert(self, dialect: Dialect, first: int, condition: str | None = None) -> str:
        """``INSERT INTO table (columns) SELECT columns FROM <source>``, the rows in the order
        of the arrays (the order they take their row locks in); ``condition``: an SQL
        condition the rows are inserted under (all or none)."""
        columns = ", ".join(self.names)
        where = "" if condition is None else f" WHERE {condition}"
        return (
            f"INSERT INTO {self.table.name} ({columns}) "  # noqa: S608 - names from the Table
            f"SELECT {columns} FROM {self.source(dialect, first, numbered=True)}{where}"
            " ORDER BY row_number"
        )

    def arrays(self, dialect: Dialect, rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
        """One list per column of the rows' values, converted as the dialect converts them."""
        converters = self._converters.get(id(dialect))
        if converters is None:
            converters = self._converters[id(dialect)] = [
                processor(self.table.c[name].type, dialect) for name in self.names
            ]
        arrays: list[list[Any]] = []
        for name, convert in zip(self.names, converters, strict=True):
            values = [row[name] for row in rows]
            if convert is not None:
                values = [None if value is None else convert(value) for value in values]
            arrays.append(values)
        return arrays

    def __len__(self) -> int:
        return len(self.names)


def _array_type(column_type: TypeEngine[Any], dialect: Dialect) -> str:
    """The array type a column's values are sent as. Text for strings: the column's own type
    may carry a collation, which an array cast cannot name; the insert casts each value to the
    column's type, length checks included. JSON as text too (the driver's json codec is not
    ours to rely on), cast to ``json`` here."""
    if isinstance(column_type, JSON):
        return "text[]::json[]"
    try:
        if column_type.python_type is str:
            return "text[]"
    except NotImplementedError:
        pass
    return f"{column_type.compile(dialect=dialect)}[]"
