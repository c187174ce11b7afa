"""The error contract: every non-2xx response is
``{"error": {"code", "reason", "message", "details", "problems"}}``.

``details`` names the first parameter at fault (the specification's field); ``problems`` lists
every problem of the request as ``{parameter, reason, message}`` — several when several fields
are wrong, one for a refusal about one parameter, none for a failure on our side (5xx) or a
rate limit (the request itself is fine).

Statuses and codes follow docs/design.md's table; ``reason`` is a stable word a program can
switch on (:data:`REASONS`, the table "Reasons" of docs/design.md), chosen where the error is
raised: a constant, so nothing is computed for it on any request. ``http/errors.py`` renders
them and translates FastAPI's and Starlette's own exceptions, so no framework default error
body ever reaches a client; the outermost middleware (``http/middleware.py``) renders anything
that escapes as a 500. No web framework is imported here: the services raise these errors,
and the command line runs the services without the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import orjson

from commerce_api.core.validation_messages import describe

MAX_BODY_BYTES = 1024 * 1024

ErrorCode = Literal["invalid_request", "unauthorized", "not_found", "rate_limited", "server_error"]

Reason = Literal[
    "validation_failed",
    "malformed_request",
    "order_limit_exceeded",
    "url_not_allowed",
    "endpoint_limit_reached",
    "missing_api_key",
    "malformed_authorization",
    "invalid_api_key",
    "wrong_environment",
    "forbidden",
    "publishable_key_not_allowed",
    "origin_not_allowed",
    "not_found",
    "unknown_route",
    "method_not_allowed",
    "request_timeout",
    "insufficient_stock",
    "invalid_transition",
    "endpoint_disabled",
    "idempotency_key_in_use",
    "payload_too_large",
    "unsupported_media_type",
    "idempotency_key_reused",
    "quota_exceeded",
    "redelivery_pending",
    "header_too_large",
    "internal_error",
    "server_busy",
    "service_unavailable",
    "storage_full",
]

# Each reason's status and code: the rows of docs/design.md's "Reasons" table (a test holds the
# two together, and checks that every error the app answers carries one of them).
REASONS: dict[Reason, tuple[int, ErrorCode]] = {
    "validation_failed": (400, "invalid_request"),
    "malformed_request": (400, "invalid_request"),
    "order_limit_exceeded": (400, "invalid_request"),
    "url_not_allowed": (400, "invalid_request"),
    "endpoint_limit_reached": (400, "invalid_request"),
    "missing_api_key": (401, "unauthorized"),
    "malformed_authorization": (401, "unauthorized"),
    "invalid_api_key": (401, "unauthorized"),
    "wrong_environment": (401, "unauthorized"),
    "forbidden": (403, "unauthorized"),
    "publishable_key_not_allowed": (403, "unauthorized"),
    "origin_not_allowed": (403, "unauthorized"),
    "not_found": (404, "not_found"),
    "unknown_route": (404, "not_found"),
    "method_not_allowed": (405, "invalid_request"),
    "request_timeout": (408, "invalid_request"),
    "insufficient_stock": (409, "invalid_request"),
    "invalid_transition": (409, "invalid_request"),
    "endpoint_disabled": (409, "invalid_request"),
    "idempotency_key_in_use": (409, "invalid_request"),
    "payload_too_large": (413, "invalid_request"),
    "unsupported_media_type": (415, "invalid_request"),
    "idempotency_key_reused": (422, "invalid_request"),
    "quota_exceeded": (429, "rate_limited"),
    "redelivery_pending": (429, "rate_limited"),
    "header_too_large": (431, "invalid_request"),
    "internal_error": (500, "server_error"),
    "server_busy": (503, "rate_limited"),
    "service_unavailable": (503, "server_error"),
    "storage_full": (503, "server_error"),
}


class Problem(NamedTuple):
    """One problem of a request: the parameter at fault, why (a reason of :data:`REASONS`) and
    what to do, in a sentence."""

    parameter: str
    reason: Reason
    message: str


# Codes whose refusal is not about the request's parameters: their ``problems`` is empty.
_NOT_THE_REQUEST: frozenset[ErrorCode] = frozenset({"server_error", "rate_limited"})


def single_problem(code: ErrorCode, reason: Reason, message: str, details: str) -> list[Problem]:
    """The ``problems`` of an error about one parameter (``details``), or none for a failure
    on our side or a rate limit."""
    return [] if code in _NOT_THE_REQUEST or not details else [Problem(details, reason, message)]


class APIError(Exception):
    """An error with its place in the contract. Raise it anywhere below a route."""

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        details: str = "",
        headers: Mapping[str, str] | None = None,
        *,
        reason: Reason,
        problems: Sequence[Problem] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})
        self.problems = (
            list(problems)
            if problems is not None
            else single_problem(code, reason, message, details)
        )


def invalid_request(
    message: str,
    details: str,
    status: int = 400,
    *,
    reason: Reason = "validation_failed",
    problems: Sequence[Problem] | None = None,
) -> APIError:
    return APIError(status, "invalid_request", message, details, reason=reason, problems=problems)


# The answer to a body that ended before it was complete. The server cannot tell a chunked
# body with broken framing (a bad chunk size, junk where CRLF belongs, no final chunk) from a
# client that hung up mid-body: both end the body early. Either way nothing is done, and the
# answer is this 400 (which a client that hung up never reads).
BODY_CUT_SHORT = (
    "The request body ended before it was complete (its chunked framing is broken, or the "
    "connection closed mid-body). Nothing was done; send the whole body again."
)


def body_cut_short() -> APIError:
    return invalid_request(BODY_CUT_SHORT, "body", reason="malformed_request")


def not_found(message: str, details: str, *, reason: Reason = "not_found") -> APIError:
    return APIError(404, "not_found", message, details, reason=reason)


def unauthorized(
    message: str, details: str = "Authorization", *, reason: Reason = "invalid_api_key"
) -> APIError:
    headers = {"WWW-Authenticate": "Bearer"}
    return APIError(401, "unauthorized", message, details, headers, reason=reason)


def forbidden(
    message: str, details: str = "Authorization", *, reason: Reason = "forbidden"
) -> APIError:
    return APIError(403, "unauthorized", message, details, reason=reason)


def error_body(
    code: ErrorCode,
    reason: Reason,
    message: str,
    details: str,
    problems: Sequence[Problem] | None = None,
) -> bytes:
    """The envelope; ``problems`` defaults to the one problem ``details`` names."""
    if problems is None:
        problems = single_problem(code, reason, message, details)
    error = {
        "code": code,
        "reason": reason,
        "message": message,
        "details": details,
        "problems": [problem._asdict() for problem in problems],
    }
    return orjson.dumps({"error": error})


def server_error(request_id: str) -> bytes:
    return error_body(
        "server_error",
        "internal_error",
        "Something went wrong on our side. Retry later; if it persists, "
        "contact the operator with the request id.",
        request_id,
    )


# --- translating validation errors -------------------------------------------------------------


def describe_validation_error(error: Mapping[str, Any]) -> tuple[str, str]:
    """The (message, details) pair for one pydantic error, in our wording."""
    parameter, message, _malformed = describe(error)
    return message, parameter


def validation_error(errors: Sequence[Mapping[str, Any]]) -> APIError:
    """Every problem pydantic found, each in our wording; ``details`` names the first."""
    if not errors:
        return invalid_request("The request is invalid.", "body")
    problems: list[Problem] = []
    malformed = False
    for error in errors:
        parameter, message, not_json = describe(error)
        # A body that is not JSON at all is not a value to correct: the request is malformed.
        malformed = malformed or not_json
        reason: Reason = "malformed_request" if not_json else "validation_failed"
        problems.append(Problem(parameter, reason, message))
    return invalid_request(
        summary(problems),
        problems[0].parameter,
        reason="malformed_request" if malformed else "validation_failed",
        problems=problems,
    )


def summary(problems: Sequence[Problem]) -> str:
    """The envelope's ``message`` for ``problems``: the one, or each of several in turn."""
    if len(problems) == 1:
        return problems[0].message
    return f"The request has {len(problems)} problems: " + " ".join(p.message for p in problems)
