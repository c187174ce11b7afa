"""Group commit (``commerce_api.storage.group_commit``), on both backends: batching, results
only after the commit, a failing item failing alone, a failed commit failing the whole batch,
exclusive items in separate batches, and ``close()``.

Batches are made deterministic with a gate: the first batch waits inside its transaction until
the test opens the gate, so the items submitted meanwhile queue up and form the next batch
together. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import select, text

from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database, Executor
from commerce_api.storage.group_commit import GroupCommit
from commerce_api.storage.tables import instance_values

WAIT_SECONDS = 10.0
PREFIX = "group-commit-test-"
FAIL = "fail"  # an item whose statement fails
FAIL_AT_COMMIT = "fail-at-commit"  # an item that makes its batch's COMMIT fail
GHOST_LINE = (
    "INSERT INTO order_items (order_id, position, product_id, name, quantity, unit_price_minor) "
    "VALUES ('ord_missing', 0, 'prod_missing', 'Ghost', 1, 1)"
)


class Batches:
    """What ``GroupCommit`` runs here: each item inserts an ``instance_values`` row named after
    it. ``gate`` (when set) holds every batch inside its transaction until it is opened."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.seen: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def run(self, conn: Executor, items: list[str]) -> list[str]:
        self.seen.append(list(items))
        self.entered.set()
        if self.gate is not None:
            await asyncio.wait_for(self.gate.wait(), WAIT_SECONDS)
        for item in items:
            await conn.execute(
                instance_values.insert().values(
                    name=PREFIX + item, value=f"value of {item}", created_at=utcnow()
                )
            )
            if item == FAIL:
                await conn.execute(text("SELECT no_such_column FROM instance_values"))
            if item == FAIL_AT_COMMIT and self.db.is_sqlite:
                # Foreign keys deferred to the COMMIT: a line of an order that does not exist.
                await conn.execute(text("PRAGMA defer_foreign_keys=ON"))
                await conn.execute(text(GHOST_LINE))
        return [item.upper() for item in items]


async def stored(db: Database) -> set[str]:
    async with db.read() as conn:
        names: Any = await conn.scalars(
            select(instance_values.c.name).where(instance_values.c.name.like(PREFIX + "%"))
        )
        return {name.removeprefix(PREFIX) for name in names}


@pytest.fixture
def batches(db: Database) -> Batches:
    return Batches(db)


@asynccontextmanager
async def group(
    db: Database, batches: Batches, exclusive: bool = False
) -> AsyncIterator[GroupCommit[str, str]]:
    def key(item: str) -> Hashable | None:
        return item.split("#")[0] if exclusive else None

    commit: GroupCommit[str, str] = GroupCommit(db, batches.run, exclusive=key)
    try:
        yield commit
    finally:
        await asyncio.wait_for(commit.close(), WAIT_SECONDS)


async def one_batch_after_a_held_one(
    commit: GroupCommit[str, str], batches: Batches, items: list[str]
) -> list[str | BaseException]:
    """Submit ``items`` while a first batch is held open: they form the next batch(es)."""
    batches.gate = asyncio.Event()
    first = asyncio.create_task(commit.submit("first"))
    await asyncio.wait_for(batches.entered.wait(), WAIT_SECONDS)
    tasks = [asyncio.create_task(commit.submit(item)) for item in items]
    for _ in range(5):
        await asyncio.sleep(0)
    assert not first.done(), "answered before its commit"
    assert not any(task.done() for task in tasks), "answered before a commit"
    batches.gate.set()
    assert await asyncio.wait_for(first, WAIT_SECONDS) == "FIRST"
    return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_SECONDS)


async def test_items_waiting_together_share_one_batch_in_submission_order(
    db: Database, batches: Batches
) -> None:
    async with group(db, batches) as commit:
        results = await one_batch_after_a_held_one(commit, batches, ["a", "b", "c", "d"])
    assert results == ["A", "B", "C", "D"]
    assert batches.seen == [["first"], ["a", "b", "c", "d"]]
    assert commit.batches == 2
    assert await stored(db) == {"first", "a", "b", "c", "d"}


async def test_fifty_concurrent_items_commit_in_fewer_batches_than_items(
    db: Database, batches: Batches
) -> None:
    async with group(db, batches) as commit:
        names = [f"item-{i}" for i in range(50)]
        results = await asyncio.wait_for(
            asyncio.gather(*(commit.submit(name) for name in names)), WAIT_SECONDS
        )
    assert results == [name.upper() for name in names]
    assert commit.items == 50
    assert commit.batches < 50
    assert await stored(db) == set(names)


async def test_a_result_is_answered_only_once_its_batch_is_committed(
    db: Database, batches: Batches
) -> None:
    async with group(db, batches) as commit:
        batches.gate = asyncio.Event()
        task = asyncio.create_task(commit.submit("durable"))
        await asyncio.wait_for(batches.entered.wait(), WAIT_SECONDS)
        assert await stored(db) == set(), "another connection sees nothing before the commit"
        assert not task.done()
        batches.gate.set()
        assert await asyncio.wait_for(task, WAIT_SECONDS) == "DURABLE"
        assert await stored(db) == {"durable"}, "answered: committed"


async def test_an_item_that_fails_fails_alone_and_the_rest_of_its_batch_is_kept(
    db: Database, batches: Batches
) -> None:
    async with group(db, batches) as commit:
        results = await one_batch_after_a_held_one(commit, batches, ["a", FAIL, "b"])
    assert results[0] == "A"
    assert results[2] == "B"
    assert isinstance(results[1], Exception)
    # The batch failed before its commit, then each item ran alone.
    assert batches.seen[1:] == [["a", FAIL, "b"], ["a"], [FAIL], ["b"]]
    assert await stored(db) == {"first", "a", "b"}


@asynccontextmanager
async def commit_refused_on_postgres(db: Database) -> AsyncIterator[None]:
    """On PostgreSQL, a deferred constraint trigger that refuses FAIL_AT_COMMIT's row at the
    COMMIT (SQLite's batch defers its foreign keys instead: see ``Batches.run``)."""
    if db.is_sqlite:
        yield
        return
    statements = [
        "CREATE FUNCTION group_commit_test_guard() RETURNS trigger AS $$ BEGIN "
        f"IF NEW.name = '{PREFIX}{FAIL_AT_COMMIT}' THEN RAISE EXCEPTION 'refused at commit'; "
        "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE CONSTRAINT TRIGGER group_commit_test_guard AFTER INSERT ON instance_values "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION group_commit_test_guard()",
    ]
    async with db.write() as conn:
        for statement in statements:
            await conn.exec_driver_sql(statement)
    try:
        yield
    finally:
        async with db.write() as conn:
            await conn.exec_driver_sql("DROP TRIGGER group_commit_test_guard ON instance_values")
            await conn.exec_driver_sql("DROP FUNCTION group_commit_test_guard()")


async def test_a_failed_commit_fails_every_item_of_the_batch_and_keeps_nothing(
    db: Database, batches: Batches, caplog: pytest.LogCaptureFixture
) -> None:
    async with commit_refused_on_postgres(db), group(db, batches) as commit:
        results = await one_batch_after_a_held_one(commit, batches, ["a", FAIL_AT_COMMIT, "b"])
        after = await commit.submit("after")
    assert all(isinstance(result, Exception) for result in results)
    assert batches.seen[1:] == [["a", FAIL_AT_COMMIT, "b"], ["after"]], "not run again"
    assert await stored(db) == {"first", "after"}, "the batches before and after are kept"
    assert after == "AFTER"
    assert "a batch of 3 writes failed; none of it was kept" in caplog.text


async def test_items_with_one_exclusive_key_never_share_a_batch(
    db: Database, batches: Batches
) -> None:
    async with group(db, batches, exclusive=True) as commit:
        results = await one_batch_after_a_held_one(commit, batches, ["k#1", "other", "k#2", "k#3"])
    assert results == ["K#1", "OTHER", "K#2", "K#3"]
    assert batches.seen[1:] == [["k#1", "other"], ["k#2"], ["k#3"]]


async def test_close_finishes_the_items_already_queued(db: Database, batches: Batches) -> None:
    commit: GroupCommit[str, str] = GroupCommit(db, batches.run)
    tasks = [asyncio.create_task(commit.submit(f"queued-{i}")) for i in range(5)]
    await asyncio.sleep(0)
    await asyncio.wait_for(commit.close(), WAIT_SECONDS)
    assert all(task.done() for task in tasks)
    assert await stored(db) == {f"queued-{i}" for i in range(5)}
    await commit.close()  # twice, and with nothing queued: harmless
