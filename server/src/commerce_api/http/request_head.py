"""The request's head, as a path that answers before the routes reads it (the fast lane, the
pipeline): headers by name, the body's framing, the API key, and the caller that key names
(:func:`authenticate`: checked once, its caller or its 401 memoised in the request's context,
for the routes' dependencies and the fast lane alike). Plain functions over the ASGI scope, so
that no other layer names a header."""

from __future__ import annotations

from typing import NamedTuple

from starlette.types import Scope

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import APIError, unauthorized
from commerce_api.http.context import RequestContext
from commerce_api.http.services import Authenticator

_AUTHORIZATION = b"authorization"
_CONTENT_TYPE = b"content-type"
_CONTENT_LENGTH = b"content-length"
_TRANSFER_ENCODING = b"transfer-encoding"
_JSON_TYPE = b"application/json"


def request_headers(scope: Scope) -> dict[bytes, bytes] | None:
    """The request's headers by (lower-case) name; None when one is repeated (a form only the
    routes answer)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in found:
            return None
        found[name] = value
    return found


class PlainHead(NamedTuple):
    """A head in its plain form, as the fast lane reads it."""

    headers: dict[bytes, bytes]  # by (lower-case) name, each once
    declares_body: bool  # a length or a transfer coding says a body follows
    token: str | None  # the key of ``Authorization: Bearer …``; None if missing or malformed


def plain_head(scope: Scope) -> PlainHead | None:
    """The request's head read once, for the fast lane; None when a header is repeated (a form
    only the routes answer)."""
    headers = request_headers(scope)
    if headers is None:
        return None
    given = headers.get(_AUTHORIZATION)
    token = None if given is None else _bearer(given.decode("latin-1"))
    declares_body = _CONTENT_LENGTH in headers or _TRANSFER_ENCODING in headers
    return PlainHead(headers, declares_body, token)


def json_body_size(headers: dict[bytes, bytes]) -> int | None:
    """The size of a body in its plain form: ``application/json`` of a stated length, not
    chunked; None for any other form."""
    if headers.get(_CONTENT_TYPE) != _JSON_TYPE or _TRANSFER_ENCODING in headers:
        return None
    try:
        return int(headers.get(_CONTENT_LENGTH, b""))
    except ValueError:
        return None


def header_text(headers: dict[bytes, bytes], lower_name: bytes) -> str | None:
    value = headers.get(lower_name)
    return None if value is None else value.decode("latin-1")


def bearer_token(authorization: str | None) -> str:
    """The key from an ``Authorization: Bearer …`` header, or a 401 saying what is wrong."""
    if not authorization:
        raise unauthorized(
            "Missing API key. Send it as `Authorization: Bearer <API_KEY>`.",
            "Authorization",
            reason="missing_api_key",
        )
    token = _bearer(authorization)
    if token is None:
        raise unauthorized(
            "Malformed Authorization header. Send `Authorization: Bearer <API_KEY>`.",
            "Authorization",
            reason="malformed_authorization",
        )
    return token


def _bearer(authorization: str) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` value; None for any other value."""
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def authorization_header(scope: Scope) -> str | None:
    """The request's Authorization header (the first, as Starlette's ``headers.get``)."""
    for name, value in scope["headers"]:
        if name == _AUTHORIZATION:
            text: str = value.decode("latin-1")
            return text
    return None


async def authenticate(
    read_path: Authenticator, ctx: RequestContext, authorization: str | None
) -> Principal:
    """The caller of this request (401 without a valid key), memoised: failures too."""
    if ctx.principal is not None:
        return ctx.principal
    if ctx.auth_error is not None:
        raise ctx.auth_error
    try:
        principal = await read_path.authenticate(bearer_token(authorization), ctx)
    except APIError as exc:
        ctx.auth_error = exc
        raise
    ctx.principal = principal
    return principal
