"""The dispatcher's HTTP client: one POST at a time per connection, HTTP/1.1 over asyncio
streams, connections kept alive per destination.

Why not httpx (which the dispatcher used before): per request it spent about 0.9 ms of CPU on
loopback (request and response models, anyio cancel scopes, httpcore's pool, which scans
every connection, with a ``poll`` per idle one, on every request), two thirds of a worker's CPU
when draining a backlog; and its pools are keyed by the URL's host, while a webhook URL is
pinned to the address its host name was checked to resolve to (``url_policy``), so a kept
connection could carry a webhook for one host name over a TLS session verified for another.
A webhook attempt needs a small part of HTTP: a POST with a body we hold in memory, a status
line and headers read back, and the body (never stored) skipped so the connection can serve
the next attempt.

Connections are kept per :class:`Destination`, the address dialled *and* the host name, so a
connection (and its TLS session, verified for that host name, with it as SNI) only ever carries
requests for that host name to that address. Each request takes an idle connection or opens a
new one: there is no limit per destination to queue on, so a slow receiver never holds up a
request to another (the dispatcher bounds the attempts in flight). The answers are read by
``http_response``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, urlsplit

import certifi

from commerce_api.webhooks.http_response import MAX_HEAD_BYTES, ReceiverError, read_response

# A connection idle longer than this is closed rather than reused: well below the keep-alive
# timeouts of common servers (uvicorn and Node 5 s, gunicorn 2 s, nginx 75 s), so a request is
# rarely sent on a connection the receiver is closing at that moment.
IDLE_SECONDS = 1.0
CLOSE_SECONDS = 1.0  # what closing the idle connections may take, at most


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a connection goes, and what it may carry: requests for ``host`` (the Host header
    and, over TLS, the name sent and verified) to ``address``:``port``."""

    scheme: str
    address: str  # the checked IP to dial, or the host name itself when it was not pinned
    port: int
    host: str  # the Host header's value (with the port when not the scheme's default)
    server_name: str  # the host name, for TLS


@dataclass(frozen=True, slots=True)
class _Route:
    scheme: str
    hostname: str
    port: int
    host_header: str
    target: bytes  # path and query, as sent on the request line


@lru_cache(maxsize=4096)
def _route(url: str) -> _Route:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ReceiverError(f"not an absolute http(s) URL: {url[:100]}")
    hostname = parts.hostname
    try:
        ascii_name = hostname.encode("ascii").decode()
    except UnicodeEncodeError:
        try:
            ascii_name = hostname.encode("idna").decode()
        except UnicodeError as exc:
            raise ReceiverError(f"host name cannot be encoded: {exc}") from None
    if any(c in ascii_name for c in " \t\r\n/\\@#?"):
        raise ReceiverError("host name has characters no host name may have")
    default = 443 if parts.scheme == "https" else 80
    port = parts.port or default
    bracketed = f"[{ascii_name}]" if ":" in ascii_name else ascii_name
    host_header = bracketed if port == default else f"{bracketed}:{port}"
    # Percent-encode what may not stand on a request line (spaces, non-ASCII), as browsers
    # and httpx do; what is already encoded stays as it is.
    path = quote(parts.path or "/", safe="/%!$&'()*+,;=:@-._~")
    query = quote(parts.query, safe="/?%!$&'()*+,;=:@-._~")
    target = f"{path}?{query}" if query else path
    return _Route(parts.scheme, ascii_name, port, host_header, target.encode("ascii"))


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Not idle too long, and not closed by the receiver meanwhile."""
        return (
            now - self.idle_since <= IDLE_SECONDS
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        self.writer.close()


class HTTPClient:
    """POST requests, each on a kept-alive connection to its destination or a new one."""

    def __init__(
        self,
        *,
        user_agent: str,
        ssl_context: ssl.SSLContext | None = None,
        max_idle_per_destination: int = 100,
    ) -> None:
        self._user_agent = user_agent.encode("ascii")
        self._ssl_context = ssl_context
        self._max_idle = max_idle_per_destination
        self._idle: dict[Destination, list[_Connection]] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self.connections_opened = 0  # for tests and the benchmark

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            # The CA bundle httpx used (certifi), so the receivers trusted stay the same.
            self._ssl_context = ssl.create_default_context(cafile=certifi.where())
        return self._ssl_context

    async def post(
        self, url: str, address: str | None, headers: Sequence[tuple[str, str]], body: bytes
    ) -> int:
        """POST ``body`` to ``url``, dialling ``address`` (a checked IP; None: resolve the
        host name as usual); returns the status code. Redirects are not followed. The caller
        bounds the time (a cancelled request's connection is closed, never reused)."""
        route = _route(url)
        destination = Destination(
            route.scheme,
            address if address is not None else route.hostname,
            route.port,
            route.host_header,
            route.hostname,
        )
        lines = [
            b"POST %s HTTP/1.1\r\nhost: %s\r\nuser-agent: %s\r\ncontent-length: %d\r\n"
            % (route.target, route.host_header.encode("ascii"), self._user_agent, len(body))
        ]
        for name, value in headers:
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} has a line break")
            lines.append(b"%s: %s\r\n" % (name.encode("ascii"), value.encode("latin-1")))
        lines.append(b"\r\n")
        lines.append(body)
        request = b"".join(lines)

        connection = self._checkout(destination)
        if connection is None:
            connection = await self._connect(destination)
        keep = False
        try:
            connection.writer.write(request)
            await connection.writer.drain()
            status, keep = await read_response(connection.reader)
            return status
        finally:
            if keep:
                self._checkin(destination, connection)
            else:
                connection.close()

    async def _connect(self, destination: Destination) -> _Connection:
        tls = destination.scheme == "https"
        reader, writer = await asyncio.open_connection(
            destination.address,
            destination.port,
            ssl=self._tls() if tls else None,
            # Over TLS: the host name is sent (SNI) and the certificate verified for it,
            # whatever address was dialled.
            server_hostname=destination.server_name if tls else None,
            limit=MAX_HEAD_BYTES,
        )
        self.connections_opened += 1
        return _Connection(reader, writer)

    def _checkout(self, destination: Destination) -> _Connection | None:
        idle = self._idle.get(destination)
        now = time.monotonic()
        while idle:
            connection = idle.pop()  # the most recently used: the likeliest to be open
            if connection.reusable(now):
                return connection
            connection.close()
        return None

    def _checkin(self, destination: Destination, connection: _Connection) -> None:
        now = time.monotonic()
        connection.idle_since = now
        idle = self._idle.setdefault(destination, [])
        if len(idle) >= self._max_idle:
            connection.close()
        else:
            idle.append(connection)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._sweep)

    def _sweep(self) -> None:
        """Close the connections idle too long, every ``IDLE_SECONDS`` while there are idle
        ones (so that receivers no longer sent to, or a dispatcher with nothing to do, do not
        keep sockets open)."""
        self._sweeper = None
        now = time.monotonic()
        for destination in list(self._idle):
            kept = []
            for connection in self._idle[destination]:
                if connection.reusable(now):
                    kept.append(connection)
                else:
                    connection.close()
            if kept:
                self._idle[destination] = kept
            else:
                del self._idle[destination]
        if self._idle:
            self._sweeper = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._sweep)

    async def aclose(self) -> None:
        """Close the idle connections (those in use are closed by their requests)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        connections = [c for idle in self._idle.values() for c in idle]
        self._idle.clear()
        for connection in connections:
            connection.close()
        # Bounded: a TLS peer that never answers our close_notify must not hold up a stop.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_SECONDS):
                await asyncio.gather(
                    *(c.writer.wait_closed() for c in connections), return_exceptions=True
                )
