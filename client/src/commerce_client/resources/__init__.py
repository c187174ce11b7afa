"""The resources of a client: ``client.products``, ``client.orders``, and so on."""

from commerce_client.resources.audit_events import AsyncAuditEvents, AuditEvents
from commerce_client.resources.categories import AsyncCategories, Categories
from commerce_client.resources.events import AsyncEvents, Events
from commerce_client.resources.orders import AsyncOrders, Orders
from commerce_client.resources.products import AsyncProducts, Products
from commerce_client.resources.webhook_endpoints import AsyncWebhookEndpoints, WebhookEndpoints

__all__ = [
    "AsyncAuditEvents",
    "AsyncCategories",
    "AsyncEvents",
    "AsyncOrders",
    "AsyncProducts",
    "AsyncWebhookEndpoints",
    "AuditEvents",
    "Categories",
    "Events",
    "Orders",
    "Products",
    "WebhookEndpoints",
]
