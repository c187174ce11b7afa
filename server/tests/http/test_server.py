"""``serve``'s HTTP protocol: a response's writes leave in one send, with the other responses of
its event loop step, and nothing is held longer."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn

from commerce_api.http.server import (
    MAX_HELD_BYTES,
    WHOLE_RESPONSE,
    DeadlineHttpProtocol,
    _OneSend,
)


class _Transport:
    """Records what is written and whether the transport was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.closing = False
        self.aborted = False
        self.fail = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        if self.fail:
            raise RuntimeError("the transport failed")
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing or self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def _one_send() -> tuple[_OneSend, _Transport]:
    transport = _Transport()
    return _OneSend(transport, asyncio.get_running_loop()), transport  # type: ignore[arg-type]


async def test_a_head_and_its_body_leave_in_one_write_at_the_end_of_the_step() -> None:
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    sending.write(b"{}")
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    await asyncio.sleep(0)
    assert len(transport.writes) == 1, "the held write was sent twice"


async def test_what_is_written_while_the_app_awaits_is_not_held() -> None:
    """A streamed response's head (or a 100 Continue) leaves when the app awaits."""
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    sending.write(b"chunk")
    sending.write(b"next")
    await asyncio.sleep(0)
    sending.write(b"last")
    await asyncio.sleep(0)
    assert transport.writes[1:] == [b"chunknext", b"last"]


async def test_the_responses_of_one_step_leave_together_each_in_its_order() -> None:
    (first, first_transport), (second, second_transport) = _one_send(), _one_send()
    first.write(b"head 1 ")
    second.write(b"head 2 ")
    first.write(b"body 1")
    second.write(b"body 2")
    assert first_transport.writes == second_transport.writes == []
    await asyncio.sleep(0)
    assert first_transport.writes == [b"head 1 body 1"]
    assert second_transport.writes == [b"head 2 body 2"]


async def test_a_large_body_is_not_held() -> None:
    """What reaches MAX_HELD_BYTES goes at once, so the transport's flow control sees it."""
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 200 OK\r\n\r\n")
    sending.write(b"x" * MAX_HELD_BYTES)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * MAX_HELD_BYTES]
    await asyncio.sleep(0)
    assert len(transport.writes) == 1


async def test_nothing_is_sent_to_a_connection_that_is_gone() -> None:
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.closing = True  # the peer went away before the end of the step
    await asyncio.sleep(0)
    assert transport.writes == []


async def test_a_connection_whose_write_fails_holds_back_no_other() -> None:
    (failing, failing_transport), (sending, transport) = _one_send(), _one_send()
    failing_transport.fail = True
    failing.write(b"HTTP/1.1 200 OK\r\n\r\n")
    sending.write(b"HTTP/1.1 200 OK\r\n\r\n")
    await asyncio.sleep(0)
    assert failing_transport.aborted
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n"]
    failing.write(b"next")  # held again, and sent with the next step's writes
    sending.write(b"next")
    await asyncio.sleep(0)
    assert transport.writes[1:] == [b"next"]


async def test_close_sends_what_is_held_first() -> None:
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    sending.close()
    assert transport.writes == [b"HTTP/1.1 500 Internal Server Error\r\n\r\n"]
    assert transport.closed
    await asyncio.sleep(0)
    assert len(transport.writes) == 1


async def test_the_rest_of_the_transport_is_the_transports() -> None:
    sending, _ = _one_send()
    size: Any = sending.get_write_buffer_size()
    assert size == 0


# --- a whole response, over a real socket ------------------------------------------------------

_HEADERS = [(b"content-type", b"application/json"), (b"x-request-id", b"req_1")]
_BAD_HEADERS = [
    (b"x-evil", b"a\r\nset-cookie: 1"),  # a line break in a value: a header injected
    (b"x-evil", b"a\nset-cookie: 1"),
    (b"x-bad", b"\x01"),  # a control byte in a value or a name
    (b"x-bad", b"\x00"),
    (b"x-bad\x01", b"1"),
    (b"bad name", b"1"),
    (b"x-evil\r\nset-cookie", b"1"),
    (b"Content-Length", b"0"),  # the server frames a whole response itself
    (b"transfer-encoding", b"chunked"),
    (b"connection", b"close"),
]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with one WHOLE_RESPONSE message when the server offers it, ``/parts`` with
    uvicorn's two messages; ``/header?N`` adds ``_BAD_HEADERS[N]``."""
    if scope["type"] != "http":
        return
    headers = list(_HEADERS)
    if scope["path"] == "/header":
        headers.append(_BAD_HEADERS[int(scope["query_string"])])
    body = b'{"ok":true}'
    if scope["path"] != "/parts" and WHOLE_RESPONSE in scope.get("extensions", {}):
        await send({"type": WHOLE_RESPONSE, "status": 200, "headers": headers, "body": body})
        return
    headers.insert(1, (b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def _serving() -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        _app, http=DeadlineHttpProtocol, log_level="critical", lifespan="off", server_header=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, no event)
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


async def _exchange(port: int, request: bytes) -> bytes:
    """Send a raw request; read until the server closes or one whole response has arrived
    (its head alone, for HEAD)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    data = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 5):
            data += chunk
            head, end_of_head, body = data.partition(b"\r\n\r\n")
            length = [line for line in head.split(b"\r\n") if line.startswith(b"content-length:")]
            if (
                end_of_head
                and length
                and (request.startswith(b"HEAD ") or len(body) >= int(length[0].split(b":")[1]))
            ):
                break
    finally:
        writer.close()
    return data


def _parsed(response: bytes) -> tuple[bytes, list[bytes], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    return status, [line for line in lines if not line.startswith(b"date: ")], body


async def test_a_whole_response_leaves_as_its_two_messages_would() -> None:
    async with _serving() as port:
        whole = await _exchange(port, b"GET /whole HTTP/1.1\r\nhost: t\r\n\r\n")
        parts = await _exchange(port, b"GET /parts HTTP/1.1\r\nhost: t\r\n\r\n")
    status, lines, body = _parsed(whole)
    assert (status, body) == (b"HTTP/1.1 200 OK", b'{"ok":true}')
    assert lines == [
        b"content-type: application/json",
        b"x-request-id: req_1",
        b"content-length: 11",  # the one difference: where the length goes
    ]
    assert whole.split(b"\r\n")[1].startswith(b"date: "), "the server's own headers first"
    assert sorted(lines) == sorted(_parsed(parts)[1])


async def test_a_whole_response_to_head_has_no_body_and_to_close_closes() -> None:
    async with _serving() as port:
        head = await _exchange(port, b"HEAD /whole HTTP/1.1\r\nhost: t\r\n\r\n")
        closing = await _exchange(
            port, b"GET /whole HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"
        )
        old = await _exchange(port, b"GET /whole HTTP/1.0\r\n\r\n")
    assert head.endswith(b"content-length: 11\r\n\r\n"), head
    assert b"connection: close\r\n" in closing
    assert closing.endswith(b'{"ok":true}')
    assert b"connection: close\r\n" in old
    assert old.endswith(b'{"ok":true}')


@pytest.mark.parametrize("index", range(len(_BAD_HEADERS)))
async def test_a_whole_response_with_a_bad_header_is_a_500_and_nothing_of_it_leaves(
    index: int,
) -> None:
    async with _serving() as port:
        request = b"GET /header?%d HTTP/1.1\r\nhost: t\r\n\r\n" % index
        answer = await _exchange(port, request)
    assert answer.startswith(b"HTTP/1.1 500 "), answer
    assert b"x-request-id" not in answer
    assert b"set-cookie" not in answer
