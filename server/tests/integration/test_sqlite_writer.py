"""SQLite group commit (``commerce_api.sqlite_writer``): batching, a failing job undone alone,
results only after the commit, a failed commit failing the whole batch, and ``close()``.

Batches are made deterministic by holding the database's write lock from another connection
(as another process would): the writer's ``BEGIN IMMEDIATE`` waits for it, so the jobs
submitted meanwhile queue up and form the next batch together. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from commerce_api.sqlite_writer import SQLiteWriter

WAIT_SECONDS = 10.0
CREATED_AT = "2026-03-01 09:30:00.000000"  # SQLAlchemy's stored format for UTCDateTime
PREFIX = "writer-test-"
GHOST_LINE = (
    "INSERT INTO order_items (order_id, position, product_id, name, quantity, unit_price_minor) "
    "VALUES ('ord_missing', 0, 'prod_missing', 'Ghost', 1, 100)"
)

Job = Callable[[sqlite3.Connection], str]


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def path(sqlite_database_url: str) -> str:
    """A migrated SQLite file of this test's own (a copy of the session's template)."""
    database = make_url(sqlite_database_url).database
    assert database is not None
    assert Path(database).is_file()
    return database


@pytest.fixture
async def writer(path: str) -> AsyncIterator[SQLiteWriter]:
    instance = SQLiteWriter(path)
    try:
        yield instance
    finally:
        await instance.close()


def insert(name: str) -> Job:
    """A job that inserts ``instance_values`` row ``name`` and returns the name."""

    def job(conn: sqlite3.Connection) -> str:
        conn.execute(
            "INSERT INTO instance_values (name, value, created_at) VALUES (?, ?, ?)",
            (PREFIX + name, f"value of {name}", CREATED_AT),
        )
        return name

    return job


class JobFailed(Exception):
    pass


def insert_then_fail(name: str) -> Job:
    """A job that inserts two rows, then raises."""

    def job(conn: sqlite3.Connection) -> str:
        insert(name)(conn)
        insert(name + "-second")(conn)
        raise JobFailed(name)

    return job


def violate_a_deferred_foreign_key(conn: sqlite3.Connection) -> str:
    """Succeeds on its own but makes the batch's COMMIT fail: with foreign keys deferred
    (``defer_foreign_keys`` lasts until the transaction ends), an order line pointing to no
    order is only checked at COMMIT."""
    conn.execute("PRAGMA defer_foreign_keys=ON")
    conn.execute(GHOST_LINE)
    return "deferred"


@contextmanager
def connection(path: str) -> Iterator[sqlite3.Connection]:
    """A connection of its own (not the writer's)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=WAIT_SECONDS)
    try:
        yield conn
    finally:
        conn.close()


def stored_names(path: str) -> set[str]:
    with connection(path) as conn:
        rows = conn.execute(
            "SELECT name FROM instance_values WHERE name LIKE ?", (PREFIX + "%",)
        ).fetchall()
    return {str(name).removeprefix(PREFIX) for (name,) in rows}


def order_item_count(path: str) -> int:
    with connection(path) as conn:
        (count,) = conn.execute("SELECT count(*) FROM order_items").fetchone()
    assert isinstance(count, int)
    return count


async def turns(count: int = 5) -> None:
    """Let the event loop run every ready callback ``count`` times over."""
    for _ in range(count):
        await asyncio.sleep(0)


@asynccontextmanager
async def write_lock_held(path: str) -> AsyncIterator[None]:
    """Another connection holds the write lock inside the block (released at its end)."""
    with connection(path) as other:
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")


async def one_batch(writer: SQLiteWriter, path: str, jobs: list[Job]) -> list[str | BaseException]:
    """Run ``jobs`` as one batch of their own; their results (or exceptions), in order.

    A first job is submitted while another connection holds the write lock, so the writer is
    busy starting that job's batch; the jobs submitted then wait and form the next batch."""
    batches, count = writer.batches, writer.jobs
    async with write_lock_held(path):
        first = asyncio.create_task(writer.run(insert(f"first-{batches}")))
        await turns()
        tasks = [asyncio.create_task(writer.run(job)) for job in jobs]
        await turns()
        assert not first.done()
        assert not any(task.done() for task in tasks), "nothing is answered before a commit"
    assert await asyncio.wait_for(first, WAIT_SECONDS) == f"first-{batches}"
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_SECONDS)
    assert (writer.batches - batches, writer.jobs - count) == (2, len(jobs) + 1), (
        "the jobs should have shared one batch"
    )
    return results


# --- group commit ------------------------------------------------------------------------------


async def test_fifty_concurrent_runs_all_commit_in_fewer_batches_than_jobs(
    writer: SQLiteWriter, path: str
) -> None:
    """Submitted together (all queued before the writer starts), they share one commit."""
    names = [f"row-{index:02d}" for index in range(50)]
    results = await asyncio.wait_for(
        asyncio.gather(*(writer.run(insert(name)) for name in names)), WAIT_SECONDS
    )
    assert results == names
    assert stored_names(path) == set(names)
    assert writer.jobs == 50
    assert writer.batches < writer.jobs
    assert writer.batches == 1


async def test_jobs_queued_while_another_writer_holds_the_lock_share_the_next_batch(
    writer: SQLiteWriter, path: str
) -> None:
    names = [f"held-{index:02d}" for index in range(50)]
    results = await one_batch(writer, path, [insert(name) for name in names])
    assert results == names
    assert stored_names(path) == {"first-0", *names}
    assert (writer.batches, writer.jobs) == (2, 51)


async def test_jobs_run_in_the_order_they_were_submitted(writer: SQLiteWriter, path: str) -> None:
    seen: list[int] = []

    def numbered(index: int) -> Job:
        def job(conn: sqlite3.Connection) -> str:
            seen.append(index)
            return str(index)

        return job

    results = await one_batch(writer, path, [numbered(index) for index in range(20)])
    assert results == [str(index) for index in range(20)]
    assert seen == list(range(20))


# --- a failing job is undone alone ---------------------------------------------------------------


async def test_a_job_that_raises_is_rolled_back_alone_and_its_caller_gets_the_error(
    writer: SQLiteWriter, path: str
) -> None:
    before, failing, after = await one_batch(
        writer, path, [insert("before"), insert_then_fail("failing"), insert("after")]
    )
    assert (before, after) == ("before", "after")
    assert isinstance(failing, JobFailed)
    assert failing.args == ("failing",)
    assert stored_names(path) == {"first-0", "before", "after"}


async def test_a_job_whose_statement_fails_is_rolled_back_alone(
    writer: SQLiteWriter, path: str
) -> None:
    """A constraint error inside a job (a duplicate key) undoes that job's earlier rows too."""
    assert await writer.run(insert("taken")) == "taken"

    def duplicate(conn: sqlite3.Connection) -> str:
        insert("first-of-duplicate")(conn)
        insert("taken")(conn)  # primary key violation
        return "unreachable"

    one, error, two = await one_batch(writer, path, [insert("one"), duplicate, insert("two")])
    assert (one, two) == ("one", "two")
    assert isinstance(error, sqlite3.IntegrityError)
    assert stored_names(path) == {"taken", "first-1", "one", "two"}


async def test_several_failing_jobs_in_one_batch_each_get_their_own_error(
    writer: SQLiteWriter, path: str
) -> None:
    jobs = [insert_then_fail(f"bad-{i}") if i % 2 else insert(f"good-{i}") for i in range(10)]
    results = await one_batch(writer, path, jobs)
    for index, result in enumerate(results):
        if index % 2:
            assert isinstance(result, JobFailed)
            assert result.args == (f"bad-{index}",)
        else:
            assert result == f"good-{index}"
    assert stored_names(path) == {"first-0", *(f"good-{i}" for i in range(0, 10, 2))}


# --- results only after the commit -------------------------------------------------------------


async def test_a_result_is_delivered_only_once_its_batch_is_committed(
    writer: SQLiteWriter, path: str
) -> None:
    """As soon as ``run`` returns, another connection sees the row."""
    with connection(path) as other:
        for index in range(25):
            name = f"visible-{index}"
            assert await writer.run(insert(name)) == name
            found = other.execute(
                "SELECT value FROM instance_values WHERE name = ?", (PREFIX + name,)
            ).fetchone()
            assert found == (f"value of {name}",), f"{name} was answered before it committed"


class GatedConnection(sqlite3.Connection):
    """A connection whose COMMIT waits until the test opens the gate."""

    commit_entered: threading.Event
    commit_gate: threading.Event

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql == "COMMIT":
            self.commit_entered.set()
            assert self.commit_gate.wait(WAIT_SECONDS), "the test never opened the gate"
        return super().execute(sql, parameters)


class GatedWriter(SQLiteWriter):
    """The writer, on a connection whose COMMIT the test holds."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.commit_entered = threading.Event()
        self.commit_gate = threading.Event()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            isolation_level=None,
            check_same_thread=False,
            timeout=WAIT_SECONDS,
            factory=GatedConnection,
        )
        assert isinstance(conn, GatedConnection)
        conn.commit_entered = self.commit_entered
        conn.commit_gate = self.commit_gate
        conn.execute("PRAGMA foreign_keys=ON")
        return conn


async def test_a_job_that_ran_is_not_answered_until_its_commit_returns(path: str) -> None:
    ran: list[str] = []

    def recorded(conn: sqlite3.Connection) -> str:
        insert("pending")(conn)
        ran.append("pending")
        return "pending"

    writer = GatedWriter(path)
    try:
        task = asyncio.create_task(writer.run(recorded))
        try:
            assert await asyncio.to_thread(writer.commit_entered.wait, WAIT_SECONDS)
            assert ran == ["pending"], "the job has run"
            await turns()
            assert not task.done(), "answered before its COMMIT returned"
            assert "pending" not in stored_names(path)
        finally:
            writer.commit_gate.set()
        assert await asyncio.wait_for(task, WAIT_SECONDS) == "pending"
        assert "pending" in stored_names(path)
    finally:
        writer.commit_gate.set()
        await writer.close()


async def test_a_job_waits_for_its_batch_to_begin(writer: SQLiteWriter, path: str) -> None:
    """While another connection holds the write lock, the job has not run yet."""
    ran: list[str] = []

    def recorded(conn: sqlite3.Connection) -> str:
        insert("pending")(conn)
        ran.append("pending")
        return "pending"

    async with write_lock_held(path):
        task = asyncio.create_task(writer.run(recorded))
        await turns()
        assert not task.done()
        assert ran == [], "the job must wait for the batch's BEGIN"
    assert await asyncio.wait_for(task, WAIT_SECONDS) == "pending"
    assert ran == ["pending"]
    assert "pending" in stored_names(path)


# --- a failed commit fails the whole batch -----------------------------------------------------


async def test_a_failed_commit_fails_every_job_of_the_batch_and_keeps_nothing(
    writer: SQLiteWriter, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [insert("a"), violate_a_deferred_foreign_key, insert("b"), insert_then_fail("c")]
    tasks = [asyncio.create_task(writer.run(job)) for job in jobs]
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_SECONDS)
    assert (writer.batches, writer.jobs) == (1, 4), "the four jobs should have shared a batch"
    for result in results:
        assert isinstance(result, sqlite3.IntegrityError), results
        assert "FOREIGN KEY" in str(result)
    assert stored_names(path) == set()
    assert order_item_count(path) == 0
    assert "none of it was kept" in caplog.text

    # The writer carries on: the next batch commits, and foreign keys are checked at once again
    # (the deferral ended with the failed transaction).
    assert await writer.run(insert("next")) == "next"
    assert stored_names(path) == {"next"}

    def ghost_line(conn: sqlite3.Connection) -> str:
        conn.execute(GHOST_LINE)
        return "inserted"

    with pytest.raises(sqlite3.IntegrityError):
        await writer.run(ghost_line)
    assert order_item_count(path) == 0


async def test_a_failed_commit_does_not_touch_the_batches_before_and_after(
    writer: SQLiteWriter, path: str
) -> None:
    assert await writer.run(insert("earlier")) == "earlier"
    results = await one_batch(writer, path, [insert("doomed"), violate_a_deferred_foreign_key])
    assert all(isinstance(result, sqlite3.IntegrityError) for result in results), results
    assert await writer.run(insert("later")) == "later"
    # "first-1" committed in a batch of its own before the doomed batch.
    assert stored_names(path) == {"earlier", "first-1", "later"}


# --- close -------------------------------------------------------------------------------------


async def test_close_finishes_the_jobs_already_queued(writer: SQLiteWriter, path: str) -> None:
    names = [f"queued-{index}" for index in range(30)]
    async with write_lock_held(path):
        tasks = [asyncio.create_task(writer.run(insert(name))) for name in names]
        await turns()
        closing = asyncio.create_task(writer.close())
        await turns()
        assert not closing.done(), "close() waits for the queued jobs"
        assert not any(task.done() for task in tasks)
    await asyncio.wait_for(closing, WAIT_SECONDS)
    assert all(task.done() for task in tasks), "every queued job was answered by close()"
    assert [task.result() for task in tasks] == names
    assert stored_names(path) == set(names)
    assert writer.jobs == 30


async def test_close_right_after_submitting_still_runs_the_jobs(path: str) -> None:
    writer = SQLiteWriter(path)
    tasks = [asyncio.create_task(writer.run(insert(f"late-{index}"))) for index in range(5)]
    await asyncio.sleep(0)  # the jobs are submitted; the writer has not started them yet
    await asyncio.wait_for(writer.close(), WAIT_SECONDS)
    assert [task.result() for task in tasks] == [f"late-{index}" for index in range(5)]
    assert stored_names(path) == {f"late-{index}" for index in range(5)}


async def test_close_without_any_job_and_twice_is_harmless(path: str) -> None:
    idle = SQLiteWriter(path)
    await idle.close()
    used = SQLiteWriter(path)
    assert await used.run(insert("once")) == "once"
    await used.close()
    await used.close()
    assert stored_names(path) == {"once"}


async def test_a_batch_committing_when_the_writer_is_cancelled_is_answered_as_committed(
    path: str,
) -> None:
    """The loop closing cancels the writer's task; a COMMIT already running on the thread goes
    on, and its callers must hear that it committed (not a failure), the rest that the writer
    stopped."""
    writer = GatedWriter(path)
    try:
        committing = asyncio.create_task(writer.run(insert("in-commit")))
        assert await asyncio.to_thread(writer.commit_entered.wait, WAIT_SECONDS)
        queued = asyncio.create_task(writer.run(insert("queued")))
        await turns()
        runner = writer._runner
        assert runner is not None
        runner.cancel()
        await turns()
        assert not committing.done(), "answered before the COMMIT's outcome was known"
        writer.commit_gate.set()
        assert await asyncio.wait_for(committing, WAIT_SECONDS) == "in-commit"
        with pytest.raises(RuntimeError, match="stopped"):
            await asyncio.wait_for(queued, WAIT_SECONDS)
        with pytest.raises(asyncio.CancelledError):
            await runner
        assert stored_names(path) == {"in-commit"}
        # The writer serves again afterwards.
        assert await writer.run(insert("after")) == "after"
    finally:
        writer.commit_gate.set()
        await writer.close()
