"""Request dependencies: the services (as the HTTP layer knows them: ``http.services``; a
route module that uses more of them types ``request_services`` with a protocol of its own), the
caller's key and role.

A route says which keys it admits by the caller it declares: ``CatalogPrincipal`` (any key,
publishable ones included: the catalogue reads, and only they), ``CurrentPrincipal`` (a secret
key: client or admin) or ``AdminPrincipal``. ``CatalogPrincipal`` is the one declaration the
publishable keys' allow-list and CORS (``http/cors.py``) are derived from."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from commerce_api.accounts.service import Principal, secret_key_principal
from commerce_api.core.errors import forbidden
from commerce_api.http.context import RequestContext, context
from commerce_api.http.request_head import authenticate
from commerce_api.http.services import RequestServices


def get_services(request: Request) -> RequestServices:
    """The services the app's lifespan assembled (``app.services``)."""
    services: RequestServices = request.app.state.services
    return services


async def catalog_principal(request: Request) -> Principal:
    """The authenticated caller, whatever its key's role (publishable keys too); 401 without a
    valid key. Memoised per request, failures too. Only the catalogue reads declare it."""
    services = get_services(request)
    return await authenticate(
        services.read_path, context(request.scope), request.headers.get("authorization")
    )


CatalogPrincipal = Annotated[Principal, Depends(catalog_principal)]


async def current_principal(request: Request) -> Principal:
    """The authenticated caller with a secret key (client or admin): 401 without a valid key,
    403 ``publishable_key_not_allowed`` with a publishable one."""
    return secret_key_principal(await catalog_principal(request))


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


async def request_services(request: Request) -> RequestServices:
    # async: FastAPI would run a plain function dependency on a worker thread (~50 µs a call).
    return get_services(request)


ServicesDep = Annotated[RequestServices, Depends(request_services)]
