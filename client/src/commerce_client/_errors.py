"""Every exception this library raises. Catch :class:`CommerceError` to catch them all::

    CommerceError                      code, message, details, status_code, request_id, rate_limit
    ├── APIConnectionError             no response: DNS, refused connection, reset, timeout
    │   └── APITimeoutError            the request timed out
    ├── APIStatusError                 the API answered 4xx/5xx: status_code, request_id, body
    │   ├── InvalidRequestError        400, 405, 413, 415 and any other 4xx not listed below
    │   │   ├── ConflictError          409: out of stock, illegal status change, or a request
    │   │   │                               with the same Idempotency-Key still in flight
    │   │   └── IdempotencyError       422: Idempotency-Key reused with a different request
    │   ├── AuthenticationError        401: missing, unknown or revoked key
    │   │   └── PermissionDeniedError  403: a valid key without the right role
    │   ├── NotFoundError              404
    │   ├── RateLimitError             429, with retry_after (seconds)
    │   └── ServerError                5xx
    └── WebhookVerificationError       verify_webhook(): unsigned, tampered or stale delivery

``code`` is the API's error code (``invalid_request``, ``unauthorized``, ``not_found``,
``rate_limited``, ``server_error``); it is None when there was no API response (connection
errors, webhook verification). ``details`` names the offending parameter, such as
``items[0].quantity``, or carries the request id of a server error.
"""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from commerce_client.types.rate_limit import RateLimitInfo

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "CommerceError",
    "ConflictError",
    "IdempotencyError",
    "InvalidRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "WebhookVerificationError",
]

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


class CommerceError(Exception):
    """The root of every error raised by this library."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: str = "",
        status_code: int | None = None,
        request_id: str | None = None,
        rate_limit: RateLimitInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details
        self.status_code = status_code
        self.request_id = request_id
        self.rate_limit = rate_limit

    def __str__(self) -> str:
        facts = [
            f"{name} {value}"
            for name, value in (
                ("status", self.status_code),
                ("code", self.code),
                ("details", self.details or None),
                ("request id", self.request_id),
            )
            if value is not None
        ]
        return f"{self.message} ({', '.join(facts)})" if facts else self.message


class APIConnectionError(CommerceError):
    """The API could not be reached, or the connection broke before a response."""


class APITimeoutError(APIConnectionError):
    """The request timed out (see the client's ``timeout``)."""


class APIStatusError(CommerceError):
    """The API answered with an error status. ``status_code`` is always set; ``request_id`` is
    the response's ``X-Request-Id``; ``body`` is the error body as parsed JSON (the API's
    ``{"error": {...}}`` envelope), or its text when it was not JSON (a proxy's page, say)."""

    status_code: int

    def __init__(self, message: str, *, status_code: int, body: Any = None, **kwargs: Any) -> None:
        super().__init__(message, status_code=status_code, **kwargs)
        self.body = body


class InvalidRequestError(APIStatusError):
    """The request is malformed or not allowed as sent; ``details`` names the parameter."""


class ConflictError(InvalidRequestError):
    """409: the request conflicts with the current state (stock, order status, or a request
    with the same ``Idempotency-Key`` still in flight)."""


class IdempotencyError(InvalidRequestError):
    """422: the ``Idempotency-Key`` was already used with a different request."""


class AuthenticationError(APIStatusError):
    """401 or 403: the key is missing, invalid, revoked, or lacks the role."""


class PermissionDeniedError(AuthenticationError):
    """403: the key is valid but may not do this (a client key on an admin endpoint)."""


class NotFoundError(APIStatusError):
    """404: no such resource (or it belongs to another account)."""


class RateLimitError(APIStatusError):
    """429: the account's quota for this window is spent."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after
        """Seconds to wait before retrying (the ``Retry-After`` header), when given."""


class ServerError(APIStatusError):
    """5xx: something failed on the server's side; ``request_id`` helps the operator."""


class WebhookVerificationError(CommerceError):
    """A webhook delivery is unsigned, its signature does not match, or it is stale."""


def _class_for_status(status: int) -> type[APIStatusError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 422:
        return IdempotencyError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return InvalidRequestError


def error_envelope(response: httpx.Response) -> tuple[str | None, str | None, str]:
    """``(code, message, details)`` of an error body; Nones when it is not the API's envelope
    (a proxy's HTML page, say)."""
    try:
        error = json.loads(response.content)["error"]
        code, message, details = error.get("code"), error.get("message"), error.get("details")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None, ""
    return (
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else None,
        details if isinstance(details, str) else "",
    )


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN is not a delay


def _body(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except ValueError:
        return response.text


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for a non-2xx response."""
    code, message, details = error_envelope(response)
    status = response.status_code
    kwargs: dict[str, Any] = {
        "code": code,
        "details": details,
        "status_code": status,
        "body": _body(response),
        "request_id": response.headers.get("x-request-id"),
        "rate_limit": RateLimitInfo.from_headers(response.headers),
    }
    text = message or f"The API answered {status} {response.reason_phrase}".rstrip() + "."
    cls = _class_for_status(status)
    if cls is RateLimitError:
        return RateLimitError(text, retry_after=parse_retry_after(response.headers), **kwargs)
    return cls(text, **kwargs)


def is_idempotency_in_flight(response: httpx.Response) -> bool:
    """A 409 meaning "a request with this Idempotency-Key is still running" (safe to retry),
    as opposed to out-of-stock or an illegal transition (not retried)."""
    return response.status_code == 409 and error_envelope(response)[2] == IDEMPOTENCY_KEY_HEADER
