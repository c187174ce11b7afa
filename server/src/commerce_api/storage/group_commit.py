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
  alone, in a transaction of its own: one bad item fails only itself. A batch that failed on
  a lost connection (a pooled one that died while idle) runs once more, whole. One that met a
  deadline (``storage.deadlines``: a lock, a statement, its transaction's) is not run again:
  each item gets the error (a 503), within the deadline, rather than meeting it once per item.
- Each item's deadline (``Database.deadline``) is set when it is submitted, and a batch's
  transaction ends by the soonest of its items' (``write_batch(by=…)``): an item that waited
  for the batch before its own meets one deadline in all, not that batch's and then its own
  (else an order could wait 6 to 8 s behind a batch that met SQLite's lock). An item whose
  deadline passed while it waited is answered at once (:class:`DatabaseTimeout`, a 503).
- While a batch commits, the next requests queue up and form the next batch, so the batch grows
  with the load and one commit is shared by all the items it carries.
- Items with the same ``exclusive`` key never share a batch (the later waits for the next one):
  two requests with one ``Idempotency-Key`` are decided one after the other.

Traced (``core.tracing``), a batch's transaction is one span: the child of the first item's
request span, linked to every other item's (``traceparent_of`` names each item's), because
one transaction serves many requests and a span has one parent.

One batch is in flight per process at a time, or ``in_flight``: on PostgreSQL a batch spends most
of its time waiting on the wire when the database is on another host, and a second batch in its
own transaction overlaps those waits. Batches in flight at once, of one process or of several
(or machines), are serialised by the database's locks as any other writers. The queue is
``core.coalescing.RequestBatcher``'s; this module adds the transaction around each batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Generic, TypeVar

from commerce_api.core import tracing
from commerce_api.core.coalescing import RequestBatcher
from commerce_api.storage.db import Database, Executor
from commerce_api.storage.deadlines import (
    DatabaseTimeout,
    is_database_timeout,
    is_database_unavailable,
)

logger = logging.getLogger("commerce_api.storage.db")

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
MAX_BATCH = 256

RunBatch = Callable[[Executor, list[ItemT]], Awaitable[list[ResultT]]]


@dataclass(slots=True, frozen=True)
class _Queued(Generic[ItemT]):
    item: ItemT
    by: float | None  # its deadline, the loop's time (``Database.deadline``), if any


def _soonest(queued: list[_Queued[ItemT]]) -> float | None:
    deadlines = [entry.by for entry in queued if entry.by is not None]
    return min(deadlines) if deadlines else None


class GroupCommit(Generic[ItemT, ResultT]):
    def __init__(
        self,
        db: Database,
        run_batch: RunBatch[ItemT, ResultT],
        *,
        exclusive: Callable[[ItemT], Hashable | None] = lambda item: None,
        max_batch: int = MAX_BATCH,
        in_flight: int = 1,
        traceparent_of: Callable[[ItemT], str | None] = lambda item: None,
    ) -> None:
        """``run_batch(conn, items)`` writes the items in the transaction it is given and
        returns one result per item, in order; it must not commit or roll back.
        ``in_flight``: how many batches may be in their transactions at once (see the module
        doc). ``traceparent_of(item)``: the trace context the item was submitted in, if any."""
        self._db = db
        self._traceparent_of = traceparent_of
        self._run_batch = run_batch
        self._batcher: RequestBatcher[_Queued[ItemT], ResultT] = RequestBatcher(
            self._send,
            max_batch=max_batch,
            exclusive=lambda queued: exclusive(queued.item),
            in_flight=in_flight,
            name="group-commit",
        )
        self.batches = 0  # for tests and the benchmark: how many commits carried the items
        self.items = 0

    async def submit(self, item: ItemT) -> ResultT:
        """``item``'s result once its batch is committed (or the batch's error, raised)."""
        return await self._batcher.submit(_Queued(item, self._db.deadline()))

    async def close(self) -> None:
        """Finish the items already submitted."""
        await self._batcher.close()

    async def _send(self, queued: list[_Queued[ItemT]]) -> list[ResultT | BaseException]:
        """Each item's outcome: a timeout at once for an item whose deadline has passed, the
        others' from their batch (:meth:`_commit`)."""
        now = asyncio.get_running_loop().time()
        due = [entry for entry in queued if entry.by is None or entry.by > now]
        ran = iter(await self._commit(due) if due else [])
        late = DatabaseTimeout("a write waited past its deadline for its batch's turn")
        if len(due) < len(queued):
            logger.warning("%d writes waited past their deadline", len(queued) - len(due))
        return [next(ran) if entry.by is None or entry.by > now else late for entry in queued]

    async def _commit(
        self, queued: list[_Queued[ItemT]], *, again: bool = True
    ) -> list[ResultT | BaseException]:
        """Each item's result, or the exception that stopped it, by the soonest deadline of
        the items."""
        ran = False
        batch = [entry.item for entry in queued]
        transaction: AbstractAsyncContextManager[Executor] = self._db.write_batch(
            by=_soonest(queued)
        )
        if tracing.ENABLED:
            traceparents = [self._traceparent_of(item) for item in batch]
            transaction = tracing.transaction(transaction, self._db.backend, traceparents)
        try:
            async with transaction as conn:
                results = await self._run_batch(conn, batch)
                ran = True
        except Exception as exc:
            timed_out = is_database_timeout(exc)
            lost = not timed_out and is_database_unavailable(exc)
            if not ran and lost and again:
                # Before the commit: nothing was kept. Once more after a lost connection (a
                # pooled one that died while idle: SQLAlchemy has dropped the pool, the next is
                # fresh); not after a deadline, which would only be met again, item by item.
                return await self._commit(queued, again=False)
            if not ran and len(batch) > 1 and not (timed_out or lost):
                # Each item alone, so one fails only itself.
                return [
                    outcome
                    for entry in queued
                    for outcome in await self._commit([entry], again=False)
                ]
            if timed_out or lost:  # a 503 with Retry-After; no traceback per batch meanwhile
                logger.warning("a batch of %d writes failed: database unavailable", len(batch))
            else:
                logger.exception("a batch of %d writes failed; none of it was kept", len(batch))
            return [exc] * len(batch)
        finally:
            self.batches += 1
            self.items += len(batch)
        if len(results) != len(batch):
            raise RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
        return list(results)
