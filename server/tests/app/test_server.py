"""``serve``'s HTTP server (granian) and the guard around the app, against a real process.

The settings map onto granian's documented options (``app.serving.granian_options``); what granian
has no setting for is ``app.server_guard.ServerGuardMiddleware``. Each behaviour is checked over
a raw socket, as a slow or hostile client would meet it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from granian.constants import HTTPModes, Interfaces, RuntimeModes
from starlette.types import Message, Receive, Scope, Send

from commerce_api.app.server_guard import ServerGuardMiddleware
from commerce_api.app.serving import granian_options
from commerce_api.settings import Settings
from tests.helpers import guard_scope, never_receive, sent_by
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
    # granian's default I/O runtime, said explicitly (app/serving.py: measured on two machines).
    assert options["runtime_mode"] == RuntimeModes.mt
    assert options["runtime_threads"] == 1
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


# --- the guard in process: what its real-socket tests (tests/cli/test_serve_guards.py) rely on --


def _guard(app: Any, **limits: Any) -> ServerGuardMiddleware:
    options = {
        "max_header_bytes": 1024,
        "max_headers": 64,
        "max_requests_per_client": 2,
        "body_timeout": 0.05,
    }
    return ServerGuardMiddleware(app, **{**options, **limits})


async def test_a_failed_request_leaves_the_client_no_request_in_flight() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    guard = _guard(failing)
    with pytest.raises(RuntimeError):
        await sent_by(guard, guard_scope(), never_receive)
    assert guard.in_flight == {}


async def test_the_head_counted_is_the_path_and_every_header_line() -> None:
    async def ok(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    # 10 bytes of path, one header of 4 + 1000 + 4 (": " and CRLF): 1018.
    fits = [(b"x-ab", b"v" * 1000)]
    guard = _guard(ok, max_header_bytes=1018)
    assert (await sent_by(guard, guard_scope(headers=fits), never_receive))[0]["status"] == 204
    guard = _guard(ok, max_header_bytes=1017)
    refused = await sent_by(guard, guard_scope(headers=fits), never_receive)
    assert refused[0]["status"] == 431


async def test_a_body_past_its_deadline_is_answered_408_not_by_the_app() -> None:
    async def reading(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await receive()
        finally:
            await send({"type": "http.response.start", "status": 499, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    sent = await sent_by(_guard(reading), guard_scope("POST"), never_receive)
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [408]
    assert (b"connection", b"close") in sent[0]["headers"]


async def test_deadlines_are_per_request_and_another_cancellation_stays_one() -> None:
    """One timer watches every request waiting for its body: the stalled one gets 408, the one
    whose body comes in time its own answer, and a request cancelled for another reason (the
    server going away) sees its cancellation, not a 408."""

    async def echo(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": message["body"]})

    guard = _guard(echo, body_timeout=0.2, max_requests_per_client=5)

    async def late_body() -> Message:
        await asyncio.sleep(0.05)
        return {"type": "http.request", "body": b"in time", "more_body": False}

    stalled = asyncio.create_task(sent_by(guard, guard_scope("POST"), never_receive))
    in_time = asyncio.create_task(sent_by(guard, guard_scope("POST"), late_body))
    cancelled = asyncio.create_task(sent_by(guard, guard_scope("POST"), never_receive))
    await asyncio.sleep(0.1)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert next(m.get("status") for m in await stalled) == 408
    answered = await in_time
    assert answered[0]["status"] == 200
    assert answered[1]["body"] == b"in time"
    assert guard.deadlines.waiting == {}
    assert guard.deadlines.cancelled == set()
    assert guard.in_flight == {}


async def test_what_follows_a_whole_body_has_no_deadline() -> None:
    messages = iter([{"type": "http.request", "body": b"{}", "more_body": False}])

    async def receive() -> Message:
        message = next(messages, None)
        if message is None:
            await asyncio.sleep(0.1)  # longer than the body deadline, then the client leaves
            return {"type": "http.disconnect"}
        return message

    async def listening(scope: Scope, receive: Receive, send: Send) -> None:
        assert (await receive())["body"] == b"{}"
        assert (await receive())["type"] == "http.disconnect"

    assert await sent_by(_guard(listening), guard_scope("POST"), receive) == []


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


def _worker_thread_policies(server: RunningServer) -> set[int]:
    """The scheduling policies of every thread of serve's worker (granian's child process)."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    assert len(children) == 1, children
    threads = [int(tid) for tid in os.listdir(f"/proc/{children[0]}/task")]
    assert len(threads) > 1, "granian's I/O thread and the app's: at least two"
    return {os.sched_getscheduler(tid) for tid in threads}


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux's SCHED_BATCH")
@pytest.mark.parametrize(("setting", "policy"), [("true", "SCHED_BATCH"), ("false", "SCHED_OTHER")])
def test_every_worker_thread_runs_under_the_scheduling_setting(
    tmp_path: Path, setting: str, policy: str
) -> None:
    settings = {"COMMERCE_HTTP_BATCH_SCHEDULING": setting}
    with running_server(
        f"sqlite:///{tmp_path / 'commerce.db'}", tmp_path, settings=settings
    ) as running:
        assert _worker_thread_policies(running) == {getattr(os, policy)}
