"""Order events as a webhook receiver gets them: the body of each event type and its delivery,
declared for the OpenAPI document's ``webhooks`` section (FastAPI's ``app.webhooks``).

The declarations only describe the POSTs the dispatcher makes (``webhooks.sender``); nothing
here is served.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header
from pydantic import Field
from starlette.responses import Response

from commerce_api.core.timestamps import TimestampText
from commerce_api.http.schemas import ResponseModel
from commerce_api.orders.schemas import Order
from commerce_api.webhooks.schemas import DeliveryHeaders, EventType


class OrderEvent(ResponseModel):
    """The body of a delivery: the event, with the order as it was after the change."""

    id: str = Field(
        description="The event's id (`evt_…`), also sent as `webhook-id`; the same on every "
        "retry: dedupe on it."
    )
    type: EventType
    created_at: TimestampText = Field(description="When the change happened.")
    data: Order = Field(description="The order, as it was after the change.")


class OrderCreatedEvent(OrderEvent):
    type: Literal["order.created"]


class OrderFulfilledEvent(OrderEvent):
    type: Literal["order.fulfilled"]


class OrderCanceledEvent(OrderEvent):
    type: Literal["order.canceled"]


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
