"""The ASGI app served over granian's RSGI interface (``serve``'s interface).

Why not granian's own ASGI interface: for every request it builds the whole ASGI scope in Rust
and answers each ``send`` with a future resolved on its I/O thread. Measured on one pinned
worker (docs/performance.md, issue 30), its floor is ~4 to 5 µs of CPU a request above RSGI's,
where the app reads the request's fields from a scope object and answers with one call
(``protocol.response_bytes``). So this module hands the app an ASGI scope of its own making and
turns the app's messages into RSGI calls: the whole app — its lifespan, middleware, fast lane
and routes — stays plain ASGI (and is tested as such, in process), and ``serve`` pays RSGI's
price. Built only on what RSGI documents (granian's ``docs/spec/RSGI.md``, version 1.6: the
scope's attributes, ``headers.items()``, the protocol's ``__call__``, ``__aiter__``,
``client_disconnect``, ``response_bytes`` and ``response_stream``, ``__rsgi_init__`` and
``__rsgi_del__``); granian's own ASGI adapter is not a public interface.

What RSGI does not carry, and what the app sees instead:
- a header value that is not visible ASCII (RSGI gives values as text and leaves such values
  out) arrives empty, so that the header's presence is kept: an ``Idempotency-Key`` or a key
  of that kind is refused as malformed, never ignored;
- ``raw_path``: RSGI gives the decoded path only (as ASGI's ``path``);
- a response header's value is given to RSGI as text: bytes outside ASCII would reach the
  client re-encoded (the app sends none: its values are ASCII);
- a streamed answer cannot be cut short on the wire: RSGI 1.6 has no way to abort one, so when
  the app fails after part of a streamed body, the stream is ended at once (never held open)
  and the failure logged, but the client sees a body that ended; a chunked request body the
  client cuts off reads as ended, not as a disconnect (granian ends the iteration) — ours are
  JSON objects and multipart forms, which a cut makes unreadable, never another valid body.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Collection, Iterator
from typing import Any, Protocol

from starlette.types import ASGIApp, Message

logger = logging.getLogger("commerce_api")

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_HTTP_VERSIONS = {"1": "1.0", "1.0": "1.0", "1.1": "1.1", "2": "2"}  # RSGI's "1" is HTTP/1.0


class _Headers(Protocol):
    """RSGI's headers: a mapping of lower-case names to text values."""

    def items(self) -> Collection[tuple[str, str]]: ...
    def get(self, key: str) -> str | None: ...
    def __contains__(self, key: object) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...  # the names, each once
    def __len__(self) -> int: ...


class RSGIScope(Protocol):
    """What RSGI's HTTP scope carries (the attributes this module reads)."""

    proto: str
    http_version: str
    server: str
    client: str
    scheme: str
    method: str
    path: str
    query_string: str

    @property
    def headers(self) -> _Headers: ...


_ADDRESSES: dict[str, tuple[str, int]] = {}  # memoised: a connection's requests share theirs
_MAX_ADDRESSES = 4096


def _address(text: str) -> tuple[str, int]:
    """RSGI's ``{address}:{port}`` (an IPv6 address in brackets) as ASGI's (host, port)."""
    address = _ADDRESSES.get(text)
    if address is None:
        host, _, port = text.rpartition(":")
        if host.startswith("["):
            host = host[1:-1]
        if len(_ADDRESSES) >= _MAX_ADDRESSES:
            _ADDRESSES.clear()
        address = _ADDRESSES[text] = (host, int(port))
    return address


def asgi_headers(headers: _Headers) -> list[tuple[bytes, bytes]]:
    """RSGI's headers as ASGI's list: lower-case names (RSGI gives them so), each value as sent;
    a header none of whose values RSGI could give as text is kept, with an empty value."""
    items = headers.items()
    listed = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in items]
    given = dict(items)  # the names given (``len(headers)`` counts every name once)
    if len(given) != len(headers):
        listed += [(name.encode("latin-1"), b"") for name in headers if name not in given]
    return listed


# How the rest of a request's body is to be read (``_Exchange.reading``).
_EMPTY = "empty"  # none was sent: one empty message, without asking
_WHOLE = "whole"  # in one call
_CHUNKS = "chunks"  # chunk by chunk
_READ = "read"  # it has been: what follows is the client's going
_ANSWERED = "answered"  # the response has been sent: the request is over (ASGI: disconnect)


class _Exchange:
    """One request: the ASGI ``receive`` and ``send`` over its RSGI protocol.

    A body declared with a ``Content-Length`` within ``whole_up_to`` bytes is read in one call
    (hyper frames it by that length, so it cannot be longer); any other is read in chunks, so
    that the app's size limit holds before more is buffered. After the body, ``receive`` waits
    for the client to go, and once the response is sent it says at once that the request is
    over (ASGI's ``http.disconnect``). A response whose body comes in one message is sent with
    one call; one in several messages is streamed, and the stream ends with the app's last
    message: RSGI ends a stream when its transport is let go (``stop_streaming``), so what the
    app does after answering (a background task, a dependency's teardown) never holds the
    client."""

    __slots__ = ("chunks", "headers", "protocol", "reading", "status", "stream")

    def __init__(self, protocol: Any, reading: str) -> None:
        self.protocol = protocol
        self.reading = reading
        self.chunks: Any = None
        self.status = 500
        self.headers: list[tuple[str, str]] = []
        self.stream: Any = None

    async def receive(self) -> Message:
        reading = self.reading
        if reading is _ANSWERED:
            return {"type": "http.disconnect"}
        if reading is _READ:
            await self.protocol.client_disconnect()
            return {"type": "http.disconnect"}
        if reading is _EMPTY:
            self.reading = _READ
            return {"type": "http.request", "body": b"", "more_body": False}
        try:
            if reading is _WHOLE:
                self.reading = _READ
                return {"type": "http.request", "body": await self.protocol(), "more_body": False}
            if self.chunks is None:
                self.chunks = aiter(self.protocol)
            try:
                chunk = await anext(self.chunks)
            except StopAsyncIteration:
                chunk = b""
        except Exception:  # the client went away mid-body (RSGI's protocol error)
            self.reading = _READ
            return {"type": "http.disconnect"}
        if not chunk:
            self.reading = _READ
        return {"type": "http.request", "body": chunk, "more_body": bool(chunk)}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            self.headers = [
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", ())
            ]
            return
        if kind != "http.response.body":
            return
        body = message.get("body", b"")
        more = message.get("more_body", False)
        stream = self.stream
        if stream is None:
            if not more:
                self.reading = _ANSWERED
                self.protocol.response_bytes(self.status, self.headers, body)
                return
            stream = self.stream = self.protocol.response_stream(self.status, self.headers)
        if not more:
            self.reading = _ANSWERED
            self.stream = None
        if body:
            try:
                await stream.send_bytes(body)
            except Exception as exc:  # the client is gone (RSGI's protocol closed)
                raise OSError("the client closed the connection") from exc

    def stop_streaming(self) -> bool:
        """Let go of the response's stream, which ends it; True when one was still open (the
        app stopped before its last message)."""
        open_stream = self.stream is not None
        self.stream = None
        return open_stream


def _reading(headers: _Headers, whole_up_to: int) -> str:
    """How the body is to be read: ``_EMPTY`` without one, ``_WHOLE`` with a ``Content-Length``
    within ``whole_up_to``, else ``_CHUNKS``. (hyper has refused a request whose lengths
    disagree.)"""
    if "transfer-encoding" in headers:
        return _CHUNKS
    value = headers.get("content-length")
    if value is None:
        return _CHUNKS if "content-length" in headers else _EMPTY
    if not value.isdigit() or int(value) > whole_up_to:
        return _CHUNKS
    return _WHOLE


class _Lifespan:
    """The app's ASGI lifespan, driven from RSGI's synchronous init and del hooks."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()
        self.state: dict[str, Any] = {}
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        try:
            await self.app(scope, self.inbox.get, self.outbox.put)
        except BaseException as exc:
            await self.outbox.put({"type": "lifespan.raised", "message": repr(exc)})
            raise
        # An app without a lifespan returns at once (ASGI: then the server goes on without it).
        await self.outbox.put({"type": "lifespan.returned"})

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="lifespan")
        await self.inbox.put({"type": "lifespan.startup"})
        answer = await self.outbox.get()
        if answer["type"] == "lifespan.raised":
            # ASGI: an app that raises for the lifespan instead of answering has none; the
            # server goes on without it. (A failed startup is answered: ``startup.failed``.)
            logger.warning("the app has no lifespan (it raised %s); serving on", answer["message"])
            await asyncio.gather(self.task, return_exceptions=True)
            return
        if answer["type"] not in ("lifespan.startup.complete", "lifespan.returned"):
            raise RuntimeError(answer.get("message") or answer["type"])

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        answer = await self.outbox.get()
        if answer["type"] != "lifespan.shutdown.complete":
            logger.error("the app's shutdown failed: %s", answer.get("message") or answer["type"])
        await asyncio.gather(self.task, return_exceptions=True)


class RSGIApp:
    """``app`` as an RSGI application (granian's ``Interfaces.RSGI``)."""

    def __init__(self, app: ASGIApp, *, whole_body_up_to: int) -> None:
        self.app = app
        self.whole_body_up_to = whole_body_up_to
        self.lifespan = _Lifespan(app)

    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.run_until_complete(self.lifespan.startup())
        except Exception:
            # As granian does when an ASGI app's startup fails: the worker stops.
            logger.exception("the app's startup failed")
            sys.exit(1)

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.run_until_complete(self.lifespan.shutdown())

    async def __rsgi__(self, scope: RSGIScope, protocol: Any) -> None:
        if scope.proto != "http":  # websockets are off (serving.granian_options)
            return
        given = scope.headers
        headers = asgi_headers(given)
        exchange = _Exchange(protocol, _reading(given, self.whole_body_up_to))
        asgi_scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": _HTTP_VERSIONS.get(scope.http_version, scope.http_version),
            "method": scope.method,
            "scheme": scope.scheme,
            "path": scope.path,
            "query_string": scope.query_string.encode("latin-1"),
            "root_path": "",
            "headers": headers,
            "client": _address(scope.client),
            "server": _address(scope.server),
            "state": self.lifespan.state.copy() if self.lifespan.state else {},
        }
        try:
            await self.app(asgi_scope, exchange.receive, exchange.send)
        finally:
            if exchange.stop_streaming():
                logger.error("a streamed answer to %s %s ended early", scope.method, scope.path)
