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

import errno
import logging
import sqlite3

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.core.errors import BODY_CUT_SHORT, MAX_BODY_BYTES, error_body, server_error
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


async def send_refusal(
    scope: Scope, send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]
) -> None:
    """An error answered before the pipeline (which adds these to every other answer): with
    the request's id and ``nosniff``."""
    request_id = context(scope).request_id.encode()
    headers = [*extra, (b"x-request-id", request_id), (b"x-content-type-options", b"nosniff")]
    await send_json(send, status, body, headers)


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
            # The body ended early: broken chunked framing, or a client that hung up (the
            # server cannot tell which). Not a server error; nothing was done.
            REFUSALS.refused("malformed_request", 400, client_address(scope))
            if not response_started:
                body = error_body("invalid_request", "malformed_request", BODY_CUT_SHORT, "body")
                await send_json(send, 400, body, [(b"connection", b"close")])
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
