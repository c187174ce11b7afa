"""Start a real ``commerce-api serve`` for the client's end-to-end tests, on data prepared
in-process with the server's own services (not a test module: see conftest.py)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
from client_testing import BOOK_COUNT, BOOKS, E2EServer

from commerce_api.accounts import service as accounts
from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import ProductCreate
from commerce_api.storage.db import Database

COMMERCE_API = Path(sys.executable).with_name("commerce-api")
HOST = "127.0.0.1"
STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0


async def prepare(database_url: str) -> E2EServer:
    """Migrate, then an account with a client key, an admin key, and a catalogue (the
    ``base_url`` is filled in once a server runs)."""
    db = Database(database_url)
    try:
        await db.migrate()
        async with db.write() as conn:
            account = await accounts.create_account(conn, "Client e2e", "production")
            client_key = await accounts.create_key(conn, "sandbox", account_id=account)
            admin_key = await accounts.create_key(conn, "sandbox", account_id=None, role="admin")
            books = []
            for index in range(BOOK_COUNT):
                product = ProductCreate(
                    name=f"Book {index:02d}",
                    price=19.99,
                    category=BOOKS,
                    inventory_count=1_000_000,
                )
                books.append((await catalog.create_product(conn, None, product))["id"])
            sold_out = ProductCreate(name="Gone", price=0.1, category="e2e-sold-out")
            sold_out_id = (await catalog.create_product(conn, None, sold_out))["id"]
    finally:
        await db.dispose()
    return E2EServer("", client_key.secret, admin_key.secret, books, sold_out_id)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_healthy(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-4000:]
    raise AssertionError(f"the server did not become healthy; its stderr:\n{tail}")


@contextmanager
def serve(
    workdir: Path, database_url: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """A sandbox ``commerce-api serve`` on a free port until the block ends; yields its
    ``…/v1`` URL. It sees no ``COMMERCE_*`` variable but ours, and no ``.env`` file."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    environ |= {"COMMERCE_DATABASE_URL": database_url, "COMMERCE_ENVIRONMENT": "sandbox"}
    # The tests register receivers on 127.0.0.1 (private receivers are opt-in).
    environ |= {"COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS": "true"}
    environ |= env or {}
    log = workdir / f"serve-{port}.stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [COMMERCE_API, "serve", "--host", HOST, "--port", str(port), *args],
            cwd=workdir,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    url = f"http://{HOST}:{port}"
    try:
        _wait_until_healthy(process, url, log)
        yield f"{url}/v1"
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server as SIGTERM does (gracefully), killing it if it outlives the grace."""
    process.terminate()
    try:
        process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)


@dataclass(frozen=True, slots=True)
class DemoServer:
    """What ``serve --demo`` prints: the URL it announces (``http://localhost:PORT/v1``) on
    stderr, and the demo account's sandbox key on stdout."""

    printed_base_url: str
    key: str


def _printed(path: Path, pattern: str, deadline: float) -> re.Match[str]:
    """The first match of ``pattern`` (a line of its own, ``re.M``) in the file a process
    writes, waiting for it until ``deadline``."""
    while True:
        text = path.read_text(errors="replace")
        if match := re.search(pattern, text, re.MULTILINE):
            return match
        if time.monotonic() > deadline:
            raise AssertionError(f"no line matching {pattern!r} in {path.name}:\n{text[-4000:]}")
        time.sleep(0.1)


@contextmanager
def serve_demo(workdir: Path) -> Iterator[DemoServer]:
    """``commerce-api serve --demo`` as ``make serve`` runs it, on a free port and a fresh
    SQLite file in ``workdir``, until the block ends. It sees no ``COMMERCE_*`` variable but
    its database and environment."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    environ |= {
        "COMMERCE_DATABASE_URL": f"sqlite:///{workdir / 'demo.db'}",
        "COMMERCE_ENVIRONMENT": "sandbox",
        "PYTHONUNBUFFERED": "1",
    }
    stdout, stderr = workdir / f"demo-{port}.stdout", workdir / f"demo-{port}.stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [COMMERCE_API, "serve", "--demo", "--host", HOST, "--port", str(port)],
            cwd=workdir,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        announced = _printed(stderr, r" on (http://\S+/v1)", deadline)
        key = _printed(stdout, r"^(sk_sandbox_\w+)$", deadline)
        _wait_until_healthy(process, f"http://{HOST}:{port}", stderr)
        yield DemoServer(announced.group(1), key.group(1))
    finally:
        _stop(process)


@contextmanager
def http_receiver(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A webhook receiver answering with ``handler`` on a free port, in a thread; its base URL."""
    server = HTTPServer((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
