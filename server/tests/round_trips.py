"""A TCP relay in front of PostgreSQL: it counts round trips (how many times a client spoke
and then waited for the server's answer before speaking again — what a network's latency
multiplies, whatever the driver batches into one write), and it can cut the link and heal it
(a network fault between the service and its database, the machine's PostgreSQL untouched).

A cut is loud (every link closed, new ones refused: :meth:`Relay.cut`, healed by
:meth:`Relay.start`) or silent (:meth:`Relay.cut` with ``silent=True``, healed by
:meth:`Relay.heal`): nothing passes either way and nothing is closed — new links are accepted
and then hear nothing, as a partition drops packets without a word; what was sent meanwhile is
delivered once healed, as TCP retransmits it.

A turn starts when the client sends after the server has sent (or first): bytes the client
sends while it has not heard back yet belong to the same turn (pipelined).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from sqlalchemy.engine import make_url


class Relay:
    def __init__(self, url: str) -> None:
        target = make_url(url)
        self.host = target.host or "127.0.0.1"
        self.target_port = target.port or 5432
        self.port = 0
        self.turns = 0
        self.last_speaker: dict[int, bool] = {}
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.flowing = asyncio.Event()  # cleared during a silent cut
        self.flowing.set()

    def url_for(self, url: str) -> str:
        """``url`` (``postgresql://…``) through this relay."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(False)

    async def start(self) -> None:
        """Listen (on the port it had, after a :meth:`cut`)."""
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def cut(self, *, silent: bool = False) -> None:
        """Drop every link and refuse new ones, until :meth:`start` again; or, ``silent``,
        forward nothing either way (closing nothing) until :meth:`heal`."""
        if silent:
            self.flowing.clear()
            return
        self.flowing.set()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with suppress(asyncio.CancelledError):
                await task

    def heal(self) -> None:
        """End a silent cut: what was held back goes through, and everything after it."""
        self.flowing.set()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: int, client: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                if client and not self.last_speaker.get(link, False):
                    self.turns += 1
                self.last_speaker[link] = client
                writer.write(data)
                await writer.drain()
            await self.flowing.wait()  # an end of stream waits out a silent cut too
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepting = asyncio.current_task()
        assert accepting is not None
        self.tasks.add(accepting)  # a cut cancels it while it waits out a silent one
        try:
            await self.flowing.wait()
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except BaseException:
            writer.close()
            raise
        finally:
            self.tasks.discard(accepting)
        link = id(writer)
        for task in (
            asyncio.create_task(self._pipe(reader, up_writer, link, True)),
            asyncio.create_task(self._pipe(up_reader, writer, link, False)),
        ):
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)


@asynccontextmanager
async def counting_relay(url: str) -> AsyncIterator[Relay]:
    """A relay to the PostgreSQL server of ``url`` on a free local port, while in the block."""
    relay = Relay(url)
    await relay.start()
    try:
        yield relay
    finally:
        await relay.cut()
