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
kept to within a quarter of the shorter timeout (at most a second). uvicorn's own keep-alive
timer (armed after every response, cancelled by the next request) is replaced the same way: an
idle connection is closed ``timeout_keep_alive`` seconds after its last response, give or take
a sweep.

Three more per-request costs of uvicorn's protocol are cut here:

- a response's head and its body leave in one ``send()`` instead of two, and the responses an
  event loop step made leave back to back at its end (:class:`_OneSend`: on loopback a send also
  runs the receiving side's TCP stack and wakes the receiver, so each costs microseconds);
- an app may send a whole response as one message (:data:`WHOLE_RESPONSE`, :class:`_Cycle`),
  checked and framed by the server for less than uvicorn's two messages cost;
- the deadlines are read once per connection, not per request.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from functools import cache
from typing import Any

from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from commerce_api.settings import Settings

logger = logging.getLogger("commerce_api.http")


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


# A connection's writes are held until the end of the loop's step, unless they reach this size:
# then they go at once, so that a large or streamed body meets the transport's flow control.
MAX_HELD_BYTES = 64 * 1024


class _Flusher:
    """The connections of one event loop whose writes are held, sent together when the loop
    has run the steps that were ready (see :class:`_OneSend`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: list[_OneSend] = []

    def hold(self, connection: _OneSend) -> None:
        if not self.held:
            self.loop.call_soon(self.flush)
        self.held.append(connection)

    def flush(self) -> None:
        held, self.held = self.held, []
        for connection in held:
            try:
                connection.flush()
            except Exception:  # one connection's failure must not hold back the others'
                logger.exception("could not send a response; closing its connection")
                connection.abort()


_FLUSHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Flusher] = (
    weakref.WeakKeyDictionary()
)


class _OneSend:
    """A connection's transport whose writes are held until the event loop has run the steps
    that were ready when the first was made, then sent with every other connection's
    (:class:`_Flusher`): a response's head and body (two writes by uvicorn) leave in one
    ``send()``, and the responses of one step leave back to back.

    On loopback or behind a proxy on the same machine, a ``send()`` to a peer that sleeps in
    ``epoll_wait`` wakes it, and waking a process on another CPU costs more than the write
    (on a virtual machine, an inter-processor interrupt is a VM exit). Sent back to back, the
    responses of one step wake the peer once, not once each; a response waits at most for the
    rest of its step. Nothing waits longer: a streamed response's head goes as soon as the app
    awaits, and what reaches :data:`MAX_HELD_BYTES` goes at once."""

    __slots__ = ("_flusher", "_held", "_size", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        flusher = _FLUSHERS.get(loop)
        if flusher is None:
            flusher = _FLUSHERS[loop] = _Flusher(loop)
        self._flusher = flusher
        self._held: list[bytes] | None = None
        self._size = 0

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = [bytes(data)]
            self._size = len(data)
            self._flusher.hold(self)
        else:
            held.append(bytes(data))
            self._size += len(data)
        if self._size >= MAX_HELD_BYTES:
            self.flush()

    def flush(self) -> None:
        """Send what is held (the flusher's later call then finds nothing)."""
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():  # else the peer is gone: nothing to send
                self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:  # the rest of the transport, as it is
        return getattr(self._transport, name)


# An ASGI extension of this protocol (named in ``scope["extensions"]``): a message of this type
# is a whole response, ``{"type", "status", "headers", "body"}``, sent in one call. Its headers
# are checked as uvicorn checks them and must not frame the body: the server adds the
# Content-Length (and, when the connection closes, ``connection: close``).
WHOLE_RESPONSE = "commerce.http.response.whole"
_FRAMING = frozenset({b"content-length", b"transfer-encoding", b"connection"})
# The bytes uvicorn's expression allows in a header value, found with it (so the two agree):
# ``translate`` deleting them leaves what the expression would find.
_VALUE_BYTES = bytes(b for b in range(256) if not HEADER_VALUE_RE.search(bytes([b])))
# Header names found valid and not framing, so checked once each (a process sends a few dozen).
_CHECKED_NAMES: set[bytes] = set()
MAX_CHECKED_NAMES = 1024


def _check_name(name: bytes) -> None:
    if HEADER_RE.search(name):
        raise RuntimeError("Invalid HTTP header name.")
    if name.lower() in _FRAMING:
        raise RuntimeError("A whole response's headers must not frame its body.")
    if len(_CHECKED_NAMES) < MAX_CHECKED_NAMES:
        _CHECKED_NAMES.add(name)


class _Cycle(RequestResponseCycle):
    """uvicorn's request/response cycle, which also takes a :data:`WHOLE_RESPONSE`.

    Sent as uvicorn's two messages, a response costs a catalogue read about 4 µs of its ~35:
    two calls, and for each of its eight headers two regular-expression searches, a copy in
    lower case and three comparisons. A whole response is checked as strictly for less: its
    values joined are searched once (each expression is one character class, so a forbidden
    byte is found in the join exactly when it is in a value), a name once per process, and
    the framing is the server's own. It leaves as the two messages would, but that its
    Content-Length comes after the other headers (``tests/http/test_server.py``)."""

    async def send(self, message: Any) -> None:
        if message["type"] != WHOLE_RESPONSE:
            await super().send(message)
            return
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        if self.response_started:
            raise RuntimeError("A whole response was sent after the response had started.")
        headers: list[tuple[bytes, bytes]] = self.default_headers + message["headers"]
        if b"".join([value for _, value in headers]).translate(None, _VALUE_BYTES):
            raise RuntimeError("Invalid HTTP header value.")
        content = [STATUS_LINE[message["status"]]]
        for name, value in headers:
            if name not in _CHECKED_NAMES:
                _check_name(name)
            content += (name, b": ", value, b"\r\n")
        body: bytes = message["body"]
        content += (b"content-length: ", b"%d" % len(body), b"\r\n")
        if not self.keep_alive:
            content.append(b"connection: close\r\n")
        content.append(b"\r\n")
        if self.scope["method"] != "HEAD":
            content.append(body)
        self.response_started = self.response_complete = True
        self.waiting_for_100_continue = False
        self.transport.write(b"".join(content))
        self.message_event.set()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()


class DeadlineHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.due: float | None = None  # the loop's time by which the next read must be done
        self._head_due: float | None = None  # after an idle wait: when the next head is due
        self._head_seconds, self._body_seconds = _deadlines()
        self._sweeper = _sweeper(self.loop)

    def too_slow(self) -> None:
        self.due = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_OneSend(transport, self.loop))  # type: ignore[arg-type]
        self.due = self.loop.time() + self._head_seconds  # the first request's head
        self._sweeper.add(self)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A dict of its own per request, as the scope is the app's to change.
        self.scope["extensions"] = {**self.scope.get("extensions", {}), WHOLE_RESPONSE: {}}
        if self._head_due is not None:  # the idle wait is over: the head is due
            self.due, self._head_due = self._head_due, None

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if type(self.cycle) is RequestResponseCycle:
            # uvicorn makes the request's cycle in the middle of this method (50 lines we would
            # otherwise copy). _Cycle adds a method and no state, so the new cycle becomes one
            # here, before its task first runs.
            self.cycle.__class__ = _Cycle
        self.due = self.loop.time() + self._body_seconds  # its body
        self._head_due = None

    def on_message_complete(self) -> None:
        self.due = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """uvicorn's, less its keep-alive timer: an idle connection is due at
        ``timeout_keep_alive`` (the sweeper closes it), and its next head at our header timeout
        after that, as before."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # a pipelined request was waiting: it starts, its deadlines stand
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            idle_until = self.loop.time() + self.timeout_keep_alive
            self.due = idle_until
            self._head_due = idle_until + self._head_seconds

    def connection_lost(self, exc: Exception | None) -> None:
        self.due = None
        self._sweeper.discard(self)
        super().connection_lost(exc)
