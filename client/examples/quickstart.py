"""A tour of every resource of the Commerce API client, sync then async.

    COMMERCE_API_KEY=sk_sandbox_… COMMERCE_BASE_URL=http://localhost:8000/v1 \
        .venv/bin/python client/examples/quickstart.py

(`make serve` prints a sandbox key; it serves http://localhost:8000/v1.)
"""

from __future__ import annotations

import asyncio
import uuid

import commerce_client
from commerce_client import AsyncClient, Client, Order, ShippingAddressParam

ADDRESS: ShippingAddressParam = {
    "street": "1 Main St",
    "city": "Springfield",
    "postal_code": "12345",
    "country": "US",
}


def tour(client: Client) -> None:
    # Products: one page, every page (lazily), one product.
    page = client.products.list(limit=5)
    print(f"{page.pagination.total} products; the first {len(page.data)}:")
    for item in page.data:
        print(f"  {item.id}  {item.name:<30} {item.price:>10} ({item.category})")
    by_category: dict[str, int] = {}
    for item in client.products.list_all():
        by_category[item.category] = by_category.get(item.category, 0) + 1
    print("per category:", by_category)
    product = client.products.get(page.data[0].id)
    print(f"{product.name}: {product.inventory_count} in stock")

    # A webhook endpoint, so the order events below have somewhere to go.
    endpoint = client.webhook_endpoints.create(
        url="http://localhost:9000/webhooks", events=["order.created"], description="quickstart"
    )
    print(f"endpoint {endpoint.id}; its secret (shown once): {endpoint.secret}")

    # Orders: create (retried safely with a generated Idempotency-Key), read, list, act.
    order = client.orders.create(
        customer_id=f"cus_{uuid.uuid4().hex[:8]}",
        items=[{"product_id": product.id, "quantity": 2}],
        shipping_address=ADDRESS,
    )
    print(f"order {order.id}: {order.status}, {order.total} {order.currency}")
    assert client.orders.get(order.id).id == order.id
    recent = client.orders.list(status="pending", limit=10)
    print(f"{recent.pagination.total} pending orders")
    mine = [o.id for o in client.orders.list_all(customer_id=order.customer_id)]
    print("this customer's orders:", mine)
    print("fulfilled:", client.orders.fulfill(order.id).fulfilled_at)
    try:
        client.orders.cancel(order.id)
    except commerce_client.ConflictError as exc:
        print("cannot cancel a fulfilled order:", exc.message)

    # Events and their deliveries.
    for event in client.events.list(type="order.created", limit=3).data:
        if isinstance(event.data, Order):
            print(f"{event.id} {event.type} for {event.data.id}")
    for event in client.events.list_all(type="order.fulfilled"):
        detailed = client.events.get(event.id)
        for delivery in detailed.deliveries:
            tries = len(delivery.attempts)
            print(f"  → {delivery.endpoint_id}: {delivery.status} after {tries} attempts")
        client.events.redeliver(event.id)
        break

    # Manage the endpoint, then remove it.
    print([e.url for e in client.webhook_endpoints.list().data])
    print([e.id for e in client.webhook_endpoints.list_all()])
    client.webhook_endpoints.update(endpoint.id, events=[], description=None)
    print("enabled:", client.webhook_endpoints.get(endpoint.id).enabled)
    rotated = client.webhook_endpoints.rotate_secret(endpoint.id)
    print("new secret:", rotated.secret)
    client.webhook_endpoints.delete(endpoint.id)

    if client.last_rate_limit is not None:
        limit = client.last_rate_limit
        print(f"{limit.remaining}/{limit.limit} requests left until {limit.reset_at:%H:%M} UTC")

    # Per-call options, one call's response metadata, and the error every 4xx/5xx shares.
    quick = client.with_options(timeout=2.0, max_retries=0, extra_headers={"X-Trace": "tour"})
    print("quick:", quick.products.list(limit=1).pagination.total)
    result = client.with_response(client.orders.get, order.id)
    print(f"{result.data.id}: {result.response.status_code}, request {result.response.request_id}")
    try:
        client.products.get("prod_missing")
    except commerce_client.APIStatusError as exc:
        print(f"{exc.status_code} {exc.request_id}: {exc.body}")


async def async_tour(client: AsyncClient) -> None:
    first = await client.products.list(limit=1)
    async for item in client.products.list_all():
        print("async:", item.name)
        break
    product = await client.products.get(first.data[0].id)
    order = await client.orders.create(
        customer_id="cus_async",
        items=[{"product_id": product.id, "quantity": 1}],
        shipping_address=ADDRESS,
    )
    fetched = await client.with_response(client.orders.get, order.id)
    print("async request id:", fetched.response.request_id)
    await client.orders.list(customer_id="cus_async")
    print("async orders:", [o.id async for o in client.orders.list_all(customer_id="cus_async")])
    await client.orders.cancel(order.id)
    endpoint = await client.webhook_endpoints.create(url="http://localhost:9000/webhooks")
    await client.webhook_endpoints.list()
    print([e.id async for e in client.webhook_endpoints.list_all()])
    await client.webhook_endpoints.get(endpoint.id)
    await client.webhook_endpoints.update(endpoint.id, enabled=False)
    await client.webhook_endpoints.rotate_secret(endpoint.id)
    events = await client.events.list(type="order.canceled", limit=1)
    async for event in client.events.list_all(type="order.canceled"):
        print("async event:", event.id)
        break
    if events.data:
        await client.events.get(events.data[0].id)
        await client.events.redeliver(events.data[0].id)
    await client.webhook_endpoints.delete(endpoint.id)


def main() -> None:
    try:
        with Client() as client:  # COMMERCE_API_KEY, COMMERCE_ENVIRONMENT, COMMERCE_BASE_URL
            tour(client)
    except commerce_client.RateLimitError as exc:
        print(f"Rate limited; retry in {exc.retry_after} s (request {exc.request_id}).")
    except commerce_client.CommerceError as exc:
        print(f"The API said no: {exc}")

    async def run_async() -> None:
        async with AsyncClient() as client:
            await async_tour(client)

    asyncio.run(run_async())


if __name__ == "__main__":
    main()
