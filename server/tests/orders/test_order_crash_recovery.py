"""An order whose server is killed mid-request can be retried with its ``Idempotency-Key`` at
once, on both backends (issue 13: on PostgreSQL the key's claim used to be committed before the
order, so the retry was refused with 409 "still being processed" until its 60 s lease ran out).

Two servers share one database. The test holds the product's lock from a connection of its own
(PostgreSQL: the row, ``FOR UPDATE``; SQLite: the file's write lock), so the first server's order
is certainly in flight — inside its batch's transaction, waiting — when the server is killed
with SIGKILL. Once the lock is released, the retry on the other server must place the order
(201, not a replay, not a 409), exactly once, with its stock taken once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from commerce_api.storage.db import Database
from tests.helpers import bearer
from tests.orders.test_order_concurrency import (
    new_client_key,
    new_products,
    order_body,
    order_count,
    units_ordered,
)
from tests.server_process import running_servers

pytestmark = pytest.mark.slow

WAIT_SECONDS = 20.0


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, tmp_path / "commerce.db")
        return f"sqlite:///{tmp_path / 'commerce.db'}"
    url: str = request.getfixturevalue("postgresql_database_url")
    return url


@asynccontextmanager
async def product_locked(database_url: str, product_id: str) -> AsyncIterator[None]:
    """Hold what an order for ``product_id`` must lock, until the block ends."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        with _sqlite_write_lock(str(url.database)):
            yield
        return
    conn = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(False))
    try:
        transaction = conn.transaction()
        await transaction.start()
        await conn.execute("SELECT 1 FROM products WHERE id = $1 FOR UPDATE", product_id)
        try:
            yield
        finally:
            await transaction.rollback()
    finally:
        await conn.close()


@contextmanager
def _sqlite_write_lock(path: str) -> Iterator[None]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def wait_until_blocked(database_url: str, product_id: str) -> None:
    """Give the first server time to reach the lock (bounded): on PostgreSQL until a backend
    waits on a lock; on SQLite a fixed moment, as nothing shows a waiting writer."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        await asyncio.sleep(0.5)
        return
    conn = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(False))
    try:
        for _ in range(int(WAIT_SECONDS / 0.05)):
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if waiting:
                return
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("the first server's order never reached the product's lock")


async def test_a_retry_after_the_server_was_killed_mid_order_is_placed_at_once(
    database_url: str, tmp_path: Path
) -> None:
    db = Database(database_url)
    try:
        account_id, key = await new_client_key(db)
        [product_id] = await new_products(db, 5)
    finally:
        await db.dispose()
    body = order_body(product_id)
    headers = {**bearer(key), "Idempotency-Key": "killed-mid-order"}
    with running_servers(database_url, tmp_path, 2) as (doomed, survivor):
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            async with product_locked(database_url, product_id):
                first = asyncio.create_task(
                    http.post(f"{doomed.base_url}/v1/orders", json=body, headers=headers)
                )
                await wait_until_blocked(database_url, product_id)
                os.kill(doomed.pid, signal.SIGKILL)
                with pytest.raises(httpx.TransportError):
                    await asyncio.wait_for(first, WAIT_SECONDS)
            retried = await http.post(f"{survivor.base_url}/v1/orders", json=body, headers=headers)
            assert retried.status_code == 201, retried.text
            assert "idempotent-replayed" not in retried.headers
            again = await http.post(f"{survivor.base_url}/v1/orders", json=body, headers=headers)
            assert again.headers["idempotent-replayed"] == "true"
            assert again.json() == retried.json()
    db = Database(database_url)
    try:
        assert await order_count(db, account_id) == 1
        assert await units_ordered(db, product_id) == 1
    finally:
        await db.dispose()
