"""SQLite's checkpoints in the serving process run on their thread, never in a commit: with
``background_checkpoints`` a burst of writes leaves the database file as it was until the
thread checkpoints; without it SQLite checkpoints in the commit that crosses its threshold."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from commerce_api.storage import checkpoints
from commerce_api.storage.db import Database

BLOB = 40_000  # bytes a row: ten pages
ROWS = 150  # ~1,500 pages: past SQLite's automatic threshold of 1,000


async def _burst(db: Database) -> None:
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS blobs (b BLOB)"))
    for _ in range(ROWS):
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


async def test_with_the_thread_no_commit_checkpoints_and_the_thread_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "background.db"
    monkeypatch.setattr(checkpoints, "CHECKPOINT_EVERY_SECONDS", 3600.0)
    db = Database(f"sqlite:///{path}", background_checkpoints=True)
    try:
        await _burst(db)
        assert _file_size(path) < ROWS * BLOB / 10  # every page still in the WAL only
    finally:
        await db.dispose()  # the last connection closed: SQLite folds the WAL in itself
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
