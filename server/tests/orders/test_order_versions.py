"""Order versions (issue 31): an order is at version 1 when placed and one more at each change
(fulfilled, canceled, expired); the order, the list and each event's ``data`` show it, so a
webhook receiver can drop a stale delivery. Both backends. (That the deliveries carry it:
``tests/webhooks/test_webhook_recovery.py``.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import update

from commerce_api.core.timestamps import utcnow
from commerce_api.orders import service as order_service
from commerce_api.storage.db import Database
from commerce_api.storage.tables import orders
from tests.factories import create_product, place_ok
from tests.helpers import bearer, list_page
from tests.orders.test_orders import action


async def _order(client: httpx.AsyncClient, key: str, order_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/orders/{order_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    order: dict[str, Any] = response.json()
    return order


async def _events_of(client: httpx.AsyncClient, key: str, order_id: str) -> list[dict[str, Any]]:
    """The order's events, oldest first."""
    page = await list_page(client, "/v1/events", key, order_id=order_id)
    return list(reversed(page["data"]))


async def test_fulfilment_moves_the_version_from_1_to_2_in_the_order_and_its_events(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await create_product(client, admin_key)
    placed = await place_ok(client, client_key, (product["id"], 1))
    assert placed["version"] == 1
    assert (await _order(client, client_key, placed["id"]))["version"] == 1

    fulfilled = await action(client, admin_key, placed["id"], "fulfill")
    assert fulfilled.status_code == 200, fulfilled.text
    assert fulfilled.json()["version"] == 2
    assert (await _order(client, client_key, placed["id"]))["version"] == 2
    listed = await list_page(client, "/v1/orders", client_key)
    assert [(o["id"], o["version"]) for o in listed["data"]] == [(placed["id"], 2)]

    created_event, fulfilled_event = await _events_of(client, client_key, placed["id"])
    assert (created_event["type"], created_event["data"]["version"]) == ("order.created", 1)
    assert (fulfilled_event["type"], fulfilled_event["data"]["version"]) == ("order.fulfilled", 2)
    assert created_event["created_at"] <= fulfilled_event["created_at"]
    detail = await client.get(f"/v1/events/{fulfilled_event['id']}", headers=bearer(client_key))
    assert detail.json()["data"]["version"] == 2
    assert detail.json()["created_at"] == fulfilled_event["created_at"]


async def test_a_cancel_moves_the_version_once_and_a_refused_change_not_at_all(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await create_product(client, admin_key)
    placed = await place_ok(client, client_key, (product["id"], 1))

    canceled = await action(client, client_key, placed["id"], "cancel")
    assert canceled.json()["version"] == 2
    for verb, key in (("cancel", client_key), ("fulfill", admin_key)):
        refused = await action(client, key, placed["id"], verb)
        assert refused.status_code == 409
    assert (await _order(client, client_key, placed["id"]))["version"] == 2
    events = await _events_of(client, client_key, placed["id"])
    assert [(e["type"], e["data"]["version"]) for e in events] == [
        ("order.created", 1),
        ("order.canceled", 2),
    ]


async def test_expiry_is_a_change_of_its_own_version(
    client: httpx.AsyncClient, admin_key: str, client_key: str, db: Database
) -> None:
    product = await create_product(client, admin_key)
    placed = await place_ok(client, client_key, (product["id"], 1))
    async with db.write() as conn:
        long_ago = utcnow() - timedelta(hours=2)
        await conn.execute(
            update(orders).where(orders.c.id == placed["id"]).values(created_at=long_ago)
        )

    assert await order_service.expire_pending_orders(db, ttl_seconds=3600) == 1

    expired = await _order(client, client_key, placed["id"])
    assert (expired["status"], expired["version"]) == ("canceled", 2)
    events = await _events_of(client, client_key, placed["id"])
    assert [(e["type"], e["data"]["version"]) for e in events] == [
        ("order.created", 1),
        ("order.canceled", 2),
    ]
