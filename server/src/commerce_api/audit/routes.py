"""Endpoints: ``/v1/audit_events``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from commerce_api.audit import service
from commerce_api.audit.schemas import AuditEventList
from commerce_api.audit.service import Action
from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, MAX_ID_LENGTH, newest_first_paging
from commerce_api.http.dependencies import AdminPrincipal, ServicesDep
from commerce_api.http.paging import CreatedGte, CreatedLt, Limit, Offset, StartingAfter
from commerce_api.http.routing import StrictRoute, error_responses, json_response
from commerce_api.http.schemas import SingleLine

audit_router = APIRouter(prefix="/v1/audit_events", tags=["Audit"], route_class=StrictRoute)


@audit_router.get(
    "",
    response_model=AuditEventList,
    responses=error_responses(401, 403, 404),
    summary="List audit events (admin)",
)
async def list_audit_events(
    services: ServicesDep,
    _admin: AdminPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
    starting_after: StartingAfter = None,
    target_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_ID_LENGTH,
            description="Only the changes of this product, order, key, webhook endpoint or event.",
        ),
        SingleLine,
    ] = None,
    actor_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_ID_LENGTH,
            description="Only the changes by this "
            "key (`key_…`) or system actor (`cli`, `sweeper`).",
        ),
        SingleLine,
    ] = None,
    action: Annotated[
        Action | None, Query(description="Only this action (`order.fulfill`…).")
    ] = None,
    created_gte: CreatedGte = None,
    created_lt: CreatedLt = None,
) -> Response:
    """Who changed what: every change by an admin key, a console session, a client key (its
    own orders and cancels) or the system, newest first: by `created_at`, then id, both
    descending. Kept `COMMERCE_AUDIT_RETENTION_DAYS` (365 by default). Needs an admin key.

    Page with `starting_after` (the last id of the page before): changes recorded meanwhile
    do not shift the pages."""
    paging = newest_first_paging(limit, offset, starting_after, created_gte, created_lt)
    async with services.db.read() as conn:
        page = await service.list_audit_events(
            conn, target_id=target_id, actor_id=actor_id, action=action, **paging
        )
    return json_response(page)
