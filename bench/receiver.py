"""A webhook receiver for ``make bench``: answers every POST with ``200`` after 1 ms
(keep-alive), counts them, and reports at ``GET /count`` the count and the time of the last
POST (``time.monotonic()``, the same clock as the bench's, so a drain that runs out of backlog
mid-round is timed to its last delivery). Any other GET is ``200`` too: the health probe. Raw
asyncio, not an ASGI server: it must never be what limits the dispatcher.

    python bench/receiver.py PORT [IDS]

With ``IDS`` (a file), it appends each POST's ``webhook-id`` header (the event's id) to it, a
line each, flushed at once (``bench/cluster_faults.py`` checks every event arrived).
"""

from __future__ import annotations

import asyncio
import sys
import time

ANSWER_SECONDS = 0.001  # issue 18: "a receiver that answers in 1 ms"
count = 0
last_post = 0.0
ids_file = open(sys.argv[2], "a") if len(sys.argv) > 2 else None  # noqa: SIM115


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global count, last_post
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path = head.split(b" ", 2)[:2]
            length = 0
            webhook_id = b""
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
                elif name.strip().lower() == b"webhook-id":
                    webhook_id = value.strip()
            if length:
                await reader.readexactly(length)
            if method == b"POST":
                await asyncio.sleep(ANSWER_SECONDS)
                count += 1
                if ids_file is not None:
                    ids_file.write(webhook_id.decode() + "\n")
                    ids_file.flush()
                last_post = time.monotonic()
                body = b""
            else:
                body = f"{count} {last_post}".encode() if path == b"/count" else b"ok"
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
