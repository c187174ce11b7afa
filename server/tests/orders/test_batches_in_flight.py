"""Two order batches of one process in their transactions at once (PostgreSQL,
``COMMERCE_ORDER_BATCHES_IN_FLIGHT=2``): they overlap, and the row locks keep the outcome what
batches taking turns would give — no oversell, one order per ``Idempotency-Key``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from commerce_api.core.errors import APIError
from commerce_api.idempotency.service import KeyedRequest
from commerce_api.orders import desk, placement
from commerce_api.orders.batch_plan import OrderRequest, PlacementResult
from commerce_api.storage.crypto import SecretBox
from tests import factories

pytestmark = pytest.mark.postgresql


async def test_two_batches_in_flight_overlap_and_sell_exactly_the_stock(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = most = 0
    real_place_batch = placement.place_batch

    async def slow_place_batch(*args: Any, **kwargs: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await asyncio.sleep(0.02)  # a database further away: the next batch forms meanwhile
            return await real_place_batch(*args, **kwargs)
        finally:
            running -= 1

    monkeypatch.setattr(placement, "place_batch", slow_place_batch)
    async with factories.opened(postgresql_database_url) as db:
        customer = await factories.new_customer(db, "In flight")
        principal = customer.principal
        account_id = principal.account_id
        assert account_id is not None
        hot = await factories.new_product(db, stock=30)
        orders = desk.OrderDesk(db, "USD", SecretBox("in flight test key"), in_flight=2)

        async def place(key: str | None) -> int:
            keyed = None if key is None else KeyedRequest(account_id, key, "print")
            request = OrderRequest(principal, factories.order_create((hot, 1)), keyed)
            try:
                result = await orders.place(request)
            except APIError as exc:
                return exc.status
            assert isinstance(result, PlacementResult)
            return result.status

        async def in_waves(calls: list[Any]) -> list[int]:
            tasks = []
            for start in range(0, len(calls), 6):  # arriving while the batches before wait
                tasks += [asyncio.create_task(call) for call in calls[start : start + 6]]
                await asyncio.sleep(0.005)
            return list(await asyncio.gather(*tasks))

        # 40 orders without a key and 10 keys sent twice each, for 30 units.
        keys = [f"key-{n}" for n in range(10)]
        statuses = await in_waves(
            [place(None) for _ in range(40)] + [place(key) for key in keys + keys]
        )
        await orders.close()

        async with db.read() as conn:
            stock = await conn.scalar(
                text("SELECT inventory_count FROM products WHERE id = :id"), {"id": hot}
            )
            placed = await conn.scalar(text("SELECT count(*) FROM orders"))
            events = await conn.scalar(text("SELECT count(*) FROM events"))
    assert most == 2
    assert stock == 0
    assert placed == 30
    assert events == 30
    assert statuses.count(409) + statuses.count(201) == len(statuses)
    # Each key's two requests got one answer: both 201 (one order, replayed) or both 409.
    for n in range(10):
        assert statuses[40 + n] == statuses[50 + n]
    assert statuses[:40].count(201) + statuses[40:50].count(201) == 30
