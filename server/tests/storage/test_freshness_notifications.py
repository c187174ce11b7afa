"""The PostgreSQL change tracker: stamps kept while notifications say nothing changed, this
process's own commits seen at once, and every read going to the database while the listening
connection is down (a lost notification never means silently stale data)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from commerce_api.readpath.service import ReadPath
from commerce_api.storage import freshness
from commerce_api.storage.db import Database
from commerce_api.storage.freshness import postgres_tracker

pytestmark = pytest.mark.postgresql

WAIT_SECONDS = 5.0


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
async def read_path(postgresql_database_url: str) -> AsyncIterator[ReadPath]:
    db = Database(postgresql_database_url)
    path = await ReadPath.open(db, "sandbox")
    try:
        yield path
    finally:
        await path.close()
        await db.dispose()


@pytest.fixture
async def writer(postgresql_database_url: str) -> AsyncIterator[Database]:
    """Another ``Database`` of this process (as the CLI's or a test's would be): its commits
    are still this process's."""
    db = Database(postgresql_database_url)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
async def outsider(postgresql_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own: its commits are another process's, as far as the tracker knows."""
    conn = await asyncpg.connect(_dsn(postgresql_database_url))
    try:
        yield conn
    finally:
        await conn.close()


async def set_stamp(conn: asyncpg.Connection, value: str, *, notify: bool) -> None:
    async with conn.transaction():
        await conn.execute(
            "UPDATE instance_values SET value = $1 WHERE name = $2", value, freshness.AUTH
        )
        if notify:
            await conn.execute("SELECT pg_notify($1, $2)", freshness.CHANNEL, freshness.AUTH)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


def tracker_of(read_path: ReadPath) -> freshness.PostgresTracker:
    assert isinstance(read_path.tracker, freshness.PostgresTracker)
    return read_path.tracker


async def test_the_stamps_are_kept_until_a_notification_says_they_changed(
    read_path: ReadPath, outsider: asyncpg.Connection
) -> None:
    tracker = tracker_of(read_path)
    first = await tracker.current()
    assert first is not None
    assert first.data_version is not None
    # Committed without a notification: not seen (this is what the notification is for) ...
    await set_stamp(outsider, "unannounced", notify=False)
    assert await tracker.current() == first
    # ... and with one, seen as soon as it arrives.
    await set_stamp(outsider, "announced", notify=True)
    started = time.monotonic()
    while (versions := await tracker.current()) is None or versions.auth != "announced":
        assert time.monotonic() - started < 0.1, "the notification took over 100 ms"
        await asyncio.sleep(0.001)


async def around_a_commit(
    read_path: ReadPath, writer: Database, work: Callable[[Any], Awaitable[None]]
) -> tuple[Any, Any]:
    """The tracker's stamps before and right after a transaction doing ``work`` commits."""
    tracker = tracker_of(read_path)
    before = await tracker.current()
    assert before is not None
    async with writer.write() as conn:
        await work(conn)
    after = await tracker.current()
    assert after is not None
    return before, after


async def test_a_commit_of_this_process_is_seen_by_its_next_read(
    read_path: ReadPath, writer: Database
) -> None:
    async def bump(conn: Any) -> None:
        await freshness.bump(conn, freshness.CATALOG)

    # no wait: told at the commit, before write() returned
    before, after = await around_a_commit(read_path, writer, bump)
    assert after.catalog != before.catalog


async def test_a_stock_change_makes_cached_products_stale_but_keeps_the_stamps(
    read_path: ReadPath, writer: Database
) -> None:
    async def touch_twice(conn: Any) -> None:
        await freshness.touch(conn, freshness.STOCK)
        await freshness.touch(conn, freshness.STOCK)  # once per transaction is enough

    before, after = await around_a_commit(read_path, writer, touch_twice)
    assert (after.auth, after.catalog) == (before.auth, before.catalog)
    assert after.data_version != before.data_version


async def touch_then_fail(db: Database) -> None:
    async with db.write() as conn:
        await freshness.touch(conn, freshness.STOCK)
        raise RuntimeError("rolled back")


async def test_a_rolled_back_change_tells_nobody(
    read_path: ReadPath, writer: Database, outsider: asyncpg.Connection
) -> None:
    tracker = tracker_of(read_path)
    before = await tracker.current()
    told = tracker._changes
    with pytest.raises(RuntimeError):
        await touch_then_fail(writer)
    async with writer.write():  # the pooled connection carries no leftover note
        pass
    # Notifications arrive in commit order: once this one is here, one sent by the rolled-back
    # transaction would have been too.
    await outsider.execute("SELECT pg_notify($1, 'sentinel')", freshness.CHANNEL)
    await until(lambda: tracker._changes > told, "the sentinel arrived")
    assert tracker._changes == told + 1  # the sentinel alone
    after = await tracker.current()
    assert before is not None
    assert after is not None
    assert (after.auth, after.catalog) == (before.auth, before.catalog)


async def test_while_the_listener_is_down_every_read_goes_to_the_database(
    read_path: ReadPath, outsider: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = tracker_of(read_path)
    await tracker.current()
    monkeypatch.setattr(postgres_tracker, "RECONNECT_SECONDS", (0.5,))
    listener = tracker._listener
    assert listener is not None
    await outsider.execute("SELECT pg_terminate_backend($1)", listener.get_server_pid())
    await until(lambda: not tracker.listening, "the tracker noticed the lost connection")

    # Down: a commit without any notification is seen by the next read; nothing is cached.
    await set_stamp(outsider, "while-down", notify=False)
    versions = await tracker.current()
    assert versions is not None
    assert (versions.auth, versions.data_version) == ("while-down", None)

    # Back: listening again, and caching again.
    await until(lambda: tracker.listening, "the tracker listened again")
    await set_stamp(outsider, "after", notify=False)  # read fresh once it listens again
    versions = await tracker.current()
    assert versions is not None
    assert versions.auth == "after"
    assert versions.data_version is not None
