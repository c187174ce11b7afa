"""A synchronous SQLAlchemy connection behind the awaitable interface repositories use
(:class:`~commerce_api.storage.executor.Executor`): each statement runs at once, on the
caller's thread. For SQLite's standard-library driver, whose statements take microseconds:
the batch writer's transaction (``sqlite_writer``) and a short command's (``direct``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import CursorResult
from sqlalchemy.sql.base import Executable

T = TypeVar("T")


class InlineConnection:
    """``conn``'s statements, awaited but run at once (nothing is awaited in between)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect
        self.info = conn.info

    async def execute(self, statement: Executable, parameters: Any = None) -> CursorResult[Any]:
        return self._conn.execute(statement, parameters)

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any:
        return self._conn.exec_driver_sql(statement, parameters)

    async def scalar(self, statement: Executable, parameters: Any = None) -> Any:
        return self._conn.scalar(statement, parameters)

    async def get_raw_connection(self) -> Any:
        return self._conn.connection

    async def run_sync(self, work: Callable[[Connection], T]) -> T:
        return work(self._conn)
