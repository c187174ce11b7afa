"""ASGI layers around the app, outermost first:

1. :class:`RequestIdMiddleware` gives each request an id and puts it on every response.
2. ``ratelimit.middleware.RateLimitMiddleware`` counts the request and adds the
   ``X-RateLimit-*`` headers (or answers 429).
3. :class:`ErrorGuardMiddleware` enforces the body-size limit and turns anything unexpected
   into the contract's 500 — inside the two above, so that a 500 carries their headers too.

Written as plain ASGI rather than ``BaseHTTPMiddleware``: no task or stream per request.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.errors import MAX_BODY_BYTES, BodyTooLarge, error_body, server_error
from commerce_api.ids import new_request_id

logger = logging.getLogger("commerce_api")


def add_headers(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """``send`` that appends ``headers`` to the response's start message."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *headers]
        await send(message)

    return send_with_headers


async def send_json(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        await self.app(scope, receive, add_headers(send, [(b"x-request-id", request_id.encode())]))


def _too_large_body() -> bytes:
    return error_body("invalid_request", BodyTooLarge().detail, "body")


class ErrorGuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = scope.get("state", {}).get("request_id", "")
        response_started = False

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        declared = _content_length(scope)
        if declared == -1:
            body = error_body("invalid_request", "Invalid Content-Length header.", "Content-Length")
            await send_json(send, 400, body, [])
            return
        if declared is not None and declared > MAX_BODY_BYTES:
            await send_json(send, 413, _too_large_body(), [(b"connection", b"close")])
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
                await send_json(send, 413, _too_large_body(), [(b"connection", b"close")])
        except Exception:
            # Log with the request id; the client gets the id, never the traceback.
            logger.exception("unhandled error", extra={"request_id": request_id})
            if not response_started:
                await send_json(send, 500, server_error(request_id), [])


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
