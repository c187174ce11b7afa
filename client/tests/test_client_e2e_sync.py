"""The synchronous client against a real ``commerce-api serve`` process (see conftest.py)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from client_testing import ADDRESS, BOOKS, E2EServer

import commerce_client
from commerce_client import Client, Order, Tracking, TrackingParam

pytestmark = pytest.mark.slow


def place(api: Client, product_id: str, quantity: int = 2, **kwargs: str) -> Order:
    customer = f"cus_{uuid.uuid4().hex}"
    return api.orders.create(
        customer_id=customer,
        items=[{"product_id": product_id, "quantity": quantity}],
        shipping_address=ADDRESS,
        **kwargs,
    )


def test_products_list_get_and_list_all(api: Client, e2e_server: E2EServer) -> None:
    page = api.products.list(category=BOOKS, limit=5)
    assert [p.id for p in page.data] == e2e_server.books[:5]
    assert page.pagination.total == len(e2e_server.books)
    assert page.has_more
    product = api.products.get(e2e_server.books[0])
    assert product.price == Decimal("19.99")
    assert product.inventory_count > 0
    walked = [p.id for p in api.products.list_all(category=BOOKS, page_size=10)]
    assert walked == e2e_server.books
    assert api.last_rate_limit is not None
    assert api.last_rate_limit.limit == 10_000  # the account is on the production tier
    assert api.last_rate_limit.remaining < api.last_rate_limit.limit


def test_unknown_product_is_not_found_with_a_request_id(api: Client) -> None:
    with pytest.raises(commerce_client.NotFoundError) as caught:
        api.products.get("prod_doesnotexist")
    assert caught.value.status_code == 404
    assert caught.value.code == "not_found"
    assert caught.value.request_id
    assert caught.value.rate_limit is not None


def test_order_lifecycle(api: Client, e2e_server: E2EServer) -> None:
    order = place(api, e2e_server.books[1])
    assert order.status == "pending"
    assert order.total == Decimal("39.98")
    assert order.currency == "USD"
    assert api.orders.get(order.id) == order
    page = api.orders.list(customer_id=order.customer_id)
    assert [o.id for o in page.data] == [order.id]
    assert next(o.id for o in api.orders.list_all(status="pending", page_size=1)) == order.id
    fulfilled = api.orders.fulfill(order.id)
    assert fulfilled.status == "fulfilled"
    assert fulfilled.fulfilled_at is not None
    with pytest.raises(commerce_client.ConflictError) as caught:
        api.orders.cancel(order.id)
    assert caught.value.details == "status"


def test_fulfil_with_tracking_puts_it_on_the_order(api: Client, e2e_server: E2EServer) -> None:
    order = place(api, e2e_server.books[3])
    assert order.tracking is None
    tracking: TrackingParam = {
        "carrier": "UPS",
        "number": "1Z999AA1",
        "url": "https://track.example/1Z999AA1",
    }
    fulfilled = api.orders.fulfill(order.id, tracking=tracking, idempotency_key=order.id)
    assert fulfilled.tracking == Tracking(
        carrier="UPS", number="1Z999AA1", url="https://track.example/1Z999AA1"
    )
    assert api.orders.get(order.id).tracking == fulfilled.tracking
    # The same key and body again: the first answer, replayed.
    assert api.orders.fulfill(order.id, tracking=tracking, idempotency_key=order.id) == fulfilled


def test_cancel_returns_the_stock(api: Client, e2e_server: E2EServer) -> None:
    product_id = e2e_server.books[2]
    before = api.products.get(product_id).inventory_count
    order = place(api, product_id, quantity=3)
    assert api.products.get(product_id).inventory_count == before - 3
    canceled = api.orders.cancel(order.id)
    assert canceled.status == "canceled"
    assert api.products.get(product_id).inventory_count == before


def test_out_of_stock_is_a_conflict(api: Client, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.ConflictError) as caught:
        place(api, e2e_server.sold_out, quantity=1)
    assert caught.value.details == "items[0].quantity"


def test_an_idempotency_key_replays_the_first_order(api: Client, e2e_server: E2EServer) -> None:
    key = str(uuid.uuid4())
    customer = f"cus_{uuid.uuid4().hex}"
    items: list[commerce_client.OrderItemParam] = [
        {"product_id": e2e_server.books[3], "quantity": 1}
    ]
    first = api.orders.create(
        customer_id=customer, items=items, shipping_address=ADDRESS, idempotency_key=key
    )
    again = api.orders.create(
        customer_id=customer, items=items, shipping_address=ADDRESS, idempotency_key=key
    )
    assert again == first
    with pytest.raises(commerce_client.IdempotencyError):
        api.orders.create(
            customer_id=customer + "x", items=items, shipping_address=ADDRESS, idempotency_key=key
        )


def test_a_validation_error_names_the_parameter(api: Client, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.InvalidRequestError) as caught:
        api.orders.create(
            customer_id="cus_1",
            items=[{"product_id": e2e_server.books[0], "quantity": 1}],
            shipping_address={**ADDRESS, "country": "XX"},
        )
    assert caught.value.status_code == 400
    assert caught.value.details == "shipping_address.country"


def test_an_unknown_key_is_an_authentication_error(e2e_server: E2EServer) -> None:
    with (
        Client(api_key="sk_sandbox_" + "x" * 32, base_url=e2e_server.base_url) as client,
        pytest.raises(commerce_client.AuthenticationError) as caught,
    ):
        client.products.list()
    assert caught.value.status_code == 401


def test_admin_keys_fulfil_but_do_not_place_orders(api: Client, e2e_server: E2EServer) -> None:
    order = place(api, e2e_server.books[4])
    with Client(api_key=e2e_server.admin_key, base_url=e2e_server.base_url) as admin:
        with pytest.raises(commerce_client.PermissionDeniedError):
            place(admin, e2e_server.books[4])
        assert admin.orders.fulfill(order.id).status == "fulfilled"


def test_webhook_endpoint_lifecycle(api: Client) -> None:
    created = api.webhook_endpoints.create(
        url="http://127.0.0.1:9/hooks", events=["order.created"], description="e2e"
    )
    assert created.secret.startswith("whsec_")
    assert created.enabled
    assert api.webhook_endpoints.get(created.id).url == "http://127.0.0.1:9/hooks"
    assert created.id in [e.id for e in api.webhook_endpoints.list_all()]
    assert created.id in [e.id for e in api.webhook_endpoints.list(limit=100).data]
    updated = api.webhook_endpoints.update(created.id, events=[], description=None, enabled=False)
    assert (updated.events, updated.description, updated.enabled) == ([], None, False)
    rotated = api.webhook_endpoints.rotate_secret(created.id)
    assert rotated.secret.startswith("whsec_")
    assert rotated.secret != created.secret
    api.webhook_endpoints.delete(created.id)
    with pytest.raises(commerce_client.NotFoundError):
        api.webhook_endpoints.get(created.id)


def test_events_record_orders_and_their_deliveries(api: Client, e2e_server: E2EServer) -> None:
    endpoint = api.webhook_endpoints.create(url="http://127.0.0.1:9/events")
    try:
        order = place(api, e2e_server.books[5])
        created = [
            event
            for event in api.events.list_all(type="order.created")
            if isinstance(event.data, Order) and event.data.id == order.id
        ]
        assert len(created) == 1
        assert api.events.list(type="order.created", limit=1).pagination.total >= 1
        event = api.events.get(created[0].id)
        assert event.data == order
        (delivery,) = [d for d in event.deliveries if d.endpoint_id == endpoint.id]
        assert delivery.status == "pending"  # this server runs no dispatcher
        assert delivery.attempts == []
        assert delivery.last_attempt is None
        assert delivery.next_attempt_at is not None
        redelivered = api.events.redeliver(event.id)
        assert redelivered.id == event.id
    finally:
        api.webhook_endpoints.delete(endpoint.id)


def test_list_all_sees_each_order_and_event_once_while_orders_arrive(
    api: Client, e2e_server: E2EServer
) -> None:
    customer = f"cus_{uuid.uuid4().hex}"

    def order_now() -> str:
        return api.orders.create(
            customer_id=customer,
            items=[{"product_id": e2e_server.books[6], "quantity": 1}],
            shipping_address=ADDRESS,
        ).id

    first = api.orders.get(order_now())
    placed = [first.id] + [order_now() for _ in range(6)]
    seen_orders = []
    for order in api.orders.list_all(customer_id=customer, page_size=2):
        seen_orders.append(order.id)
        order_now()  # a newer order at each step: it would shift offsets, never the cursor
    assert seen_orders == placed[::-1]

    since = first.created_at  # this test's events are those from then on
    page = api.events.list(created_gte=since, type="order.created", limit=100)
    existing = [event.id for event in page.data]
    assert len(existing) == 14
    seen_events = []
    for event in api.events.list_all(created_gte=since, type="order.created", page_size=3):
        seen_events.append(event.id)
        order_now()
    assert seen_events == existing
