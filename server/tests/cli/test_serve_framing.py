"""``commerce-api serve`` and HTTP/1.1's message framing, over raw sockets to a real server.

The server runs under granian's ASGI interface (``app.serving``): a chunked body whose framing
is broken reaches the app as a body cut short, which is refused (400) and never placed; a
request head without one ``Host`` header, or with too many header lines, is refused in the
error envelope; and a streamed answer the app fails in midway reaches the client as a failure
(the connection cut before the final chunk), never as a complete body.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server_process import HOST, RunningServer, free_port, running_server, stop_process

pytestmark = pytest.mark.slow

SERVER_DIRECTORY = Path(__file__).resolve().parents[2]  # server/: where ``tests`` imports from


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    workdir = tmp_path_factory.mktemp("framing")
    database_url = f"sqlite:///{workdir / 'commerce.db'}"
    with running_server(database_url, workdir, args=["--demo"], expect_key=True) as running:
        yield running


def _exchange(server: RunningServer, request: bytes, *, half_close: bool = False) -> bytes:
    """Send ``request`` on a new connection; everything the server sends until it closes the
    connection or goes quiet for a second."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            pass
    return received


def _status_and_error(response: bytes) -> tuple[int, dict[str, str]]:
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body).get("error", {}) if body else {}


def _order_body(server: RunningServer, customer: str) -> bytes:
    headers = {"Authorization": f"Bearer {server.key}"}
    products = httpx.get(f"{server.base_url}/v1/products?limit=1", headers=headers).json()
    item = {"product_id": products["data"][0]["id"], "quantity": 1}
    address = {
        "street": "1 Main St",
        "city": "Springfield",
        "postal_code": "12345",
        "country": "US",
    }
    return json.dumps(
        {"customer_id": customer, "items": [item], "shipping_address": address}
    ).encode()


def _chunked_order(server: RunningServer, body: bytes, tail: bytes, key: str) -> bytes:
    """A POST /v1/orders whose body is one whole chunk of ``body``, then ``tail``."""
    head = (
        f"POST /v1/orders HTTP/1.1\r\nHost: shop.example\r\n"
        f"Authorization: Bearer {server.key}\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: {key}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    return head + b"%x\r\n" % len(body) + body + b"\r\n" + tail


def _orders_of(server: RunningServer, customer: str) -> int:
    headers = {"Authorization": f"Bearer {server.key}"}
    page = httpx.get(
        f"{server.base_url}/v1/orders", params={"customer_id": customer}, headers=headers
    )
    assert page.status_code == 200, page.text
    return int(page.json()["pagination"]["total"])


@pytest.mark.parametrize(
    ("case", "tail", "half_close"),
    [
        ("a bad chunk size", b"zz\r\n", False),
        ("junk where CRLF belongs", b"5\r\nabcdeXX", False),
        ("the end of the stream without the final chunk", b"", True),
    ],
)
def test_a_chunked_body_with_broken_framing_is_refused_and_never_placed(
    server: RunningServer, case: str, tail: bytes, half_close: bool
) -> None:
    customer = f"cus_framing_{abs(hash(case)) % 10**8}"
    body = _order_body(server, customer)
    request = _chunked_order(server, body, tail, f"framing-{customer}")
    status, error = _status_and_error(_exchange(server, request, half_close=half_close))
    if half_close:  # a client that ends its side mid-body may still read the answer
        assert status == 400
    else:
        assert status == 400, case
    assert (error["reason"], error["details"]) == ("malformed_request", "body"), error
    assert _orders_of(server, customer) == 0


def test_the_same_order_with_its_final_chunk_is_placed(server: RunningServer) -> None:
    """The control: the bodies above are refused for their framing, not their content."""
    customer = "cus_framing_whole"
    body = _order_body(server, customer)
    request = _chunked_order(server, body, b"0\r\n\r\n", "framing-whole")
    status, error = _status_and_error(_exchange(server, request))
    assert status == 201, error
    assert _orders_of(server, customer) == 1


@pytest.mark.parametrize(
    ("host_lines", "problem"),
    [("", "has none"), ("Host: a.example\r\nHost: b.example\r\n", "has 2")],
)
def test_an_http_1_1_request_needs_exactly_one_host(
    server: RunningServer, host_lines: str, problem: str
) -> None:
    request = f"GET /healthz HTTP/1.1\r\n{host_lines}\r\n".encode()
    status, error = _status_and_error(_exchange(server, request))
    assert status == 400
    assert (error["reason"], error["details"]) == ("malformed_request", "Host")
    assert problem in error["message"]


def test_http_1_0_may_leave_host_out(server: RunningServer) -> None:
    response = _exchange(server, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert response.startswith(b"HTTP/1.0 200") or response.startswith(b"HTTP/1.1 200"), response


def _refusals(server: RunningServer, reason: str) -> float:
    text = httpx.get(f"{server.base_url}/metrics").text
    for line in text.splitlines():
        if line.startswith("commerce_http_refusals_total{") and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_too_many_header_lines_get_431_in_the_envelope_and_are_counted(
    server: RunningServer,
) -> None:
    before = _refusals(server, "header_too_large")
    extra = "".join(f"X-Extra-{i}: {i}\r\n" for i in range(70))  # over the default 64
    request = f"GET /healthz HTTP/1.1\r\nHost: shop.example\r\n{extra}\r\n".encode()
    status, error = _status_and_error(_exchange(server, request))
    assert status == 431
    assert (error["reason"], error["details"]) == ("header_too_large", "headers")
    assert "71 header lines" in error["message"]
    assert _refusals(server, "header_too_large") == before + 1


FAILING_STREAM = """
import sys
from granian import Granian
from commerce_api.app.serving import granian_options
from commerce_api.settings import Settings

options = granian_options(Settings(log_level="warning"), "{host}", {port}, 1)
Granian("tests.cli.test_serve_framing:failing_export", **options).serve()
"""


def failing_export() -> object:
    """granian's factory target: an app, served as ``serve`` serves its own, whose streamed
    answer fails after two chunks (as a CSV export whose database goes away midway)."""
    from commerce_api.app.serving import guarded, in_worker
    from commerce_api.settings import Settings

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] != "http":
            return
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/csv")],
        }
        await send(start)  # type: ignore[operator]
        for row in (b"id,name\n", b"1,first\n"):
            await send({"type": "http.response.body", "body": row, "more_body": True})  # type: ignore[operator]
        raise RuntimeError("the export failed midway")

    settings = Settings()
    return in_worker(guarded(app, settings), settings)  # type: ignore[arg-type]


def test_a_stream_that_fails_midway_reaches_the_client_as_a_failure() -> None:
    port = free_port()
    code = FAILING_STREAM.format(host=HOST, port=port)
    env = {**os.environ, "PYTHONPATH": str(SERVER_DIRECTORY)}
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=SERVER_DIRECTORY, env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "granian did not start"
                time.sleep(0.1)
        received = b""
        with socket.create_connection((HOST, port), timeout=10) as sock:
            sock.sendall(b"GET /export.csv HTTP/1.1\r\nHost: x\r\n\r\n")
            while chunk := sock.recv(65536):  # the server closes the connection
                received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        assert b"1,first\n" in body  # what was sent before the failure arrived
        assert not body.endswith(b"0\r\n\r\n"), body  # but never the final chunk
        with pytest.raises(httpx.RemoteProtocolError):  # so a client sees a failure
            httpx.get(f"http://{HOST}:{port}/export.csv", timeout=10)
    finally:
        stop_process(process)
