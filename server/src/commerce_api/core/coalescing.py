"""Request coalescing: callers that arrive while a batch is in flight form the next batch.

A commit per write (the order desk, the webhook outcomes), a network read per request (the
change stamps on PostgreSQL) or a counter bump per request (the rate limit in Redis) each cost a
round trip and, in Python, ~50-100 µs of client code. Under load, most of them are waiting at
the same moment. :class:`RequestBatcher` sends them in batches: a caller joins the batch that
has not been sent yet, and a batch is sent as soon as the previous one has returned. So each
caller's answer comes from a send that *started after the caller arrived* — exactly what its
own would have seen (a commit that finished before the caller arrived is in it) — while one
send serves all of them, and the batch grows with the load.

Latency: at most two sends (the one in flight when the caller came, then its own).

- :class:`RequestBatcher`: a result per caller; optionally at most ``max_batch`` callers per
  batch, and callers with the same ``exclusive`` key in separate batches
  (``storage.group_commit`` builds the write transactions on it).
- :class:`Rounds`: the same, when a batch has one result for all its callers (a read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")  # what one caller brings to the batch
R = TypeVar("R")  # what one caller gets back
T = TypeVar("T")  # what one round returns, for all its callers

Send = Callable[[list[A]], Awaitable[Sequence[R | BaseException]]]


class RequestBatcher(Generic[A, R]):
    """``await batcher.submit(arg)``: ``arg`` joins the next batch, and ``send(args)`` returns
    one outcome per arg, in order: a result, or an exception that is raised to that caller
    alone. If ``send`` raises, every caller of the batch gets the error.

    ``in_flight``: how many batches may be sent at once (1: a batch is sent when the one before
    returned). More overlap the waits of a send that is mostly waiting (a transaction whose
    statements cross a network): the next batch forms and is sent while one waits. Callers with
    the same ``exclusive`` key are never in two batches in flight at once."""

    def __init__(
        self,
        send: Send[A, R],
        *,
        max_batch: int | None = None,
        exclusive: Callable[[A], Hashable | None] | None = None,
        in_flight: int = 1,
        name: str = "request-batcher",
    ) -> None:
        self._send = send
        self._max_batch = max_batch
        self._exclusive = exclusive
        self._in_flight = in_flight
        self._name = name
        self._pending: list[tuple[A, asyncio.Future[R]]] = []
        self._runners: set[asyncio.Task[None]] = set()
        self._sending: set[Hashable] = set()  # the exclusive keys of the batches in flight

    async def submit(self, arg: A) -> R:
        """``arg``'s outcome, from the first batch sent after it arrived that has room for it."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((arg, future))
        if len(self._runners) < self._in_flight:
            self._runners.add(asyncio.create_task(self._drain(), name=self._name))
        # A caller that is cancelled cancels only its own future: its arg stays in its batch
        # (it may already be written), and the batch serves the others.
        return await future

    async def close(self) -> None:
        """Wait until the args already submitted have been sent."""
        while self._runners:
            await asyncio.shield(asyncio.gather(*self._runners))

    def _next_batch(self) -> list[tuple[A, asyncio.Future[R]]]:
        if self._max_batch is None and self._exclusive is None:
            everyone, self._pending = self._pending, []
            return everyone
        batch: list[tuple[A, asyncio.Future[R]]] = []
        later: list[tuple[A, asyncio.Future[R]]] = []
        seen = self._sending
        for waiting in self._pending:
            key = None if self._exclusive is None else self._exclusive(waiting[0])
            full = self._max_batch is not None and len(batch) >= self._max_batch
            if full or (key is not None and key in seen):
                later.append(waiting)
                continue
            if key is not None:
                seen.add(key)
            batch.append(waiting)
        self._pending = later
        return batch

    async def _drain(self) -> None:
        # Runs while there is a batch to send; one that only exclusive keys in flight hold back
        # is left to the runner sending those (it looks again when its batch returned).
        try:
            while self._pending:
                batch = self._next_batch()
                if not batch:
                    return
                try:
                    outcomes: Sequence[R | BaseException] = await self._send(
                        [arg for arg, _ in batch]
                    )
                except Exception as exc:
                    outcomes = [exc] * len(batch)
                except BaseException as exc:  # cancelled at shutdown: nobody is left waiting
                    for _, future in batch:
                        _settle(future, exc)
                    raise
                finally:
                    if self._exclusive is not None:
                        for arg, _ in batch:
                            self._sending.discard(self._exclusive(arg))
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    _settle(future, outcome)
        except BaseException:
            for _, future in self._pending:  # cancelled: nobody will send them
                _settle(future, RuntimeError(f"{self._name} stopped"))
            self._pending.clear()
            raise
        finally:  # at once, not when the task is done: a caller arriving now starts another
            self._runners.discard(asyncio.current_task())


def _settle(future: asyncio.Future[R], outcome: R | BaseException) -> None:
    if future.done():  # its caller was cancelled
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class Rounds(Generic[A, T]):
    """``await rounds.join(arg)``: ``arg`` joins the next round; ``send(args)`` runs a round
    for every arg that joined it and returns one result for all of them (or raises: every
    caller of that round gets the error)."""

    def __init__(self, send: Callable[[list[A]], Awaitable[T]]) -> None:
        self._send = send
        self._batcher: RequestBatcher[A, tuple[T, int]] = RequestBatcher(self._round, name="rounds")

    async def join(self, arg: A) -> tuple[T, int]:
        """The round's result, and this caller's index among the round's args."""
        return await self._batcher.submit(arg)

    async def _round(self, args: list[A]) -> list[tuple[T, int]]:
        result = await self._send(args)
        return [(result, index) for index in range(len(args))]
