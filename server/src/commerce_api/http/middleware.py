"""The ASGI layers of our own around the routes and around the whole app.

:class:`ErrorGuardMiddleware`, just outside the routes (inside ``pipeline``'s, so that its
answers carry the request id and the rate-limit headers like any other), enforces the body-size
limit and turns anything unexpected into the contract's 500 (:func:`unexpected_failure`, which
the fast lane uses too).

:class:`ServerGuardMiddleware`, around the whole app (the fast lane included), is what ``serve``
needs of its HTTP server and granian does not offer as a setting: a cap on the requests one
client address has in flight, a cap on the size of a request's head answered in the error
envelope, and a deadline for a request's body.

Written as plain ASGI rather than ``BaseHTTPMiddleware``: no task or stream per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import sqlite3
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.core.errors import CLIENT_CLOSED_REQUEST, MAX_BODY_BYTES, error_body, server_error
from commerce_api.http.context import client_address, context
from commerce_api.http.errors import BodyTooLarge
from commerce_api.observability import metrics
from commerce_api.observability.refusals import REFUSALS
from commerce_api.storage.deadlines import causes, is_database_timeout, is_database_unavailable

logger = logging.getLogger("commerce_api")


async def send_json(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


STORAGE_FULL_RETRY_AFTER_SECONDS = 30
_SQLITE_FULL = 13  # SQLITE_FULL
_POSTGRES_DISK_FULL = "53100"  # SQLSTATE disk_full


def is_storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the database could not write because its disk
    is full."""
    for current in causes(exc):
        if isinstance(current, sqlite3.Error) and (
            getattr(current, "sqlite_errorcode", None) == _SQLITE_FULL
            or "database or disk is full" in str(current)
        ):
            return True
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        if getattr(current, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return True
    return False


DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS = 2


def unexpected_failure(
    exc: BaseException, request_id: str
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Log an exception no handler knew and give its answer, for the middleware and the fast
    lane alike: a full disk is a 503 with ``Retry-After`` (nothing was written: the transaction
    rolled back) and its own metric, an unreachable database or a wait for it past its deadline
    (``storage.deadlines``: a connect, a statement, a lock, a transaction) a 503 with
    ``Retry-After`` too; anything else the contract's 500."""
    if is_storage_full(exc):
        metrics.STORAGE_FULL_ERRORS.inc()
        logger.error(
            "storage full: the database could not write (free disk space; requests are "
            "answered 503 until then)",
            extra={"request_id": request_id},
        )
        body = error_body(
            "server_error",
            "storage_full",
            "The service cannot store anything right now (its storage is full). Nothing was "
            "written; retry later with the same Idempotency-Key.",
            request_id,
        )
        return 503, body, [(b"retry-after", str(STORAGE_FULL_RETRY_AFTER_SECONDS).encode())]
    timed_out = is_database_timeout(exc)
    if timed_out or is_database_unavailable(exc):
        # One line, no traceback: during an outage every request would log the same one.
        logger.warning(
            "database wait timed out: %s" if timed_out else "database unavailable: %s",
            type(exc).__name__,
            extra={"request_id": request_id},
        )
        cause = (
            "its database did not answer in time"
            if timed_out
            else "the service cannot reach its database"
        )
        body = error_body(
            "server_error",
            "service_unavailable",
            f"The request was not completed: {cause}. Retry shortly (with the same "
            "Idempotency-Key for a write).",
            request_id,
        )
        retry_after = str(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS).encode()
        return 503, body, [(b"retry-after", retry_after)]
    logger.error("unhandled error", exc_info=exc, extra={"request_id": request_id})
    return 500, server_error(request_id), []


async def _refuse_too_large(scope: Scope, send: Send) -> None:
    REFUSALS.refused("payload_too_large", 413, client_address(scope))
    body = error_body("invalid_request", "payload_too_large", BodyTooLarge().detail, "body")
    await send_json(send, 413, body, [(b"connection", b"close")])


class ErrorGuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = context(scope).request_id
        response_started = False

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        declared = _content_length(scope)
        if declared == -1:
            body = error_body(
                "invalid_request",
                "malformed_request",
                "Invalid Content-Length header.",
                "Content-Length",
            )
            await send_json(send, 400, body, [])
            return
        if declared is not None and declared > MAX_BODY_BYTES:
            await _refuse_too_large(scope, send)
            return

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await _refuse_too_large(scope, send)
        except ClientDisconnect:
            # The client hung up before its body arrived: not a server error. The answer,
            # which reaches no one, is nginx's 499 "client closed request", so that metrics and
            # the request log count it apart from the 5xx an operator is alerted on.
            logger.info("client closed the request", extra={"request_id": request_id})
            if not response_started:
                await send_json(send, CLIENT_CLOSED_REQUEST, b"", [])
        except Exception as exc:
            # Logged with the request id; the client gets the id, never the traceback.
            status, body, headers = unexpected_failure(exc, request_id)
            if not response_started:
                await send_json(send, status, body, headers)


def _content_length(scope: Scope) -> int | None:
    """The declared body length; None when absent, -1 when malformed."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return -1
            return length if length >= 0 else -1
    return None


# A client over its in-flight cap retries after this long (its other requests finish by then).
BUSY_RETRY_AFTER_SECONDS = 1
REQUEST_TIMEOUT = 408
HEADERS_TOO_LARGE = 431
# Methods whose requests the app never reads a body of (a catalogue read skips the deadline).
_WITHOUT_BODY = frozenset({"GET", "HEAD"})
# Each header line's ": " and CRLF, which ASGI's (name, value) pairs leave out.
_HEADER_LINE_OVERHEAD = 4


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


class ServerGuardMiddleware:
    """What ``serve``'s server leaves to the app, outside everything else
    (``app.serving.guarded``):

    - a request whose head (request line and headers) is over ``max_header_bytes`` is answered
      431 (the server refuses, with its own plain 431, heads past its buffer: see
      ``app.serving.granian_options``);
    - a client address with ``max_requests_per_client`` requests in flight in this process gets
      503 with ``Retry-After`` for any more, so that one client cannot take every worker's
      attention; other clients are served as before;
    - a body must arrive within ``body_timeout`` seconds of the head: else the app sees the
      client gone and the client gets 408 and a closed connection.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_header_bytes: int,
        max_requests_per_client: int,
        body_timeout: float,
    ) -> None:
        self.app = app
        self.max_header_bytes = max_header_bytes
        self.max_requests_per_client = max_requests_per_client
        self.body_timeout = body_timeout
        self.in_flight: dict[str, int] = {}  # by client address; an address at 0 is removed
        self.deadlines = _BodyDeadlines(tick=min(_DEADLINE_TICK_SECONDS, body_timeout / 4))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The path as sent (served over RSGI, the decoded one: app/rsgi.py).
        head = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string") or b"")
        head += sum([len(name) + len(value) for name, value in scope["headers"]])
        address = client_address(scope)
        if head + _HEADER_LINE_OVERHEAD * len(scope["headers"]) > self.max_header_bytes:
            REFUSALS.refused("header_too_large", HEADERS_TOO_LARGE, address)
            closing = [(b"connection", b"close")]
            await self._refuse(scope, send, HEADERS_TOO_LARGE, self._headers_too_large(), closing)
            return
        in_flight = self.in_flight
        count = in_flight.get(address, 0)
        if count >= self.max_requests_per_client:
            REFUSALS.refused("server_busy", 503, address)
            retry = [(b"retry-after", str(BUSY_RETRY_AFTER_SECONDS).encode())]
            await self._refuse(scope, send, 503, self._client_busy(), retry)
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
            await self._refuse(scope, send, REQUEST_TIMEOUT, body, [(b"connection", b"close")])

    @staticmethod
    async def _refuse(
        scope: Scope, send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        request_id = context(scope).request_id.encode()
        extra = [*headers, (b"x-request-id", request_id), (b"x-content-type-options", b"nosniff")]
        await send_json(send, status, body, extra)

    def _headers_too_large(self) -> bytes:
        message = (
            f"The request's head (its request line and headers) is larger than "
            f"{self.max_header_bytes} bytes."
        )
        return error_body("invalid_request", "header_too_large", message, "headers")

    def _client_busy(self) -> bytes:
        message = (
            f"This client already has {self.max_requests_per_client} requests in progress. "
            f"Retry after {BUSY_RETRY_AFTER_SECONDS} second(s) (see the Retry-After header), or "
            "send fewer requests at once."
        )
        return error_body("rate_limited", "server_busy", message, "client")
