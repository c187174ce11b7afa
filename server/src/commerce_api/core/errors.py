"""The error contract: every non-2xx response is ``{"error": {"code", "message", "details"}}``.

Statuses and codes follow docs/design.md's table. Handlers here translate FastAPI's and Starlette's
own exceptions, so no framework default error body ever reaches a client; the outermost
middleware (``http/middleware.py``) renders anything that escapes as a 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

MAX_BODY_BYTES = 1024 * 1024
# nginx's "client closed request": the status of an answer to a client that hung up before its
# body arrived. No one receives it; metrics and the request log count it apart from the 5xx.
CLIENT_CLOSED_REQUEST = 499

ErrorCode = Literal["invalid_request", "unauthorized", "not_found", "rate_limited", "server_error"]


class APIError(Exception):
    """An error with its place in the contract. Raise it anywhere below a route."""

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        details: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = dict(headers or {})


class BodyTooLarge(StarletteHTTPException):
    """Raised while reading a body past ``MAX_BODY_BYTES``.

    An ``HTTPException`` on purpose: FastAPI turns any other exception raised while it reads
    the body into a generic 400, but lets HTTP exceptions through to our handler.
    """

    def __init__(self) -> None:
        super().__init__(413, f"The request body is larger than {MAX_BODY_BYTES} bytes.")


def invalid_request(message: str, details: str, status: int = 400) -> APIError:
    return APIError(status, "invalid_request", message, details)


def not_found(message: str, details: str) -> APIError:
    return APIError(404, "not_found", message, details)


def unauthorized(message: str, details: str = "Authorization") -> APIError:
    return APIError(401, "unauthorized", message, details, {"WWW-Authenticate": "Bearer"})


def forbidden(message: str, details: str = "Authorization") -> APIError:
    return APIError(403, "unauthorized", message, details)


def error_body(code: ErrorCode, message: str, details: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message, "details": details}})


def error_response(error: APIError) -> Response:
    return Response(
        error_body(error.code, error.message, error.details),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )


def server_error(request_id: str) -> bytes:
    return error_body(
        "server_error",
        "Something went wrong on our side. Retry later; if it persists, "
        "contact the operator with the request id.",
        request_id,
    )


# --- translating validation errors -------------------------------------------------------------


def parameter_path(loc: Sequence[str | int]) -> str:
    """``('body', 'items', 2, 'quantity')`` → ``items[2].quantity``."""
    parts = list(loc)
    if parts and parts[0] in {"body", "query", "path", "header"}:
        where = parts.pop(0)
        if not parts:
            return "body" if where == "body" else str(where)
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


def describe_validation_error(error: Mapping[str, Any]) -> tuple[str, str]:
    """The (message, details) pair for one pydantic error."""
    loc = tuple(error.get("loc", ()))
    kind = error.get("type", "")
    param = parameter_path(loc)
    if kind == "json_invalid":
        reason = error.get("ctx", {}).get("error", "")
        return f"The request body is not valid JSON ({reason}).".replace(" ()", ""), "body"
    if kind == "missing":
        if param == "body":
            return "A JSON request body is required.", "body"
        return f"Missing required parameter `{param}`.", param
    if kind == "extra_forbidden":
        return f"Unknown parameter `{param}`.", param
    if param == "body":
        return f"The request body is invalid: {error.get('msg', 'invalid')}.", "body"
    msg = str(error.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    return f"Invalid value for `{param}`: {msg}.", param


def validation_error(errors: Sequence[Mapping[str, Any]]) -> APIError:
    if not errors:
        return invalid_request("The request is invalid.", "body")
    message, details = describe_validation_error(errors[0])
    if len(errors) > 1:
        message += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} found.)"
    return invalid_request(message, details)


# --- handlers ----------------------------------------------------------------------------------


async def _api_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return error_response(exc)


async def _validation_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(validation_error(exc.errors()))


async def _http_exception_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, ClientDisconnect):  # FastAPI's 400 for a body never sent
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        error = not_found(f"No route matches {request.method} {request.url.path}.", "path")
    elif exc.status_code == 405:
        allowed = _allowed_methods(request)
        headers = {key: value for key, value in headers.items() if key.lower() != "allow"}
        headers["Allow"] = allowed
        error = invalid_request(
            f"Method {request.method} is not allowed on {request.url.path}"
            + (f"; use {allowed}." if allowed else "."),
            "method",
            status=405,
        )
    elif exc.status_code >= 500:
        error = APIError(exc.status_code, "server_error", "Internal error.", "")
    else:
        error = invalid_request(str(exc.detail), "body", status=exc.status_code)
    error.headers.update(headers)
    return error_response(error)


def _allowed_methods(request: Request) -> str:
    """Every method the path answers (see ``routing.MethodIndex``)."""
    index = getattr(request.app.state, "method_index", None)
    return ", ".join(index.allowed(request.url.path)) if index is not None else ""


async def render_exception(request: Request, exc: Exception) -> Response | None:
    """The contract's response for an exception we know, or None for an unexpected one."""
    if isinstance(exc, APIError):
        return error_response(exc)
    if isinstance(exc, RequestValidationError):
        return await _validation_handler(request, exc)
    if isinstance(exc, StarletteHTTPException):
        return await _http_exception_handler(request, exc)
    return None


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(APIError, _api_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(StarletteHTTPException, _http_exception_handler)
