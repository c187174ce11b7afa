"""Through PgBouncer in transaction pooling (``?pooler=pgbouncer``): what the pooled service
does differently. The order and read tests run through it too (the ``pgbouncer`` marker).
"""

from __future__ import annotations

import secrets

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from commerce_api.http.context import RequestContext
from commerce_api.readpath.service import ReadPath
from commerce_api.storage import freshness
from commerce_api.storage.connecting import SERVER_SETTINGS
from commerce_api.storage.db import Database
from commerce_api.storage.urls import UnsupportedDatabaseURL
from tests import factories
from tests.conftest import DIRECT_URLS, make_settings
from tests.pgbouncer_process import RunningPgBouncer

pytestmark = pytest.mark.postgresql


async def test_no_prepared_statement_stays_on_a_server_connection(
    pgbouncer_database_url: str,
) -> None:
    """Named prepared statements would outlive their transaction on a server connection that
    the next transaction of the same client connection does not get: none is made."""
    db = Database(pgbouncer_database_url)
    read_path = await ReadPath.open(db, "sandbox")
    try:
        await factories.new_customer(db)
        for _ in range(5):
            async with db.write() as conn:
                await conn.execute(text("SELECT count(*) FROM products"))
            await read_path.product("prod_" + "x" * 24)
        # Every server connection PgBouncer holds, each asked in a transaction of its own
        # (as many at once as there are, so each lands on a different one).
        connections = [
            await asyncpg.connect(_plain(pgbouncer_database_url), statement_cache_size=0)
            for _ in range(8)
        ]
        try:
            for connection in connections:
                await connection.execute("BEGIN")
            counts = [
                await connection.fetchval("SELECT count(*) FROM pg_prepared_statements")
                for connection in connections
            ]
        finally:
            for connection in connections:
                await connection.close()
        assert counts == [0] * len(connections)
    finally:
        await read_path.close()
        await db.dispose()


async def test_without_a_listen_url_nothing_is_cached_and_changes_are_seen_at_once(
    pgbouncer_database_url: str,
) -> None:
    """LISTEN through transaction pooling would hear nothing: with no direct URL for it the
    read path does not listen, and reads the stamps for every request (no stale key)."""
    direct = Database(DIRECT_URLS[pgbouncer_database_url])
    db = Database(pgbouncer_database_url)
    assert db.listen_dsn is None
    read_path = await ReadPath.open(db, "sandbox")
    try:
        assert isinstance(read_path.tracker, freshness.PostgresTracker)
        assert read_path.tracker.listening is False
        before = await read_path.versions(RequestContext("req_a"))
        assert before is not None
        assert before.data_version is None  # no cache trusts it
        async with direct.write() as conn:  # another process's change, told to no one here
            await freshness.bump(conn, freshness.AUTH)
        after = await read_path.versions(RequestContext("req_b"))
        assert after is not None
        assert after.auth != before.auth
    finally:
        await read_path.close()
        await db.dispose()
        await direct.dispose()


async def test_with_a_listen_url_the_listener_goes_direct(pgbouncer_database_url: str) -> None:
    settings = make_settings(pgbouncer_database_url)
    db = Database(settings.database_url, listen_url=settings.database_listen_url)
    read_path = await ReadPath.open(db, "sandbox")
    try:
        assert db.listen_dsn is not None
        assert "pooler" not in db.listen_dsn
        assert isinstance(read_path.tracker, freshness.PostgresTracker)
        assert read_path.tracker.listening is True
    finally:
        await read_path.close()
        await db.dispose()


async def test_the_server_settings_missing_behind_the_pooler_are_named(
    pgbouncer_database_url: str, postgresql_database_url: str
) -> None:
    """Through PgBouncer nothing is sent at connect (it refuses unknown startup parameters):
    the settings belong on the role, and the service says which ones PostgreSQL lacks."""
    pooled, direct = Database(pgbouncer_database_url), Database(postgresql_database_url)
    try:
        assert await direct.unapplied_settings() == {}
        missing = await pooled.unapplied_settings()
        assert set(missing) == set(SERVER_SETTINGS)  # the test server's role has none of them
    finally:
        await pooled.dispose()
        await direct.dispose()


def test_an_unknown_pooler_is_refused() -> None:
    with pytest.raises(UnsupportedDatabaseURL, match="pgbouncer"):
        Database("postgresql://u@127.0.0.1/db?pooler=odyssey")


def _plain(url: str) -> str:
    """``url`` for asyncpg itself (without the service's option), through PgBouncer."""
    return url.replace("?pooler=pgbouncer", "")


async def test_migrate_runs_through_the_pooler(
    postgres_url: str, pgbouncer: RunningPgBouncer
) -> None:
    """``migrate`` takes a transaction-scoped advisory lock and migrates in that one
    transaction: nothing of it needs a session. A new database, migrated from nothing."""
    admin = await asyncpg.connect(_plain(postgres_url))
    name = f"commerce_test_{secrets.token_hex(6)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    direct = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    db = Database(pgbouncer.url_for(direct))
    try:
        await db.migrate()
        await db.migrate()  # at head: checks and returns
        async with db.read() as conn:
            assert await conn.scalar(text("SELECT count(*) FROM alembic_version")) == 1
    finally:
        await db.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
