"""``serve``'s HTTP protocol: a response's writes leave in one send, with the other responses of
its event loop step, and nothing is held longer."""

from __future__ import annotations

import asyncio
from typing import Any

from commerce_api.http.server import MAX_HELD_BYTES, _OneSend


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
