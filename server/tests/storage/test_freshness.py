"""The SQLite change tracker: PRAGMA data_version on the tracker's own connection tells whether
another connection (of any process) committed; the stamps are read only when one did."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from commerce_api.http.context import RequestContext
from commerce_api.readpath.service import ReadPath
from commerce_api.storage import freshness
from commerce_api.storage.db import Database
from commerce_api.storage.freshness import stamps


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
    track = freshness.SQLiteTracker.open(database)
    statements: list[str] = []
    track._conn.set_trace_callback(statements.append)
    yield track, statements
    await track.close()


def bump(path: str, name: str, value: str) -> None:
    """Commit a new stamp from a connection of our own (another connection, as a write is)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("UPDATE instance_values SET value = ? WHERE name = ?", (value, name))
    finally:
        conn.close()


async def bump_in_another_process(path: str, name: str, value: str) -> None:
    """Commit a new stamp from another process (as another worker's write would)."""
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        'c.execute("UPDATE instance_values SET value = ? WHERE name = ?", sys.argv[2:])'
    )
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script, path, value, name], check=True
    )


async def test_only_data_version_is_asked_while_nothing_is_committed(
    tracker: tuple[freshness.SQLiteTracker, list[str]],
) -> None:
    track, statements = tracker
    assert track.known() is None  # nothing read yet
    first = await track.current()
    assert first is not None
    assert first.auth is not None
    assert first.catalog is not None
    statements.clear()
    for _ in range(100):
        await next_step()
        assert track.known() is first
        assert await track.current() is first
    # once per loop step (shared by its calls), and the stamps were not read again
    assert statements == ["PRAGMA data_version"] * 100


async def next_step() -> None:
    """Let the event loop start its next step, as the next request's arrival would."""
    await asyncio.sleep(0)


async def test_one_loop_step_asks_once_and_what_is_queued_after_asks_again(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    """Every call of one loop step shares its answer: each was queued before the answer was
    asked, so nothing it was sent after can have committed later. A callback queued after the
    ask (a request read after it) asks again and sees what committed in between."""
    track, statements = tracker
    first = await track.current()
    await next_step()
    statements.clear()
    assert track.known() is first
    bump(database, freshness.CATALOG, "in-between")
    assert track.known() is first  # the same step: called for a request queued before
    assert statements == ["PRAGMA data_version"]
    seen: list[freshness.Versions | None] = []
    loop = asyncio.get_running_loop()
    arrived = loop.create_future()

    async def later_request() -> None:
        seen.append(track.known() or await track.current())
        arrived.set_result(None)

    loop.call_soon(lambda: loop.create_task(later_request()))
    await arrived
    assert seen[0] is not None
    assert seen[0].catalog == "in-between"


async def test_a_commit_by_another_connection_is_seen_by_the_next_call(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, _ = tracker
    await track.current()
    for round_ in range(20):
        bump(database, freshness.AUTH, f"auth-{round_}")
        await next_step()
        versions = await track.current()
        assert versions is not None
        assert versions.auth == f"auth-{round_}"
        bump(database, freshness.CATALOG, f"catalog-{round_}")
        await next_step()
        versions = await track.current()
        assert versions is not None
        assert versions.catalog == f"catalog-{round_}"


async def test_a_commit_by_another_process_is_seen_by_the_next_call(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, _ = tracker
    await track.current()
    await bump_in_another_process(database, freshness.CATALOG, "from-elsewhere")
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
    await next_step()
    statements.clear()
    again = await track.current()
    assert again is not None
    assert first is not None
    assert (again.auth, again.catalog) == (first.auth, first.catalog)
    assert again.data_version != first.data_version  # what the product cache goes by
    # known() finds a change, current() reads the stamps under the new value
    assert statements == ["PRAGMA data_version"] * 2 + [stamps.SELECT_STAMPS]
    statements.clear()
    assert track.known() is again
    assert statements == []  # the step's answer, shared
    await next_step()
    assert track.known() is again
    assert statements == ["PRAGMA data_version"]


async def test_a_commit_seen_by_known_is_read_by_current(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    track, _ = tracker
    first = await track.current()
    bump(database, freshness.AUTH, "changed")
    await next_step()
    assert track.known() is None  # changed: current() reads the stamps again
    versions = await track.current()
    assert versions is not None
    assert first is not None
    assert (versions.auth, versions.catalog) == ("changed", first.catalog)
    assert track.known() is versions


def checkpoint(path: str) -> tuple[int, int]:
    """A TRUNCATE checkpoint from a connection of our own: (busy, the WAL's size after it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=0")  # report a reader at once rather than wait
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    return busy, Path(f"{path}-wal").stat().st_size


async def test_the_tracker_never_keeps_a_checkpoint_from_emptying_the_wal(
    database: str, tracker: tuple[freshness.SQLiteTracker, list[str]]
) -> None:
    """A read transaction left open (a statement not run to its end) would pin the WAL: a
    TRUNCATE checkpoint would report itself busy and the WAL would grow without bound."""
    track, _ = tracker
    await track.current()
    bump(database, freshness.AUTH, "before-the-checkpoint")
    await next_step()
    assert track.known() is None
    assert await track.current() is not None
    assert track.known() is not None
    assert checkpoint(database) == (0, 0)


async def test_the_tracker_refuses_a_thread_other_than_its_own(
    tracker: tuple[freshness.SQLiteTracker, list[str]],
) -> None:
    """Its connection belongs to the event loop's thread: another thread is told so, loudly,
    rather than shown stamps that are not known to be current."""
    track, _ = tracker
    await track.current()
    await next_step()  # not the answer shared by this step: the thread must ask
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            track.known()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], sqlite3.ProgrammingError)
    assert track.known() is not None  # still fine on its own thread


async def test_the_read_path_sees_a_commit_of_another_process_at_its_next_request(
    database: str,
) -> None:
    """Through ``ReadPath.open``, as the app makes it: the stamps of the next request."""
    db = Database(f"sqlite:///{database}")
    read_path = await ReadPath.open(db, "sandbox")
    try:
        versions = await read_path.versions(RequestContext("req_test"))
        assert versions is not None
        await bump_in_another_process(database, freshness.AUTH, "revoked")
        versions = await read_path.versions(RequestContext("req_test"))
        assert versions is not None
        assert versions.auth == "revoked"
    finally:
        await read_path.close()
        await db.dispose()
