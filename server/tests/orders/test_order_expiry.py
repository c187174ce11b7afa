"""Pending orders expire on time: each process sweeps often enough for the TTL
(``COMMERCE_PENDING_ORDER_TTL_SECONDS``) that an order past it is canceled within
max(30 s, 10 % of the TTL), and several sweeping processes cancel each order once."""

from __future__ import annotations

import asyncio
import time

import pytest

from commerce_api.orders.domain import expiry_sweep_seconds
from tests import helpers
from tests.conftest import KeyFactory, make_settings
from tests.factories import create_product, place_ok, timestamp
from tests.helpers import bearer

TTL_SECONDS = 2


def _expiry_bound(ttl_seconds: int) -> float:
    """How long after its TTL a pending order may still be pending (docs/design.md)."""
    return max(30.0, ttl_seconds / 10)


@pytest.mark.parametrize(
    "ttl", [1, 2, 19, 20, 21, 60, 300, 301, 600, 3600, 11_999, 12_000, 12_001, 86_400, 10**7]
)
def test_the_sweep_interval_leaves_half_the_bound_for_the_sweep_itself(ttl: int) -> None:
    interval = expiry_sweep_seconds(ttl)
    assert 1 <= interval <= 600
    assert interval <= _expiry_bound(ttl) / 2


async def test_orders_past_their_ttl_are_canceled_within_the_bound_by_several_processes(
    database_url: str, make_key: KeyFactory
) -> None:
    settings = make_settings(database_url, pending_order_ttl_seconds=TTL_SECONDS)
    async with helpers.serving(settings) as first, helpers.serving(settings) as second:
        admin_key, client_key = await make_key("admin"), await make_key()
        product = await create_product(first, admin_key, inventory_count=10)
        placed_at = time.monotonic()
        orders = [await place_ok(http, client_key, (product["id"], 2)) for http in (first, second)]
        deadline = placed_at + TTL_SECONDS + _expiry_bound(TTL_SECONDS)
        pending = {order["id"] for order in orders}
        while pending and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            for order_id in list(pending):
                response = await first.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
                if response.json()["status"] == "canceled":
                    pending.discard(order_id)
        assert not pending, f"still pending {_expiry_bound(TTL_SECONDS)} s after their TTL"

        for order in orders:
            response = await second.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
            canceled = response.json()
            waited = timestamp(canceled["canceled_at"]) - timestamp(canceled["created_at"])
            assert waited.total_seconds() >= TTL_SECONDS, "canceled before its TTL"
        stock = await first.get(f"/v1/products/{product['id']}", headers=bearer(client_key))
        assert stock.json()["inventory_count"] == 10  # each order's units given back once
        events = await first.get(
            "/v1/events", params={"type": "order.canceled"}, headers=bearer(client_key)
        )
        assert sorted(event["data"]["id"] for event in events.json()["data"]) == sorted(
            order["id"] for order in orders
        )
