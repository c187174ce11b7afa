"""Every exception this library raises. Catch :class:`CommerceError` to catch them all::

    CommerceError                          code, reason, message, details, problems,
    │                                      status_code, request_id, rate_limit
    ├── APIConnectionError                 no response: DNS, refused connection, reset, timeout
    │   └── APITimeoutError                the request timed out
    ├── APIStatusError                     the API answered 4xx/5xx: status_code, request_id, body
    │   ├── InvalidRequestError            400, 405, 413, 415 and any other 4xx not listed below
    │   │   ├── ValidationFailedError      400 validation_failed: fix the parameter in details
    │   │   ├── ConflictError              409
    │   │   │   ├── InsufficientStockError     insufficient_stock: not enough in stock
    │   │   │   ├── InvalidTransitionError     invalid_transition: the order's status forbids it
    │   │   │   └── IdempotencyKeyInUseError   idempotency_key_in_use: the first request with
    │   │   │                                  this Idempotency-Key is still running (retried)
    │   │   └── IdempotencyError           422
    │   │       └── IdempotencyKeyReusedError  idempotency_key_reused: the key was used with
    │   │                                      a different request
    │   ├── AuthenticationError            401: missing, unknown or revoked key
    │   │   └── PermissionDeniedError      403: a valid key without the right role
    │   ├── NotFoundError                  404
    │   ├── RateLimitError                 429, with retry_after (seconds)
    │   │   └── QuotaExceededError         quota_exceeded: the window's requests are spent
    │   └── ServerError                    5xx
    └── WebhookVerificationError           verify_webhook(): unsigned, tampered or stale delivery

``code`` is the API's error code (``invalid_request``, ``unauthorized``, ``not_found``,
``rate_limited``, ``server_error``) and ``reason`` the stable word that says why
(``insufficient_stock``, ``invalid_transition``, … the table "Reasons" of the API's
docs/design.md); both are None when there was no API response (connection errors, webhook
verification). A reason this version does not know still sets ``reason``, on the class of its
status. ``details`` names the offending parameter, such as ``items[0].quantity``, or carries
the request id of a server error; ``problems`` lists every problem of the request
(:class:`~commerce_client.types.Problem`: ``parameter``, ``reason``, ``message``), so a body with
three bad fields gives three.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

import httpx

from commerce_client.types.problem import Problem
from commerce_client.types.rate_limit import RateLimitInfo

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "CommerceError",
    "ConflictError",
    "IdempotencyError",
    "IdempotencyKeyInUseError",
    "IdempotencyKeyReusedError",
    "InsufficientStockError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "NotFoundError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "RateLimitError",
    "ServerError",
    "ValidationFailedError",
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
        reason: str | None = None,
        details: str = "",
        problems: Sequence[Problem] = (),
        status_code: int | None = None,
        request_id: str | None = None,
        rate_limit: RateLimitInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.details = details
        self.problems: list[Problem] = list(problems)
        """Every problem of the request, in the order the API found them (the first is the
        one ``details`` names); empty without an API response, for a server error or a rate
        limit."""
        self.status_code = status_code
        self.request_id = request_id
        self.rate_limit = rate_limit

    def __str__(self) -> str:
        facts = [
            f"{name} {value}"
            for name, value in (
                ("status", self.status_code),
                ("code", self.code),
                ("reason", self.reason),
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


class ValidationFailedError(InvalidRequestError):
    """400 ``validation_failed``: a parameter is missing, invalid or unknown; ``details``
    names it."""


class InsufficientStockError(ConflictError):
    """409 ``insufficient_stock``: an order line wants more than the product has
    (``details``: ``items[i].quantity``). Not retried: retrying will not help until stock
    returns."""


class InvalidTransitionError(ConflictError):
    """409 ``invalid_transition``: the order's status does not allow this (fulfilling a
    canceled order, canceling one twice)."""


class IdempotencyKeyInUseError(ConflictError):
    """409 ``idempotency_key_in_use``: a request with the same ``Idempotency-Key`` is still
    running. The client retries these itself; this is raised once its retries are spent."""


class IdempotencyKeyReusedError(IdempotencyError):
    """422 ``idempotency_key_reused``: the key was used with a different request; use a new key
    for a new request."""


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


class QuotaExceededError(RateLimitError):
    """429 ``quota_exceeded``: the account's requests for this window are spent."""


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


# The typed subclass of each reason that has one, with the reason's status (each reason has
# one); the other reasons get their status's class.
_CLASS_FOR_REASON: dict[str, tuple[int, type[APIStatusError]]] = {
    "validation_failed": (400, ValidationFailedError),
    "insufficient_stock": (409, InsufficientStockError),
    "invalid_transition": (409, InvalidTransitionError),
    "idempotency_key_in_use": (409, IdempotencyKeyInUseError),
    "idempotency_key_reused": (422, IdempotencyKeyReusedError),
    "quota_exceeded": (429, QuotaExceededError),
}


def _class_for(status: int, reason: str | None) -> type[APIStatusError]:
    """The reason's subclass when it has one and the status is the reason's, else the
    status's class."""
    refined = _CLASS_FOR_REASON.get(reason or "")
    if refined is not None and refined[0] == status:
        return refined[1]
    return _class_for_status(status)


class ErrorEnvelope(NamedTuple):
    """The fields of the API's ``{"error": {...}}`` body."""

    code: str | None
    reason: str | None
    message: str | None
    details: str
    problems: list[Problem]


def error_envelope(response: httpx.Response) -> ErrorEnvelope:
    """The fields of an error body; Nones when it is not the API's envelope (a proxy's HTML
    page, say)."""
    try:
        error = json.loads(response.content)["error"]
        fields = [error.get(name) for name in ("code", "reason", "message", "details")]
        problems = Problem.list_from(error.get("problems"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ErrorEnvelope(None, None, None, "", [])
    code, reason, message, details = (value if isinstance(value, str) else None for value in fields)
    return ErrorEnvelope(code, reason, message, details or "", problems)


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
    code, reason, message, details, problems = error_envelope(response)
    status = response.status_code
    kwargs: dict[str, Any] = {
        "code": code,
        "reason": reason,
        "details": details,
        "problems": problems,
        "status_code": status,
        "body": _body(response),
        "request_id": response.headers.get("x-request-id"),
        "rate_limit": RateLimitInfo.from_headers(response.headers),
    }
    text = message or f"The API answered {status} {response.reason_phrase}".rstrip() + "."
    cls = _class_for(status, reason)
    if issubclass(cls, RateLimitError):
        return cls(text, retry_after=parse_retry_after(response.headers), **kwargs)
    return cls(text, **kwargs)


def is_idempotency_in_flight(response: httpx.Response) -> bool:
    """A 409 meaning "a request with this Idempotency-Key is still running" (safe to retry),
    as opposed to out-of-stock or an illegal transition (not retried). Said by its reason; a
    server from before reasons says it by naming the header in ``details``."""
    if response.status_code != 409:
        return False
    envelope = error_envelope(response)
    if envelope.reason is not None:
        return envelope.reason == "idempotency_key_in_use"
    return envelope.details == IDEMPOTENCY_KEY_HEADER
