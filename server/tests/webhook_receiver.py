"""Webhook receivers for tests: real HTTP/1.1 servers on 127.0.0.1, one thread per request.

A :class:`Receiver` records every request it gets (method, path, headers, body, arrival time,
and how many requests for the same ``(webhook-id, path)`` were in progress at that moment) and
answers what the test told it to for that path: a status, optional headers (``Location`` for a
redirect) and an optional delay (to be slower than the dispatcher's timeout, or to make
overlapping deliveries visible). Being threaded, it keeps answering while the test's event
loop is busy (or blocked in a subprocess helper), so it serves in-process dispatchers and
dispatchers in other processes alike.

Every delivery is checked the way an integrator's receiver would: :meth:`Received.verify`
calls ``standardwebhooks.Webhook(secret).verify(body, headers)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook

HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: ``status`` after ``delay`` seconds, with ``headers``."""

    status: int = 200
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    # Send the status line at once, then one header line every 0.1 s during ``delay``: a
    # receiver that is never silent for long yet takes ``delay`` to answer.
    trickle: bool = False


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the receiver saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    arrived_at: float  # time.monotonic()
    in_flight: int  # requests for the same (webhook-id, path) in progress, this one included
    status: int  # what the receiver answered (or was about to, if the client gave up)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    def verify(self, secret: str) -> Any:
        """The parsed payload if the signature verifies with ``secret``; raises otherwise."""
        return Webhook(secret).verify(self.body, self.headers)


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[Received] = field(default_factory=list)
    replies: dict[str, list[Reply]] = field(default_factory=dict)
    per_delivery: dict[str, tuple[tuple[Reply, ...], int | None]] = field(default_factory=dict)
    scripted: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    seen: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    in_flight: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    max_in_flight: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    total_in_flight: int = 0
    peak_total_in_flight: int = 0


def _handler_class(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            path = self.path
            key = (headers.get("webhook-id", ""), path)
            with state.lock:
                if path in state.per_delivery:
                    script, limit = state.per_delivery[path]
                    ids = state.scripted[path]
                    if key[0] not in ids and (limit is None or len(ids) < limit):
                        ids.add(key[0])
                    if key[0] in ids:
                        reply = script[min(state.seen[key], len(script) - 1)]
                    else:
                        reply = script[-1]
                else:
                    queued = state.replies.get(path) or [Reply()]
                    reply = queued.pop(0) if len(queued) > 1 else queued[0]
                state.seen[key] += 1
                state.in_flight[key] += 1
                state.max_in_flight[key] = max(state.max_in_flight[key], state.in_flight[key])
                state.total_in_flight += 1
                state.peak_total_in_flight = max(state.peak_total_in_flight, state.total_in_flight)
                state.received.append(
                    Received(
                        method=self.command,
                        path=path,
                        headers=headers,
                        body=body,
                        arrived_at=time.monotonic(),
                        in_flight=state.in_flight[key],
                        status=reply.status,
                    )
                )
            try:
                if reply.trickle:
                    with contextlib.suppress(OSError):
                        self._trickle(reply)
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                with contextlib.suppress(OSError):  # the client may have given up (timeout)
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    self.wfile.flush()
            finally:
                with state.lock:
                    state.in_flight[key] -= 1
                    state.total_in_flight -= 1

        def _trickle(self, reply: Reply) -> None:
            self.close_connection = True
            self.wfile.write(f"HTTP/1.1 {reply.status} Whatever\r\n".encode())
            self.wfile.flush()
            deadline = time.monotonic() + reply.delay
            line = 0
            while time.monotonic() < deadline:
                time.sleep(0.1)
                line += 1
                self.wfile.write(f"X-Pad-{line}: x\r\n".encode())
                self.wfile.flush()
            self.wfile.write(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            self.wfile.flush()

        do_POST = _handle
        do_GET = _handle
        do_PUT = _handle

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


class Receiver:
    """A running receiver; see the module docstring. Use :func:`running_receiver`."""

    def __init__(self, port: int = 0) -> None:
        self._state = _State()
        self._server = _Server((HOST, port), _handler_class(self._state))
        port = self._server.server_address[1]
        self.base_url = f"http://{HOST}:{port}"
        self.port: int = int(port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def url(self, path: str = "/hook") -> str:
        return self.base_url + path

    def reply(self, path: str, *replies: Reply) -> None:
        """Answer requests to ``path`` with these replies in turn; the last one repeats."""
        assert replies
        with self._state.lock:
            self._state.replies[path] = list(replies)

    def reply_per_delivery(self, path: str, *replies: Reply, limit: int | None = None) -> None:
        """Answer the n-th request for each ``webhook-id`` at ``path`` with ``replies[n]``
        (the last one repeats): e.g. fail every delivery's first attempt only. With ``limit``,
        only the first ``limit`` webhook-ids to arrive follow the script; later ones always
        get the last reply."""
        assert replies
        with self._state.lock:
            self._state.per_delivery[path] = (replies, limit)

    def requests(self, path: str | None = None) -> list[Received]:
        with self._state.lock:
            return [r for r in self._state.received if path is None or r.path == path]

    def max_in_flight(self) -> dict[tuple[str, str], int]:
        """Per (webhook-id, path): the most requests that were in progress at once."""
        with self._state.lock:
            return dict(self._state.max_in_flight)

    @property
    def peak_total_in_flight(self) -> int:
        with self._state.lock:
            return self._state.peak_total_in_flight

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def running_receiver(port: int = 0) -> Iterator[Receiver]:
    """A receiver on a free port, or on ``port`` (e.g. one coming back after an outage)."""
    receiver = Receiver(port)
    try:
        yield receiver
    finally:
        receiver.close()


async def eventually(
    condition: Callable[[], bool], *, within: float, what: str, interval: float = 0.02
) -> None:
    """Wait (without blocking the loop) until ``condition()`` holds; fail after ``within`` s."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(interval)
