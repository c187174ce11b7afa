"""Request dependencies: the services container, the caller's key and role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from commerce_api.accounts.service import Principal, authenticate, bearer_token
from commerce_api.db import Database
from commerce_api.errors import forbidden
from commerce_api.settings import Settings


@dataclass(frozen=True, slots=True)
class Services:
    """What a request handler needs, built once per process by the app's lifespan."""

    settings: Settings
    db: Database


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def current_principal(request: Request) -> Principal:
    """The authenticated caller; 401 without a valid key. Memoised per request."""
    state = request.scope.setdefault("state", {})
    cached = state.get("principal")
    if isinstance(cached, Principal):
        return cached
    token = bearer_token(request.headers.get("authorization"))
    services = get_services(request)
    async with services.db.read() as conn:
        principal = await authenticate(conn, token, services.settings.environment)
    state["principal"] = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


async def admin_principal(principal: CurrentPrincipal) -> Principal:
    if not principal.is_admin:
        raise forbidden("This endpoint needs an admin key; client keys cannot use it.")
    return principal


AdminPrincipal = Annotated[Principal, Depends(admin_principal)]
ServicesDep = Annotated[Services, Depends(get_services)]
