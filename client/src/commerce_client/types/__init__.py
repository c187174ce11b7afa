"""The models the API returns (frozen dataclasses) and the shapes it accepts (TypedDicts)."""

from commerce_client._pagination import Page, Pagination
from commerce_client.types.audit_event import AuditActor, AuditEvent, AuditTarget
from commerce_client.types.category import Category
from commerce_client.types.event import (
    DeliveryAttempt,
    DeliveryStatus,
    Event,
    EventDelivery,
    EventWithDeliveries,
)
from commerce_client.types.order import (
    Address,
    Order,
    OrderItem,
    OrderItemParam,
    OrderStatus,
    ShippingAddressParam,
    Tracking,
    TrackingParam,
)
from commerce_client.types.problem import Problem
from commerce_client.types.product import Product, ProductListItem, ProductSort
from commerce_client.types.rate_limit import RateLimitInfo
from commerce_client.types.webhook_endpoint import WebhookEndpoint, WebhookEndpointWithSecret

__all__ = [
    "Address",
    "AuditActor",
    "AuditEvent",
    "AuditTarget",
    "Category",
    "DeliveryAttempt",
    "DeliveryStatus",
    "Event",
    "EventDelivery",
    "EventWithDeliveries",
    "Order",
    "OrderItem",
    "OrderItemParam",
    "OrderStatus",
    "Page",
    "Pagination",
    "Problem",
    "Product",
    "ProductListItem",
    "ProductSort",
    "RateLimitInfo",
    "ShippingAddressParam",
    "Tracking",
    "TrackingParam",
    "WebhookEndpoint",
    "WebhookEndpointWithSecret",
]
