"""The outermost ASGI layer: request ids, the body-size limit, and the last-resort 500.

Written as plain ASGI rather than ``BaseHTTPMiddleware``: it adds no task or stream per request
and sees every response, including the ones Starlette's own middleware produce.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.errors import MAX_BODY_BYTES, BodyTooLarge, error_body, server_error
from commerce_api.ids import new_id

logger = logging.getLogger("commerce_api")

REQUEST_ID_HEADER = b"x-request-id"


def _too_large_body() -> bytes:
    return error_body("invalid_request", BodyTooLarge().detail, "body")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        request_id = new_id("req")
        scope.setdefault("state", {})["request_id"] = request_id
        request_id_header = (REQUEST_ID_HEADER, request_id.encode())
        response_started = False

        async def send_with_request_id(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                message["headers"] = [*message.get("headers", ()), request_id_header]
            await send(message)

        async def reply(status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ]
            await send_with_request_id(
                {"type": "http.response.start", "status": status, "headers": headers}
            )
            await send_with_request_id({"type": "http.response.body", "body": body})

        declared = _content_length(scope)
        if declared == -1:
            await reply(
                400,
                error_body("invalid_request", "Invalid Content-Length header.", "Content-Length"),
                [],
            )
            return
        if declared is not None and declared > MAX_BODY_BYTES:
            await reply(413, _too_large_body(), [(b"connection", b"close")])
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
            await self.app(scope, limited_receive, send_with_request_id)
        except BodyTooLarge:
            if not response_started:
                await reply(413, _too_large_body(), [(b"connection", b"close")])
        except Exception:
            # Log with the request id; the client gets the id, never the traceback.
            logger.exception("unhandled error", extra={"request_id": request_id})
            if not response_started:
                await reply(500, server_error(request_id), [])


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
