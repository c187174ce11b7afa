"""The dispatcher's HTTP client (``webhooks/http_client.py``, ``http_response.py``) against
real servers on 127.0.0.1: raw asyncio servers that answer what each test scripts, byte for
byte, and one over TLS with a certificate made for the test."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

from commerce_api.webhooks import http_client, http_response
from commerce_api.webhooks.http_client import HTTPClient
from commerce_api.webhooks.http_response import ReceiverError
from tests.helpers import self_signed_certificate

HEADERS = (("content-type", "application/json"), ("webhook-id", "evt_1"))
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"


@dataclass
class Request:
    connection: int
    head: bytes
    body: bytes

    @property
    def request_line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]

    def header(self, name: bytes) -> bytes | None:
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name:
                return value.strip()
        return None


class Serve(Protocol):
    def __call__(self, server: Server, tls: ssl.SSLContext | None = None) -> Awaitable[Server]: ...


@dataclass
class Server:
    """Answers each request with ``answer(request)`` (bytes, written as they are); closes the
    connection after it when ``close_after`` says so."""

    answer: Callable[[Request], bytes] = lambda request: OK
    delay: Callable[[Request], float] = lambda request: 0.0
    close_after: Callable[[Request], bool] = lambda request: False
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    server_names: list[str | None] = field(default_factory=list)  # over TLS: the SNI
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request = Request(connection, head, b"")
                length = int(request.header(b"content-length") or 0)
                request.body = await reader.readexactly(length)
                self.requests.append(request)
                if pause := self.delay(request):
                    await asyncio.sleep(pause)
                writer.write(self.answer(request))
                await writer.drain()
                if self.close_after(request):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(server: Server, tls: ssl.SSLContext | None = None) -> Server:
        running = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
        servers.append(running)
        server.port = running.sockets[0].getsockname()[1]
        return server

    yield start
    for running in servers:
        running.close()


@pytest.fixture
async def client() -> AsyncIterator[HTTPClient]:
    client = HTTPClient(user_agent="Test/1")
    yield client
    await client.aclose()


async def test_keeps_the_connection_alive_between_requests(
    serve: Serve, client: HTTPClient
) -> None:
    server = await serve(Server())
    url = f"http://127.0.0.1:{server.port}/hook?a=1"
    for _ in range(3):
        assert await client.post(url, None, HEADERS, b'{"x": 1}') == 200
    assert (server.connections, client.connections_opened) == (1, 1)
    request = server.requests[0]
    assert request.request_line == b"POST /hook?a=1 HTTP/1.1"
    assert request.header(b"host") == f"127.0.0.1:{server.port}".encode()
    assert request.header(b"webhook-id") == b"evt_1"
    assert request.header(b"user-agent") == b"Test/1"
    assert request.body == b'{"x": 1}'


async def test_a_receiver_that_closes_the_connection_gets_a_new_one(
    serve: Serve, client: HTTPClient
) -> None:
    # One closes after saying so, the other without a word (its FIN arrives before the next
    # request): either way the next request goes on a new connection and succeeds.
    said = await serve(
        Server(
            answer=lambda r: b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
        )
    )
    silent = await serve(Server(close_after=lambda r: True))
    for server in (said, silent):
        for _ in range(3):
            status = await client.post(f"http://127.0.0.1:{server.port}/", None, HEADERS, b"{}")
            assert status == 200
            await asyncio.sleep(0.05)
        assert server.connections == 3


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
        b"HTTP/1.1 202 Accepted\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5;x=y\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\nhi\r\n0\r\nx-trailer: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok",
    ],
    ids=["content-length", "chunked", "chunked-trailers", "interim-100", "http-1.0-keep-alive"],
)
async def test_reads_a_framed_body_and_reuses_the_connection(
    serve: Serve, client: HTTPClient, answer: bytes
) -> None:
    server = await serve(Server(answer=lambda r: answer))
    expected = int(answer.rsplit(b"HTTP/1.", 1)[1][2:5])
    for _ in range(3):
        assert (
            await client.post(f"http://127.0.0.1:{server.port}/", None, HEADERS, b"{}") == expected
        )
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\n\r\nbody until the connection closes",
        b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 500 Oops\r\ncontent-length: %d\r\n\r\n" % (http_response.MAX_DRAINED_BYTES + 1)
        + b"x" * (http_response.MAX_DRAINED_BYTES + 1),
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nxyz",
    ],
    ids=["until-close", "http-1.0", "too-large", "not-chunked"],
)
async def test_a_body_that_cannot_be_skipped_costs_the_connection_not_the_status(
    serve: Serve,
    client: HTTPClient,
    answer: bytes,
) -> None:
    server = await serve(Server(answer=lambda r: answer, close_after=lambda r: True))
    expected = int(answer.split(b" ", 2)[1])
    for _ in range(2):
        assert (
            await client.post(f"http://127.0.0.1:{server.port}/", None, HEADERS, b"{}") == expected
        )
    assert server.connections == 2


async def test_a_body_slow_to_arrive_costs_the_connection_not_the_status(
    serve: Serve, client: HTTPClient
) -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await asyncio.sleep(5)
        writer.close()

    running = await asyncio.start_server(trickle, "127.0.0.1", 0)
    port = running.sockets[0].getsockname()[1]
    started = time.monotonic()
    assert await client.post(f"http://127.0.0.1:{port}/", None, (), b"") == 200
    assert time.monotonic() - started < http_response.DRAIN_SECONDS + 0.5
    assert client._idle == {}
    running.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"",
        b"HTTP/1.1 20",
        b"SIP/2.0 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
    ],
    ids=["closed", "cut-off", "not-http", "bad-length"],
)
async def test_an_answer_that_is_not_http_is_an_error(
    serve: Serve, client: HTTPClient, answer: bytes
) -> None:
    server = await serve(Server(answer=lambda r: answer, close_after=lambda r: True))
    with pytest.raises(ReceiverError):
        await client.post(f"http://127.0.0.1:{server.port}/", None, HEADERS, b"{}")


async def test_a_refused_connection_is_an_os_error(client: HTTPClient) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(OSError):
        await client.post(f"http://127.0.0.1:{port}/", None, HEADERS, b"{}")


async def test_a_cancelled_request_closes_its_connection(serve: Serve, client: HTTPClient) -> None:
    server = await serve(Server(delay=lambda r: 0.5 if len(server.requests) == 1 else 0.0))
    url = f"http://127.0.0.1:{server.port}/"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await client.post(url, None, HEADERS, b"{}")
    # The late answer to the first request is never taken for the second's.
    assert await client.post(url, None, HEADERS, b"{}") == 200
    assert server.connections == 2


async def test_a_slow_receiver_does_not_hold_up_a_fast_one(
    serve: Serve, client: HTTPClient
) -> None:
    slow = await serve(Server(delay=lambda r: 1.0))
    fast = await serve(Server())
    slow_ones = [
        asyncio.create_task(client.post(f"http://127.0.0.1:{slow.port}/", None, HEADERS, b"{}"))
        for _ in range(5)
    ]
    await asyncio.sleep(0.05)
    started = time.monotonic()
    for _ in range(50):
        assert await client.post(f"http://127.0.0.1:{fast.port}/", None, HEADERS, b"{}") == 200
    assert time.monotonic() - started < 0.5
    assert not any(task.done() for task in slow_ones)
    assert await asyncio.gather(*slow_ones) == [200] * 5


async def test_a_pinned_address_keeps_the_host_name_and_its_own_connections(
    serve: Serve, client: HTTPClient
) -> None:
    server = await serve(Server())
    for host in ("a.example", "b.example", "a.example"):
        url = f"http://{host}:{server.port}/p%20q/é"
        assert await client.post(url, "127.0.0.1", HEADERS, b"{}") == 200
    hosts = [(r.connection, r.header(b"host")) for r in server.requests]
    assert hosts == [
        (1, f"a.example:{server.port}".encode()),
        (2, f"b.example:{server.port}".encode()),
        (1, f"a.example:{server.port}".encode()),
    ]
    assert server.requests[0].request_line == b"POST /p%20q/%C3%A9 HTTP/1.1"


async def test_tls_names_and_verifies_the_host_name_not_the_pinned_address(
    serve: Serve,
    tmp_path: Path,
) -> None:
    cert, key = self_signed_certificate(tmp_path, "hooks.example")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    server = Server()

    def sni(_socket: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        server.server_names.append(name)

    server_tls.sni_callback = sni
    await serve(server, server_tls)
    trusting = ssl.create_default_context(cafile=str(cert))
    client = HTTPClient(user_agent="Test/1", ssl_context=trusting)
    try:
        url = f"https://hooks.example:{server.port}/hook"
        for _ in range(2):
            assert await client.post(url, "127.0.0.1", HEADERS, b"{}") == 200
        assert server.server_names == ["hooks.example"]  # SNI, and one kept connection
        assert server.requests[0].header(b"host") == f"hooks.example:{server.port}".encode()
        # Another host name on the same address: its own connection, verified for its name,
        # which this certificate does not cover.
        with pytest.raises(ssl.SSLCertVerificationError):
            await client.post(
                f"https://other.example:{server.port}/hook", "127.0.0.1", HEADERS, b"{}"
            )
        # Without a CA that trusts it (the default bundle), the certificate is refused.
        default = HTTPClient(user_agent="Test/1")
        with pytest.raises(ssl.SSLCertVerificationError):
            await default.post(url, "127.0.0.1", HEADERS, b"{}")
        await default.aclose()
    finally:
        await client.aclose()


async def test_idle_connections_are_closed_after_the_idle_limit(
    serve: Serve,
    client: HTTPClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_client, "IDLE_SECONDS", 0.1)
    server = await serve(Server())
    url = f"http://127.0.0.1:{server.port}/"
    assert await client.post(url, None, HEADERS, b"{}") == 200
    assert len(client._idle) == 1
    await asyncio.sleep(0.35)  # the sweep closes it without another request
    assert client._idle == {}
    assert await client.post(url, None, HEADERS, b"{}") == 200
    assert server.connections == 2
