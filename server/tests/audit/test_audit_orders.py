"""Orders in the audit trail, on both backends: placed (by the client key, written with the
order desk's batch), canceled by their client, fulfilled by an admin, expired by the sweeper;
a refused transition or a crash after the change leaves no row."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from commerce_api.accounts.service import CreatedKey
from commerce_api.core.timestamps import utcnow
from commerce_api.orders import service as orders_service
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.tables import orders
from tests import factories
from tests.audit.helpers import by, key_actor, trail
from tests.audit.test_audit_products import Crash, principal_of
from tests.helpers import bearer

PENDING = {"status": [None, "pending"]}


async def test_an_orders_life_is_recorded_with_each_actor(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret, inventory_count=10)
    first = await factories.place_ok(client, customer.secret, (product["id"], 1))
    second = await factories.place_ok(client, customer.secret, (product["id"], 1))
    fulfilled = await client.post(f"/v1/orders/{first['id']}/fulfill", headers=bearer(admin.secret))
    assert fulfilled.status_code == 200
    canceled = await client.post(
        f"/v1/orders/{second['id']}/cancel", headers=bearer(customer.secret)
    )
    assert canceled.status_code == 200

    placed, done = await trail(db, target_id=first["id"])
    assert (placed["action"], by(placed), placed["changes"]) == (
        "order.create",
        key_actor(customer.id),
        PENDING,
    )
    assert placed["created_at"] == first["created_at"]
    assert placed["target"] == {"type": "order", "id": first["id"]}
    assert (done["action"], by(done)) == ("order.fulfill", key_actor(admin.id))
    assert done["changes"] == {"status": ["pending", "fulfilled"]}
    _, cancel = await trail(db, target_id=second["id"])
    assert (cancel["action"], by(cancel)) == ("order.cancel", key_actor(customer.id))
    assert cancel["changes"] == {"status": ["pending", "canceled"]}


async def test_a_refused_transition_leaves_no_row(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret)
    order = await factories.place_ok(client, customer.secret, (product["id"], 1))
    await client.post(f"/v1/orders/{order['id']}/cancel", headers=bearer(customer.secret))
    before = await trail(db, target_id=order["id"])
    again = await client.post(f"/v1/orders/{order['id']}/fulfill", headers=bearer(admin.secret))
    assert again.status_code == 409
    refused = await client.post(
        f"/v1/orders/{order['id']}/fulfill", headers=bearer(customer.secret)
    )
    assert refused.status_code in (403, 409)
    assert await trail(db, target_id=order["id"]) == before
    assert [row["action"] for row in before] == ["order.create", "order.cancel"]


async def test_a_refused_order_leaves_no_row(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret, inventory_count=1)
    response = await factories.post_order(
        client, customer.secret, factories.order_body((product["id"], 5))
    )
    assert response.status_code == 409
    assert await trail(db, action="order.create") == []


async def test_a_crash_after_a_fulfil_rolls_back_its_row(
    db: Database, settings: Settings, admin: CreatedKey, customer: CreatedKey
) -> None:
    product_id = await factories.new_product(db, stock=3)
    order = await factories.place_order(db, principal_of(customer), (product_id, 1))

    async def fulfil_then_crash() -> None:
        async with db.write() as conn:
            await orders_service.fulfill_order(
                conn, principal_of(admin), order["id"], settings.environment
            )
            raise Crash

    with pytest.raises(Crash):
        await fulfil_then_crash()
    rows = await trail(db, target_id=order["id"])
    assert [row["action"] for row in rows] == ["order.create"]


async def test_a_batch_of_orders_writes_a_row_per_order_in_its_commit(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret, inventory_count=100)
    placed = await asyncio.gather(  # at once: the order desk places them in batches
        *(factories.place_ok(client, customer.secret, (product["id"], 1)) for _ in range(12))
    )
    order_ids = {order["id"] for order in placed}
    rows = await trail(db, action="order.create")
    assert {row["target"]["id"] for row in rows} == order_ids
    assert {by(row) for row in rows} == {key_actor(customer.id)}
    assert all(row["changes"] == PENDING for row in rows)


async def test_the_sweeper_expires_orders_as_the_system(db: Database, customer: CreatedKey) -> None:
    product_id = await factories.new_product(db, stock=3)
    order = await factories.place_order(db, principal_of(customer), (product_id, 1))
    async with db.write() as conn:
        old = utcnow() - timedelta(hours=2)
        await conn.execute(update(orders).where(orders.c.id == order["id"]).values(created_at=old))
    assert await orders_service.expire_pending_orders(db, 3600) == 1
    _, expired = await trail(db, target_id=order["id"])
    assert (expired["action"], by(expired)) == ("order.cancel", ("system", "sweeper"))
    assert expired["changes"] == {"status": ["pending", "canceled"]}


async def test_the_cli_fulfils_as_the_system(db: Database, customer: CreatedKey) -> None:
    product_id = await factories.new_product(db, stock=3)
    order = await factories.place_order(db, principal_of(customer), (product_id, 1))
    async with db.write() as conn:
        await orders_service.fulfill_order(conn, None, order["id"], "production")
    _, done = await trail(db, target_id=order["id"])
    assert (done["action"], by(done)) == ("order.fulfill", ("system", "cli"))
