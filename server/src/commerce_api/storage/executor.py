"""What repositories run their statements on (:class:`Executor`), kept apart from ``db`` so
that a short command's database (``storage.direct``) needs none of the async engine."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from sqlalchemy.engine import CursorResult, Dialect
from sqlalchemy.sql.base import Executable


class Executor(Protocol):
    """What a repository writes and reads through: an ``AsyncConnection``; on SQLite a
    connection whose statements run inline (``Database.write_batch``, ``storage.direct``); or
    a short command's asyncpg connection (``storage.direct``)."""

    @property
    def dialect(self) -> Dialect: ...

    async def execute(self, statement: Executable, parameters: Any = None) -> CursorResult[Any]: ...

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any: ...

    async def scalar(self, statement: Executable, parameters: Any = None) -> Any: ...

    @property
    def info(self) -> dict[Any, Any]: ...

    async def get_raw_connection(self) -> Any:
        """The pool's connection, whose ``driver_connection`` is the driver's (asyncpg's, for
        a ``COPY``: ``bulk.copy_rows``)."""
        ...


# Where a write transaction records what it changed (``freshness.touch``) for the
# process's own caches, told at its commit (``Database.on_commit``). The key lives in the
# DBAPI connection's ``info``, which outlives the checkout: ``write`` clears it either way.
CHANGED = "commerce_changed"


def json_text(value: Any) -> str:
    """JSON columns' text: orjson (several times faster than the standard library's encoder,
    which SQLAlchemy would use; an order's event carries the whole order)."""
    return orjson.dumps(value).decode()
