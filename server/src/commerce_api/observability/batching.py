"""Per-request notes handed on in batches (answered requests, to the request log and the
request metrics: ``http.pipeline.RequestObserver``).

Not ``core.coalescing.RequestBatcher``: nobody waits for these writes, and a batch is written
when it is full or after a while, not as soon as the previous one is (docs/decisions.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Batch(Generic[T]):
    """Items noted one at a time and handed to ``write`` together: when ``size`` are waiting,
    ``seconds`` after the first of a batch (a one-shot timer on the running loop), or on
    :meth:`flush`. Outside a running event loop each item is written at once."""

    def __init__(self, write: Callable[[list[T]], None], size: int, seconds: float) -> None:
        self._write = write
        self._size = size
        self._seconds = seconds
        self._items: list[T] = []
        self.timer: asyncio.TimerHandle | None = None

    def add(self, item: T) -> None:
        items = self._items
        items.append(item)
        if len(items) >= self._size:
            self.flush()
        elif self.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self.timer = loop.call_later(self._seconds, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        items, self._items = self._items, []
        if items:
            self._write(items)
