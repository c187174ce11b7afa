"""Who is calling: the request's API key checked once, its caller (or its 401) memoised in the
request's context, for the routes' dependencies and the fast lane alike."""

from __future__ import annotations

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import APIError
from commerce_api.http.context import RequestContext
from commerce_api.http.request_head import bearer_token
from commerce_api.http.services import Authenticator


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
