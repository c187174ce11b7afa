"""The queue of a process's SQLite writers (``Database.write``): SQLite admits one writer at a
time, so the process's write transactions wait for each other here, in order, rather than in
SQLite's busy handler (which polls with sleeps of up to 100 ms); each starts the moment the one
before it is done. A wait here counts against the writer's deadline, like its wait for the
file's lock after it (``storage.deadlines``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from commerce_api.storage.deadlines import DatabaseTimeout


class WritersQueue:
    """One lock per event loop (a lock belongs to the loop it was first waited on in)."""

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @asynccontextmanager
    async def turn(self, deadline: float | None) -> AsyncIterator[None]:
        """This writer's turn, waited for until ``deadline`` (the loop's time) at most, else
        :class:`DatabaseTimeout`."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        lock = self._lock
        if deadline is None:
            async with lock:
                yield
            return
        # Always with the deadline: a lock just let go is not ``locked()`` while the waiter it
        # woke has yet to run, and an ``acquire`` then queues behind that one (a write could
        # wait 5.5 s for a turn so begun).
        try:
            async with asyncio.timeout_at(deadline):
                await lock.acquire()
        except TimeoutError:
            raise DatabaseTimeout(
                "a write waited past its deadline for the database file's lock"
            ) from None
        try:
            yield
        finally:
            lock.release()
