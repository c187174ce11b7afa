"""``commerce-api serve`` under attack: real processes, raw sockets, two loopback addresses.

A client is told apart by its address: the tests connect from 127.0.0.1 and from 127.0.0.2
(both loopback on Linux) to a server listening on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server_process import RunningServer, running_server

pytestmark = pytest.mark.slow

ATTACKER = "127.0.0.2"
VICTIM = "127.0.0.1"


def _address(server: RunningServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _connect_from(source: str, server: RunningServer) -> socket.socket:
    return socket.create_connection(_address(server), timeout=10.0, source_address=(source, 0))


def _client_from(source: str, server: RunningServer) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=server.base_url, transport=transport, timeout=10.0)


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length body: status, headers (lower-case names), body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole head arrived: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (x.split(":", 1) for x in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "closed before the whole body arrived"
        body += chunk
    return int(status_line.split()[1]), headers, body


def _worker_rss_kib(server: RunningServer) -> int:
    """The resident memory of serve's worker process (granian's child of the serve process)."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    assert len(children) == 1, children
    for line in Path(f"/proc/{children[0]}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@contextmanager
def _serving(tmp_path: Path, **settings: str) -> Iterator[RunningServer]:
    env = {f"COMMERCE_{name.upper()}": value for name, value in settings.items()}
    with running_server(f"sqlite:///{tmp_path / 'commerce.db'}", tmp_path, settings=env) as server:
        yield server


STALLED_ORDER = (
    b"POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{"
)


def test_a_client_past_its_requests_in_flight_alone_is_refused_503(tmp_path: Path) -> None:
    """Requests whose bodies have not arrived stay in flight; past the cap, the same client's
    next one is refused at once in the error envelope, while another address is served, and
    the client is served again once its requests are done."""
    with (
        _serving(
            tmp_path, http_max_requests_per_client="4", http_body_timeout_seconds="20"
        ) as server,
        ExitStack() as stack,
    ):
        stalled = [stack.enter_context(_connect_from(ATTACKER, server)) for _ in range(4)]
        for sock in stalled:
            sock.sendall(STALLED_ORDER)
        time.sleep(0.5)  # each is now in the app, waiting for its body

        with _client_from(ATTACKER, server) as attacker:
            refused = attacker.get("/healthz")
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["x-request-id"].startswith("req_")
        error = refused.json()["error"]
        assert error["code"] == "rate_limited"
        assert "4 requests in progress" in error["message"]

        with _client_from(VICTIM, server) as victim:
            assert victim.get("/healthz").status_code == 200

        for sock in stalled:
            sock.close()
        time.sleep(0.5)
        with _client_from(ATTACKER, server) as attacker:
            assert attacker.get("/healthz").status_code == 200


def test_a_thousand_half_sent_heads_from_one_client_do_not_shut_out_another(
    tmp_path: Path,
) -> None:
    """granian counts no connections per client (docs/deployment.md): what keeps others served
    is that a connection waiting for its head costs little, granian holds
    COMMERCE_HTTP_MAX_CONNECTIONS of them per worker (10,000), and each is closed after the
    header timeout."""
    with _serving(tmp_path) as server, ExitStack() as stack:
        for _ in range(1_100):
            sock = stack.enter_context(_connect_from(ATTACKER, server))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Half: ")
        started = time.monotonic()
        with _client_from(VICTIM, server) as victim:
            response = victim.get("/healthz")
        assert response.status_code == 200
        assert time.monotonic() - started < 2.0, "the victim waited behind the half-sent heads"


def test_a_head_over_the_cap_is_431_in_the_envelope(tmp_path: Path) -> None:
    with _serving(tmp_path, http_max_header_bytes="8192") as server:
        with _connect_from(VICTIM, server) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
            status, headers, body = _read_response(sock)
        assert status == 431
        assert headers["connection"] == "close"
        error = json.loads(body)["error"]
        assert (error["code"], error["details"]) == ("invalid_request", "headers")
        assert "8192 bytes" in error["message"]
        with _client_from(VICTIM, server) as client:
            assert client.get("/healthz", headers={"X-Fine": "a" * 6000}).status_code == 200


def test_a_huge_head_is_refused_by_the_server_without_memory_growth(tmp_path: Path) -> None:
    """256 MiB of header: granian stops reading at its buffer (twice the cap) and refuses it."""
    with _serving(tmp_path) as server:
        before = _worker_rss_kib(server)
        sent = 0
        answer = b""
        with _connect_from(ATTACKER, server) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: ")
            chunk = b"a" * (1024 * 1024)
            try:
                while sent < 256 * 1024 * 1024:
                    sock.sendall(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                sock.settimeout(5.0)
                answer = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                pass
        grown_kib = _worker_rss_kib(server) - before
        assert sent < 256 * 1024 * 1024, "the server read the whole 256 MiB head"
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:100]
        assert grown_kib < 32 * 1024, f"the worker grew by {grown_kib} KiB"
        with _client_from(VICTIM, server) as victim:
            assert victim.get("/healthz").status_code == 200


def _quota_left(client: httpx.Client, forwarded_for: str | None = None) -> int:
    """The remaining quota of the bucket an unauthenticated request is counted in (per IP)."""
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    response = client.get("/v1/products", headers=headers)
    assert response.status_code == 401
    return int(response.headers["x-ratelimit-remaining"])


def test_x_forwarded_for_is_ignored_unless_the_proxy_is_trusted(tmp_path: Path) -> None:
    with (
        _serving(tmp_path, rate_limit_development="100") as server,
        _client_from(VICTIM, server) as client,
    ):
        # No trusted proxy (the default): a forged address changes nothing.
        assert _quota_left(client, "198.51.100.7") == 99
        assert _quota_left(client, "198.51.100.8") == 98
        assert _quota_left(client) == 97


def test_a_trusted_proxys_x_forwarded_for_names_the_client(tmp_path: Path) -> None:
    with (
        _serving(tmp_path, rate_limit_development="100", trusted_proxies=VICTIM) as server,
        _client_from(VICTIM, server) as proxy,
        _client_from(ATTACKER, server) as other,
    ):
        assert _quota_left(proxy, "198.51.100.7") == 99
        assert _quota_left(proxy, "198.51.100.7") == 98
        assert _quota_left(proxy, "198.51.100.8") == 99
        # From an address not listed, the header is not believed.
        assert _quota_left(other, "198.51.100.7") == 99
        assert _quota_left(other, "198.51.100.7") == 98
        assert _quota_left(proxy) == 99
