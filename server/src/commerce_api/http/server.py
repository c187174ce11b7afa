"""The HTTP protocol ``serve`` runs: uvicorn's httptools protocol with read deadlines.

Hand-written because uvicorn has none: it closes a connection idle *between* requests
(``timeout_keep_alive``) but waits for ever for a request's head or body, so an idle socket or
one trickling a header line every few seconds holds a connection (and, by the thousand, the
process). Here a request's head must arrive within ``COMMERCE_HTTP_HEADER_TIMEOUT_SECONDS`` of
the connection opening (or of the previous response), and its body within
``COMMERCE_HTTP_BODY_TIMEOUT_SECONDS`` of the head; otherwise the connection is closed (an app
waiting on the body then sees the client gone: a 499 in the metrics, see ``middleware``).
A reverse proxy in front (nginx) has its own such timeouts; these protect a bare ``serve``.

A connection only notes when its deadline falls (a float); one timer per process sweeps them
all a few times per deadline (:class:`_Sweeper`). A timer armed and cancelled per request, as
before, cost ~5 µs of CPU a request — an eighth of a catalogue read. A deadline is therefore
kept to within a quarter of the shorter timeout (at most a second).
"""

from __future__ import annotations

import asyncio
import weakref
from functools import cache
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from commerce_api.settings import Settings


@cache
def _deadlines() -> tuple[float, float]:
    """(head, body) seconds, from this process's settings (read once: workers are processes)."""
    settings = Settings()
    return settings.http_header_timeout_seconds, settings.http_body_timeout_seconds


class _Sweeper:
    """Closes the connections of one event loop whose deadline has passed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.interval = min(1.0, max(0.05, min(_deadlines()) / 4))
        self.connections: set[DeadlineHttpProtocol] = set()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, connection: DeadlineHttpProtocol) -> None:
        self.connections.add(connection)
        if self._timer is None:
            self._timer = self.loop.call_later(self.interval, self._sweep)

    def discard(self, connection: DeadlineHttpProtocol) -> None:
        self.connections.discard(connection)

    def _sweep(self) -> None:
        self._timer = None
        now = self.loop.time()
        for connection in [c for c in self.connections if c.due is not None and c.due <= now]:
            connection.too_slow()
        if self.connections:
            self._timer = self.loop.call_later(self.interval, self._sweep)


_SWEEPERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = (
    weakref.WeakKeyDictionary()
)


def _sweeper(loop: asyncio.AbstractEventLoop) -> _Sweeper:
    found = _SWEEPERS.get(loop)
    if found is None:
        found = _SWEEPERS[loop] = _Sweeper(loop)
    return found


class DeadlineHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.due: float | None = None  # the loop's time by which the next read must be done
        self._sweeper = _sweeper(self.loop)

    def too_slow(self) -> None:
        self.due = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.due = self.loop.time() + _deadlines()[0]  # the first request's head
        self._sweeper.add(self)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.due = self.loop.time() + _deadlines()[1]  # its body

    def on_message_complete(self) -> None:
        self.due = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Idle until the next request: uvicorn's keep-alive timeout; the next head: ours.
        if not self.transport.is_closing():
            self.due = self.loop.time() + _deadlines()[0] + self.timeout_keep_alive

    def connection_lost(self, exc: Exception | None) -> None:
        self.due = None
        self._sweeper.discard(self)
        super().connection_lost(exc)
