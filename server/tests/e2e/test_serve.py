"""``commerce-api serve --demo`` as an operator runs it: a real process on a loopback port.

The operator contract: the command applies migrations, loads the demo catalogue into an empty
database, prints a sandbox client key as the last line of standard output (explanations go to
standard error), then serves ``/v1``. These tests read that key and use it over real HTTP.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.helpers import bearer

pytestmark = pytest.mark.slow

COMMERCE_API = Path(sys.executable).with_name("commerce-api")
HOST = "127.0.0.1"
STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0
DEMO_PRODUCTS = 60
DEMO_CATEGORIES = {"books", "electronics", "apparel", "home", "toys", "grocery"}


@dataclass(frozen=True, slots=True)
class Server:
    base_url: str
    key: str
    stdout_lines: list[str]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _pump_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Copy a pipe's lines into a queue (``None`` at EOF), so reads can have a deadline."""
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _stderr_tail(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return text[-4000:]


def _read_key(lines: queue.Queue[str | None], seen: list[str], deadline: float) -> str:
    """The secret printed on stdout: its last line before the server starts (one line here)."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no key on stdout within the deadline; stdout: {seen!r}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            raise AssertionError(f"stdout closed before a key was printed; stdout: {seen!r}")
        seen.append(line)
        if line.startswith("sk_"):
            return line


def _wait_until_healthy(process: subprocess.Popen[str], base_url: str, deadline: float) -> None:
    with httpx.Client(base_url=base_url, timeout=2.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"the server exited early with code {process.returncode}")
            try:
                if http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise AssertionError(f"/healthz did not answer 200 within {STARTUP_TIMEOUT_SECONDS} s")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)


@contextmanager
def demo_server(database_url: str, workdir: Path) -> Iterator[Server]:
    """Run ``commerce-api serve --demo`` on a free loopback port until the block ends."""
    assert COMMERCE_API.exists(), f"{COMMERCE_API} is not installed (run `make install`)"
    port = _free_port()
    # Only our settings: no COMMERCE_* variable from the caller's environment, no .env file
    # (the working directory is a fresh temporary one).
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    env.update({"COMMERCE_DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"})
    stderr_path = workdir / "serve.stderr.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [str(COMMERCE_API), "serve", "--demo", "--host", HOST, "--port", str(port)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()
    assert process.stdout is not None
    pump = threading.Thread(target=_pump_lines, args=(process.stdout, lines), daemon=True)
    pump.start()
    base_url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        seen: list[str] = []
        try:
            key = _read_key(lines, seen, deadline)
            _wait_until_healthy(process, base_url, deadline)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- stderr ---\n{_stderr_tail(stderr_path)}") from None
        yield Server(base_url=base_url, key=key, stdout_lines=seen)
    finally:
        _stop(process)
        pump.join(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        process.stdout.close()


def _check_demo_server(server: Server, *, fresh_catalogue: bool) -> None:
    assert server.key.startswith("sk_sandbox_")
    assert server.stdout_lines[-1] == server.key, "the key is the last line of stdout"

    with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
        response = http.get("/v1/products", headers=bearer(server.key))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["x-request-id"].startswith("req_")
        body = response.json()
        assert len(body["data"]) == 20
        pagination = body["pagination"]
        assert pagination["total"] >= 50
        if fresh_catalogue:
            assert pagination["total"] == DEMO_PRODUCTS
        assert pagination["limit"] == 20
        assert pagination["offset"] == 0
        assert pagination["has_more"] is True
        for product in body["data"]:
            assert set(product) == {"id", "name", "description", "price", "category", "created_at"}
            assert product["id"].startswith("prod_")

        everything = http.get("/v1/products", params={"limit": 100}, headers=bearer(server.key))
        assert everything.status_code == 200
        categories = {product["category"] for product in everything.json()["data"]}
        assert len(categories) >= 3, categories
        if fresh_catalogue:
            assert categories == DEMO_CATEGORIES

        one = body["data"][0]
        detail = http.get(f"/v1/products/{one['id']}", headers=bearer(server.key))
        assert detail.status_code == 200
        assert detail.json()["inventory_count"] >= 0

        anonymous = http.get("/v1/products")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].lower().startswith("bearer")
        error = anonymous.json()["error"]
        assert error["code"] == "unauthorized"
        assert isinstance(error["message"], str)
        assert error["message"]
        assert isinstance(error["details"], str)

        assert http.get("/readyz").status_code == 200


def test_serve_demo_on_sqlite(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


@pytest.mark.postgresql
def test_serve_demo_on_postgresql(postgresql_database_url: str, tmp_path: Path) -> None:
    # The fixture empties the session's shared database first, so the demo catalogue loads.
    with demo_server(postgresql_database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


def test_serve_demo_twice_keeps_the_catalogue_and_prints_a_new_key(tmp_path: Path) -> None:
    """A restart does not load the demo catalogue again, and the new key works."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as first:
        first_key = first.key
    with demo_server(database_url, tmp_path) as second:
        assert second.key != first_key
        _check_demo_server(second, fresh_catalogue=True)
