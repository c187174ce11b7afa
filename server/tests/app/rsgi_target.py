"""A small ASGI app served by granian over RSGI through ``commerce_api.app.rsgi`` (the target of
tests/app/test_rsgi.py's servers): each route shows one side of the bridge.

``RSGI_TEST_DIR``: where the lifespan and the disconnect watcher leave their marks.
``RSGI_TEST_FAIL_STARTUP``: the lifespan's startup fails.
``RSGI_TEST_NO_LIFESPAN``: the app has no lifespan (it returns at once, as ASGI allows).
``RSGI_TEST_LIFESPAN_RAISES``: the app raises for the lifespan (ASGI: then it has none).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from commerce_api.app.rsgi import RSGIApp

WHOLE_BODY_UP_TO = 64
LINGER_SECONDS = 3.0


def _marks() -> Path:
    return Path(os.environ["RSGI_TEST_DIR"])


async def _json(send: Send, value: Any, status: int = 200) -> None:
    body = json.dumps(value).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _start(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )


async def _lifespan(scope: Scope, receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if os.environ.get("RSGI_TEST_FAIL_STARTUP"):
                await send({"type": "lifespan.startup.failed", "message": "no database"})
                return
            (_marks() / "started").write_text("yes")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            (_marks() / "stopped").write_text("yes")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        if os.environ.get("RSGI_TEST_LIFESPAN_RAISES"):
            raise RuntimeError("this app knows no lifespan")
        if not os.environ.get("RSGI_TEST_NO_LIFESPAN"):
            await _lifespan(scope, receive, send)
        return
    path = scope["path"]
    if path == "/scope":
        await _json(
            send,
            {
                "method": scope["method"],
                "path": path,
                "query_string": scope["query_string"].decode("latin-1"),
                "headers": [
                    [n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]
                ],
                "client": list(scope["client"]),
                "server": list(scope["server"]),
                "http_version": scope["http_version"],
                "scheme": scope["scheme"],
                "started": (_marks() / "started").exists(),
            },
        )
    elif path == "/body":
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        await _json(
            send,
            {
                "body": b"".join(m.get("body", b"") for m in messages).decode(),
                "messages": len(messages),
                "last": messages[-1]["type"],
            },
        )
    elif path == "/stream":
        await _start(send)
        for part in (b"one,", b"two,", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif path == "/starlette-stream":  # as the console's exports stream (it watches for the
        # client's going while it sends: ASGI spec 2.3)

        async def rows() -> AsyncIterator[bytes]:
            for number in range(3):
                await asyncio.sleep(0)
                yield f"row {number}\n".encode()

        await StreamingResponse(rows(), media_type="text/csv")(scope, receive, send)
    elif path == "/stream-then-linger":  # the last message sent, the app goes on working
        await _start(send)
        await send({"type": "http.response.body", "body": b"all ", "more_body": True})
        await send({"type": "http.response.body", "body": b"sent", "more_body": False})
        await asyncio.sleep(LINGER_SECONDS)
    elif path == "/stream-then-fail":  # part of a streamed body, then the app fails (as an
        # export whose database fails mid-way: Starlette's task group keeps the failure's
        # traceback, and all it holds, alive until the garbage collector runs)

        async def failing() -> AsyncIterator[bytes]:
            yield b"part"
            raise RuntimeError("the app failed while streaming")

        await StreamingResponse(failing(), media_type="text/plain")(scope, receive, send)
    elif path == "/receive-after-answer":
        await _json(send, {"answered": True})
        kinds = [(await asyncio.wait_for(receive(), 10))["type"] for _ in range(2)]
        (_marks() / "after-answer").write_text(",".join(kinds))
    elif path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/wait-for-disconnect":
        message = await receive()  # the (empty) body
        message = await asyncio.wait_for(receive(), 10)
        (_marks() / "disconnect").write_text(message["type"])
    elif path == "/fail":
        raise RuntimeError("the app failed before answering")
    else:
        await _json(send, {"error": "not found"}, 404)


def target() -> RSGIApp:
    """granian's factory target."""
    return RSGIApp(app, whole_body_up_to=WHOLE_BODY_UP_TO)
