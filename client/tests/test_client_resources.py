"""Each method's request (method, path, query, body) and the model it returns."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from client_testing import (
    ADDRESS,
    BASE_URL,
    ORDER_REQUEST,
    MockAPI,
    endpoint_json,
    event_json,
    order_json,
    page_json,
    product_json,
)

import commerce_client
from commerce_client import (
    NOT_GIVEN,
    Category,
    Event,
    EventWithDeliveries,
    Order,
    Product,
    Tracking,
    TrackingParam,
    WebhookEndpointWithSecret,
)


def body_of(api: MockAPI) -> object:
    return json.loads(api.last.content)


def test_products_get_parses_exact_money_and_timestamps() -> None:
    api = MockAPI().reply(json=product_json(price=0.1))
    with api.client() as client:
        product = client.products.get("prod_1")
    assert isinstance(product, Product)
    assert product.price == Decimal("0.1")
    assert product.inventory_count == 7
    assert product.created_at == datetime(2026, 11, 21, 8, 12, 41, 123000, tzinfo=UTC)
    assert (api.last.method, api.last.url.path) == ("GET", "/v1/products/prod_1")


def test_large_prices_stay_exact() -> None:
    api = MockAPI().reply(
        content=b'{"id":"prod_1","name":"n","description":"","price":99999999.99,'
        b'"category":"c","created_at":"2026-11-21T08:12:41.123Z","inventory_count":1,'
        b'"updated_at":"2026-11-21T08:12:41.123Z"}'
    )
    with api.client() as client:
        assert client.products.get("prod_1").price == Decimal("99999999.99")


def test_ids_are_percent_encoded_into_the_path() -> None:
    api = MockAPI().error(404, "not_found")
    with api.client() as client, pytest.raises(commerce_client.NotFoundError):
        client.orders.get("../products")
    assert api.last.url.raw_path == b"/v1/orders/..%2Fproducts"


def test_an_empty_id_is_refused_before_any_request() -> None:
    api = MockAPI().reply(json=order_json())
    with api.client() as client, pytest.raises(ValueError, match="non-empty id"):
        client.orders.get("")
    assert api.requests == []


def test_products_list_passes_search_and_sort_through() -> None:
    api = MockAPI().reply(json=page_json([product_json()], total=1))
    with api.client() as client:
        client.products.list(q="blue mug", sort="-price", category="mugs", limit=5)
        assert dict(api.last.url.params) == {
            "q": "blue mug",
            "sort": "-price",
            "category": "mugs",
            "limit": "5",
        }
        client.products.list()
        assert dict(api.last.url.params) == {}
        assert [p.id for p in client.products.list_all(q="mug", sort="name")] == ["prod_1"]
        assert dict(api.last.url.params) == {
            "q": "mug",
            "sort": "name",
            "limit": "100",
            "offset": "0",
        }


def test_products_create_sends_exact_prices_and_omits_what_is_not_given() -> None:
    api = MockAPI().reply(201, product_json(price=19.99, inventory_count=0))
    with api.client() as client:
        product = client.products.create(name="A book", price=Decimal("19.99"), category="books")
        assert body_of(api) == {"name": "A book", "price": 19.99, "category": "books"}
        assert api.last.content == b'{"name":"A book","price":19.99,"category":"books"}'
        assert (api.last.method, api.last.url.path) == ("POST", "/v1/products")
        assert api.last.headers["idempotency-key"]
        assert isinstance(product, Product)
        assert product.price == Decimal("19.99")
        client.products.create(
            name="A mug",
            price=7,
            category="mugs",
            description="Blue.",
            inventory_count=3,
            idempotency_key="key-1",
        )
        assert body_of(api) == {
            "name": "A mug",
            "price": 7,
            "category": "mugs",
            "description": "Blue.",
            "inventory_count": 3,
        }
        assert api.last.headers["idempotency-key"] == "key-1"


def test_products_create_refuses_a_price_that_is_not_a_number() -> None:
    api = MockAPI().reply(201, product_json())
    with api.client() as client, pytest.raises(TypeError, match="price"):
        client.products.create(name="n", price="19.99", category="c")  # type: ignore[arg-type]
    assert api.requests == []


def test_products_update_sends_only_the_given_fields_and_archive_deletes() -> None:
    api = MockAPI().reply(json=product_json(price=5, inventory_count=0))
    with api.client() as client:
        updated = client.products.update(
            "prod_1", price=Decimal("5.00"), inventory_count=0, name=NOT_GIVEN
        )
        assert (api.last.method, api.last.url.path) == ("PATCH", "/v1/products/prod_1")
        assert body_of(api) == {"price": 5.0, "inventory_count": 0}
        assert "idempotency-key" not in api.last.headers
        assert updated.inventory_count == 0
    api = MockAPI().reply(204)
    with api.client() as client:
        client.products.archive("prod_1")
    assert (api.last.method, api.last.url.path) == ("DELETE", "/v1/products/prod_1")


def test_categories_list_reads_names_and_counts() -> None:
    api = MockAPI().reply(
        json={
            "data": [{"name": "books", "product_count": 23}, {"name": "mugs", "product_count": 1}]
        }
    )
    with api.client() as client:
        categories = client.categories.list()
    assert (api.last.method, api.last.url.path) == ("GET", "/v1/categories")
    assert categories == [
        Category(name="books", product_count=23),
        Category(name="mugs", product_count=1),
    ]


def test_orders_create_sends_the_order() -> None:
    api = MockAPI().reply(201, order_json())
    with api.client() as client:
        order = client.orders.create(
            customer_id="cus_1",
            items=[{"product_id": "prod_1", "quantity": 3}],
            shipping_address=ADDRESS,
        )
    assert (api.last.method, api.last.url.path) == ("POST", "/v1/orders")
    assert api.last.headers["content-type"] == "application/json"
    assert body_of(api) == ORDER_REQUEST
    assert isinstance(order, Order)
    assert order.total == Decimal("0.3")
    assert order.items[0].unit_price == Decimal("0.1")
    assert order.items[0].quantity * order.items[0].unit_price == order.total
    assert order.shipping_address.country == "US"
    assert order.shipping_address.line2 is None
    assert order.fulfilled_at is None


def test_orders_get_list_cancel_fulfill() -> None:
    api = MockAPI().reply(json=order_json(status="canceled", canceled_at="2026-11-21T10:00:00Z"))
    with api.client() as client:
        canceled = client.orders.cancel("ord_1")
        assert canceled.canceled_at == datetime(2026, 11, 21, 10, tzinfo=UTC)
        assert (api.last.method, api.last.url.path) == ("POST", "/v1/orders/ord_1/cancel")
        assert api.last.content == b""
        client.orders.fulfill("ord_1")
        assert api.last.url.path == "/v1/orders/ord_1/fulfill"
        assert api.last.content == b""  # no tracking: no body, the request as it always was
        client.orders.get("ord_1")
        assert (api.last.method, api.last.url.path) == ("GET", "/v1/orders/ord_1")
    api = MockAPI().reply(json=page_json([order_json()], total=1))
    with api.client() as client:
        page = client.orders.list(status="pending", limit=5)
    assert dict(api.last.url.params) == {"status": "pending", "limit": "5"}
    assert page.data[0].id == "ord_1"


TRACKING: TrackingParam = {
    "carrier": "UPS",
    "number": "1Z999AA1",
    "url": "https://track.example/1Z999AA1",
}


def test_orders_fulfill_sends_the_tracking_and_reads_it_back() -> None:
    fulfilled = order_json(status="fulfilled", fulfilled_at="2026-11-21T10:00:00Z", version=2)
    api = MockAPI().reply(json={**fulfilled, "tracking": TRACKING})
    with api.client() as client:
        order = client.orders.fulfill("ord_1", tracking=TRACKING, idempotency_key="fulfil-1")
    assert (api.last.method, api.last.url.path) == ("POST", "/v1/orders/ord_1/fulfill")
    assert api.last.headers["content-type"] == "application/json"
    assert api.last.headers["idempotency-key"] == "fulfil-1"
    assert body_of(api) == {"tracking": TRACKING}
    assert order.tracking == Tracking(
        carrier="UPS", number="1Z999AA1", url="https://track.example/1Z999AA1"
    )
    api = MockAPI().reply(json={**fulfilled, "tracking": {"carrier": "DHL", "number": "42"}})
    with api.client() as client:
        order = client.orders.fulfill("ord_1", tracking={"carrier": "DHL", "number": "42"})
    assert body_of(api) == {"tracking": {"carrier": "DHL", "number": "42"}}
    assert order.tracking == Tracking(carrier="DHL", number="42", url=None)
    assert Order.from_dict(order_json()).tracking is None


def test_webhook_endpoints_create_returns_the_secret() -> None:
    api = MockAPI().reply(201, endpoint_json(secret="whsec_c2VjcmV0"))
    with api.client() as client:
        endpoint = client.webhook_endpoints.create(
            url="https://example.com/hooks", events=["order.created"], description="Shop"
        )
    assert isinstance(endpoint, WebhookEndpointWithSecret)
    assert endpoint.secret == "whsec_c2VjcmV0"
    assert endpoint.events == ["order.created"]
    assert (api.last.method, api.last.url.path) == ("POST", "/v1/webhook_endpoints")
    assert "idempotency-key" in api.last.headers
    assert body_of(api) == {
        "url": "https://example.com/hooks",
        "events": ["order.created"],
        "description": "Shop",
    }


def test_webhook_endpoints_create_omits_what_is_not_given() -> None:
    api = MockAPI().reply(201, endpoint_json(events=[], secret="whsec_c2VjcmV0"))
    with api.client() as client:
        endpoint = client.webhook_endpoints.create(url="https://example.com/hooks")
    assert body_of(api) == {"url": "https://example.com/hooks"}
    assert endpoint.events == []


def test_webhook_endpoints_update_sends_only_the_given_fields() -> None:
    api = MockAPI().reply(json=endpoint_json(enabled=False))
    with api.client() as client:
        endpoint = client.webhook_endpoints.update("we_1", enabled=False, description=None)
        assert body_of(api) == {"enabled": False, "description": None}
        assert (api.last.method, api.last.url.path) == ("PATCH", "/v1/webhook_endpoints/we_1")
        client.webhook_endpoints.update("we_1", url="https://e.com/x", events=("order.created",))
        assert body_of(api) == {"url": "https://e.com/x", "events": ["order.created"]}
    assert endpoint.enabled is False
    assert "idempotency-key" not in api.last.headers


def test_webhook_endpoints_list_get_delete_rotate() -> None:
    api = MockAPI().reply(json=page_json([endpoint_json()], total=1))
    with api.client() as client:
        page = client.webhook_endpoints.list(limit=10)
        assert page.data[0].id == "we_1"
        assert dict(api.last.url.params) == {"limit": "10"}
        assert [e.id for e in client.webhook_endpoints.list_all()] == ["we_1"]
    api = MockAPI().reply(json=endpoint_json())
    with api.client() as client:
        assert client.webhook_endpoints.get("we_1").url == "https://example.com/hooks"
        assert api.last.url.path == "/v1/webhook_endpoints/we_1"
    api = MockAPI().reply(204)
    with api.client() as client:
        assert client.webhook_endpoints.delete("we_1") is None  # type: ignore[func-returns-value]
        assert (api.last.method, api.last.url.path) == ("DELETE", "/v1/webhook_endpoints/we_1")
    api = MockAPI().reply(json=endpoint_json(secret="whsec_bmV3"))
    with api.client() as client:
        rotated = client.webhook_endpoints.rotate_secret("we_1")
        assert rotated.secret == "whsec_bmV3"
        assert api.last.url.path == "/v1/webhook_endpoints/we_1/rotate_secret"
        assert "idempotency-key" in api.last.headers


def test_events_list_get_redeliver() -> None:
    api = MockAPI().reply(json=page_json([event_json()], total=1))
    with api.client() as client:
        page = client.events.list(type="order.created")
    assert dict(api.last.url.params) == {"type": "order.created"}
    event = page.data[0]
    assert isinstance(event, Event)
    assert isinstance(event.data, Order)
    assert event.data.total == Decimal("0.3")

    attempt = {
        "attempted_at": "2026-11-21T08:55:00.000Z",
        "status_code": 500,
        "duration_ms": 12,
        "error": "HTTP 500",
    }
    delivery = {
        "endpoint_id": "we_1",
        "status": "pending",
        "next_attempt_at": "2026-11-21T09:00:00.000Z",
        "attempts": [
            {**attempt, "status_code": None, "duration_ms": None, "error": "Interrupted: …"},
            {**attempt, "status_code": None, "error": "Timed out."},
            attempt,
        ],
    }
    pending = {**delivery, "attempts": []}
    api = MockAPI().reply(json=event_json(deliveries=[delivery, pending]))
    with api.client() as client:
        detailed = client.events.get("evt_1")
        assert api.last.url.path == "/v1/events/evt_1"
        again = client.events.redeliver("evt_1")
        assert (api.last.method, api.last.url.path) == ("POST", "/v1/events/evt_1/redeliver")
        assert "idempotency-key" in api.last.headers
    assert isinstance(detailed, EventWithDeliveries)
    assert [a.status_code for a in detailed.deliveries[0].attempts] == [None, None, 500]
    assert [a.duration_ms for a in detailed.deliveries[0].attempts] == [None, 12, 12]
    assert detailed.deliveries[0].last_attempt is not None
    assert detailed.deliveries[0].last_attempt.status_code == 500
    assert detailed.deliveries[1].last_attempt is None
    assert again == detailed


def test_events_of_unknown_types_keep_their_raw_data() -> None:
    api = MockAPI().reply(
        json=page_json([event_json(type="refund.created", data={"x": 1.5})], total=1)
    )
    with api.client() as client:
        event = next(client.events.list_all())
    assert event.data == {"x": Decimal("1.5")}


def test_models_are_frozen_and_read_plain_json_floats_exactly() -> None:
    product = Product.from_dict(product_json(price=19.99))
    assert product.price == Decimal("19.99")
    with pytest.raises(AttributeError):
        product.price = Decimal(0)  # type: ignore[misc]


async def test_async_resources_make_the_same_requests() -> None:
    api = MockAPI().reply(json=product_json())
    async with api.async_client() as client:
        assert (await client.products.get("prod_1")).id == "prod_1"
    api = MockAPI().reply(201, order_json())
    async with api.async_client() as client:
        await client.orders.create(**ORDER_REQUEST)
        assert body_of(api) == ORDER_REQUEST
        await client.orders.get("ord_1")
        await client.orders.cancel("ord_1")
        await client.orders.fulfill("ord_1")
        await client.orders.fulfill("ord_1", tracking={"carrier": "UPS", "number": "1Z"})
        assert body_of(api) == {"tracking": {"carrier": "UPS", "number": "1Z"}}
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("POST", "/v1/orders"),
        ("GET", "/v1/orders/ord_1"),
        ("POST", "/v1/orders/ord_1/cancel"),
        ("POST", "/v1/orders/ord_1/fulfill"),
        ("POST", "/v1/orders/ord_1/fulfill"),
    ]
    api = MockAPI().reply(json=page_json([order_json()], total=1))
    async with api.async_client() as client:
        assert len((await client.orders.list()).data) == 1
        assert [o.id async for o in client.orders.list_all()] == ["ord_1"]
    api = MockAPI().reply(json=page_json([product_json()], total=1))
    async with api.async_client() as client:
        assert len((await client.products.list()).data) == 1
        assert [p.id async for p in client.products.list_all(q="mug", sort="-price")] == ["prod_1"]
        assert dict(api.last.url.params) == {
            "q": "mug",
            "sort": "-price",
            "limit": "100",
            "offset": "0",
        }
    api = MockAPI().reply(json=product_json())
    async with api.async_client() as client:
        await client.products.create(
            name="A", price=Decimal("1.10"), category="c", inventory_count=2
        )
        assert body_of(api) == {"name": "A", "price": 1.1, "category": "c", "inventory_count": 2}
        await client.products.update("prod_1", description="")
        assert body_of(api) == {"description": ""}
    api = MockAPI().reply(204)
    async with api.async_client() as client:
        await client.products.archive("prod_1")
    api = MockAPI().reply(json={"data": [{"name": "books", "product_count": 2}]})
    async with api.async_client() as client:
        assert await client.categories.list() == [Category(name="books", product_count=2)]
    assert str(api.last.url) == f"{BASE_URL}/categories"
    api = MockAPI().reply(json=endpoint_json(secret="whsec_c2VjcmV0"))
    async with api.async_client() as client:
        await client.webhook_endpoints.create(url="https://example.com/hooks")
        await client.webhook_endpoints.get("we_1")
        await client.webhook_endpoints.update("we_1", enabled=True)
        await client.webhook_endpoints.rotate_secret("we_1")
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("POST", "/v1/webhook_endpoints"),
        ("GET", "/v1/webhook_endpoints/we_1"),
        ("PATCH", "/v1/webhook_endpoints/we_1"),
        ("POST", "/v1/webhook_endpoints/we_1/rotate_secret"),
    ]
    api = MockAPI().reply(204)
    async with api.async_client() as client:
        await client.webhook_endpoints.delete("we_1")
    api = MockAPI().reply(json=page_json([endpoint_json()], total=1))
    async with api.async_client() as client:
        assert len((await client.webhook_endpoints.list()).data) == 1
        assert [e.id async for e in client.webhook_endpoints.list_all()] == ["we_1"]
    api = MockAPI().reply(json=page_json([event_json()], total=1))
    async with api.async_client() as client:
        assert len((await client.events.list()).data) == 1
        assert [e.id async for e in client.events.list_all(type="order.created")] == ["evt_1"]
    api = MockAPI().reply(json=event_json(deliveries=[]))
    async with api.async_client() as client:
        assert (await client.events.get("evt_1")).deliveries == []
        assert (await client.events.redeliver("evt_1")).id == "evt_1"
    assert str(api.last.url) == f"{BASE_URL}/events/evt_1/redeliver"
