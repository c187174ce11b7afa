"""How much of the project a warm catalogue read runs (a product, a list page, a sorted one):
at most 12 source files, at most 15 calls from one module into another, none
of them back up a floor.

A read that crosses many modules is slow to follow and slow to run: each hop is a call, a
lookup, and a place a reader must open to see what happens. The count is taken with
``sys.setprofile`` around one request, made straight to the app as ``serve`` runs it
(``app.serving.guarded``: the server guard around it, as granian's ASGI interface calls it) after a
warm-up, with no HTTP client in between, and every project file (or call) is named when a count
is over.

A call counted is a stop on the read's walk: a project function called from another module (or,
the first, by the server); calls inside one module are that module's own business. The floors
are the layers of ``tests/project/test_layers.py``, the route modules (``routes.py``,
``console``) on ``app``'s, the top: a walk that climbs back up a floor zig-zags between layers.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Message

import commerce_api
from commerce_api.app.serving import guarded
from commerce_api.settings import Settings
from tests.project.test_layers import RANK

MAX_FILES = 12
MAX_CALLS = 15
PACKAGE = Path(commerce_api.__file__).resolve().parent


async def _get(app: ASGIApp, path: str, key: str, query: str = "") -> tuple[int, bytes]:
    """``GET path`` straight to ``app``, as granian's ASGI interface hands it a request."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
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


# (caller's module, or None for the server; called module; function) of each project call.
Call = tuple[str | None, str, str]


def _module(filename: str) -> str | None:
    """A project file's path in the package (``app/fastlane.py``); None outside it."""
    if not filename.startswith(str(PACKAGE)):
        return None
    return str(Path(filename).relative_to(PACKAGE))


def _floor(module: str) -> int:
    """The layer a module's package is in; a route module is on ``app``'s floor."""
    if module.endswith("/routes.py") or module.startswith("console/"):
        return RANK["app"]
    return RANK[module.split("/")[0].removesuffix(".py")]


# Each read and the project files it may run.
READS = {
    "/v1/products/{id}": MAX_FILES,
    "/v1/products?limit=20": MAX_FILES,
    "/v1/products?sort=price&offset=1": MAX_FILES,
}


WARM_ATTEMPTS = 100
COLD_PATH = "catalog/repository.py"


async def _profiled(
    served: ASGIApp, path: str, key: str, query: str
) -> tuple[list[Call], int, bytes]:
    """The project calls one read makes, in order, with its status and body: those of this
    task only (a task of the app or of another test that runs meanwhile is not this read)."""
    calls: list[Call] = []
    task = asyncio.current_task()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or (called := _module(frame.f_code.co_filename)) is None:
            return
        if asyncio.current_task() is not task:
            return
        caller = frame.f_back
        calls.append(
            (
                None if caller is None else _module(caller.f_code.co_filename),
                called,
                frame.f_code.co_qualname,
            )
        )

    sys.setprofile(profile)
    try:
        status, body = await _get(served, path, key, query)
    finally:
        sys.setprofile(None)
    return calls, status, body


async def _warm_read(
    app: FastAPI, settings: Settings, client_key: str, product_id: str, read: str
) -> list[Call]:
    """The project calls of one warm read (``READS``), in order."""
    served = guarded(app, settings)
    path, _, query = read.format(id=product_id).partition("?")
    for _ in range(3):  # warm: the key, the catalogue snapshot, the memoised matches
        status, _body = await _get(served, path, client_key, query)
        assert status == 200

    # The catalogue is warm once a read runs none of the database path (catalog/repository.py):
    # on a loaded machine the first build or PostgreSQL's notification can take a moment.
    for _ in range(WARM_ATTEMPTS):
        calls, status, body = await _profiled(served, path, client_key, query)
        if all(called != COLD_PATH for _caller, called, _function in calls):
            break
        await asyncio.sleep(0.1)
    assert status == 200, body
    assert calls, "the profile saw no project code: the count would prove nothing"
    return calls


@pytest.mark.parametrize("read", READS)
async def test_a_warm_product_read_runs_at_most_twelve_project_files(
    read: str,
    app: FastAPI,
    settings: Settings,
    client: httpx.AsyncClient,
    client_key: str,
    product_in_stock: str,
) -> None:
    ran = {
        called
        for _caller, called, _function in await _warm_read(
            app, settings, client_key, product_in_stock, read
        )
    }
    assert len(ran) <= READS[read], f"{len(ran)} project files ran: " + ", ".join(sorted(ran))


@pytest.mark.parametrize("read", READS)
async def test_a_warm_product_read_makes_at_most_fifteen_calls_none_back_up_a_floor(
    read: str,
    app: FastAPI,
    settings: Settings,
    client: httpx.AsyncClient,
    client_key: str,
    product_in_stock: str,
) -> None:
    calls = await _warm_read(app, settings, client_key, product_in_stock, read)
    stops = [(caller, called, function) for caller, called, function in calls if caller != called]
    walk = "\n".join(f"{caller} -> {called}: {function}" for caller, called, function in stops)
    assert len(stops) <= MAX_CALLS, f"{len(stops)} calls between modules:\n{walk}"
    climbs = [
        f"{caller} -> {called}: {function}"
        for caller, called, function in stops
        if caller is not None and _floor(called) > _floor(caller)
    ]
    assert climbs == [], walk
