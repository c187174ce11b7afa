"""``app/rsgi.py``: an ASGI app served by a real granian over RSGI (``tests/app/rsgi_target.py``),
each side of the bridge seen from the app and from a client: the scope, bodies read whole and
in chunks, responses sent whole and streamed, the client's going, the lifespan, and an app that
fails before it answers. (``serve`` itself runs over it in every test that starts a server.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from commerce_api.app.rsgi import _address, asgi_headers
from tests.app.rsgi_target import LINGER_SECONDS, WHOLE_BODY_UP_TO
from tests.server_process import HOST, free_port, stop_process

SERVER_DIRECTORY = Path(__file__).resolve().parents[2]  # server/: where ``tests`` imports from
STARTUP_SECONDS = 20.0


def _granian(port: int, marks: Path, **env: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "granian", "--interface", "rsgi", "--factory", "--host", HOST,
        "--port", str(port), "--workers", "1", "--log-level", "warning",
        "tests.app.rsgi_target:target",
    ]  # fmt: skip
    environment = {**os.environ, "RSGI_TEST_DIR": str(marks), "PYTHONPATH": str(SERVER_DIRECTORY)}
    return subprocess.Popen(
        command,
        cwd=SERVER_DIRECTORY,
        env={**environment, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@contextmanager
def _served(tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    process = _granian(port, tmp_path, **env)
    base = f"http://{HOST}:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    try:
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(f"{base}/scope", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "granian did not start"
                time.sleep(0.1)
        yield base, process
    finally:
        stop_process(process)


def _mark(path: Path, missing: str) -> str:
    """What the app wrote at ``path``, once it has (within 5 s; else fail with ``missing``)."""
    deadline = time.monotonic() + 5
    while not path.exists():
        assert time.monotonic() < deadline, missing
        time.sleep(0.05)
    return path.read_text()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    marks = tmp_path_factory.mktemp("rsgi")
    with _served(marks) as (base, _):
        yield base, marks


def test_the_app_gets_an_asgi_scope(served: tuple[str, Path]) -> None:
    base, _ = served
    with httpx.Client() as client:
        answer = client.get(
            f"{base}/scope",
            params={"q": "a b&c", "x": "é"},
            headers=[("X-Twice", "one"), ("X-Twice", "two"), ("X-Plain", "yes")],
        ).json()
    assert answer["method"] == "GET"
    assert answer["path"] == "/scope"
    assert answer["query_string"] == "q=a+b%26c&x=%C3%A9"  # as sent, undecoded
    headers = answer["headers"]
    assert ["x-twice", "one"] in headers
    assert ["x-twice", "two"] in headers
    assert ["x-plain", "yes"] in headers
    assert answer["client"][0] == HOST
    assert isinstance(answer["client"][1], int)
    assert answer["server"][1] == int(base.rsplit(":", 1)[1])
    assert answer["http_version"] == "1.1"
    assert answer["scheme"] == "http"
    assert answer["started"] is True  # the lifespan ran before the first request


def test_the_path_is_decoded_as_asgi_says(served: tuple[str, Path]) -> None:
    base, _ = served
    answer = httpx.get(f"{base}/%73cope").json()
    assert answer["path"] == "/scope"


def test_a_header_value_that_is_not_ascii_arrives_empty_not_missing(
    served: tuple[str, Path],
) -> None:
    base, _ = served
    with socket.create_connection((HOST, int(base.rsplit(":", 1)[1])), timeout=5) as sock:
        sock.sendall(
            b"GET /scope HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \xc3\xa9\r\n"
            b"Connection: close\r\n\r\n"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    body = raw.split(b"\r\n\r\n", 1)[1]
    assert b'["idempotency-key", ""]' in body


def test_bodies_whole_and_in_chunks(served: tuple[str, Path]) -> None:
    base, _ = served
    small = "x" * WHOLE_BODY_UP_TO
    answer = httpx.post(f"{base}/body", content=small).json()
    assert answer == {"body": small, "messages": 1, "last": "http.request"}  # one read

    large = "y" * (WHOLE_BODY_UP_TO * 100)
    answer = httpx.post(f"{base}/body", content=large).json()
    assert answer["body"] == large
    assert answer["last"] == "http.request"

    def chunks() -> Iterator[bytes]:
        yield b"first,"
        yield b"second"

    answer = httpx.post(f"{base}/body", content=chunks()).json()  # Transfer-Encoding: chunked
    assert answer["body"] == "first,second"

    answer = httpx.get(f"{base}/body").json()
    assert answer == {"body": "", "messages": 1, "last": "http.request"}


def test_responses_whole_streamed_and_empty(served: tuple[str, Path]) -> None:
    base, _ = served
    streamed = httpx.get(f"{base}/stream")
    assert streamed.status_code == 200
    assert streamed.text == "one,two,three"
    assert streamed.headers["content-type"] == "text/plain"
    rows = httpx.get(f"{base}/starlette-stream")
    assert rows.status_code == 200
    assert rows.text == "row 0\nrow 1\nrow 2\n"
    empty = httpx.get(f"{base}/empty")
    assert empty.status_code == 204
    assert empty.content == b""


def test_a_stream_ends_with_the_apps_last_message(served: tuple[str, Path]) -> None:
    """Not when the app returns: what it does after answering never holds the client."""
    base, _ = served
    started = time.monotonic()
    answer = httpx.get(f"{base}/stream-then-linger", timeout=LINGER_SECONDS + 5)
    assert answer.text == "all sent"
    assert time.monotonic() - started < LINGER_SECONDS / 2


def test_a_stream_the_app_fails_in_is_ended_not_held_open(served: tuple[str, Path]) -> None:
    base, _ = served
    with httpx.stream("GET", f"{base}/stream-then-fail", timeout=5) as answer:
        assert answer.status_code == 200
        assert answer.read() == b"part"  # ended at once (RSGI cannot abort it): no timeout
    assert httpx.get(f"{base}/scope").status_code == 200  # and the worker serves on


def test_receive_after_the_answer_says_the_request_is_over(served: tuple[str, Path]) -> None:
    base, marks = served
    assert httpx.get(f"{base}/receive-after-answer").json() == {"answered": True}
    after = _mark(marks / "after-answer", "receive() after the answer did not return")
    assert after == "http.disconnect,http.disconnect"


def test_http_1_0_is_asgis_1_0(served: tuple[str, Path]) -> None:
    base, _ = served
    with socket.create_connection((HOST, int(base.rsplit(":", 1)[1])), timeout=5) as sock:
        sock.sendall(b"GET /scope HTTP/1.0\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert b'"http_version": "1.0"' in answer, answer


def test_the_app_sees_the_client_go(served: tuple[str, Path]) -> None:
    base, marks = served
    with socket.create_connection((HOST, int(base.rsplit(":", 1)[1])), timeout=5) as sock:
        sock.sendall(b"GET /wait-for-disconnect HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)
    assert _mark(marks / "disconnect", "the app never saw the client go") == "http.disconnect"


def test_an_app_that_fails_before_answering_gets_a_500(served: tuple[str, Path]) -> None:
    base, _ = served
    assert httpx.get(f"{base}/fail").status_code == 500
    assert httpx.get(f"{base}/scope").status_code == 200  # and the worker serves on


def test_the_lifespan_ends_when_the_server_stops(tmp_path: Path) -> None:
    with _served(tmp_path) as (_, process):
        assert (tmp_path / "started").exists()
        assert not (tmp_path / "stopped").exists()
        stop_process(process)
        assert process.returncode == 0
    assert (tmp_path / "stopped").read_text() == "yes"


def test_an_app_without_a_lifespan_is_served(tmp_path: Path) -> None:
    with _served(tmp_path, RSGI_TEST_NO_LIFESPAN="1") as (base, process):
        assert httpx.get(f"{base}/scope").json()["started"] is False
        stop_process(process)
        assert process.returncode == 0


def test_an_app_that_raises_for_the_lifespan_is_served_without_one(tmp_path: Path) -> None:
    """ASGI: "the server must continue but not send any lifespan events"."""
    with _served(tmp_path, RSGI_TEST_LIFESPAN_RAISES="1") as (base, process):
        assert httpx.get(f"{base}/scope").json()["started"] is False
        stop_process(process)
        assert process.returncode == 0


def test_a_failed_startup_stops_the_server(tmp_path: Path) -> None:
    process = _granian(free_port(), tmp_path, RSGI_TEST_FAIL_STARTUP="1")
    try:
        returncode = process.wait(timeout=30)
    finally:
        stop_process(process)
    assert returncode != 0
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert "startup failed" in stderr
    assert "no database" in stderr


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:8000", ("127.0.0.1", 8000)), ("[::1]:443", ("::1", 443))],
)
def test_addresses(text: str, address: tuple[str, int]) -> None:
    assert _address(text) == address


class _Headers:
    """RSGI's headers as granian gives them: text values; one it could not give is left out of
    ``items()`` but still among the names."""

    def __init__(self, items: list[tuple[str, str]], names: list[str]) -> None:
        self._items, self._names = items, names

    def items(self) -> list[tuple[str, str]]:
        return self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def get(self, key: str) -> str | None:
        return dict(self._items).get(key)

    def __len__(self) -> int:
        return len(self._names)


def test_headers_keep_repeats_and_what_was_left_out() -> None:
    given = _Headers([("a", "1"), ("a", "2"), ("b", "3")], ["a", "b", "idempotency-key"])
    assert asgi_headers(given) == [
        (b"a", b"1"),
        (b"a", b"2"),
        (b"b", b"3"),
        (b"idempotency-key", b""),
    ]
