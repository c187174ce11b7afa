"""SQLite: WAL mode, and BEGIN IMMEDIATE serialising concurrent writers."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import select, text, update

from commerce_api.storage.db import Database
from commerce_api.storage.tables import products
from tests import factories

WRITERS = 20
INITIAL = 100


@pytest.fixture
async def sqlite_db(sqlite_database_url: str) -> AsyncIterator[Database]:
    async with factories.opened(sqlite_database_url) as database:
        yield database


async def _insert_product(db: Database, inventory: int) -> str:
    return await factories.new_product(db, inventory, price_minor=100, category="tools")


async def _inventory(db: Database, product_id: str) -> int:
    async with db.read() as conn:
        value = await conn.scalar(
            select(products.c.inventory_count).where(products.c.id == product_id)
        )
    assert value is not None
    return int(value)


async def test_journal_mode_is_wal(sqlite_db: Database) -> None:
    async with sqlite_db.read() as conn:
        assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
        assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
        assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() == 30_000
        assert (await conn.exec_driver_sql("PRAGMA synchronous")).scalar() == 2  # FULL


async def test_the_wal_is_bounded(sqlite_db: Database) -> None:
    """Checkpointed automatically, and truncated after a checkpoint: a burst of writes does not
    keep its disk space (a full disk can recover once it is checkpointed)."""
    async with sqlite_db.read() as conn:
        limit = (await conn.exec_driver_sql("PRAGMA journal_size_limit")).scalar()
        pages = (await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")).scalar()
    assert limit == 64 * 1024 * 1024
    assert pages == 1000


async def _take_one(db: Database, product_id: str, *, pause: float) -> None:
    """Read the stock, pause (other writers may run), write it back one less: in one
    transaction, which must serialise with every other writer's."""
    async with db.write() as conn:
        current = await conn.scalar(
            select(products.c.inventory_count).where(products.c.id == product_id)
        )
        assert current is not None
        await asyncio.sleep(pause)
        await conn.execute(
            update(products)
            .where(products.c.id == product_id)
            .values(inventory_count=int(current) - 1)
        )


async def test_concurrent_read_modify_write_transactions_serialise(sqlite_db: Database) -> None:
    product_id = await _insert_product(sqlite_db, INITIAL)

    # Each writer gives every other one the chance to run between its read and its write.
    writers = (_take_one(sqlite_db, product_id, pause=0.005) for _ in range(WRITERS))
    results = await asyncio.gather(*writers, return_exceptions=True)
    errors = [result for result in results if isinstance(result, BaseException)]
    assert errors == []
    assert await _inventory(sqlite_db, product_id) == INITIAL - WRITERS


async def test_concurrent_writers_from_separate_engines_serialise(
    sqlite_database_url: str,
) -> None:
    """Like two processes: each writer has its own engine (and so its own connections)."""
    setup = Database(sqlite_database_url)
    product_id = await _insert_product(setup, INITIAL)
    await setup.dispose()
    databases = [Database(sqlite_database_url) for _ in range(4)]

    async def take(db: Database, count: int) -> None:
        for _ in range(count):
            await _take_one(db, product_id, pause=0)

    try:
        await asyncio.gather(*(take(db, WRITERS // 4) for db in databases))
        assert await _inventory(databases[0], product_id) == INITIAL - WRITERS
    finally:
        for db in databases:
            await db.dispose()


async def test_failed_write_rolls_back(sqlite_db: Database) -> None:
    product_id = await _insert_product(sqlite_db, INITIAL)

    async def fail_midway() -> None:
        async with sqlite_db.write() as conn:
            await conn.execute(
                update(products).where(products.c.id == product_id).values(inventory_count=1)
            )
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await fail_midway()
    assert await _inventory(sqlite_db, product_id) == INITIAL


async def test_reads_do_not_wait_for_an_open_write(sqlite_db: Database) -> None:
    product_id = await _insert_product(sqlite_db, INITIAL)
    async with sqlite_db.write() as conn:
        await conn.execute(
            update(products).where(products.c.id == product_id).values(inventory_count=1)
        )
        # WAL: a reader sees the last committed value at once, without waiting.
        value = await asyncio.wait_for(_inventory(sqlite_db, product_id), timeout=2)
        assert value == INITIAL
    assert await _inventory(sqlite_db, product_id) == 1


async def test_write_transactions_take_the_write_lock_at_begin(
    sqlite_db: Database, sqlite_database_url: str
) -> None:
    """BEGIN IMMEDIATE: the write lock is held from the start, before any write statement."""
    path = sqlite_database_url.removeprefix("sqlite:///")
    async with sqlite_db.write() as conn:
        await conn.execute(text("SELECT 1"))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
    # Once committed, another writer gets the lock.
    _take_and_release_the_write_lock(path)


def _take_and_release_the_write_lock(path: str) -> None:
    """Another connection takes the file's write lock at once (no waiting) and lets it go."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_read_transactions_do_not_take_the_write_lock(
    sqlite_db: Database, sqlite_database_url: str
) -> None:
    path = sqlite_database_url.removeprefix("sqlite:///")
    async with sqlite_db.read() as conn:
        await conn.execute(select(products.c.id))
        _take_and_release_the_write_lock(path)


async def test_opening_a_new_database_waits_for_a_locked_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # as another process does while it sets the file up
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    db = Database(f"sqlite:///{path}")
    try:
        async with db.read() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
    finally:
        release.join()
        holder.close()
        await db.dispose()


# Batches (Database.write_batch) of the processes on one file take turns on a lock beside it.
# Two Database objects hold two open files of that lock, which exclude each other as two
# processes' would; the test probes the lock the same way, without ever blocking on it.


def _turn_is_free(path: Path) -> bool:
    fd = os.open(f"{path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # also lets go of the lock if it was taken
    return True


@asynccontextmanager
async def _turn_held_elsewhere(path: Path) -> AsyncIterator[None]:
    fd = os.open(f"{path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        yield
    finally:
        os.close(fd)


async def test_a_batch_holds_the_writers_turn_from_begin_to_commit(sqlite_db: Database) -> None:
    path = Path(sqlite_db.sqlite_path or "")
    async with sqlite_db.write_batch():
        assert not _turn_is_free(path)
    assert _turn_is_free(path)

    async def failing_batch() -> None:
        async with sqlite_db.write_batch():
            assert not _turn_is_free(path)
            raise RuntimeError("the batch failed")

    with pytest.raises(RuntimeError):
        await failing_batch()
    assert _turn_is_free(path)


async def test_a_batch_waits_for_another_processs_turn_and_gives_up_after_the_busy_timeout(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Path(sqlite_db.sqlite_path or "")
    product_id = await _insert_product(sqlite_db, INITIAL)
    monkeypatch.setattr(sqlite_db, "busy_seconds", 0.2)
    async with _turn_held_elsewhere(path):
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            async with sqlite_db.write_batch():
                pytest.fail("the batch began while another process had the turn")
    # The thread that waited got the turn when it was let go, and gave it back unused; the
    # next batch takes it and commits.
    async with sqlite_db.write_batch() as conn:
        await conn.execute(
            update(products).where(products.c.id == product_id).values(inventory_count=7)
        )
    assert await _inventory(sqlite_db, product_id) == 7
    assert _turn_is_free(path)


async def test_batches_of_two_processes_on_one_file_commit_every_write(
    sqlite_database_url: str,
) -> None:
    first, second = Database(sqlite_database_url), Database(sqlite_database_url)
    try:
        product_id = await _insert_product(first, INITIAL)

        async def take_one(db: Database) -> None:
            async with db.write_batch() as conn:
                await conn.execute(
                    update(products)
                    .where(products.c.id == product_id)
                    .values(inventory_count=products.c.inventory_count - 1)
                )

        await asyncio.gather(*(take_one(db) for db in (first, second) * (WRITERS // 2)))
        assert await _inventory(first, product_id) == INITIAL - WRITERS
    finally:
        await first.dispose()
        await second.dispose()


async def test_a_batch_cancelled_at_its_commit_still_ends_its_transaction(
    sqlite_db: Database,
) -> None:
    """A batch whose caller is cancelled while its COMMIT waits for the batch thread: the
    transaction still ends (committed), so the write lock and the writers' turn are given
    back. It used to stay open, holding both, until this Database's next batch rolled it back
    (another process or Database waited the busy timeout meanwhile), and its write was lost
    although the COMMIT had been asked for."""
    path = Path(sqlite_db.sqlite_path or "")
    product_id = await _insert_product(sqlite_db, INITIAL)
    thread_busy = threading.Event()
    release = threading.Event()

    def occupy() -> None:
        thread_busy.set()
        release.wait(5)

    async def batch() -> None:
        async with sqlite_db.write_batch() as conn:
            await conn.execute(
                update(products).where(products.c.id == product_id).values(inventory_count=5)
            )
            # Keep the batch thread busy so that the COMMIT queues behind this, and the
            # cancellation below lands before the thread takes it up.
            assert sqlite_db._batch_writer is not None
            sqlite_db._batch_writer.io.submit(occupy)
            await asyncio.get_running_loop().run_in_executor(None, thread_busy.wait, 5)

    task = asyncio.create_task(batch())
    await asyncio.get_running_loop().run_in_executor(None, thread_busy.wait, 5)
    await asyncio.sleep(0.05)  # the task now waits for its COMMIT
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await asyncio.sleep(0.1)  # the COMMIT runs on the batch thread
    assert _turn_is_free(path)
    assert await _inventory(sqlite_db, product_id) == 5
    async with asyncio.timeout(5):
        async with sqlite_db.write_batch() as conn:
            await conn.execute(
                update(products)
                .where(products.c.id == product_id)
                .values(inventory_count=products.c.inventory_count + 1)
            )
    assert await _inventory(sqlite_db, product_id) == 6
    assert _turn_is_free(path)
