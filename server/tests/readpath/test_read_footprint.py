"""How much of the project a warm product read runs: at most 12 source files.

A read that crosses many modules is slow to follow and slow to run: each hop is a call, a
lookup, and a place a reader must open to see what happens. The count is taken with
``sys.setprofile`` around one request, made straight to the app as ``serve`` runs it
(``app.serving.guarded``: the server guard around it, served over RSGI by ``app.rsgi``) after a
warm-up, with no HTTP client in between, and every project file that ran a function is named
when the count is over.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from fastapi import FastAPI

import commerce_api
from commerce_api.app.rsgi import RSGIApp
from commerce_api.app.serving import guarded
from commerce_api.core.errors import MAX_BODY_BYTES
from commerce_api.settings import Settings

MAX_FILES = 12
PACKAGE = Path(commerce_api.__file__).resolve().parent


class _Headers(dict[str, str]):
    """RSGI's headers (a mapping of names to text values)."""


@dataclass
class _Scope:
    """RSGI's HTTP scope, as granian gives it to ``serve``'s app."""

    path: str
    headers: _Headers
    proto: str = "http"
    http_version: str = "1.1"
    server: str = "127.0.0.1:8000"
    client: str = "127.0.0.1:50000"
    scheme: str = "http"
    method: str = "GET"
    query_string: str = ""


class _Protocol:
    """RSGI's HTTP protocol: what the app answers with."""

    def __init__(self) -> None:
        self.answer: tuple[int, bytes] | None = None

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.answer = status, body


async def _get(app: RSGIApp, path: str, key: str) -> tuple[int, bytes]:
    headers = _Headers({"host": "testserver", "authorization": f"Bearer {key}"})
    protocol = _Protocol()
    await app.__rsgi__(_Scope(path, headers), protocol)
    assert protocol.answer is not None
    return protocol.answer


async def test_a_warm_product_read_runs_at_most_twelve_project_files(
    app: FastAPI,
    settings: Settings,
    client: httpx.AsyncClient,
    client_key: str,
    product_in_stock: str,
) -> None:
    served = RSGIApp(guarded(app, settings), whole_body_up_to=MAX_BODY_BYTES)
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
