"""A pooled PostgreSQL connection is pinged only after it sat idle
(``storage.connecting.ping_when_idle``, instead of SQLAlchemy's ping on every checkout, three
round trips before every transaction): one that died while idle is replaced before anyone uses
it."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from commerce_api.storage import connecting
from commerce_api.storage.db import Database

pytestmark = pytest.mark.postgresql


async def backend_pid(db: Database) -> int:
    async with db.read() as conn:
        return int(await conn.scalar(text("SELECT pg_backend_pid()")))


async def terminate(url: str, pid: int) -> None:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


async def test_a_connection_that_died_while_idle_is_replaced_unseen(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connecting, "IDLE_PING_SECONDS", 0.0)  # every checkout counts as idle
    db = Database(postgresql_database_url, pool_size=1)
    try:
        first = await backend_pid(db)
        await terminate(postgresql_database_url, first)
        assert await backend_pid(db) != first  # no error: the ping found it dead
    finally:
        await db.dispose()


async def test_a_busy_connection_is_not_pinged(postgresql_database_url: str) -> None:
    """Within ``IDLE_PING_SECONDS`` the pooled connection is handed out as it is: a connection
    killed meanwhile fails its statement (and SQLAlchemy then invalidates the pool)."""
    db = Database(postgresql_database_url, pool_size=1)
    try:
        first = await backend_pid(db)
        await terminate(postgresql_database_url, first)
        with pytest.raises(DBAPIError):
            await backend_pid(db)
        assert await backend_pid(db) != first  # the pool was invalidated: a fresh one
    finally:
        await db.dispose()
