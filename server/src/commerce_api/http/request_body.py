"""A request body read ahead of the routes (the fast lane's orders): read only if it is whole
at its declared size, and handed back, every message as read, when the routes take the request
after all."""

from __future__ import annotations

from starlette.types import Message, Receive


async def read_body(receive: Receive, size: int) -> tuple[bytes | None, list[Message]]:
    """The body, if it is exactly the declared ``size``; the messages read, to hand back.

    Reading stops once ``size`` bytes have come: the server frames the body by its
    Content-Length, so it is whole then, and what follows the body is not waited for (the full
    stack, if it takes the request, reads it from ``receive`` after the replayed ones)."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages  # the client went away
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        total += len(chunk)
        if total > size:
            return None, messages
        if total == size or not message.get("more_body", False):
            break
    return (b"".join(chunks) if total == size else None), messages


def replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first hands back the messages the fast lane already read."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
