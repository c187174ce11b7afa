"""Order endpoints: ``/v1/orders``; and ``order_webhooks``, the order events' deliveries as a
receiver gets them, declared for the OpenAPI document's ``webhooks`` section (FastAPI's
``app.webhooks``): they only describe the POSTs the dispatcher makes (``webhooks.sender``),
nothing of them is served."""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response

from commerce_api.core import tracing
from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, newest_first_paging
from commerce_api.http import idempotency
from commerce_api.http.context import context
from commerce_api.http.dependencies import CurrentPrincipal, ServicesDep, request_services
from commerce_api.http.paging import CreatedGte, CreatedLt, Limit, Offset, StartingAfter
from commerce_api.http.routing import (
    StrictRoute,
    error_responses,
    json_response,
    manages_idempotency,
    places_orders,
)
from commerce_api.http.schemas import SingleLine
from commerce_api.http.services import RequestServices
from commerce_api.orders import new_orders, service
from commerce_api.orders.batch_plan import OrderRequest
from commerce_api.orders.desk import OrderDesk
from commerce_api.orders.schemas import (
    Order,
    OrderCanceledEvent,
    OrderCreate,
    OrderCreatedEvent,
    OrderFulfill,
    OrderFulfilledEvent,
    OrderList,
    OrderStatusName,
)
from commerce_api.webhooks.schemas import DeliveryHeaders


class OrderServices(RequestServices, Protocol):
    """The services placing an order uses: the kit's, with the process's order desk."""

    @property
    def orders(self) -> OrderDesk: ...


OrderServicesDep = Annotated[OrderServices, Depends(request_services)]

router = APIRouter(prefix="/v1/orders", tags=["Orders"], route_class=StrictRoute)


@router.post(
    "",
    response_model=Order,
    status_code=201,
    responses=error_responses(401, 403, 409, 413, 415),
    summary="Create an order",
)
@manages_idempotency
@places_orders
async def create_order(
    body: OrderCreate, request: Request, services: OrderServicesDep, principal: CurrentPrincipal
) -> Response:
    """Place an order for a customer. Stock is reserved atomically with the order: not enough
    stock is a 409 and nothing is written. Prices are copied from the catalogue.

    Send an `Idempotency-Key` to retry safely: the same key and request replay the first
    response (with `Idempotent-Replayed: true`)."""
    new_orders.check_units(body, services.settings)
    keyed = context(request.scope).keyed  # its claim is in the batch
    traceparent = tracing.current_traceparent() if tracing.ENABLED else None
    outcome = await services.orders.place(OrderRequest(principal, body, keyed, traceparent))
    return Response(outcome.body, status_code=outcome.status, headers=outcome.headers)


@router.get(
    "",
    response_model=OrderList,
    responses=error_responses(401, 404),
    summary="List orders",
)
async def list_orders(
    services: ServicesDep,
    principal: CurrentPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
    starting_after: StartingAfter = None,
    status: Annotated[OrderStatusName | None, Query(description="Only this status.")] = None,
    customer_id: Annotated[
        str | None,
        Query(min_length=1, max_length=255, description="Only this customer's orders."),
        SingleLine,
    ] = None,
    created_gte: CreatedGte = None,
    created_lt: CreatedLt = None,
) -> Response:
    """Your account's orders (every account's with an admin key), newest first: by
    `created_at`, then id, both descending.

    Page with `starting_after` (the last id of the page before): orders placed meanwhile do
    not shift the pages, so each order is seen once. `offset` pages too, but shifts as orders
    arrive."""
    paging = newest_first_paging(limit, offset, starting_after, created_gte, created_lt)
    async with services.db.read() as conn:
        page = await service.list_orders(
            conn,
            principal,
            status=status,
            customer_id=customer_id,
            **paging,
        )
    return json_response(page)


@router.get(
    "/{id}",
    response_model=Order,
    responses=error_responses(401),
    summary="Retrieve an order",
)
async def get_order(id: str, services: ServicesDep, principal: CurrentPrincipal) -> Response:
    """One of your orders. Another account's order is a 404."""
    async with services.db.read() as conn:
        order = await service.get_order(conn, principal, id)
    return json_response(order)


@router.post(
    "/{id}/cancel",
    response_model=Order,
    responses=error_responses(401, 409),
    summary="Cancel an order",
)
async def cancel_order(
    id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """Cancel a pending order; its stock goes back to the catalogue. Any other status is a
    409."""
    async with services.db.write() as conn:
        order = await service.cancel_order(conn, principal, id)
        response = json_response(order)
        await idempotency.record(conn, request, response)
    return response


@router.post(
    "/{id}/fulfill",
    response_model=Order,
    responses=error_responses(401, 403, 409, 413, 415),
    summary="Fulfil an order",
)
async def fulfill_order(
    id: str,
    request: Request,
    services: ServicesDep,
    principal: CurrentPrincipal,
    body: OrderFulfill | None = None,
) -> Response:
    """Mark a pending order fulfilled. Needs an admin key; on a sandbox instance the owning
    client may too (to exercise its webhook handler).

    The body is optional: `{"tracking": {"carrier", "number", "url"}}` records where the parcel
    is, on the order and in its `order.fulfilled` event (`url`, https only, may be left out).
    Without a body (or with `{}`) the order's `tracking` stays null."""
    tracking = None if body is None else body.tracking
    environment = services.settings.environment
    async with services.db.write() as conn:
        order = await service.fulfill_order(conn, principal, id, environment, tracking=tracking)
        response = json_response(order)
        await idempotency.record(conn, request, response)
    return response


SignedHeaders = Annotated[DeliveryHeaders, Header()]

order_webhooks = APIRouter(
    tags=["Webhooks"],
    default_response_class=Response,  # the receiver's answer has no body we read
    generate_unique_id_function=lambda route: route.name,  # as the app's operations
)
_ACKNOWLEDGED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Any 2xx within the delivery timeout acknowledges the event; anything "
        "else (a 3xx too) is retried on the schedule, with the same `webhook-id`."
    }
}


@order_webhooks.post("order.created", responses=_ACKNOWLEDGED, summary="An order was placed")
def order_created(body: OrderCreatedEvent, headers: SignedHeaders) -> None:
    """Sent to every endpoint subscribed to `order.created` once an order is placed (its
    stock reserved)."""


@order_webhooks.post("order.fulfilled", responses=_ACKNOWLEDGED, summary="An order was fulfilled")
def order_fulfilled(body: OrderFulfilledEvent, headers: SignedHeaders) -> None:
    """Sent when an admin key, the CLI or the console fulfils an order (or, in the sandbox,
    its own client)."""


@order_webhooks.post("order.canceled", responses=_ACKNOWLEDGED, summary="An order was canceled")
def order_canceled(body: OrderCanceledEvent, headers: SignedHeaders) -> None:
    """Sent when the owning client cancels a pending order, or when the service does because
    it was still pending after `COMMERCE_PENDING_ORDER_TTL_SECONDS`; its stock is returned."""
