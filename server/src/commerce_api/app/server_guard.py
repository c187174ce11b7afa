"""What ``serve``'s HTTP server leaves to the app, outside everything else
(``app.serving.guarded``).

granian parses HTTP/1.1 and frames bodies, but offers no setting for these, so they are checked
here, each answered in the error envelope and counted as a refusal
(``observability.refusals``):

- a request head (request line and headers) over ``max_header_bytes``, or with more than
  ``max_headers`` header lines: 431 (granian refuses, with its own plain 431, a head past its
  buffer or past hyper's 100 lines: ``app.serving.granian_options``);
- an HTTP/1.1 request without a ``Host`` header, or with several (RFC 9112, 3.2): 400;
- a client address with ``max_requests_per_client`` requests in flight in this process: 503 with
  ``Retry-After`` for any more, so that one client cannot take every worker's attention; other
  clients are served as before;
- a body must arrive within ``body_timeout`` seconds of the head: else the app sees the client
  gone and the client gets 408 and a closed connection.

Written as plain ASGI rather than ``BaseHTTPMiddleware``: no task or stream per request.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.core.errors import error_body
from commerce_api.http.context import client_address
from commerce_api.http.middleware import send_refusal
from commerce_api.observability.refusals import REFUSALS

# A client over its in-flight cap retries after this long (its other requests finish by then).
BUSY_RETRY_AFTER_SECONDS = 1
REQUEST_TIMEOUT = 408
HEADERS_TOO_LARGE = 431
# Methods whose requests the app never reads a body of (a catalogue read skips the deadline).
_WITHOUT_BODY = frozenset({"GET", "HEAD"})
# Each header line's ": " and CRLF, which ASGI's (name, value) pairs leave out.
_HEADER_LINE_OVERHEAD = 4
_CLOSE = (b"connection", b"close")


class BodyTimedOut(ClientDisconnect):
    """The body did not arrive within its deadline: to the app, as if the client had gone (the
    error guard logs it as such, and no one is sent its answer)."""


# How often the requests waiting for their body are checked against their deadlines, at most.
_DEADLINE_TICK_SECONDS = 1.0


class _BodyDeadlines:
    """The tasks of one event loop waiting for a request body, each with its deadline; one
    timer, running only while some task waits, cancels those past it, within a tick.

    ``asyncio.timeout`` around each ``receive`` would schedule and cancel a timer handle for
    every order (~6 µs, on every request with a body); this costs two dict operations, and a
    deadline is kept to within ``tick`` seconds. The cancellation is told apart from any other
    by :meth:`expired`, which also takes it back (``Task.uncancel``), as ``asyncio.timeout``
    does.
    """

    def __init__(self, *, tick: float) -> None:
        self.tick = tick
        self.waiting: dict[asyncio.Task[Any], float] = {}
        self.cancelled: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None

    def watch(self, deadline: float) -> asyncio.Task[Any]:
        """Watch the current task until :meth:`forget`: cancelled if still waiting at
        ``deadline`` (the loop's clock)."""
        task = asyncio.current_task()
        assert task is not None, "a request is served in a task"
        self.waiting[task] = deadline
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.tick, self._check)
        return task

    def forget(self, task: asyncio.Task[Any]) -> None:
        self.waiting.pop(task, None)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` was cancelled for its deadline (and if so, no longer cancelled)."""
        if task not in self.cancelled:
            return False
        self.cancelled.discard(task)
        task.uncancel()
        return True

    def _check(self) -> None:
        now = asyncio.get_running_loop().time()
        for task, deadline in list(self.waiting.items()):
            if deadline <= now:
                del self.waiting[task]
                self.cancelled.add(task)
                task.cancel()
        self.timer = None
        if self.waiting:
            self.timer = asyncio.get_running_loop().call_later(self.tick, self._check)


def _host_problem(hosts: int, named: bool) -> str | None:
    """Why an HTTP/1.1 request with ``hosts`` ``Host`` header lines is refused (RFC 9112, 3.2:
    exactly one); None when it is not. granian gives a request sent without one an empty
    ``Host``, so an empty one (``named`` false) counts as none: a client sending a request in
    origin form, as every client does, names the host."""
    if hosts > 1:
        return f"An HTTP/1.1 request must carry one Host header; this one has {hosts}."
    if not named:
        return "An HTTP/1.1 request must carry a Host header naming the host; this one has none."
    return None


class ServerGuardMiddleware:
    """The checks of this module's docstring, around the whole app (the fast lane included)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_header_bytes: int,
        max_headers: int,
        max_requests_per_client: int,
        body_timeout: float,
    ) -> None:
        self.app = app
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.max_requests_per_client = max_requests_per_client
        self.body_timeout = body_timeout
        self.in_flight: dict[str, int] = {}  # by client address; an address at 0 is removed
        self.deadlines = _BodyDeadlines(tick=min(_DEADLINE_TICK_SECONDS, body_timeout / 4))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._refused_head(scope)
        if refused is not None:
            await send_refusal(scope, send, *refused)
            return
        client = scope.get("client")  # http.context.client_address, on every request's path
        address = str(client[0]) if client else ""
        in_flight = self.in_flight
        count = in_flight.get(address, 0)
        if count >= self.max_requests_per_client:
            REFUSALS.refused("server_busy", 503, address)
            retry = [(b"retry-after", str(BUSY_RETRY_AFTER_SECONDS).encode())]
            await send_refusal(scope, send, 503, self._client_busy(), retry)
            return
        in_flight[address] = count + 1
        try:
            if scope["method"] in _WITHOUT_BODY:  # no body to wait for: no deadline to keep
                await self.app(scope, receive, send)
            else:
                await self._with_body_deadline(scope, receive, send)
        finally:
            left = in_flight[address] - 1
            if left:
                in_flight[address] = left
            else:
                del in_flight[address]

    def _refused_head(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        """The answer to a head this guard refuses (counted as a refusal); None to serve it."""
        headers = scope["headers"]
        size = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string") or b"")
        hosts = 0
        named = False
        for name, value in headers:
            size += len(name) + len(value)
            if name == b"host":
                hosts += 1
                named = bool(value)
        size += _HEADER_LINE_OVERHEAD * len(headers)
        if size > self.max_header_bytes:
            message = (
                f"The request's head (its request line and headers) is larger than "
                f"{self.max_header_bytes} bytes."
            )
        elif len(headers) > self.max_headers:
            message = (
                f"The request has {len(headers)} header lines; at most {self.max_headers} "
                "are accepted."
            )
        else:
            # HTTP/1.0 may leave Host out.
            problem = _host_problem(hosts, named) if scope.get("http_version") == "1.1" else None
            if problem is None:
                return None
            REFUSALS.refused("malformed_request", 400, client_address(scope))
            body = error_body("invalid_request", "malformed_request", problem, "Host")
            return 400, body, [_CLOSE]
        REFUSALS.refused("header_too_large", HEADERS_TOO_LARGE, client_address(scope))
        body = error_body("invalid_request", "header_too_large", message, "headers")
        return HEADERS_TOO_LARGE, body, [_CLOSE]

    async def _with_body_deadline(self, scope: Scope, receive: Receive, send: Send) -> None:
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        body_done = timed_out = started = False
        deadlines = self.deadlines

        async def timed_receive() -> Message:
            nonlocal body_done, timed_out
            if body_done:  # what follows the body (a disconnect) has no deadline
                return await receive()
            task = deadlines.watch(deadline)
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not deadlines.expired(task):
                    raise
                timed_out = True
                raise BodyTimedOut from None
            finally:
                deadlines.forget(task)
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the app's answer to a request whose body never came: ours goes instead
            started = True
            await send(message)

        # The error guard catches it behind the routes; the fast lane lets it through.
        with contextlib.suppress(BodyTimedOut):
            await self.app(scope, timed_receive, guarded_send)
        if timed_out and not started:
            REFUSALS.refused("request_timeout", REQUEST_TIMEOUT, client_address(scope))
            message = f"The request body did not arrive within {self.body_timeout:g} seconds."
            body = error_body("invalid_request", "request_timeout", message, "body")
            await send_refusal(scope, send, REQUEST_TIMEOUT, body, [_CLOSE])

    def _client_busy(self) -> bytes:
        message = (
            f"This client already has {self.max_requests_per_client} requests in progress. "
            f"Retry after {BUSY_RETRY_AFTER_SECONDS} second(s) (see the Retry-After header), or "
            "send fewer requests at once."
        )
        return error_body("rate_limited", "server_busy", message, "client")
