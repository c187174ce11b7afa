"""Request dependencies: the services container, the caller's key and role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import forbidden
from commerce_api.http.context import RequestContext, context
from commerce_api.http.pipeline import authenticate
from commerce_api.ratelimit.limiter import RateLimiter
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database

if TYPE_CHECKING:
    # The packages above this layer, named for annotations only (their routes import this).
    from commerce_api.orders.placement import OrderDesk
    from commerce_api.readpath.service import ReadPath


@dataclass(frozen=True, slots=True)
class Services:
    """What a request handler needs, built once per process by the app's lifespan."""

    settings: Settings
    db: Database
    rate_limiter: RateLimiter
    secret_box: SecretBox
    read_path: ReadPath
    orders: OrderDesk  # places orders in batches that share a commit (orders/placement.py)


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def current_principal(request: Request) -> Principal:
    """The authenticated caller; 401 without a valid key. Memoised per request, failures too."""
    services = get_services(request)
    return await authenticate(
        services.read_path, context(request.scope), request.headers.get("authorization")
    )


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


async def request_context(request: Request) -> RequestContext:
    """What this request carries (``context.py``)."""
    return context(request.scope)


RequestContextDep = Annotated[RequestContext, Depends(request_context)]


async def admin_principal(principal: CurrentPrincipal) -> Principal:
    if not principal.is_admin:
        raise forbidden("This endpoint needs an admin key; client keys cannot use it.")
    return principal


AdminPrincipal = Annotated[Principal, Depends(admin_principal)]


async def request_services(request: Request) -> Services:
    # async: FastAPI would run a plain function dependency on a worker thread (~50 µs a call).
    return get_services(request)


ServicesDep = Annotated[Services, Depends(request_services)]
