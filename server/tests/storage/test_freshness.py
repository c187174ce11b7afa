"""The SQLite change tracker: the WAL-index header (shared memory) as the cheap signal, PRAGMA
data_version as the exact one, the stamps read only when something was committed."""

from __future__ import annotations

import asyncio
import mmap
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from commerce_api.http.context import RequestContext
from commerce_api.readpath.reader import open_sqlite
from commerce_api.readpath.service import ReadPath
from commerce_api.storage import freshness, wal_index
from commerce_api.storage.db import Database


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[str]:
    path = tmp_path / "tracker.db"
    db = Database(f"sqlite:///{path}")
    await db.migrate()
    read_path = await ReadPath.open(db, "sandbox")  # gives the stamps their first values
    await read_path.close()
    yield str(path)
    await db.dispose()


@pytest.fixture
async def tracker(database: str) -> AsyncIterator[tuple[freshness.SQLiteTracker, list[str]]]:
    conn = open_sqlite(database)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    hold: list[wal_index.WalIndex] = []

    def header() -> mmap.mmap | None:
        index = wal_index.acquire(database)
        assert index is not None
        hold.append(index)
        return index.view

    tracker = freshness.SQLiteTracker(conn, header)
    yield tracker, statements
    await tracker.close()
    for index in hold:
        index.release()


def bump(path: str, name: str, value: str) -> None:
    """Commit a new stamp from a connection of our own (another connection, as a write is)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("UPDATE instance_values SET value = ? WHERE name = ?", (value, name))
    finally:
        conn.close()


async def test_no_statement_runs_while_nothing_is_committed(
    tracker: tuple[freshness.SQLiteTracker, list[str]],
) -> None:
    track, statements = tracker
    first = await track.current()
    assert first is not None
    assert first.auth is not None
    assert first.catalog is not None
    assert await track.current() is first  # the header is known from the second call on
    statements.clear()
    for _ in range(100):
        assert await track.current() is first
    assert statements == []  # the shared-memory header alone answered


async def test_a_commit_by_another_connection_is_seen_by_the_next_call(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, _ = tracker
    await track.current()
    for round_ in range(20):
        bump(database, freshness.AUTH, f"auth-{round_}")
        versions = await track.current()
        assert versions is not None
        assert versions.auth == f"auth-{round_}"
        bump(database, freshness.CATALOG, f"catalog-{round_}")
        versions = await track.current()
        assert versions is not None
        assert versions.catalog == f"catalog-{round_}"


async def test_a_commit_by_another_process_is_seen_by_the_next_call(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, _ = tracker
    await track.current()
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute(\"UPDATE instance_values SET value = 'from-elsewhere' WHERE name = ?\", "
        "(sys.argv[2],))"
    )
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script, database, freshness.CATALOG], check=True
    )
    versions = await track.current()
    assert versions is not None
    assert versions.catalog == "from-elsewhere"


async def test_a_commit_that_touches_no_stamp_moves_data_version_once(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, statements = tracker
    await track.current()
    first = await track.current()
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute(  # a commit that changes no stamp
        "INSERT INTO instance_values (name, value, created_at) "
        "VALUES ('unrelated', 'x', '2026-01-01 00:00:00.000000')"
    )
    conn.close()
    statements.clear()
    again = await track.current()
    assert again is not None
    assert first is not None
    assert (again.auth, again.catalog) == (first.auth, first.catalog)
    assert again.data_version != first.data_version  # what the product cache goes by
    assert any("data_version" in statement for statement in statements)
    statements.clear()
    await track.current()
    assert statements == []


async def test_without_the_shared_memory_every_call_asks_data_version(database: str) -> None:
    conn = open_sqlite(database)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    track = freshness.SQLiteTracker(conn, lambda: None)  # as when the map cannot be made
    try:
        await track.current()
        statements.clear()
        await track.current()
        await track.current()
        assert sum("data_version" in statement for statement in statements) == 2
        bump(database, freshness.AUTH, "changed")
        versions = await track.current()
        assert versions is not None
        assert versions.auth == "changed"
    finally:
        await track.close()


# SQLite's "dead man switch": a shared lock on byte 128 of the -shm file, held by every process
# with a connection open (UNIX_SHM_DMS in os_unix.c). A process that opens the database and
# finds nobody holding it truncates and rebuilds the WAL index under the others' feet.
_DMS_HELD_ELSEWHERE = """
import fcntl, os, struct, sys
fd = os.open(sys.argv[1] + "-shm", os.O_RDWR)
probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 128, 1, 0)
print(struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, probe))[0] != fcntl.F_UNLCK)
"""


async def sqlite_locks_held_by_this_process(database: str) -> bool:
    """Whether another process sees this one holding SQLite's lock on the -shm file (a
    process never sees its own POSIX locks, hence the child)."""
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _DMS_HELD_ELSEWHERE, database],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() == "True"


async def test_mapping_the_wal_index_keeps_sqlites_locks(database: str) -> None:
    """Regression: the map's descriptor used to be closed at once, and closing any descriptor
    of a file drops all of the process's POSIX locks on it, SQLite's included; a server then
    died of SIGBUS when another process opened the database and rebuilt the WAL index."""
    db = Database(f"sqlite:///{database}")
    read_path = await ReadPath.open(db, "sandbox")
    try:
        assert await sqlite_locks_held_by_this_process(database)
        # the tracker maps the header here
        versions = await read_path.versions(RequestContext("req_test"))
        assert versions is not None
        assert read_path.tracker._shm is not None  # type: ignore[attr-defined]
        assert await sqlite_locks_held_by_this_process(database)
        # A second user of the same file in this process, let go while the first goes on.
        other = wal_index.acquire(database)
        assert other is not None
        other.release()
        other.release()  # idempotent
        assert await sqlite_locks_held_by_this_process(database)
        bump(database, freshness.AUTH, "after-the-map")
        versions = await read_path.versions(RequestContext("req_test"))
        assert versions is not None
        assert versions.auth == "after-the-map"
    finally:
        await read_path.close()
        await db.dispose()
