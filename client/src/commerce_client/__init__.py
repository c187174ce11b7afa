"""Python client for the Commerce API.

    import commerce_client

    with commerce_client.Client(api_key="sk_sandbox_…", environment="sandbox") as client:
        for product in client.products.list_all(category="books"):
            print(product.name, product.price)

See the README for every resource, errors, retries and webhooks.
"""

from commerce_client._client import BASE_URLS, AsyncClient, Client
from commerce_client._errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    CommerceError,
    ConflictError,
    IdempotencyError,
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    InsufficientStockError,
    InvalidRequestError,
    InvalidTransitionError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
    ServerError,
    ValidationFailedError,
    WebhookVerificationError,
)
from commerce_client._response import ResponseInfo, WithResponse
from commerce_client._types import NOT_GIVEN, Environment, NotGiven
from commerce_client._version import __version__
from commerce_client.types import (
    Address,
    AuditActor,
    AuditEvent,
    AuditTarget,
    Category,
    DeliveryAttempt,
    Event,
    EventDelivery,
    EventWithDeliveries,
    Order,
    OrderItem,
    OrderItemParam,
    OrderStatus,
    Page,
    Pagination,
    Product,
    ProductListItem,
    ProductSort,
    RateLimitInfo,
    ShippingAddressParam,
    Tracking,
    TrackingParam,
    WebhookEndpoint,
    WebhookEndpointWithSecret,
)
from commerce_client.webhooks import verify_webhook

__all__ = [
    "BASE_URLS",
    "NOT_GIVEN",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Address",
    "AsyncClient",
    "AuditActor",
    "AuditEvent",
    "AuditTarget",
    "AuthenticationError",
    "Category",
    "Client",
    "CommerceError",
    "ConflictError",
    "DeliveryAttempt",
    "Environment",
    "Event",
    "EventDelivery",
    "EventWithDeliveries",
    "IdempotencyError",
    "IdempotencyKeyInUseError",
    "IdempotencyKeyReusedError",
    "InsufficientStockError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "NotFoundError",
    "NotGiven",
    "Order",
    "OrderItem",
    "OrderItemParam",
    "OrderStatus",
    "Page",
    "Pagination",
    "PermissionDeniedError",
    "Product",
    "ProductListItem",
    "ProductSort",
    "QuotaExceededError",
    "RateLimitError",
    "RateLimitInfo",
    "ResponseInfo",
    "ServerError",
    "ShippingAddressParam",
    "Tracking",
    "TrackingParam",
    "ValidationFailedError",
    "WebhookEndpoint",
    "WebhookEndpointWithSecret",
    "WebhookVerificationError",
    "WithResponse",
    "__version__",
    "verify_webhook",
]
