"""``commerce-api serve --demo`` as an operator runs it: a real process on a loopback port.

The operator contract: the command applies migrations, then serves ``/v1``; once it holds its
port it loads the demo catalogue into an empty database and prints a sandbox client key as the
last line of standard output (explanations go to standard error). These tests read that key
and use it over real HTTP.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers import bearer
from tests.server_process import running_server

pytestmark = pytest.mark.slow

DEMO_PRODUCTS = 60
DEMO_CATEGORIES = {"books", "electronics", "apparel", "home", "toys", "grocery"}


@dataclass(frozen=True, slots=True)
class Server:
    base_url: str
    key: str
    stdout_lines: list[str]
    stderr_path: Path


@contextmanager
def demo_server(database_url: str, workdir: Path) -> Iterator[Server]:
    """Run ``commerce-api serve --demo`` on a free loopback port until the block ends."""
    with running_server(database_url, workdir, args=["--demo"], expect_key=True) as server:
        assert server.key is not None
        yield Server(server.base_url, server.key, server.stdout_lines, server.stderr_path)


def _check_demo_server(server: Server, *, fresh_catalogue: bool) -> None:
    assert server.key.startswith("sk_sandbox_")
    assert server.stdout_lines[-1] == server.key, "the key is the last line of stdout"

    with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
        response = http.get("/v1/products", headers=bearer(server.key))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["x-request-id"].startswith("req_")
        # The answer the pipeline finished, framed by granian from its Content-Length.
        assert int(response.headers["content-length"]) == len(response.content)
        assert response.headers["x-content-type-options"] == "nosniff"
        assert int(response.headers["x-ratelimit-remaining"]) < int(
            response.headers["x-ratelimit-limit"]
        )
        assert int(response.headers["x-ratelimit-reset"]) > time.time()
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

        # `--demo` opts in to receivers on loopback (a demo's receiver runs on the same laptop).
        hook = http.post(
            "/v1/webhook_endpoints",
            json={"url": "http://127.0.0.1:9/hook"},
            headers=bearer(server.key),
        )
        assert hook.status_code == 201, hook.text


def test_serve_demo_on_sqlite(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


@pytest.mark.postgresql
def test_serve_demo_on_postgresql(postgresql_database_url: str, tmp_path: Path) -> None:
    # The fixture empties the session's shared database first, so the demo catalogue loads.
    with demo_server(postgresql_database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


def test_serve_demo_twice_keeps_the_catalogue_and_prints_the_same_key(tmp_path: Path) -> None:
    """A restart does not load the demo catalogue again and prints the key of the first start
    (kept beside the database: test_serve_demo_key.py); neither start logs it on stderr."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as first:
        first_key = first.key
        first_log = first.stderr_path.read_text(encoding="utf-8")
    with demo_server(database_url, tmp_path) as second:
        assert second.key == first_key
        _check_demo_server(second, fresh_catalogue=True)
        second_log = second.stderr_path.read_text(encoding="utf-8")
    # The key is printed on stdout only; stderr is the log stream and never carries a key.
    assert first_key not in first_log + second_log
    assert "sk_sandbox_" not in first_log + second_log


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if sock.recv(1024) == b"":
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return False


def test_slow_and_idle_clients_are_closed_while_others_are_served(tmp_path: Path) -> None:
    """A client that never sends its head, or trickles it, is closed after the header timeout;
    one that stalls its body after the body timeout; meanwhile other clients are answered."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    settings = {
        "COMMERCE_HTTP_HEADER_TIMEOUT_SECONDS": "1",
        "COMMERCE_HTTP_BODY_TIMEOUT_SECONDS": "1",
        "COMMERCE_HTTP_KEEP_ALIVE_SECONDS": "1",
    }
    with running_server(
        database_url, tmp_path, args=["--demo"], expect_key=True, settings=settings
    ) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        idle = socket.create_connection((host, int(port)))
        trickling = socket.create_connection((host, int(port)))
        stalled = socket.create_connection((host, int(port)))
        # Answered once, then idle (closed after the keep-alive), or then trickling its next
        # head (closed after the keep-alive and the header timeout).
        kept = socket.create_connection((host, int(port)))
        kept_trickling = socket.create_connection((host, int(port)))
        slow = (idle, trickling, stalled, kept, kept_trickling)
        try:
            for sock in (kept, kept_trickling):
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
            kept_trickling.sendall(b"GET /healthz HTTP/1.1\r\n")
            trickling.sendall(b"GET /healthz HTTP/1.1\r\n")
            stalled.sendall(
                b"POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {server.key}\r\n".encode()
                + b"Content-Length: 100\r\n\r\n{"
            )
            time.sleep(0.3)
            trickling.sendall(b"Host: x\r\n")
            # The others wait; a well-behaved client is served at once.
            with httpx.Client(base_url=server.base_url, timeout=5.0) as http:
                assert http.get("/healthz").status_code == 200
            for sock in slow:
                assert _closed_within(sock, 4.0), "a slow or idle client was not closed"
            with httpx.Client(base_url=server.base_url, timeout=5.0) as http:
                assert http.get("/healthz").status_code == 200
        finally:
            for sock in slow:
                sock.close()


def _read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length body."""
    sock.settimeout(5.0)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        body += sock.recv(4096)
    return data
