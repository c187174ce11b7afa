"""The schema, as SQLAlchemy Core tables, one module per part of the service; every table is
named here too. Migrations under ``migrations/`` create it.

- ``schema``: the ``metadata`` and the column types the tables share (``UTCDateTime``:
  timezone-aware UTC everywhere).
- ``access``: accounts, API keys, console sessions. ``catalog``: products. ``search``: the
  full-text objects outside ``metadata``. ``sales``: orders, their lines, the closed hours'
  figures. ``webhooks``: events, endpoints, deliveries, attempts. ``audit``: the audit trail.
  ``idempotency``: Idempotency-Key records. ``instance``: values the instance keeps.
"""

from commerce_api.storage.tables.access import accounts, api_keys, console_sessions
from commerce_api.storage.tables.audit import audit_events
from commerce_api.storage.tables.catalog import products
from commerce_api.storage.tables.idempotency import idempotency_keys
from commerce_api.storage.tables.instance import instance_values
from commerce_api.storage.tables.sales import (
    ORDER_HOURS_UNTIL,
    ORDER_IS_PENDING,
    order_hour_figures,
    order_items,
    orders,
)
from commerce_api.storage.tables.schema import (
    NAMING_CONVENTION,
    SortableId,
    UTCDateTime,
    metadata,
)
from commerce_api.storage.tables.search import (
    ORDER_SEARCH_PREFIX,
    PRODUCT_SEARCH_PREFIX,
    in_metadata,
)
from commerce_api.storage.tables.webhooks import (
    DELIVERY_IS_CLAIMED,
    ENDPOINT_IS_FAILING,
    events,
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
)

__all__ = [
    "DELIVERY_IS_CLAIMED",
    "ENDPOINT_IS_FAILING",
    "NAMING_CONVENTION",
    "ORDER_HOURS_UNTIL",
    "ORDER_IS_PENDING",
    "ORDER_SEARCH_PREFIX",
    "PRODUCT_SEARCH_PREFIX",
    "SortableId",
    "UTCDateTime",
    "accounts",
    "api_keys",
    "audit_events",
    "console_sessions",
    "events",
    "idempotency_keys",
    "in_metadata",
    "instance_values",
    "metadata",
    "order_hour_figures",
    "order_items",
    "orders",
    "products",
    "webhook_attempts",
    "webhook_deliveries",
    "webhook_endpoints",
]
