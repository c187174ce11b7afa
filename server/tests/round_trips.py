"""A TCP relay in front of PostgreSQL that counts round trips: how many times a client spoke
and then waited for the server's answer before speaking again — what a network's latency
multiplies, whatever the driver batches into one write.

A turn starts when the client sends after the server has sent (or first): bytes the client
sends while it has not heard back yet belong to the same turn (pipelined).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url


@dataclass
class TurnCounter:
    port: int = 0
    turns: int = 0
    last_speaker: dict[int, bool] = field(default_factory=dict)

    def url_for(self, url: str) -> str:
        """``url`` (``postgresql://…``) through this relay."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(False)


@asynccontextmanager
async def counting_relay(url: str) -> AsyncIterator[TurnCounter]:
    """A relay to the PostgreSQL server of ``url`` on a free local port, while in the block."""
    target = make_url(url)
    counter = TurnCounter()
    tasks: set[asyncio.Task[None]] = set()

    async def pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: int, client: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                if client and not counter.last_speaker.get(link, False):
                    counter.turns += 1
                counter.last_speaker[link] = client
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(
            target.host or "127.0.0.1", target.port or 5432
        )
        link = id(writer)
        for task in (
            asyncio.create_task(pipe(reader, up_writer, link, True)),
            asyncio.create_task(pipe(up_reader, writer, link, False)),
        ):
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    counter.port = server.sockets[0].getsockname()[1]
    try:
        yield counter
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        for task in list(tasks):
            with suppress(asyncio.CancelledError):
                await task
        await server.wait_closed()
