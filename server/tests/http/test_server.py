"""``serve``'s HTTP server (granian) and the guard around the app, against a real process.

The settings map onto granian's documented options (``cli.granian_options``); what granian
has no setting for is ``http.middleware.ServerGuardMiddleware``. Each behaviour is checked over
a raw socket, as a slow or hostile client would meet it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from granian.constants import HTTPModes, Interfaces

from commerce_api.cli import granian_options
from commerce_api.settings import Settings
from tests.server_process import RunningServer, running_server

SHORT_DEADLINES = {
    "COMMERCE_HTTP_HEADER_TIMEOUT_SECONDS": "1",
    "COMMERCE_HTTP_BODY_TIMEOUT_SECONDS": "1",
    "COMMERCE_HTTP_KEEP_ALIVE_SECONDS": "1",
}


def test_the_settings_become_granians_documented_options() -> None:
    settings = Settings(
        http_header_timeout_seconds=10,
        http_keep_alive_seconds=5,
        http_max_connections=300,
        http_max_header_bytes=65536,
        log_level="warning",
    )
    options = granian_options(settings, "127.0.0.1", 8000, 2)
    assert options["interface"] == Interfaces.ASGI
    assert options["http"] == HTTPModes.http1
    assert options["factory"] is True
    assert options["workers"] == 2
    assert options["backpressure"] == 300
    assert options["log_access"] is False
    http1 = options["http1_settings"]
    # One timer in granian for a new, an idle and a trickling connection: the smaller bound.
    assert http1.header_read_timeout == 5000
    assert http1.keep_alive is True
    assert http1.max_buffer_size == 2 * 65536
    assert options["log_dictconfig"]["root"]["level"] == "WARNING"


def test_keep_alive_zero_turns_it_off_and_the_head_timeout_stands_alone() -> None:
    options = granian_options(
        Settings(http_header_timeout_seconds=2.5, http_keep_alive_seconds=0), "::1", 80, 1
    )
    assert options["http1_settings"].keep_alive is False
    assert options["http1_settings"].header_read_timeout == 2500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    workdir = tmp_path_factory.mktemp("serve")
    database_url = f"sqlite:///{workdir / 'commerce.db'}"
    with running_server(database_url, workdir, settings=SHORT_DEADLINES) as running:
        yield running


def _connect(server: RunningServer) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5.0)


def _read_until_closed(sock: socket.socket, within: float) -> tuple[bytes, float | None]:
    """What the server sends until it closes the connection, and after how long it closed it
    (None: still open after ``within`` seconds)."""
    started = time.monotonic()
    deadline = started + within
    data = b""
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return data, time.monotonic() - started
            data += chunk
    except TimeoutError:
        return data, None
    except ConnectionResetError:
        return data, time.monotonic() - started
    return data, None


@pytest.mark.slow
def test_a_slow_loris_head_is_closed_after_the_header_timeout(server: RunningServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.4)
        sock.sendall(b"X-Trickle: 1\r\n")  # a line now and then does not reset the deadline
        data, closed_after = _read_until_closed(sock, 4.0)
    assert closed_after is not None, "a head trickled for ever holds its connection"
    assert b"200" not in data


@pytest.mark.slow
def test_an_idle_keep_alive_connection_is_closed(server: RunningServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data, closed_after = _read_until_closed(sock, 4.0)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert closed_after is not None, "an idle keep-alive connection was kept"
    assert closed_after < 3.0


@pytest.mark.slow
def test_a_connection_that_sends_nothing_is_closed(server: RunningServer) -> None:
    with _connect(server) as sock:
        data, closed_after = _read_until_closed(sock, 4.0)
    assert (data, closed_after is not None) == (b"", True)


@pytest.mark.slow
def test_a_body_that_stalls_is_answered_408_and_its_connection_closed(
    server: RunningServer,
) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        data, closed_after = _read_until_closed(sock, 5.0)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert b'"code":"invalid_request"' in data
    assert b'"details":"body"' in data
    assert closed_after is not None


@pytest.mark.slow
def test_a_whole_request_on_one_connection_is_served_after_another(
    server: RunningServer,
) -> None:
    """Keep-alive works: two requests on one connection, each answered with its length."""
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b'{"status":"ok"}' not in data:
                chunk = sock.recv(65536)
                assert chunk, "the server closed a keep-alive connection after one request"
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 ")
            assert b"content-length: 15\r\n" in data.lower()


def test_the_server_process_helper_runs_granian(tmp_path: Path) -> None:
    """The tests' server is the real `serve`: its log says granian."""
    with running_server(f"sqlite:///{tmp_path / 'commerce.db'}", tmp_path) as running:
        log = running.stderr_path.read_text(encoding="utf-8")
    assert "granian" in log
