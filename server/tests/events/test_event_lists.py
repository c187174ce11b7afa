"""``GET /v1/events`` as issue 31 has it: newest first, ``order_id``, ``type``,
``created_gte`` / ``created_lt``, and the cursor ``starting_after``, on both backends; and the
migration that gives the events written before it their ``order_id``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import select, update

from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import format_timestamp
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events
from tests.conftest import KeyFactory
from tests.events.test_events import a_history, cancel, fulfil, list_events
from tests.factories import place_ok
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import account_of, create_product


def ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["data"]]


async def set_times(db: Database, event_ids: list[str], start: datetime) -> None:
    """Move the events to ``start``, ``start`` + 1 s, … in the given order."""
    async with db.write() as conn:
        for index, event_id in enumerate(event_ids):
            created = start + timedelta(seconds=index)
            await conn.execute(
                update(events).where(events.c.id == event_id).values(created_at=created)
            )


async def test_order_id_lists_one_orders_events_newest_first(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    history = await a_history(client, admin_key, client_key)
    first, second = history[0][1]["id"], history[2][1]["id"]
    page = await list_events(client, client_key, order_id=first)
    assert [(item["type"], item["data"]["id"]) for item in page["data"]] == [
        ("order.fulfilled", first),
        ("order.created", first),
    ]
    assert page["pagination"]["total"] == 2
    both = await list_events(client, client_key, order_id=second, type="order.canceled")
    assert [item["type"] for item in both["data"]] == ["order.canceled"]
    assert (await list_events(client, client_key, order_id=new_id("ord")))["data"] == []


async def test_another_accounts_order_id_shows_nothing(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key)
    theirs = await place_ok(client, await make_key(), (product_id, 1))
    page = await list_events(client, client_key, order_id=theirs["id"])
    assert page["data"] == []
    assert page["pagination"]["total"] == 0
    assert len((await list_events(client, admin_key, order_id=theirs["id"]))["data"]) == 1


async def test_created_gte_and_created_lt_bound_the_events(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    await a_history(client, admin_key, client_key)
    oldest_first = ids(await list_events(client, client_key))[::-1]
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    await set_times(db, oldest_first, start)
    window = {
        "created_gte": format_timestamp(start + timedelta(seconds=1)),
        "created_lt": format_timestamp(start + timedelta(seconds=3)),
    }
    page = await list_events(client, client_key, **window)
    assert ids(page) == [oldest_first[2], oldest_first[1]]
    assert page["pagination"]["total"] == 2
    typed = await list_events(client, client_key, type="order.created", **window)
    assert ids(typed) == [oldest_first[2]]


async def test_starting_after_pages_through_each_event_once_while_orders_arrive(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    await a_history(client, admin_key, client_key)
    await a_history(client, admin_key, client_key)
    existing = ids(await list_events(client, client_key))
    product_id = await create_product(client, admin_key)
    seen: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        page = await list_events(client, client_key, limit=3, **cursor)
        seen += ids(page)
        assert page["pagination"]["has_more"] == (len(seen) < len(existing))
        if not page["pagination"]["has_more"]:
            break
        cursor = {"starting_after": seen[-1]}
        order = await place_ok(client, client_key, (product_id, 1))
        await cancel(client, client_key, order["id"])
    assert seen == existing


async def test_starting_after_keeps_the_type_filter(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    history = await a_history(client, admin_key, client_key)
    everything = ids(await list_events(client, client_key))  # canceled, created, fulfilled, created
    page = await list_events(client, client_key, type="order.created", starting_after=everything[0])
    assert [item["data"]["id"] for item in page["data"]] == [
        history[2][1]["id"],
        history[0][1]["id"],
    ]
    assert page["pagination"] == {"total": 2, "limit": 20, "offset": 0, "has_more": False}
    page = await list_events(client, client_key, type="order.created", starting_after=everything[1])
    assert page["pagination"] == {"total": 2, "limit": 20, "offset": 1, "has_more": False}


async def test_a_cursor_the_key_cannot_see_is_404_naming_starting_after(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    other = await make_key()
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, other, (product_id, 1))
    [theirs] = ids(await list_events(client, other))
    for cursor in (theirs, new_id("evt"), order["id"], "nope"):
        response = await client.get(
            "/v1/events", params={"starting_after": cursor}, headers=bearer(client_key)
        )
        assert_error(response, 404, "not_found", "starting_after")
    admin = await client.get(
        "/v1/events", params={"starting_after": theirs}, headers=bearer(admin_key)
    )
    assert admin.status_code == 200, admin.text


async def test_each_event_records_its_order(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    await fulfil(client, admin_key, order["id"])
    account_id = await account_of(db, client_key)
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(events.c.type, events.c.order_id).where(events.c.account_id == account_id)
            )
        ).all()
    assert sorted(rows) == [("order.created", order["id"]), ("order.fulfilled", order["id"])]
