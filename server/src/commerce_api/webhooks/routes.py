"""Endpoints: ``/v1/webhook_endpoints``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, clamp
from commerce_api.http import idempotency
from commerce_api.http.dependencies import CurrentPrincipal, ServicesDep
from commerce_api.http.paging import Limit, Offset
from commerce_api.http.routing import StrictRoute, error_responses, json_response
from commerce_api.webhooks import service
from commerce_api.webhooks.schemas import (
    WebhookEndpoint,
    WebhookEndpointCreate,
    WebhookEndpointList,
    WebhookEndpointRecover,
    WebhookEndpointRecovered,
    WebhookEndpointUpdate,
    WebhookEndpointWithSecret,
)

endpoints_router = APIRouter(
    prefix="/v1/webhook_endpoints", tags=["Webhook endpoints"], route_class=StrictRoute
)


@endpoints_router.post(
    "",
    response_model=WebhookEndpointWithSecret,
    status_code=201,
    responses=error_responses(401, 403, 413, 415),
    summary="Register a webhook endpoint",
)
async def create_webhook_endpoint(
    body: WebhookEndpointCreate,
    request: Request,
    services: ServicesDep,
    principal: CurrentPrincipal,
) -> Response:
    """Register a receiver URL for your account's events. The response carries the signing
    secret (`whsec_…`) — the only time it is shown. Deliveries follow Standard Webhooks.
    An account has at most 16 endpoints (`COMMERCE_WEBHOOK_MAX_ENDPOINTS`)."""
    url = await service.check_receiver_url(body.url, services.settings)
    async with services.db.write() as conn:
        endpoint = await service.create_endpoint(
            conn, principal, body, url, services.settings, services.secret_box
        )
        response = json_response(
            endpoint, 201, {"Location": f"/v1/webhook_endpoints/{endpoint['id']}"}
        )
        await idempotency.record(conn, request, response)
    return response


@endpoints_router.get(
    "",
    response_model=WebhookEndpointList,
    responses=error_responses(401, 403),
    summary="List webhook endpoints",
)
async def list_webhook_endpoints(
    services: ServicesDep,
    principal: CurrentPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> Response:
    """Your account's endpoints, oldest first."""
    async with services.db.read() as conn:
        page = await service.list_endpoints(conn, principal, limit=clamp(limit), offset=offset)
    return json_response(page)


@endpoints_router.get(
    "/{id}",
    response_model=WebhookEndpoint,
    responses=error_responses(401, 403),
    summary="Retrieve a webhook endpoint",
)
async def get_webhook_endpoint(
    id: str, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """One of your endpoints (never its secret)."""
    async with services.db.read() as conn:
        endpoint = await service.get_endpoint(conn, principal, id)
    return json_response(endpoint)


@endpoints_router.patch(
    "/{id}",
    response_model=WebhookEndpoint,
    responses=error_responses(401, 403, 413, 415),
    summary="Update a webhook endpoint",
)
async def update_webhook_endpoint(
    id: str, body: WebhookEndpointUpdate, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """Change the URL, the event types, the description, or re-enable a disabled endpoint."""
    url = None
    if body.url is not None:
        url = await service.check_receiver_url(body.url, services.settings)
    async with services.db.write() as conn:
        endpoint = await service.update_endpoint(conn, principal, id, body, url)
    return json_response(endpoint)


@endpoints_router.delete(
    "/{id}",
    status_code=204,
    responses=error_responses(401, 403),
    summary="Delete a webhook endpoint",
)
async def delete_webhook_endpoint(
    id: str, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """Stop sending events to this endpoint. Deliveries still pending are dropped."""
    async with services.db.write() as conn:
        await service.delete_endpoint(conn, principal, id)
    return Response(status_code=204)


@endpoints_router.post(
    "/{id}/rotate_secret",
    response_model=WebhookEndpointWithSecret,
    responses=error_responses(401, 403),
    summary="Rotate a webhook endpoint's secret",
)
async def rotate_webhook_endpoint_secret(
    id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """Issue a new signing secret (shown only here). For 24 hours deliveries carry signatures
    with both the old and the new secret, so receivers can switch without missing events."""
    async with services.db.write() as conn:
        endpoint = await service.rotate_secret(conn, principal, id, services.secret_box)
        response = json_response(endpoint)
        await idempotency.record(conn, request, response)
    return response


@endpoints_router.post(
    "/{id}/recover",
    response_model=WebhookEndpointRecovered,
    responses=error_responses(401, 403, 409, 413, 415),
    summary="Recover a webhook endpoint's failed deliveries",
)
async def recover_webhook_endpoint(
    id: str,
    body: WebhookEndpointRecover,
    request: Request,
    services: ServicesDep,
    principal: CurrentPrincipal,
) -> Response:
    """After an outage of your receiver: send again, now, every delivery to this endpoint that
    failed (given up, or waiting for a retry) for an event created at or after `since`, each
    with a fresh retry schedule and the same `webhook-id`. Deliveries that succeeded are not
    sent again. A disabled endpoint is refused (409 `endpoint_disabled`): re-enable it first."""
    async with services.db.write() as conn:
        recovered = await service.recover_deliveries(conn, principal, id, body.since)
        response = json_response(recovered)
        await idempotency.record(conn, request, response)
    return response
