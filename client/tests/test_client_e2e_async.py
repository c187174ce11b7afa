"""The asynchronous client against a real ``commerce-api serve`` process (see conftest.py)."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import pytest
from client_testing import BOOKS, E2EServer

import commerce_client
from commerce_client import AsyncClient, Order, ShippingAddressParam, Tracking

pytestmark = pytest.mark.slow

ADDRESS: ShippingAddressParam = {
    "street": "2 Side St",
    "city": "Shelbyville",
    "postal_code": "54321",
    "country": "CA",
}


async def place(api: AsyncClient, product_id: str, quantity: int = 2) -> Order:
    return await api.orders.create(
        customer_id=f"cus_{uuid.uuid4().hex}",
        items=[{"product_id": product_id, "quantity": quantity}],
        shipping_address=ADDRESS,
    )


async def test_products_list_get_and_list_all(
    async_api: AsyncClient, e2e_server: E2EServer
) -> None:
    page = await async_api.products.list(category=BOOKS, limit=5, offset=5)
    assert [p.id for p in page.data] == e2e_server.books[5:10]
    assert page.pagination.offset == 5
    product = await async_api.products.get(e2e_server.books[0])
    assert product.price == Decimal("19.99")
    walked = [p.id async for p in async_api.products.list_all(category=BOOKS, page_size=7)]
    assert walked == e2e_server.books
    assert async_api.last_rate_limit is not None


async def test_unknown_order_is_not_found(async_api: AsyncClient) -> None:
    with pytest.raises(commerce_client.NotFoundError) as caught:
        await async_api.orders.get("ord_doesnotexist")
    assert caught.value.request_id


async def test_order_lifecycle(async_api: AsyncClient, e2e_server: E2EServer) -> None:
    order = await place(async_api, e2e_server.books[6], quantity=5)
    assert order.status == "pending"
    assert order.total == Decimal("99.95")
    assert order.shipping_address.country == "CA"
    assert await async_api.orders.get(order.id) == order
    listed = [o.id async for o in async_api.orders.list_all(customer_id=order.customer_id)]
    assert listed == [order.id]
    canceled = await async_api.orders.cancel(order.id)
    assert canceled.status == "canceled"
    assert canceled.canceled_at is not None
    with pytest.raises(commerce_client.ConflictError):
        await async_api.orders.fulfill(order.id)


async def test_fulfil_in_the_sandbox(async_api: AsyncClient, e2e_server: E2EServer) -> None:
    order = await place(async_api, e2e_server.books[7])
    fulfilled = await async_api.orders.fulfill(order.id)
    assert fulfilled.status == "fulfilled"
    page = await async_api.orders.list(status="fulfilled", customer_id=order.customer_id)
    assert [o.id for o in page.data] == [order.id]


async def test_a_tracking_url_must_be_https_and_its_error_names_it(
    async_api: AsyncClient, e2e_server: E2EServer
) -> None:
    order = await place(async_api, e2e_server.books[8])
    with pytest.raises(commerce_client.ValidationFailedError) as caught:
        await async_api.orders.fulfill(
            order.id,
            tracking={"carrier": "UPS", "number": "1Z", "url": "http://track.example/1Z"},
        )
    assert caught.value.details == "tracking.url"
    assert (await async_api.orders.get(order.id)).status == "pending"
    fulfilled = await async_api.orders.fulfill(
        order.id, tracking={"carrier": "DHL", "number": "42"}
    )
    assert fulfilled.tracking == Tracking(carrier="DHL", number="42", url=None)


async def test_out_of_stock_is_a_conflict(async_api: AsyncClient, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.ConflictError) as caught:
        await place(async_api, e2e_server.sold_out, quantity=1)
    assert caught.value.details == "items[0].quantity"


async def test_concurrent_retries_of_one_key_make_one_order(
    async_api: AsyncClient, e2e_server: E2EServer
) -> None:
    # The same key sent concurrently: one runs, the others get 409 "in flight" and retry
    # (or get the replay), so every call returns the same order.
    key = str(uuid.uuid4())
    customer = f"cus_{uuid.uuid4().hex}"

    async def create() -> Order:
        return await async_api.orders.create(
            customer_id=customer,
            items=[{"product_id": e2e_server.books[8], "quantity": 1}],
            shipping_address=ADDRESS,
            idempotency_key=key,
        )

    orders = await asyncio.gather(*(create() for _ in range(4)))
    assert len({order.id for order in orders}) == 1
    page = await async_api.orders.list(customer_id=customer)
    assert page.pagination.total == 1


async def test_an_unknown_key_is_an_authentication_error(e2e_server: E2EServer) -> None:
    async with AsyncClient(api_key="sk_sandbox_" + "y" * 32, base_url=e2e_server.base_url) as api:
        with pytest.raises(commerce_client.AuthenticationError):
            await api.products.get(e2e_server.books[0])


async def test_webhook_endpoint_lifecycle(async_api: AsyncClient) -> None:
    created = await async_api.webhook_endpoints.create(url="http://127.0.0.1:9/async-hooks")
    assert created.secret.startswith("whsec_")
    assert created.events == []
    assert (await async_api.webhook_endpoints.get(created.id)).id == created.id
    assert created.id in [e.id async for e in async_api.webhook_endpoints.list_all()]
    assert (await async_api.webhook_endpoints.list()).pagination.total >= 1
    updated = await async_api.webhook_endpoints.update(created.id, description="renamed")
    assert updated.description == "renamed"
    rotated = await async_api.webhook_endpoints.rotate_secret(created.id)
    assert rotated.secret != created.secret
    await async_api.webhook_endpoints.delete(created.id)
    with pytest.raises(commerce_client.NotFoundError):
        await async_api.webhook_endpoints.get(created.id)


async def test_events_record_orders_and_their_deliveries(
    async_api: AsyncClient, e2e_server: E2EServer
) -> None:
    endpoint = await async_api.webhook_endpoints.create(url="http://127.0.0.1:9/async-events")
    try:
        order = await place(async_api, e2e_server.books[9])
        await async_api.orders.cancel(order.id)
        matching = [
            event
            async for event in async_api.events.list_all(type="order.canceled")
            if isinstance(event.data, Order) and event.data.id == order.id
        ]
        assert len(matching) == 1
        assert (await async_api.events.list(type="order.canceled")).pagination.total >= 1
        event = await async_api.events.get(matching[0].id)
        (delivery,) = [d for d in event.deliveries if d.endpoint_id == endpoint.id]
        assert delivery.status == "pending"  # this server runs no dispatcher
        assert delivery.attempts == []
        assert delivery.last_attempt is None
        assert delivery.next_attempt_at is not None
        assert (await async_api.events.redeliver(event.id)).id == event.id
    finally:
        await async_api.webhook_endpoints.delete(endpoint.id)


async def test_list_all_sees_each_order_once_while_orders_arrive(
    async_api: AsyncClient, e2e_server: E2EServer
) -> None:
    customer = f"cus_{uuid.uuid4().hex}"

    async def order_now() -> str:
        order = await async_api.orders.create(
            customer_id=customer,
            items=[{"product_id": e2e_server.books[7], "quantity": 1}],
            shipping_address=ADDRESS,
        )
        return order.id

    placed = [await order_now() for _ in range(5)]
    seen = []
    async for order in async_api.orders.list_all(customer_id=customer, page_size=2):
        seen.append(order.id)
        await order_now()  # a newer order at each step: it would shift offsets, never the cursor
    assert seen == placed[::-1]
    assert (await async_api.orders.list(customer_id=customer)).pagination.total == 10
