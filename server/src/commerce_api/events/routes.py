"""Endpoints: ``/v1/events``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, MAX_ID_LENGTH, newest_first_paging
from commerce_api.events import service
from commerce_api.events.schemas import EventList, EventWithDeliveries
from commerce_api.http import idempotency
from commerce_api.http.dependencies import CurrentPrincipal, ServicesDep
from commerce_api.http.paging import CreatedGte, CreatedLt, Limit, Offset, StartingAfter
from commerce_api.http.routing import StrictRoute, error_responses, json_response
from commerce_api.http.schemas import SingleLine
from commerce_api.webhooks.schemas import EventType

events_router = APIRouter(prefix="/v1/events", tags=["Events"], route_class=StrictRoute)


@events_router.get(
    "",
    response_model=EventList,
    responses=error_responses(401, 404),
    summary="List events",
)
async def list_events(
    services: ServicesDep,
    principal: CurrentPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
    starting_after: StartingAfter = None,
    type: Annotated[EventType | None, Query(description="Only this event type.")] = None,
    order_id: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_ID_LENGTH, description="Only the events of this order."),
        SingleLine,
    ] = None,
    created_gte: CreatedGte = None,
    created_lt: CreatedLt = None,
) -> Response:
    """Your account's events of the last 30 days (every account's with an admin key), newest
    first: by `created_at`, then id, both descending.

    Page with `starting_after` (the last id of the page before): events recorded meanwhile do
    not shift the pages, so each event is seen once."""
    paging = newest_first_paging(limit, offset, starting_after, created_gte, created_lt)
    async with services.db.read() as conn:
        page = await service.list_events(
            conn,
            principal,
            event_type=type,
            order_id=order_id,
            **paging,
        )
    return json_response(page)


@events_router.get(
    "/{id}",
    response_model=EventWithDeliveries,
    responses=error_responses(401),
    summary="Retrieve an event",
)
async def get_event(id: str, services: ServicesDep, principal: CurrentPrincipal) -> Response:
    """One event with its deliveries: per endpoint, the status and every attempt."""
    async with services.db.read() as conn:
        event = await service.get_event(conn, principal, id)
    return json_response(event)


@events_router.post(
    "/{id}/redeliver",
    response_model=EventWithDeliveries,
    responses=error_responses(401),
    summary="Redeliver an event",
)
async def redeliver_event(
    id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """Send the event again, now, to every enabled endpoint that wants it (a fresh retry
    schedule, the same `webhook-id`). Refused with 429 while an earlier redelivery of the event
    is still queued."""
    async with services.db.write() as conn:
        event = await service.redeliver_event(conn, principal, id)
        response = json_response(event)
        await idempotency.record(conn, request, response)
    return response
