"""How much of the project a warm product read runs: at most 12 source files.

A read that crosses many modules is slow to follow and slow to run: each hop is a call, a
lookup, and a place a reader must open to see what happens. The count is taken with
``sys.setprofile`` around one request, made straight to the app as ``serve`` runs it
(``app.serving.guarded``: the server guard around it, as granian's ASGI interface calls it) after a
warm-up, with no HTTP client in between, and every project file that ran a function is named
when the count is over.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.types import ASGIApp, Message

import commerce_api
from commerce_api.app.serving import guarded
from commerce_api.settings import Settings

MAX_FILES = 12
PACKAGE = Path(commerce_api.__file__).resolve().parent


async def _get(app: ASGIApp, path: str, key: str) -> tuple[int, bytes]:
    """``GET path`` straight to ``app``, as granian's ASGI interface hands it a request."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def test_a_warm_product_read_runs_at_most_twelve_project_files(
    app: FastAPI,
    settings: Settings,
    client: httpx.AsyncClient,
    client_key: str,
    product_in_stock: str,
) -> None:
    served = guarded(app, settings)
    path = f"/v1/products/{product_in_stock}"
    for _ in range(3):  # warm: the key, the catalogue snapshot, the memoised matches
        status, _body = await _get(served, path, client_key)
        assert status == 200

    ran: set[str] = set()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            filename = frame.f_code.co_filename
            if filename.startswith(str(PACKAGE)):
                ran.add(str(Path(filename).relative_to(PACKAGE)))

    sys.setprofile(profile)
    try:
        status, body = await _get(served, path, client_key)
    finally:
        sys.setprofile(None)

    assert status == 200, body
    assert ran, "the profile saw no project code: the count would prove nothing"
    assert len(ran) <= MAX_FILES, f"{len(ran)} project files ran: " + ", ".join(sorted(ran))
