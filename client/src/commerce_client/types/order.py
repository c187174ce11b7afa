"""Orders, and the shapes accepted by ``orders.create()``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, NotRequired, Self, TypedDict

from commerce_client import _parse

__all__ = [
    "Address",
    "Order",
    "OrderItem",
    "OrderItemParam",
    "OrderStatus",
    "ShippingAddressParam",
    "Tracking",
    "TrackingParam",
]

OrderStatus = Literal["pending", "fulfilled", "canceled"]


class OrderItemParam(TypedDict):
    """One line of ``orders.create(items=[...])``."""

    product_id: str
    quantity: int
    """1 to 10,000."""


class ShippingAddressParam(TypedDict):
    """``orders.create(shipping_address={...})``."""

    street: str
    line2: NotRequired[str | None]
    city: str
    state: NotRequired[str | None]
    postal_code: str
    country: str
    """ISO 3166-1 alpha-2 code in capitals, such as ``"US"``."""


class TrackingParam(TypedDict):
    """``orders.fulfill(id, tracking={...})``: where the parcel is."""

    carrier: str
    """Who carries the parcel, such as ``"UPS"``: 1 to 100 characters."""
    number: str
    """The carrier's tracking number: 1 to 100 characters."""
    url: NotRequired[str | None]
    """An https page where the customer follows the parcel."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderItem:
    product_id: str
    name: str
    """The product's name when the order was placed."""
    quantity: int
    unit_price: Decimal
    """The product's price when the order was placed."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            product_id=data["product_id"],
            name=data["name"],
            quantity=data["quantity"],
            unit_price=_parse.money(data["unit_price"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Address:
    street: str
    line2: str | None
    city: str
    state: str | None
    postal_code: str
    country: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            street=data["street"],
            line2=data.get("line2"),
            city=data["city"],
            state=data.get("state"),
            postal_code=data["postal_code"],
            country=data["country"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tracking:
    """The parcel's tracking, given when the order was fulfilled."""

    carrier: str
    number: str
    url: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(carrier=data["carrier"], number=data["number"], url=data.get("url"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Order:
    """An order: ``pending``, then ``fulfilled`` or ``canceled``."""

    id: str
    status: OrderStatus
    customer_id: str
    items: list[OrderItem]
    shipping_address: Address
    total: Decimal
    """Sum of quantity x unit_price over the items, exact."""
    currency: str
    """ISO 4217 code, such as ``"USD"``."""
    created_at: datetime
    updated_at: datetime
    fulfilled_at: datetime | None
    canceled_at: datetime | None
    tracking: Tracking | None
    """Set when the order was fulfilled with one; None until then (and for an event recorded
    before the API had tracking)."""
    version: int
    """1 when the order was placed, one more at each change (fulfilled, canceled, expired): of
    two deliveries about one order, the one with the higher version is the newer."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            id=data["id"],
            status=data["status"],
            customer_id=data["customer_id"],
            items=[OrderItem.from_dict(item) for item in data["items"]],
            shipping_address=Address.from_dict(data["shipping_address"]),
            total=_parse.money(data["total"]),
            currency=data["currency"],
            created_at=_parse.timestamp(data["created_at"]),
            updated_at=_parse.timestamp(data["updated_at"]),
            fulfilled_at=_parse.optional_timestamp(data.get("fulfilled_at")),
            canceled_at=_parse.optional_timestamp(data.get("canceled_at")),
            tracking=None if data.get("tracking") is None else Tracking.from_dict(data["tracking"]),
            version=data["version"],
        )
