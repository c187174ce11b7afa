"""SQLite's checkpoints in the serving process run on their thread while it writes little: with
``background_checkpoints`` a burst of writes under 4,000 pages leaves the database file as it
was until the thread checkpoints, a longer one is checkpointed by the commit that crosses 4,000
pages, and the thread skips its rounds while the process commits many writes; without it
SQLite checkpoints in the commit that crosses its threshold of 1,000."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from commerce_api.storage import checkpoints
from commerce_api.storage.checkpoints import BUSY_COMMITS, WalCheckpointer
from commerce_api.storage.db import Database

BLOB = 40_000  # bytes a row: ten pages
ROWS = 150  # ~1,500 pages: past SQLite's automatic threshold of 1,000


async def _burst(db: Database, rows: int = ROWS) -> None:
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS blobs (b BLOB)"))
    for _ in range(rows):
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO blobs VALUES (randomblob(:n))"), {"n": BLOB})
    async with db.write_batch() as batch:  # the order writer's connection too
        await batch.execute(text("INSERT INTO blobs VALUES (randomblob(:n))"), {"n": BLOB})


def _file_size(path: Path) -> int:
    return path.stat().st_size


async def test_without_the_thread_a_commit_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "own.db"
    db = Database(f"sqlite:///{path}")
    try:
        await _burst(db)
        assert _file_size(path) > ROWS * BLOB / 2  # folded into the file by some commit
    finally:
        await db.dispose()


async def _size_before_the_first_round(
    path: Path, monkeypatch: pytest.MonkeyPatch, rows: int = ROWS
) -> int:
    """The database file's size after a burst of ``rows`` with the thread's first round an hour
    away, the engine still open (closed after: the last connection folds the WAL in itself)."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_EVERY_SECONDS", 3600.0)
    db = Database(f"sqlite:///{path}", background_checkpoints=True)
    try:
        await _burst(db, rows)
        return _file_size(path)
    finally:
        await db.dispose()


async def test_with_the_thread_no_commit_checkpoints_and_the_thread_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = await _size_before_the_first_round(tmp_path / "background.db", monkeypatch)
    assert size < ROWS * BLOB / 10  # every page still in the WAL only
    monkeypatch.setattr(checkpoints, "CHECKPOINT_EVERY_SECONDS", 0.05)
    path = tmp_path / "thread.db"
    db = Database(f"sqlite:///{path}", background_checkpoints=True)
    try:
        await _burst(db)
        for _ in range(200):  # up to 10 s
            if _file_size(path) >= ROWS * BLOB:
                break
            await asyncio.sleep(0.05)
        assert _file_size(path) >= ROWS * BLOB  # the thread checkpointed, the engine open
    finally:
        await db.dispose()


async def test_with_the_thread_a_commit_past_4000_pages_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = await _size_before_the_first_round(tmp_path / "backstop.db", monkeypatch, rows=500)
    assert size > 300 * BLOB  # ~5,000 pages: folded into the file by the commit past 4,000


async def test_the_thread_skips_a_round_after_many_write_commits(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'busy.db'}")
    checkpointer = WalCheckpointer(str(tmp_path / "busy.db"))
    checkpointer.count_commits(db.engine.sync_engine)
    try:
        await _burst(db, rows=BUSY_COMMITS + 1)
        async with db.read() as conn:  # a read's end counts for nothing
            await conn.execute(text("SELECT count(*) FROM blobs"))
        assert checkpointer.writing_much()
        assert not checkpointer.writing_much()  # nothing committed since the last round
        await _burst(db, rows=BUSY_COMMITS - 2)
        assert not checkpointer.writing_much()
    finally:
        await db.dispose()
