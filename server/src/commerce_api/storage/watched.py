"""A PostgreSQL transaction held to its deadline (``Deadlines.transaction``): its driver
connection is terminated if the block is still running then, whatever it was waiting for
(``deadlines.Watch``), and the caller gets :class:`~commerce_api.storage.deadlines.DatabaseTimeout`
(a 503)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from commerce_api.storage.deadlines import (
    WATCHING,
    DatabaseTimeout,
    Deadlines,
    Reachability,
    Watch,
    milliseconds,
)


@asynccontextmanager
async def watched(
    engine: AsyncEngine,
    deadlines: Deadlines,
    transaction_seconds: float,
    reachability: Reachability,
    *,
    begin: bool,
    by: float | None = None,
) -> AsyncIterator[AsyncConnection]:
    """A PostgreSQL connection (in a transaction committed at the end when ``begin``) whose
    driver connection is terminated if the block is still running at its deadline
    (``transaction_seconds`` from now, or ``by``, if sooner): the caller then gets
    :class:`DatabaseTimeout` (a 503), whatever it was waiting for. A slow failure is noted in
    ``reachability``."""
    started = reachability.check()
    deadline = started + transaction_seconds
    cut_short = by is not None and by < deadline  # the caller's deadline, not the database
    watch = Watch(min(deadline, by) if by is not None else deadline)
    watching = WATCHING.set(watch)  # for the checkout hook (ping_when_idle)
    try:
        async with engine.connect() as conn:
            sync = conn.sync_connection
            assert sync is not None
            watch.hold(sync.connection.driver_connection)
            if begin:
                async with conn.begin():
                    await _lock_wait_by(conn, deadlines, by)
                    yield conn
            else:
                yield conn
                await conn.rollback()  # a read's transaction, ended within the deadline
            watch.done()  # before the connection goes back to the pool
    except Exception as exc:
        if not (cut_short and watch.expired):
            reachability.failed(exc, started)
        if watch.expired:
            raise DatabaseTimeout(
                f"a database transaction ran past its {transaction_seconds:g} s "
                "deadline; its connection was closed"
            ) from exc
        raise
    finally:
        WATCHING.reset(watching)
        watch.done()


async def _lock_wait_by(conn: AsyncConnection, deadlines: Deadlines, by: float | None) -> None:
    """A row lock waited for until ``by`` at most, if sooner than the lock timeout: answered
    by PostgreSQL (``lock_timeout``, 0.1 s early), not by the watch closing the connection."""
    if by is None:
        return
    left = by - asyncio.get_running_loop().time() - 0.1
    if left < deadlines.lock:
        await conn.execute(text(f"SET LOCAL lock_timeout = {milliseconds(left)}"))
