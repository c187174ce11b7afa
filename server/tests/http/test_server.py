"""``serve``'s HTTP protocol: a response's writes leave in one send, and nothing is held back."""

from __future__ import annotations

import asyncio
from typing import Any

from commerce_api.http.server import _OneSend


class _Transport:
    """Records what is written and whether the transport was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def _one_send() -> tuple[_OneSend, _Transport]:
    transport = _Transport()
    return _OneSend(transport, asyncio.get_running_loop()), transport  # type: ignore[arg-type]


async def test_a_head_and_its_body_leave_in_one_write() -> None:
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.writes == []
    sending.write(b"{}")
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    await asyncio.sleep(0)
    assert len(transport.writes) == 1, "the held write was sent twice"


async def test_a_lone_write_leaves_at_the_end_of_the_loop_step() -> None:
    """A streamed response's head (or a 100 Continue) is not held while the app awaits."""
    sending, transport = _one_send()
    sending.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    sending.write(b"chunk")
    sending.write(b"next")
    sending.write(b"last")
    await asyncio.sleep(0)
    assert transport.writes[1:] == [b"chunknext", b"last"]


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
