"""Endpoints: ``/v1/events``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, Limit, Offset, clamp
from commerce_api.events import service
from commerce_api.events.schemas import EventList, EventWithDeliveries
from commerce_api.http import idempotency
from commerce_api.http.dependencies import CurrentPrincipal, ServicesDep
from commerce_api.http.routing import StrictRoute, error_responses, json_response
from commerce_api.webhooks.schemas import EventType

events_router = APIRouter(prefix="/v1/events", tags=["Events"], route_class=StrictRoute)


@events_router.get(
    "",
    response_model=EventList,
    responses=error_responses(401),
    summary="List events",
)
async def list_events(
    services: ServicesDep,
    principal: CurrentPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
    type: Annotated[EventType | None, Query(description="Only this event type.")] = None,
) -> Response:
    """Your account's events of the last 30 days, oldest first."""
    async with services.db.read() as conn:
        page = await service.list_events(
            conn, principal, event_type=type, limit=clamp(limit), offset=offset
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
