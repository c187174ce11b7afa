"""Rounds: one round trip shared by every caller that arrived before it was sent.

A network read per request (the change stamps on PostgreSQL) or a counter bump per request
(the rate limit in Redis) costs a round trip and, in Python, ~50-100 µs of client code each.
Under load, most of them are waiting at the same moment. :class:`Rounds` runs the operation in
*rounds*: a caller joins the round that has not been sent yet, and a round is sent as soon as
the previous one has returned. So each caller's answer comes from a round trip that *started
after the caller arrived* — exactly what its own round trip would have seen (a commit that
finished before the caller arrived is in it) — while one round trip serves all of them.

Latency: at most two round trips (the one in flight when the caller came, then its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")  # what one round returns
A = TypeVar("A")  # what one caller brings to the round


class Rounds(Generic[A, T]):
    """``await rounds.join(arg)``: ``arg`` joins the next round; ``send(args)`` runs a round
    for every arg that joined it and returns one result for all of them (or raises: every
    caller of that round gets the error)."""

    def __init__(self, send: Callable[[list[A]], Awaitable[T]]) -> None:
        self._send = send
        self._next: list[A] = []
        self._next_result: asyncio.Future[T] | None = None
        self._runner: asyncio.Task[None] | None = None

    async def join(self, arg: A) -> tuple[T, int]:
        """The round's result, and this caller's index among the round's args."""
        if self._next_result is None:
            self._next_result = asyncio.get_running_loop().create_future()
        index = len(self._next)
        self._next.append(arg)
        result = self._next_result
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="rounds")
        # Not cancelled with one caller: the round serves the others.
        return await asyncio.shield(result), index

    async def _run(self) -> None:
        try:
            while self._next_result is not None:
                args, self._next = self._next, []
                result, self._next_result = self._next_result, None
                try:
                    value = await self._send(args)
                except Exception as exc:
                    if not result.done():
                        result.set_exception(exc)
                else:
                    if not result.done():
                        result.set_result(value)
        finally:
            self._runner = None
            if self._next_result is not None and not self._next_result.done():
                # Only after a cancellation (the loop is closing): nobody will send this round.
                self._next_result.set_exception(RuntimeError("rounds stopped"))
                self._next_result = None
                self._next = []
