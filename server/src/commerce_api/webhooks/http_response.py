"""Reading a receiver's answer to a webhook POST, HTTP/1.1 or 1.0: the final status, and
whether the connection may carry the next request — the body, never stored, read and dropped
if it is small and quick to come, else the connection is closed instead."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

# A response body up to this size is read (and dropped) so that its connection can be reused;
# a larger one, or one sent until the connection closes, closes the connection instead.
MAX_DRAINED_BYTES = 64 * 1024
# How long reading such a body may take after the status and headers: the attempt's outcome is
# known by then, so a receiver slow to send its body costs a new connection, not the attempt.
DRAIN_SECONDS = 0.1
MAX_HEAD_BYTES = 64 * 1024  # status line and headers
_NO_BODY = {204, 304}


class ReceiverError(Exception):
    """The receiver's answer is not HTTP/1.x as we can read it."""


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """The final response's status, and whether the connection may carry another request (its
    body, if any, read and dropped)."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise ReceiverError(
                    "the receiver closed the connection without answering"
                ) from None
            raise ReceiverError("the receiver closed the connection mid-answer") from None
        except asyncio.LimitOverrunError:
            raise ReceiverError(f"response headers over {MAX_HEAD_BYTES} bytes") from None
        status_line, *header_lines = head[:-4].split(b"\r\n")
        version, _, rest = status_line.partition(b" ")
        code = rest[:3]
        if version not in {b"HTTP/1.1", b"HTTP/1.0"} or not code.isdigit() or len(code) != 3:
            raise ReceiverError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        status = int(code)
        if 100 <= status < 200 and status != 101:
            continue  # interim (100 Continue, 103 Early Hints): the answer follows
        break
    connection_tokens: set[bytes] = set()
    content_length: int | None = None
    chunked = False
    transfer_encoding = False
    for line in header_lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise ReceiverError("invalid Content-Length") from None
            if length < 0 or (content_length is not None and length != content_length):
                raise ReceiverError("invalid Content-Length")
            content_length = length
        elif name == b"transfer-encoding":
            transfer_encoding = True
            chunked = value.strip().lower().rsplit(b",", 1)[-1].strip() == b"chunked"
        elif name == b"connection":
            connection_tokens |= {token.strip().lower() for token in value.split(b",")}
    if version == b"HTTP/1.1":
        keep = b"close" not in connection_tokens
    else:
        keep = b"keep-alive" in connection_tokens
    if status == 101:
        return status, False
    if status in _NO_BODY:
        return status, keep
    if transfer_encoding:
        # RFC 9112 6.3: Transfer-Encoding wins over Content-Length; anything but a final
        # chunked coding is read until the connection closes.
        return status, keep and chunked and await _drained(_skip_chunked(reader))
    if content_length is None:
        return status, False  # the body runs until the connection closes
    if content_length == 0:
        return status, keep
    if content_length > MAX_DRAINED_BYTES:
        return status, False
    return status, keep and await _drained(reader.readexactly(content_length))


async def _drained(reading: Awaitable[object]) -> bool:
    """Whether the body was read within ``DRAIN_SECONDS`` (else its connection is closed)."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            await reading
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ReceiverError):
        return False
    return True


async def _skip_chunked(reader: asyncio.StreamReader) -> None:
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ReceiverError("invalid chunk size") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the end
                pass
            return
        total += size
        if total > MAX_DRAINED_BYTES:
            raise ReceiverError("response body too large to read")
        await reader.readexactly(size + 2)
