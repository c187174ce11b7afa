"""The error contract over HTTP: an :class:`~commerce_api.core.errors.APIError` as a response,
and FastAPI's and Starlette's own exceptions translated into the contract, so no framework
default error body ever reaches a client."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from commerce_api.core.errors import (
    MAX_BODY_BYTES,
    APIError,
    body_cut_short,
    error_body,
    invalid_request,
    not_found,
    validation_error,
)


class BodyTooLarge(StarletteHTTPException):
    """Raised while reading a body past ``MAX_BODY_BYTES``.

    An ``HTTPException`` on purpose: FastAPI turns any other exception raised while it reads
    the body into a generic 400, but lets HTTP exceptions through to our handler.
    """

    def __init__(self) -> None:
        super().__init__(413, f"The request body is larger than {MAX_BODY_BYTES} bytes.")


def error_response(error: APIError) -> Response:
    return Response(
        error_body(error.code, error.reason, error.message, error.details, error.problems),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )


# --- handlers ----------------------------------------------------------------------------------


async def _api_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return error_response(exc)


async def _validation_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(validation_error(exc.errors()))


async def _http_exception_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, ClientDisconnect):  # FastAPI's 400 for a body cut short
        return error_response(body_cut_short())
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        error = not_found(
            f"No route matches {request.method} {request.url.path}.", "path", reason="unknown_route"
        )
    elif exc.status_code == 405:
        allowed = _allowed_methods(request)
        headers = {key: value for key, value in headers.items() if key.lower() != "allow"}
        headers["Allow"] = allowed
        error = invalid_request(
            f"Method {request.method} is not allowed on {request.url.path}"
            + (f"; use {allowed}." if allowed else "."),
            "method",
            status=405,
            reason="method_not_allowed",
        )
    elif exc.status_code >= 500:
        error = APIError(
            exc.status_code, "server_error", "Internal error.", "", reason="internal_error"
        )
    elif exc.status_code == 413:  # BodyTooLarge, raised while the routes read the body
        error = invalid_request(str(exc.detail), "body", 413, reason="payload_too_large")
    else:  # FastAPI's own refusals of a body it could not parse: said in our words
        error = invalid_request(
            "The request body could not be read; send it as JSON.",
            "body",
            status=exc.status_code,
            reason="malformed_request",
        )
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
