"""The hand-written models match the OpenAPI snapshot (``client-ts/openapi.json``, which a
server test keeps equal to the live document): a field added, removed, renamed, retyped or made
nullable in the API fails here until the model follows.

Each response model is compared with its component schema: the same field names, the same
nullability, and a compatible type (string ↔ str, a date-time ↔ datetime, a number ↔ Decimal,
a ``$ref`` ↔ that model, enums ↔ ``Literal``). The request shapes (TypedDicts) are compared by
keys and which are required.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin

import pytest

from commerce_client import (
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
    Pagination,
    Problem,
    Product,
    ProductListItem,
    ShippingAddressParam,
    Tracking,
    TrackingParam,
    WebhookEndpoint,
    WebhookEndpointWithSecret,
)
from commerce_client.resources import (
    AsyncAuditEvents,
    AsyncCategories,
    AsyncEvents,
    AsyncOrders,
    AsyncProducts,
    AsyncWebhookEndpoints,
    AuditEvents,
    Categories,
    Events,
    Orders,
    Products,
    WebhookEndpoints,
)

SNAPSHOT = Path(__file__).resolve().parents[2] / "client-ts" / "openapi.json"
SCHEMAS: dict[str, Any] = json.loads(SNAPSHOT.read_text())["components"]["schemas"]

MODELS: dict[str, type] = {
    "Address": Address,
    "AuditActor": AuditActor,
    "AuditEvent": AuditEvent,
    "AuditTarget": AuditTarget,
    "CategoryListItem": Category,
    "Delivery": EventDelivery,
    "DeliveryAttempt": DeliveryAttempt,
    "ErrorProblem": Problem,
    "Event": Event,
    "EventWithDeliveries": EventWithDeliveries,
    "Order": Order,
    "OrderItem": OrderItem,
    "Pagination": Pagination,
    "Product": Product,
    "ProductListItem": ProductListItem,
    "Tracking": Tracking,
    "WebhookEndpoint": WebhookEndpoint,
    "WebhookEndpointWithSecret": WebhookEndpointWithSecret,
}
MODEL_SCHEMAS = {model: name for name, model in MODELS.items()}
# Where the model is deliberately wider than the schema, and why.
WIDER = {
    # An event's data is the order for order.* types, the raw object for types this version
    # does not know (the schema names the order only).
    ("Event", "data"),
    ("EventWithDeliveries", "data"),
    # {field: [old, new]}: an object of arrays of any JSON value.
    ("AuditEvent", "changes"),
    # New reasons may be added: a problem keeps one this version does not know (as errors do).
    ("ErrorProblem", "reason"),
}
PARAMS: dict[str, type] = {
    "OrderItemCreate": OrderItemParam,
    "ShippingAddress": ShippingAddressParam,
    "TrackingCreate": TrackingParam,
}


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return list(schema.get("anyOf") or schema.get("oneOf") or [schema])


def _nullable(schema: dict[str, Any]) -> bool:
    return any(variant.get("type") == "null" for variant in _variants(schema))


def _optional(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without None, whether None was allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        allowed_none = len(args) < len(get_args(annotation))
        inner = args[0] if len(args) == 1 else Union[tuple(args)]  # noqa: UP007
        return inner, allowed_none
    return annotation, False


def _compatible(annotation: Any, schema: dict[str, Any]) -> bool:
    non_null = [variant for variant in _variants(schema) if variant.get("type") != "null"]
    assert len(non_null) == 1, schema
    part = non_null[0]
    if "$ref" in part:
        return bool(MODEL_SCHEMAS.get(annotation) == part["$ref"].rsplit("/", 1)[-1])
    kind = part.get("type")
    if "enum" in part:
        return get_origin(annotation) is Literal and set(get_args(annotation)) == set(part["enum"])
    if kind == "string":
        if part.get("format") == "date-time" or annotation is datetime:
            return annotation is datetime
        return annotation is str
    if kind == "integer":
        return annotation is int
    if kind == "number":
        return annotation is Decimal
    if kind == "boolean":
        return annotation is bool
    if kind == "array":
        return get_origin(annotation) is list and _compatible(
            get_args(annotation)[0], part["items"]
        )
    return False


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_has_its_schemas_fields(name: str) -> None:
    model = MODELS[name]
    schema = SCHEMAS[name]
    fields = {field.name for field in dataclasses.fields(model)}
    assert fields == set(schema["properties"]), f"{model.__name__} vs the schema {name}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_field_has_the_schemas_type_and_nullability(name: str) -> None:
    model = MODELS[name]
    schema = SCHEMAS[name]
    hints = typing.get_type_hints(model)
    required = set(schema.get("required", []))
    for field, property_schema in schema["properties"].items():
        annotation, allows_none = _optional(hints[field])
        may_be_null = _nullable(property_schema) or field not in required
        assert allows_none == may_be_null, f"{name}.{field}: None allowed {allows_none}"
        if (name, field) in WIDER:
            continue
        assert _compatible(annotation, property_schema), (
            f"{name}.{field}: {annotation!r} does not match {property_schema}"
        )


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_each_request_shape_has_the_schemas_keys(name: str) -> None:
    shape = PARAMS[name]
    schema = SCHEMAS[name]
    hints = typing.get_type_hints(shape, include_extras=True)
    assert set(hints) == set(schema["properties"])
    optional = {key for key, hint in hints.items() if get_origin(hint) is NotRequired}
    assert optional == set(schema["properties"]) - set(schema.get("required", []))


def test_every_response_schema_has_a_model() -> None:
    """A new response schema needs a model (or a line here saying why not)."""
    envelopes = {"ErrorDetail", "ErrorResponse", "EventList", "OrderList", "ProductList"}
    envelopes |= {"WebhookEndpointList", "AuditEventList"}  # pages: Page[T] of the item models
    envelopes |= {"CategoryList"}  # categories.list() returns its data, a list of Category
    envelopes |= {"WebhookEndpointRecovered"}  # webhook_endpoints.recover() returns its count
    # The webhook bodies (the document's webhooks section): verify_webhook() returns an Event,
    # wider on purpose (any type; data an Order, or the raw object of a type it does not know).
    envelopes |= {"OrderCreatedEvent", "OrderFulfilledEvent", "OrderCanceledEvent"}
    requests = {"OrderCreate", "OrderFulfill", "ProductCreate", "ProductUpdate"}
    requests |= {"WebhookEndpointCreate"}
    requests |= {"WebhookEndpointUpdate", "WebhookEndpointRecover"} | set(PARAMS)
    assert set(SCHEMAS) - envelopes - requests == set(MODELS)


# Each operation of the API (its operationId) and the methods that send it, sync and async.
OPERATION_METHODS: dict[str, tuple[Any, Any]] = {
    "list_products": (Products.list, AsyncProducts.list),
    "get_product": (Products.get, AsyncProducts.get),
    "create_product": (Products.create, AsyncProducts.create),
    "update_product": (Products.update, AsyncProducts.update),
    "archive_product": (Products.archive, AsyncProducts.archive),
    "list_categories": (Categories.list, AsyncCategories.list),
    "create_order": (Orders.create, AsyncOrders.create),
    "list_orders": (Orders.list, AsyncOrders.list),
    "get_order": (Orders.get, AsyncOrders.get),
    "cancel_order": (Orders.cancel, AsyncOrders.cancel),
    "fulfill_order": (Orders.fulfill, AsyncOrders.fulfill),
    "create_webhook_endpoint": (WebhookEndpoints.create, AsyncWebhookEndpoints.create),
    "list_webhook_endpoints": (WebhookEndpoints.list, AsyncWebhookEndpoints.list),
    "get_webhook_endpoint": (WebhookEndpoints.get, AsyncWebhookEndpoints.get),
    "update_webhook_endpoint": (WebhookEndpoints.update, AsyncWebhookEndpoints.update),
    "delete_webhook_endpoint": (WebhookEndpoints.delete, AsyncWebhookEndpoints.delete),
    "rotate_webhook_endpoint_secret": (
        WebhookEndpoints.rotate_secret,
        AsyncWebhookEndpoints.rotate_secret,
    ),
    "recover_webhook_endpoint": (WebhookEndpoints.recover, AsyncWebhookEndpoints.recover),
    "list_events": (Events.list, AsyncEvents.list),
    "get_event": (Events.get, AsyncEvents.get),
    "redeliver_event": (Events.redeliver, AsyncEvents.redeliver),
    "list_audit_events": (AuditEvents.list, AsyncAuditEvents.list),
}


def test_every_operation_has_a_sync_and_an_async_method() -> None:
    """A client covers the whole API, admin operations included: an operation added to the
    API needs its methods here (and in the TypeScript client)."""
    paths = json.loads(SNAPSHOT.read_text())["paths"]
    operations = {
        operation["operationId"]
        for path, item in paths.items()
        if path.startswith("/v1/")
        for operation in item.values()
    }
    assert operations - set(OPERATION_METHODS) == set()
    for sync_method, async_method in OPERATION_METHODS.values():
        assert sync_method.__name__ == async_method.__name__
        assert inspect.signature(sync_method) == inspect.signature(async_method)
