"""Group commit: many writes waiting at the same moment share one transaction and one commit.

Every durable commit waits for the disk (an fsync: SQLite with ``synchronous=FULL``, PostgreSQL
with ``synchronous_commit=on``), and on a hot row every writer also waits for the one before it
to commit. One commit per request caps writes at a few hundred a second whatever the CPU.
:class:`GroupCommit` takes every item waiting, runs them as one batch in one write transaction
(``Database.write_batch``), and only then answers each caller:

- A result is handed back only after the commit has returned: a caller never sees success for
  a change that is not durable. If the commit fails, every item of the batch gets the error and
  nothing of the batch is kept.
- If the batch fails before its commit (a statement raised), each of its items is run again
  alone, in a transaction of its own: one bad item fails only itself.
- While a batch commits, the next requests queue up and form the next batch, so the batch grows
  with the load and one commit is shared by all the items it carries.
- Items with the same ``exclusive`` key never share a batch (the later waits for the next one):
  two requests with one ``Idempotency-Key`` are decided one after the other.

One batch is in flight per process at a time; several processes (or machines) each run their
own, serialised by the database's locks as any other writers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from commerce_api.storage.db import Database, Executor

logger = logging.getLogger("commerce_api.storage.db")

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
MAX_BATCH = 256

RunBatch = Callable[[Executor, list[ItemT]], Awaitable[list[ResultT]]]


@dataclass(slots=True)
class _Waiting(Generic[ItemT, ResultT]):
    item: ItemT
    future: asyncio.Future[ResultT]


class GroupCommit(Generic[ItemT, ResultT]):
    def __init__(
        self,
        db: Database,
        run_batch: RunBatch[ItemT, ResultT],
        *,
        exclusive: Callable[[ItemT], Hashable | None] = lambda item: None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        """``run_batch(conn, items)`` writes the items in the transaction it is given and
        returns one result per item, in order; it must not commit or roll back."""
        self._db = db
        self._run_batch = run_batch
        self._exclusive = exclusive
        self._max_batch = max_batch
        self._pending: list[_Waiting[ItemT, ResultT]] = []
        self._runner: asyncio.Task[None] | None = None
        self.batches = 0  # for tests and the benchmark: how many commits carried the items
        self.items = 0

    async def submit(self, item: ItemT) -> ResultT:
        """``item``'s result once its batch is committed (or the batch's error, raised)."""
        future: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()
        self._pending.append(_Waiting(item, future))
        if self._runner is None:
            self._runner = asyncio.create_task(self._drain(), name="group-commit")
        # Not cancelled with the caller: its item may already be written or committed.
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Finish the items already submitted."""
        if self._runner is not None:
            await asyncio.shield(self._runner)

    def _next_batch(self) -> list[_Waiting[ItemT, ResultT]]:
        batch: list[_Waiting[ItemT, ResultT]] = []
        later: list[_Waiting[ItemT, ResultT]] = []
        seen: set[Hashable] = set()
        for waiting in self._pending:
            key = self._exclusive(waiting.item)
            if len(batch) >= self._max_batch or (key is not None and key in seen):
                later.append(waiting)
                continue
            if key is not None:
                seen.add(key)
            batch.append(waiting)
        self._pending = later
        return batch

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._next_batch()
                try:
                    outcomes = await self._commit(batch)
                except BaseException as exc:  # cancelled at shutdown: nobody is left waiting
                    for waiting in batch:
                        _settle(waiting.future, exc)
                    raise
                for waiting, outcome in zip(batch, outcomes, strict=True):
                    _settle(waiting.future, outcome)
        finally:
            self._runner = None
            for waiting in self._pending:  # only after a cancellation: nobody will run them
                _settle(waiting.future, RuntimeError("the writer stopped"))
            self._pending.clear()

    async def _commit(self, batch: list[_Waiting[ItemT, ResultT]]) -> list[ResultT | BaseException]:
        """Each item's result, or the exception that stopped it."""
        ran = False
        try:
            async with self._db.write_batch() as conn:
                results = await self._run_batch(conn, [waiting.item for waiting in batch])
                ran = True
        except Exception as exc:
            if ran or len(batch) == 1:
                logger.exception("a batch of %d writes failed; none of it was kept", len(batch))
                return [exc] * len(batch)
            # Before the commit: nothing was kept. Each item alone, so one fails only itself.
            return [outcome for waiting in batch for outcome in await self._commit([waiting])]
        finally:
            self.batches += 1
            self.items += len(batch)
        if len(results) != len(batch):
            raise RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
        return list(results)


def _settle(future: asyncio.Future[ResultT], outcome: ResultT | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
