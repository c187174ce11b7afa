"""Order schemas: the create request (strictly validated) and the order record."""

from __future__ import annotations

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
    version: int = Field(
        ge=1,
        description="1 when the order is placed, one more at each change (fulfilled, canceled, "
        "expired). An event's `data` carries the order's version: a webhook receiver that has "
        "seen a higher one for this order drops the delivery as stale.",
    )


class OrderList(ResponseModel):
    data: list[Order]
    pagination: Pagination
