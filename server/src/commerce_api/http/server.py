"""The HTTP protocol ``serve`` runs: uvicorn's httptools protocol with read deadlines.

Hand-written because uvicorn has none: it closes a connection idle *between* requests
(``timeout_keep_alive``) but waits for ever for a request's head or body, so an idle socket or
one trickling a header line every few seconds holds a connection (and, by the thousand, the
process). Here a request's head must arrive within ``COMMERCE_HTTP_HEADER_TIMEOUT_SECONDS`` of
the connection opening (or of the previous response), and its body within
``COMMERCE_HTTP_BODY_TIMEOUT_SECONDS`` of the head; otherwise the connection is closed (an app
waiting on the body then sees the client gone: a 499 in the metrics, see ``middleware``).
A reverse proxy in front (nginx) has its own such timeouts; these protect a bare ``serve``.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from commerce_api.settings import Settings


@cache
def _deadlines() -> tuple[float, float]:
    """(head, body) seconds, from this process's settings (read once: workers are processes)."""
    settings = Settings()
    return settings.http_header_timeout_seconds, settings.http_body_timeout_seconds


class DeadlineHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(_deadlines()[0])  # the first request's head

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(_deadlines()[1])  # its body

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Idle until the next request: uvicorn's keep-alive timeout; the next head: ours.
        if not self.transport.is_closing():
            self._arm(_deadlines()[0] + self.timeout_keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
