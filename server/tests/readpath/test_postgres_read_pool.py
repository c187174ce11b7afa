"""The read path's asyncpg pool on PostgreSQL: one round trip per read, nothing after it."""

from __future__ import annotations

import asyncpg
import pytest

from commerce_api.http.context import RequestContext
from commerce_api.readpath.service import ReadPath
from commerce_api.storage.db import Database

pytestmark = pytest.mark.postgresql


async def test_postgresql_read_pool_releases_without_a_reset_statement(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncpg's default release sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` after every use of a pooled connection: a second round trip for each read
    round (stamps, product, key). The read pool runs single autocommit SELECTs only, so it
    releases without one."""
    resets: list[asyncpg.Connection] = []
    original = asyncpg.Connection.reset

    # asyncpg's own signature, timeout included.
    async def spy(self: asyncpg.Connection, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        resets.append(self)
        await original(self, timeout=timeout)

    monkeypatch.setattr(asyncpg.Connection, "reset", spy)
    db = Database(postgres_url)
    read_path = await ReadPath.open(db, "sandbox")
    try:
        for _ in range(3):
            versions = await read_path.versions(RequestContext("req_test"))
            assert versions is not None
            assert versions.auth is not None
            assert await read_path.product("prod_" + "x" * 24) is None
        assert resets == []
    finally:
        await read_path.close()
        await db.dispose()
