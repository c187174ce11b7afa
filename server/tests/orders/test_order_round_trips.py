"""How many times an order batch waits on the wire to PostgreSQL (issue 32, "Orders that do not
wait on the wire"): counted by a relay between the service and the server
(``tests.round_trips``), so a statement added to the batch, or a ping before it, fails here.

Four for a batch of new keyed orders, however many: ``BEGIN``; the keys' claim and the products
read (one statement); the products locked and checked, the orders, lines, events, deliveries
and audit rows, the keys' outcomes, the stock and its notification (one statement); ``COMMIT``.
Two of them (that statement and the commit) while the batch holds its products.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from commerce_api.accounts.service import Principal
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.idempotency.service import KeyedRequest
from commerce_api.orders.batch_plan import OrderRequest, PlacementResult
from commerce_api.orders.placement import place_batch
from commerce_api.storage.bulk import insert_rows
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys, webhook_deliveries, webhook_endpoints
from tests import factories
from tests.round_trips import counting_relay

pytestmark = pytest.mark.postgresql

BATCH_ROUND_TRIPS = 4


async def new_endpoint(db: Database, account_id: str, event_types: list[str]) -> None:
    now = utcnow()
    row = {
        "id": new_id("we"),
        "account_id": account_id,
        "url": "https://receiver.example/hooks",
        "event_types": event_types,
        "enabled": True,
        "secret_encrypted": "not used here",
        "created_at": now,
        "updated_at": now,
    }
    async with db.write() as conn:
        await insert_rows(conn, webhook_endpoints, [row])


def keyed_orders(principal: Principal, product_id: str, keys: list[str]) -> list[OrderRequest]:
    assert principal.account_id is not None
    return [
        OrderRequest(
            principal,
            factories.order_create((product_id, 1)),
            KeyedRequest(principal.account_id, key, f"print-{key}"),
        )
        for key in keys
    ]


async def count(db: Database, statement: Any) -> int:
    async with db.read() as conn:
        return int(await conn.scalar(statement) or 0)


@pytest.mark.parametrize("orders", [1, 16])
async def test_a_batch_of_keyed_orders_waits_on_the_wire_four_times(
    postgresql_database_url: str, orders: int
) -> None:
    box = SecretBox("round trips test key")
    async with counting_relay(postgresql_database_url) as relay:
        db = Database(relay.url_for(postgresql_database_url))
        try:
            customer = await factories.new_customer(db, "Round trips")
            principal = customer.principal
            assert principal.account_id is not None
            product_id = await factories.new_product(db, stock=100)
            await new_endpoint(db, principal.account_id, [])  # every event
            await new_endpoint(db, principal.account_id, ["order.canceled"])  # not this one

            async def batch(keys: list[str]) -> int:
                before = relay.turns
                async with db.write_batch() as conn:
                    results = await place_batch(
                        conn,
                        keyed_orders(principal, product_id, keys),
                        currency="USD",
                        secret_box=box,
                    )
                assert all(isinstance(r, PlacementResult) and r.status == 201 for r in results)
                return relay.turns - before

            await batch(["warm-up"])  # the connection prepares its statements once
            trips = await batch([f"order-{n}" for n in range(orders)])

            assert trips == BATCH_ROUND_TRIPS
            assert await count(db, select(func.count()).select_from(webhook_deliveries)) == (
                orders + 1  # one delivery per order, to the endpoint that wants order.created
            )
            assert await count(
                db, select(func.count()).where(idempotency_keys.c.state == "done")
            ) == (orders + 1)
        finally:
            await db.dispose()
