"""Order schemas: the create request (strictly validated), the order record, and the order
events as a webhook receiver gets them (``routes.order_webhooks`` declares their deliveries)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import pycountry
from pydantic import AfterValidator, Field, StringConstraints, WithJsonSchema

from commerce_api.core.timestamps import TimestampText
from commerce_api.http.schemas import (
    Pagination,
    RequestModel,
    ResponseModel,
    SingleLine,
    WholeNumber,
)
from commerce_api.webhooks.schemas import EventType

MAX_ITEMS = 100
MAX_QUANTITY = 10_000

COUNTRY_CODES = tuple(sorted(country.alpha_2 for country in pycountry.countries))
_KNOWN_CODES = frozenset(COUNTRY_CODES)


def _country_code(value: str) -> str:
    if value not in _KNOWN_CODES:
        raise ValueError("must be an ISO 3166-1 alpha-2 country code in capitals, such as US")
    return value


NonEmpty200 = Annotated[str, StringConstraints(min_length=1, max_length=200), SingleLine]
CountryCode = Annotated[
    str,
    AfterValidator(_country_code),
    WithJsonSchema({"type": "string", "enum": list(COUNTRY_CODES)}),
]
Quantity = Annotated[int, Field(ge=1, le=MAX_QUANTITY), WholeNumber]


class ShippingAddress(RequestModel):
    street: NonEmpty200
    line2: Annotated[str, StringConstraints(max_length=200), SingleLine] | None = None
    city: Annotated[str, StringConstraints(min_length=1, max_length=100), SingleLine]
    state: Annotated[str, StringConstraints(max_length=100), SingleLine] | None = None
    postal_code: Annotated[str, StringConstraints(min_length=1, max_length=20), SingleLine]
    country: CountryCode = Field(description="ISO 3166-1 alpha-2 code, e.g. US.")


class OrderItemCreate(RequestModel):
    product_id: Annotated[str, StringConstraints(min_length=1, max_length=64), SingleLine]
    quantity: Quantity


class OrderCreate(RequestModel):
    customer_id: Annotated[str, StringConstraints(min_length=1, max_length=255), SingleLine] = (
        Field(description="Your identifier for the customer.")
    )
    items: list[OrderItemCreate] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="1 to 100 lines; lines for the same product are merged into one, their "
        "quantities summed.",
    )
    shipping_address: ShippingAddress


# Tracking on fulfilment (issue 29): an https page on a named host, no credentials, no
# #fragment. The same pattern validates and documents it, so the two never part ways.
TRACKING_URL_PATTERN = (
    r"^https://[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?"
    r"(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$"
)
_TRACKING_URL = re.compile(TRACKING_URL_PATTERN)
MAX_TRACKING_URL_LENGTH = 2048
MAX_TRACKING_TEXT_LENGTH = 100


def _tracking_url(value: str) -> str:
    if not _TRACKING_URL.fullmatch(value):
        raise ValueError(
            "must be an https URL such as https://tracking.example.com/1Z999AA1, without "
            "credentials or a #fragment"
        )
    return value


TrackingText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_TRACKING_TEXT_LENGTH), SingleLine
]
TrackingURL = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TRACKING_URL_LENGTH),
    AfterValidator(_tracking_url),
    WithJsonSchema(
        {"type": "string", "maxLength": MAX_TRACKING_URL_LENGTH, "pattern": TRACKING_URL_PATTERN}
    ),
]


class TrackingCreate(RequestModel):
    carrier: TrackingText = Field(description="Who carries the parcel, such as `UPS`.")
    number: TrackingText = Field(description="The carrier's tracking number.")
    url: TrackingURL | None = Field(
        default=None, description="An https page where the customer can follow the parcel."
    )


class OrderFulfill(RequestModel):
    tracking: TrackingCreate | None = Field(
        default=None,
        description="Where the parcel is: shown on the order and in its `order.fulfilled` "
        "event. Optional: fulfil without a body, or with `{}`, to send none.",
    )


class OrderItem(ResponseModel):
    product_id: str
    name: str = Field(description="The product's name when the order was placed.")
    quantity: int
    unit_price: float = Field(description="The product's price when the order was placed.")


class Address(ResponseModel):
    street: str
    line2: str | None = None
    city: str
    state: str | None = None
    postal_code: str
    country: str


OrderStatusName = Literal["pending", "fulfilled", "canceled"]


class Tracking(ResponseModel):
    carrier: str
    number: str
    url: str | None


class Order(ResponseModel):
    id: str
    status: OrderStatusName
    customer_id: str
    items: list[OrderItem]
    shipping_address: Address
    total: float = Field(description="Sum of quantity x unit_price over the items, exact.")
    currency: str
    created_at: TimestampText
    updated_at: TimestampText
    fulfilled_at: TimestampText | None
    canceled_at: TimestampText | None
    tracking: Tracking | None = Field(
        description="The parcel's tracking, given when the order was fulfilled; null until "
        "then, and for an order fulfilled without one."
    )
    version: int = Field(
        ge=1,
        description="1 when the order is placed, one more at each change (fulfilled, canceled, "
        "expired). An event's `data` carries the order's version: a webhook receiver that has "
        "seen a higher one for this order drops the delivery as stale.",
    )


class OrderList(ResponseModel):
    data: list[Order]
    pagination: Pagination


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
