"""Orders: ``/v1/orders`` — creation and its validation, the record, visibility, listing, the
lifecycle and its permissions, stock, events, and atomicity of failed orders."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from commerce_api.accounts import service as accounts
from commerce_api.accounts.keys import hash_key
from commerce_api.app.factory import create_app
from commerce_api.core.ids import new_id
from commerce_api.orders import placement_repository
from commerce_api.orders import service as orders_service
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.tables import api_keys, events, order_items, orders, products
from tests import factories, helpers
from tests.conftest import KeyFactory, make_settings
from tests.factories import ADDRESS, order_body, place_ok
from tests.factories import post_order as place
from tests.helpers import TIMESTAMP, bearer
from tests.http.test_error_contract import assert_error

# Through PgBouncer too (conftest.py): transaction pooling must not change an answer.
pytestmark = pytest.mark.pgbouncer

ORDER_FIELDS = {
    "id",
    "status",
    "customer_id",
    "items",
    "shipping_address",
    "total",
    "currency",
    "created_at",
    "updated_at",
    "fulfilled_at",
    "canceled_at",
    "tracking",
    "version",
}
ITEM_FIELDS = {"product_id", "name", "quantity", "unit_price"}
ORDER_ID = re.compile(r"^ord_[A-Za-z0-9]+$")
EVENT_ID = re.compile(r"^evt_[A-Za-z0-9]+$")

# --- helpers -----------------------------------------------------------------------------------


def fake_items(count: int) -> list[tuple[str, object]]:
    """Well-formed lines for products that need not exist (validation runs first)."""
    return [(f"prod_fake{index}", 1) for index in range(count)]


async def create_product(client: httpx.AsyncClient, admin_key: str, **overrides: object) -> str:
    """A product made over HTTP (10 in stock at 12.50 unless overridden): its id."""
    product_id: str = (await factories.create_product(client, admin_key, **overrides))["id"]
    return product_id


async def action(client: httpx.AsyncClient, key: str, order_id: str, verb: str) -> httpx.Response:
    return await client.post(f"/v1/orders/{order_id}/{verb}", headers=bearer(key))


async def stock(client: httpx.AsyncClient, key: str, product_id: str) -> int:
    response = await client.get(f"/v1/products/{product_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    count: int = response.json()["inventory_count"]
    return count


async def list_orders(client: httpx.AsyncClient, key: str, **params: str | int) -> dict[str, Any]:
    return await helpers.list_page(client, "/v1/orders", key, **params)


async def account_of(db: Database, key: str) -> str:
    async with db.read() as conn:
        account_id = await conn.scalar(
            select(api_keys.c.account_id).where(api_keys.c.key_hash == hash_key(key))
        )
    assert isinstance(account_id, str)
    return account_id


async def event_rows(db: Database, order_id: str | None = None) -> list[Any]:
    async with db.read() as conn:
        rows = list(
            (await conn.execute(select(events).order_by(events.c.created_at, events.c.id))).all()
        )
    return [row for row in rows if order_id is None or row.data["id"] == order_id]


@dataclass(frozen=True)
class Snapshot:
    orders: int
    order_items: int
    events: int
    stock: dict[str, int]


async def snapshot(db: Database) -> Snapshot:
    async with db.read() as conn:

        async def count(table: Any) -> int:
            return int(await conn.scalar(select(func.count()).select_from(table)) or 0)

        inventory = {
            row.id: row.inventory_count
            for row in await conn.execute(select(products.c.id, products.c.inventory_count))
        }
        return Snapshot(
            await count(orders), await count(order_items), await count(events), inventory
        )


def exact(response: httpx.Response, *path: str | int) -> Decimal:
    """A number of the JSON body read as the exact decimal text sent on the wire."""
    value: Any = json.loads(response.text, parse_float=Decimal)
    for part in path:
        value = value[part]
    assert isinstance(value, Decimal | int), value
    return Decimal(value)


# --- create: the record ------------------------------------------------------------------------


async def test_creating_an_order_returns_201_with_the_full_pending_record_and_location(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, price=12.5, name="Notebook")
    response = await place(client, client_key, order_body((product_id, 2)))
    assert response.status_code == 201, response.text
    order = response.json()
    assert set(order) == ORDER_FIELDS
    assert ORDER_ID.match(order["id"])
    assert response.headers["location"] == f"/v1/orders/{order['id']}"
    assert order == {
        "id": order["id"],
        "status": "pending",
        "customer_id": "cus_123",
        "items": [
            {"product_id": product_id, "name": "Notebook", "quantity": 2, "unit_price": 12.5}
        ],
        "shipping_address": {**ADDRESS, "line2": None, "state": None},
        "total": 25,
        "currency": "USD",
        "created_at": order["created_at"],
        "updated_at": order["created_at"],
        "fulfilled_at": None,
        "canceled_at": None,
        "tracking": None,
        "version": 1,
    }
    assert TIMESTAMP.match(order["created_at"])
    assert set(order["items"][0]) == ITEM_FIELDS


async def test_the_created_order_is_readable_at_its_location(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    response = await place(client, client_key, order_body((product_id, 1)))
    fetched = await client.get(response.headers["location"], headers=bearer(client_key))
    assert fetched.status_code == 200
    assert fetched.json() == response.json()


async def test_the_currency_is_the_deployments_setting(
    database_url: str, make_key: KeyFactory
) -> None:
    application = create_app(make_settings(database_url, currency="EUR"))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            product_id = await create_product(http, await make_key("admin"))
            order = await place_ok(http, await make_key(), (product_id, 1))
    assert order["currency"] == "EUR"


async def test_lines_keep_the_request_order_of_items(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    ids = [await create_product(client, admin_key, name=f"P{n}") for n in range(4)]
    wanted = [ids[2], ids[0], ids[3], ids[1]]
    order = await place_ok(client, client_key, *[(pid, n + 1) for n, pid in enumerate(wanted)])
    assert [item["product_id"] for item in order["items"]] == wanted
    assert [item["quantity"] for item in order["items"]] == [1, 2, 3, 4]


async def test_optional_address_fields_line2_and_state_are_kept(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    address = {**ADDRESS, "line2": "Apt 4", "state": "IL"}
    order = await place_ok(client, client_key, (product_id, 1), shipping_address=address)
    assert order["shipping_address"] == address


async def test_omitted_optional_address_fields_are_null(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    # Every order has the same address shape, as Stripe's records do.
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    assert order["shipping_address"] == {**ADDRESS, "line2": None, "state": None}


async def test_a_whole_number_float_quantity_is_accepted_as_an_integer(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    response = await place(client, client_key, order_body((product_id, 2.0)))
    assert response.status_code == 201, response.text
    assert '"quantity":2,' in response.text
    assert response.json()["items"][0]["quantity"] == 2
    assert await stock(client, client_key, product_id) == 8


async def test_limits_at_their_maximum_are_accepted(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    big = await create_product(client, admin_key, inventory_count=10_000)
    order = await place_ok(client, client_key, (big, 10_000), customer_id="c" * 255)
    assert order["items"][0]["quantity"] == 10_000
    assert order["customer_id"] == "c" * 255
    assert await stock(client, client_key, big) == 0


async def test_an_order_of_100_lines_is_accepted(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    now = datetime.now(UTC)
    ids = [new_id("prod") for _ in range(100)]
    async with db.write() as conn:
        await conn.execute(
            products.insert(),
            [
                {
                    "id": pid,
                    "name": f"Item {n}",
                    "description": "",
                    "price_minor": 1,
                    "category": "bulk",
                    "inventory_count": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, pid in enumerate(ids)
            ],
        )
    order = await place_ok(client, client_key, *[(pid, 1) for pid in ids])
    assert [item["product_id"] for item in order["items"]] == ids
    assert order["total"] == 1


# --- create: money -----------------------------------------------------------------------------


async def test_totals_are_exact_decimal_sums(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    dime = await create_product(client, admin_key, price=0.1, name="Dime")
    pen = await create_product(client, admin_key, price=19.99, name="Pen")
    response = await place(client, client_key, order_body((dime, 3), (pen, 7)))
    assert response.status_code == 201, response.text
    assert exact(response, "items", 0, "unit_price") == Decimal("0.1")
    assert exact(response, "items", 1, "unit_price") == Decimal("19.99")
    assert exact(response, "total") == Decimal("140.23")  # 0.30 + 139.93


@pytest.mark.parametrize(
    ("price", "quantity", "total"),
    [(0.1, 3, "0.3"), (19.99, 7, "139.93"), (0.01, 10_000, "100"), (33.33, 3, "99.99")],
)
async def test_a_single_line_total_is_exact(
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    price: float,
    quantity: int,
    total: str,
) -> None:
    product_id = await create_product(client, admin_key, price=price, inventory_count=quantity)
    response = await place(client, client_key, order_body((product_id, quantity)))
    assert response.status_code == 201, response.text
    assert exact(response, "total") == Decimal(total)


async def test_prices_and_names_are_copied_so_catalogue_edits_do_not_change_the_order(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, price=19.99, name="Pen")
    order = await place_ok(client, client_key, (product_id, 7))
    patched = await client.patch(
        f"/v1/products/{product_id}",
        json={"price": 25.0, "name": "Fancy pen"},
        headers=bearer(admin_key),
    )
    assert patched.status_code == 200, patched.text
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json()["items"][0] == {
        "product_id": product_id,
        "name": "Pen",
        "quantity": 7,
        "unit_price": 19.99,
    }
    assert exact(fetched, "total") == Decimal("139.93")
    later = await place_ok(client, client_key, (product_id, 1))
    assert later["items"][0]["unit_price"] == 25
    assert later["items"][0]["name"] == "Fancy pen"


async def test_an_archived_products_order_keeps_its_lines(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, name="Gone soon")
    order = await place_ok(client, client_key, (product_id, 1))
    deleted = await client.delete(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert deleted.status_code == 204
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == order


# --- create: validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "details"),
    [
        (lambda b: b.pop("customer_id"), "customer_id"),
        (lambda b: b.update(customer_id=""), "customer_id"),
        (lambda b: b.update(customer_id="c" * 256), "customer_id"),
        (lambda b: b.update(customer_id=123), "customer_id"),
        (lambda b: b.update(customer_id=None), "customer_id"),
        (lambda b: b.update(customer_id="line\nbreak"), "customer_id"),
        (lambda b: b.pop("items"), "items"),
        (lambda b: b.update(items=[]), "items"),
        (lambda b: b.update(items={"product_id": "prod_x", "quantity": 1}), "items"),
        (lambda b: b.update(items=order_body(*fake_items(101))["items"]), "items"),
        (lambda b: b.update(items=["prod_x"]), "items[0]"),
        (lambda b: b.pop("shipping_address"), "shipping_address"),
        (lambda b: b.update(shipping_address="1 Main Street"), "shipping_address"),
        (lambda b: b.update(status="fulfilled"), "status"),
        (lambda b: b.update(id="ord_mine"), "id"),
        (lambda b: b.update(total=0), "total"),
        (lambda b: b.update(currency="EUR"), "currency"),
    ],
)
async def test_an_invalid_order_names_the_parameter(
    client: httpx.AsyncClient, client_key: str, mutate: Any, details: str
) -> None:
    body = order_body(*fake_items(3))
    mutate(body)
    error = assert_error(await place(client, client_key, body), 400, "invalid_request", details)
    assert f"`{details}`" in error["message"]


@pytest.mark.parametrize(
    "quantity", ["2", 2.5, True, False, 0, -1, 10_001, None, 1e20, [2], {"n": 2}]
)
async def test_a_bad_quantity_is_refused_and_named_by_its_position(
    client: httpx.AsyncClient, client_key: str, quantity: object
) -> None:
    body = order_body(("prod_a", 1), ("prod_b", 1), ("prod_c", quantity))
    assert_error(await place(client, client_key, body), 400, "invalid_request", "items[2].quantity")


@pytest.mark.parametrize(
    ("item", "details"),
    [
        ({"quantity": 1}, "items[1].product_id"),
        ({"product_id": "prod_b"}, "items[1].quantity"),
        ({"product_id": 42, "quantity": 1}, "items[1].product_id"),
        ({"product_id": "", "quantity": 1}, "items[1].product_id"),
        ({"product_id": "prod\x00b", "quantity": 1}, "items[1].product_id"),
        ({"product_id": "prod_b", "quantity": 1, "unit_price": 0.01}, "items[1].unit_price"),
        ({"product_id": "prod_b", "quantity": 1, "name": "Free"}, "items[1].name"),
    ],
)
async def test_a_bad_item_is_named_by_its_position(
    client: httpx.AsyncClient, client_key: str, item: dict[str, object], details: str
) -> None:
    body = order_body(("prod_a", 1))
    body["items"] = [{"product_id": "prod_a", "quantity": 1}, item]
    assert_error(await place(client, client_key, body), 400, "invalid_request", details)


@pytest.mark.parametrize(
    ("address", "details"),
    [
        ({"country": "us"}, "shipping_address.country"),
        ({"country": "XX"}, "shipping_address.country"),
        ({"country": "USA"}, "shipping_address.country"),
        ({"country": "U"}, "shipping_address.country"),
        ({"country": ""}, "shipping_address.country"),
        ({"country": 840}, "shipping_address.country"),
        ({"country": " US"}, "shipping_address.country"),
        ({"country": None}, "shipping_address.country"),
        ({"street": ""}, "shipping_address.street"),
        ({"street": None}, "shipping_address.street"),
        ({"city": ""}, "shipping_address.city"),
        ({"postal_code": ""}, "shipping_address.postal_code"),
        ({"postal_code": 12345}, "shipping_address.postal_code"),
        ({"state": 7}, "shipping_address.state"),
        ({"line2": "a\nb"}, "shipping_address.line2"),
        ({"phone": "555"}, "shipping_address.phone"),
    ],
)
async def test_a_bad_address_names_the_field(
    client: httpx.AsyncClient, client_key: str, address: dict[str, object], details: str
) -> None:
    body = order_body(("prod_a", 1), shipping_address={**ADDRESS, **address})
    assert_error(await place(client, client_key, body), 400, "invalid_request", details)


@pytest.mark.parametrize("missing", ["street", "city", "postal_code", "country"])
async def test_a_missing_address_field_is_named(
    client: httpx.AsyncClient, client_key: str, missing: str
) -> None:
    address = {key: value for key, value in ADDRESS.items() if key != missing}
    body = order_body(("prod_a", 1), shipping_address=address)
    details = f"shipping_address.{missing}"
    error = assert_error(await place(client, client_key, body), 400, "invalid_request", details)
    assert "Missing" in error["message"]


@pytest.mark.parametrize("country", ["GB", "DE", "JP", "BR", "ZA"])
async def test_any_existing_country_code_is_accepted(
    client: httpx.AsyncClient, admin_key: str, client_key: str, country: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(
        client, client_key, (product_id, 1), shipping_address={**ADDRESS, "country": country}
    )
    assert order["shipping_address"]["country"] == country


async def test_a_missing_customer_id_is_named_in_the_message(
    client: httpx.AsyncClient, client_key: str
) -> None:
    body = order_body(("prod_a", 1))
    del body["customer_id"]
    error = assert_error(await place(client, client_key, body), 400, "invalid_request")
    assert error["details"] == "customer_id"
    assert "customer_id" in error["message"]


@pytest.mark.parametrize(
    ("content", "content_type", "status", "details"),
    [
        (b'{"customer_id": ', "application/json", 400, "body"),
        (b"", "application/json", 400, "body"),
        (b"[]", "application/json", 400, "body"),
        (b"null", "application/json", 400, "body"),
        (b"customer_id=c", "application/x-www-form-urlencoded", 415, "Content-Type"),
    ],
)
async def test_a_body_that_is_not_an_order_object_is_refused(
    client: httpx.AsyncClient,
    client_key: str,
    content: bytes,
    content_type: str,
    status: int,
    details: str,
) -> None:
    response = await client.post(
        "/v1/orders",
        content=content,
        headers={**bearer(client_key), "Content-Type": content_type},
    )
    assert_error(response, status, "invalid_request", details)


async def test_an_unknown_product_is_404_naming_the_line(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    real = await create_product(client, admin_key)
    for unknown in ("prod_doesnotexist", "not-an-id"):
        response = await place(client, client_key, order_body((real, 1), (unknown, 1)))
        error = assert_error(response, 404, "not_found", "items[1].product_id")
        assert unknown in error["message"]
    assert await stock(client, client_key, real) == 10


async def test_an_archived_product_cannot_be_ordered(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    await client.delete(f"/v1/products/{product_id}", headers=bearer(admin_key))
    response = await place(client, client_key, order_body((product_id, 1)))
    assert_error(response, 404, "not_found", "items[0].product_id")


async def test_not_enough_stock_is_409_naming_the_quantity(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=3)
    response = await place(client, client_key, order_body((product_id, 4)))
    error = assert_error(response, 409, "invalid_request", "items[0].quantity")
    assert "4 requested, 3 available" in error["message"]
    assert await stock(client, client_key, product_id) == 3


async def test_ordering_the_last_units_empties_the_stock(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=3)
    await place_ok(client, client_key, (product_id, 3))
    assert await stock(client, client_key, product_id) == 0
    response = await place(client, client_key, order_body((product_id, 1)))
    assert_error(response, 409, "invalid_request", "items[0].quantity")


async def test_an_admin_key_cannot_create_orders(
    db: Database, client: httpx.AsyncClient, admin_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    before = await snapshot(db)
    response = await place(client, admin_key, order_body((product_id, 1)))
    assert_error(response, 403, "unauthorized")
    assert await snapshot(db) == before


async def test_creating_an_order_needs_a_key(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/orders", json=order_body(("prod_a", 1)))
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


# --- read and visibility -----------------------------------------------------------------------


async def test_another_accounts_order_is_404_for_every_verb(
    db: Database,
    client: httpx.AsyncClient,
    product_in_stock: str,
    client_key: str,
    make_key: KeyFactory,
) -> None:
    product_id = product_in_stock
    order = await place_ok(client, client_key, (product_id, 1))
    other = await make_key()
    before = await snapshot(db)
    get = await client.get(f"/v1/orders/{order['id']}", headers=bearer(other))
    assert_error(get, 404, "not_found", "id")
    for verb in ("cancel", "fulfill"):
        assert_error(await action(client, other, order["id"], verb), 404, "not_found", "id")
    listed = await list_orders(client, other)
    assert listed["data"] == []
    assert listed["pagination"]["total"] == 0
    assert await snapshot(db) == before
    mine = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert mine.json()["status"] == "pending"


async def test_the_404_for_another_accounts_order_matches_an_unknown_id(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    other = await make_key()
    theirs = (await client.get(f"/v1/orders/{order['id']}", headers=bearer(other))).json()
    unknown_id = new_id("ord")
    unknown = (await client.get(f"/v1/orders/{unknown_id}", headers=bearer(other))).json()
    assert (
        theirs["error"]["message"].replace(order["id"], unknown_id) == unknown["error"]["message"]
    )


@pytest.mark.parametrize("order_id", ["ord_doesnotexist", "prod_abc", "nonsense", "ord_"])
async def test_an_unknown_order_is_404_for_every_verb(
    client: httpx.AsyncClient, client_key: str, order_id: str
) -> None:
    get = await client.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert_error(get, 404, "not_found")
    for verb in ("cancel", "fulfill"):
        assert_error(await action(client, client_key, order_id, verb), 404, "not_found")


async def test_an_admin_key_reads_any_accounts_order(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(admin_key))
    assert fetched.status_code == 200
    assert fetched.json() == order


async def test_reading_orders_needs_a_key(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/orders"), 401, "unauthorized")
    assert_error(await client.get(f"/v1/orders/{new_id('ord')}"), 401, "unauthorized")
    assert_error(await client.post(f"/v1/orders/{new_id('ord')}/cancel"), 401, "unauthorized")


# --- list --------------------------------------------------------------------------------------


async def insert_orders(
    db: Database,
    account_id: str,
    count: int,
    *,
    status: str = "pending",
    customer_id: str = "cus_1",
    same_time_every: int = 1,
) -> list[str]:
    """``count`` orders written directly; ``same_time_every`` of them share a created_at."""
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    ids: list[tuple[datetime, str]] = []
    product_id = await factories.new_product(
        db, 0, name="Thing", price_minor=100, category="things", created_at=start
    )
    async with db.write() as conn:
        for index in range(count):
            created = start + timedelta(seconds=index // same_time_every)
            order_id = new_id("ord")
            await placement_repository.insert_orders(
                conn,
                [
                    {
                        "id": order_id,
                        "account_id": account_id,
                        "status": status,
                        "customer_id": customer_id,
                        "shipping_address": dict(ADDRESS),
                        "total_minor": 100,
                        "currency": "USD",
                        "created_at": created,
                        "updated_at": created,
                    }
                ],
                [
                    {
                        "order_id": order_id,
                        "position": 0,
                        "product_id": product_id,
                        "name": "Thing",
                        "quantity": 1,
                        "unit_price_minor": 100,
                    }
                ],
            )
            ids.append((created, order_id))
    return [order_id for _, order_id in sorted(ids)]


async def test_the_list_shows_only_the_own_accounts_orders_newest_first(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=100)
    other = await make_key()
    mine = [await place_ok(client, client_key, (product_id, 1)) for _ in range(3)]
    theirs = await place_ok(client, other, (product_id, 1))
    page = await list_orders(client, client_key)
    assert page["data"] == mine[::-1]
    assert page["pagination"] == {"total": 3, "limit": 20, "offset": 0, "has_more": False}
    assert (await list_orders(client, other))["data"] == [theirs]


async def test_an_admin_key_lists_every_accounts_orders(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=100)
    first = await place_ok(client, client_key, (product_id, 1))
    second = await place_ok(client, await make_key(), (product_id, 1))
    page = await list_orders(client, admin_key)
    assert [order["id"] for order in page["data"]] == [second["id"], first["id"]]


async def test_paging_visits_each_order_once_newest_first_then_by_id_descending(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    expected = await insert_orders(db, account_id, 25, same_time_every=4)
    seen: list[str] = []
    for offset in range(0, 30, 7):
        page = await list_orders(client, client_key, limit=7, offset=offset)
        seen += [order["id"] for order in page["data"]]
        assert page["pagination"]["has_more"] == (offset + 7 < 25)
        assert page["pagination"]["total"] == 25
    assert seen == expected[::-1]


async def test_list_items_are_full_order_records(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    a = await create_product(client, admin_key, name="A")
    b = await create_product(client, admin_key, name="B")
    order = await place_ok(client, client_key, (a, 1), (b, 2))
    [listed] = (await list_orders(client, client_key))["data"]
    assert set(listed) == ORDER_FIELDS
    assert listed == order


async def test_the_list_limit_is_clamped_to_100_and_offset_past_the_end_is_empty(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    await insert_orders(db, account_id, 3)
    page = await list_orders(client, client_key, limit=1000)
    assert page["pagination"] == {"total": 3, "limit": 100, "offset": 0, "has_more": False}
    past = await list_orders(client, client_key, offset=3)
    assert past["data"] == []
    assert past["pagination"] == {"total": 3, "limit": 20, "offset": 3, "has_more": False}
    one = await list_orders(client, client_key, limit=1, offset=1)
    assert len(one["data"]) == 1
    assert one["pagination"]["has_more"] is True


async def test_the_list_filters_by_status_and_customer(
    db: Database, client: httpx.AsyncClient, client_key: str, make_key: KeyFactory
) -> None:
    account_id = await account_of(db, client_key)
    pending_a = await insert_orders(db, account_id, 2, customer_id="alice")
    fulfilled_a = await insert_orders(db, account_id, 1, status="fulfilled", customer_id="alice")
    canceled_b = await insert_orders(db, account_id, 1, status="canceled", customer_id="bob")
    other_account = await account_of(db, other := await make_key())
    await insert_orders(db, other_account, 2, customer_id="alice")

    async def ids(**params: str | int) -> list[str]:
        page = await list_orders(client, client_key, **params)
        assert page["pagination"]["total"] == len(page["data"])
        return [order["id"] for order in page["data"]]

    assert sorted(await ids(status="pending")) == sorted(pending_a)
    assert await ids(status="fulfilled") == fulfilled_a
    assert await ids(status="canceled") == canceled_b
    assert sorted(await ids(customer_id="alice")) == sorted(pending_a + fulfilled_a)
    assert await ids(customer_id="bob") == canceled_b
    assert await ids(customer_id="bob", status="pending") == []
    assert await ids(customer_id="carol") == []
    assert len((await list_orders(client, other, customer_id="alice"))["data"]) == 2


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"status": "shipped"}, "status"),
        ({"status": "PENDING"}, "status"),
        ({"customer_id": ""}, "customer_id"),
        ({"limit": 0}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"offset": -1}, "offset"),
        ({"offset": "1.5"}, "offset"),
        ({"sort": "created_at"}, "sort"),
    ],
)
async def test_bad_list_parameters_are_named(
    client: httpx.AsyncClient, client_key: str, params: dict[str, str | int], details: str
) -> None:
    response = await client.get("/v1/orders", params=params, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", details)


# --- lifecycle ---------------------------------------------------------------------------------


async def test_the_owner_cancels_a_pending_order_and_its_stock_comes_back(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    a = await create_product(client, admin_key, inventory_count=5)
    b = await create_product(client, admin_key, inventory_count=5)
    order = await place_ok(client, client_key, (a, 2), (b, 5))
    assert (await stock(client, client_key, a), await stock(client, client_key, b)) == (3, 0)
    response = await action(client, client_key, order["id"], "cancel")
    assert response.status_code == 200, response.text
    canceled = response.json()
    assert set(canceled) == ORDER_FIELDS
    assert canceled["status"] == "canceled"
    assert TIMESTAMP.match(canceled["canceled_at"])
    assert canceled["updated_at"] == canceled["canceled_at"]
    assert canceled["updated_at"] >= order["updated_at"]
    assert canceled["fulfilled_at"] is None
    assert canceled["created_at"] == order["created_at"]
    assert canceled["items"] == order["items"]
    assert canceled["total"] == order["total"]
    assert (await stock(client, client_key, a), await stock(client, client_key, b)) == (5, 5)
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == canceled


async def test_canceling_an_archived_products_order_restores_its_units(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=5)
    order = await place_ok(client, client_key, (product_id, 2))
    await client.delete(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert (await action(client, client_key, order["id"], "cancel")).status_code == 200
    assert (await snapshot(db)).stock[product_id] == 5


async def test_an_admin_key_fulfils_an_order(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 2))
    response = await action(client, admin_key, order["id"], "fulfill")
    assert response.status_code == 200, response.text
    fulfilled = response.json()
    assert set(fulfilled) == ORDER_FIELDS
    assert fulfilled["status"] == "fulfilled"
    assert TIMESTAMP.match(fulfilled["fulfilled_at"])
    assert fulfilled["updated_at"] == fulfilled["fulfilled_at"]
    assert fulfilled["canceled_at"] is None
    assert await stock(client, client_key, product_id) == 8  # fulfilment keeps the reservation
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == fulfilled


@pytest.mark.parametrize(
    ("actor", "quantity", "verb", "status", "stock_after"),
    [
        pytest.param("admin", 4, "cancel", "canceled", 10, id="an-admin-cancels-any-accounts"),
        pytest.param("client", 1, "fulfill", "fulfilled", 9, id="in-the-sandbox-the-owner-fulfils"),
    ],
)
async def test_who_may_cancel_or_fulfil_an_order(
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    actor: str,
    quantity: int,
    verb: str,
    status: str,
    stock_after: int,
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, quantity))
    response = await action(
        client, admin_key if actor == "admin" else client_key, order["id"], verb
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == status
    assert await stock(client, client_key, product_id) == stock_after


@pytest.mark.parametrize(
    ("first", "second", "status"),
    [
        ("cancel", "cancel", "canceled"),
        ("cancel", "fulfill", "canceled"),
        ("fulfill", "fulfill", "fulfilled"),
        ("fulfill", "cancel", "fulfilled"),
    ],
)
async def test_any_transition_from_a_final_status_is_409_and_changes_nothing(
    db: Database,
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    first: str,
    second: str,
    status: str,
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 3))
    done = await action(client, admin_key, order["id"], first)
    assert done.status_code == 200, done.text
    before = await snapshot(db)
    for key in (client_key, admin_key):
        response = await action(client, key, order["id"], second)
        error = assert_error(response, 409, "invalid_request", "status")
        past = {"cancel": "canceled", "fulfill": "fulfilled"}[second]
        assert error["message"] == f"The order is {status}; only pending orders can be {past}."
    assert await snapshot(db) == before
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == done.json()


async def test_actions_take_no_body_parameters_or_query(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    response = await client.post(
        f"/v1/orders/{order['id']}/cancel?reason=late", headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "reason")


@dataclass(frozen=True)
class Production:
    http: httpx.AsyncClient
    client_key: str
    other_key: str
    admin_key: str


@pytest.fixture
async def production(database_url: str) -> AsyncIterator[Production]:
    """An app running as a production instance, with keys issued for production."""
    settings: Settings = make_settings(database_url, environment="production")
    application = create_app(settings)
    db = Database(database_url)
    try:
        async with db.write() as conn:
            secrets = []
            for _ in range(2):
                account_id = await accounts.create_account(conn, "Live shop", "production")
                key = await accounts.create_key(conn, "production", account_id=account_id)
                secrets.append(key.secret)
            admin = await accounts.create_key(conn, "production", account_id=None, role="admin")
    finally:
        await db.dispose()
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield Production(http, secrets[0], secrets[1], admin.secret)


async def test_in_production_a_client_cannot_fulfil_even_its_own_order(
    db: Database, production: Production
) -> None:
    http = production.http
    assert production.client_key.startswith("sk_live_")
    product_id = await create_product(http, production.admin_key)
    order = await place_ok(http, production.client_key, (product_id, 1))
    before = await snapshot(db)
    response = await action(http, production.client_key, order["id"], "fulfill")
    assert_error(response, 403, "unauthorized")
    assert await snapshot(db) == before
    # Another account still gets a 404, not a 403: the order's existence is not revealed.
    theirs = await action(http, production.other_key, order["id"], "fulfill")
    assert_error(theirs, 404, "not_found", "id")
    admin = await action(http, production.admin_key, order["id"], "fulfill")
    assert admin.status_code == 200, admin.text
    assert admin.json()["status"] == "fulfilled"


async def test_in_production_the_owner_still_cancels_its_order(
    production: Production,
) -> None:
    http = production.http
    product_id = await create_product(http, production.admin_key)
    order = await place_ok(http, production.client_key, (product_id, 1))
    response = await action(http, production.client_key, order["id"], "cancel")
    assert response.status_code == 200, response.text


# --- events ------------------------------------------------------------------------------------


def assert_event(row: Any, type_: str, account_id: str, order: dict[str, Any]) -> None:
    assert EVENT_ID.match(row.id), row.id
    assert row.type == type_
    assert row.account_id == account_id
    assert isinstance(row.created_at, datetime)
    assert row.created_at.utcoffset() == timedelta(0)
    assert row.data == order


async def test_creating_an_order_writes_an_order_created_event_with_the_snapshot(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    dime = await create_product(client, admin_key, price=0.1)
    order = await place_ok(client, client_key, (dime, 3))
    [event] = await event_rows(db)
    assert_event(event, "order.created", await account_of(db, client_key), order)


async def test_each_transition_writes_its_event_with_the_new_snapshot(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    account_id = await account_of(db, client_key)
    to_fulfil = await place_ok(client, client_key, (product_id, 1))
    to_cancel = await place_ok(client, client_key, (product_id, 1))
    fulfilled = (await action(client, admin_key, to_fulfil["id"], "fulfill")).json()
    canceled = (await action(client, client_key, to_cancel["id"], "cancel")).json()

    created_event, fulfilled_event = await event_rows(db, to_fulfil["id"])
    assert_event(created_event, "order.created", account_id, to_fulfil)
    assert_event(fulfilled_event, "order.fulfilled", account_id, fulfilled)
    created_event, canceled_event = await event_rows(db, to_cancel["id"])
    assert_event(created_event, "order.created", account_id, to_cancel)
    assert_event(canceled_event, "order.canceled", account_id, canceled)
    assert len({row.id for row in await event_rows(db)}) == 4


async def test_an_admin_fulfilment_event_belongs_to_the_orders_account(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    await action(client, admin_key, order["id"], "fulfill")
    rows = await event_rows(db, order["id"])
    assert {row.account_id for row in rows} == {await account_of(db, client_key)}


async def test_a_refused_transition_writes_no_event(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    await action(client, client_key, order["id"], "cancel")
    await action(client, client_key, order["id"], "cancel")
    await action(client, admin_key, order["id"], "fulfill")
    assert [row.type for row in await event_rows(db)] == ["order.created", "order.canceled"]


# --- atomicity ---------------------------------------------------------------------------------


async def test_a_validation_error_leaves_nothing_behind(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    before = await snapshot(db)
    body = order_body((product_id, 1), shipping_address={**ADDRESS, "country": "XX"})
    assert_error(await place(client, client_key, body), 400, "invalid_request")
    assert await snapshot(db) == before
    assert before.orders == before.events == 0


async def test_running_out_of_stock_on_the_second_item_leaves_nothing_behind(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    plenty = await create_product(client, admin_key, inventory_count=10)
    scarce = await create_product(client, admin_key, inventory_count=1)
    before = await snapshot(db)
    response = await place(client, client_key, order_body((plenty, 5), (scarce, 2)))
    assert_error(response, 409, "invalid_request", "items[1].quantity")
    assert await snapshot(db) == before
    assert before.stock[plenty] == 10


async def test_an_unknown_second_item_leaves_nothing_behind(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    real = await create_product(client, admin_key)
    before = await snapshot(db)
    for unknown in ("prod_0", "prod_zzzzzz"):  # sorted before and after the real id
        response = await place(client, client_key, order_body((real, 1), (unknown, 1)))
        assert_error(response, 404, "not_found", "items[1].product_id")
    assert await snapshot(db) == before


async def test_a_crash_mid_request_is_a_500_and_leaves_nothing_behind(
    db: Database,
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = await create_product(client, admin_key)
    b = await create_product(client, admin_key)
    before = await snapshot(db)

    helpers.crash_after_writing_orders(monkeypatch, "the disk caught fire")
    response = await place(client, client_key, order_body((a, 2), (b, 3)))
    error = assert_error(response, 500, "server_error")
    assert error["details"] == response.headers["x-request-id"]
    assert "fire" not in response.text
    assert await snapshot(db) == before


async def test_a_crash_during_a_transition_leaves_the_order_unchanged(
    db: Database,
    client: httpx.AsyncClient,
    product_in_stock: str,
    client_key: str,
    admin_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    product_id = product_in_stock
    order = await place_ok(client, client_key, (product_id, 4))
    before = await snapshot(db)

    async def crash(*args: object, **kwargs: object) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("commerce_api.orders.service.record_event", crash)
    for key, verb in ((client_key, "cancel"), (admin_key, "fulfill")):
        assert_error(await action(client, key, order["id"], verb), 500, "server_error")
    assert await snapshot(db) == before
    monkeypatch.undo()
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == order


# --- pending orders expire ---------------------------------------------------------------------


async def _age(db: Database, order_id: str, by: timedelta) -> None:
    async with db.write() as conn:
        created = await conn.scalar(select(orders.c.created_at).where(orders.c.id == order_id))
        assert created is not None
        await conn.execute(
            update(orders).where(orders.c.id == order_id).values(created_at=created - by)
        )


async def test_a_pending_order_past_its_ttl_is_canceled_with_its_stock_and_event(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=10)
    old = await place_ok(client, client_key, (product_id, 3))
    fulfilled = await place_ok(client, client_key, (product_id, 1))
    fresh = await place_ok(client, client_key, (product_id, 2))
    assert (await action(client, admin_key, fulfilled["id"], "fulfill")).status_code == 200
    for order in (old, fulfilled):
        await _age(db, order["id"], timedelta(days=2))

    assert await orders_service.expire_pending_orders(db, 86400) == 1
    assert await orders_service.expire_pending_orders(db, 86400) == 0  # once only

    async def status(order_id: str) -> str:
        response = await client.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
        value: str = response.json()["status"]
        return value

    assert await status(old["id"]) == "canceled"
    assert await status(fulfilled["id"]) == "fulfilled"
    assert await status(fresh["id"]) == "pending"
    assert await stock(client, client_key, product_id) == 10 - 1 - 2
    canceled = await client.get(
        "/v1/events", params={"type": "order.canceled"}, headers=bearer(client_key)
    )
    assert [event["data"]["id"] for event in canceled.json()["data"]] == [old["id"]]


async def test_a_ttl_of_zero_never_expires_orders(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    await _age(db, order["id"], timedelta(days=400))
    assert await orders_service.expire_pending_orders(db, 0) == 0
    response = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert response.json()["status"] == "pending"


async def test_concurrent_sweeps_cancel_each_expired_order_once(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=20)
    placed = [await place_ok(client, client_key, (product_id, 1)) for _ in range(5)]
    for order in placed:
        await _age(db, order["id"], timedelta(hours=25))
    counts = await asyncio.gather(
        *(orders_service.expire_pending_orders(db, 86400) for _ in range(3))
    )
    assert sum(counts) == 5
    assert await stock(client, client_key, product_id) == 20
    canceled = await client.get(
        "/v1/events", params={"type": "order.canceled"}, headers=bearer(client_key)
    )
    assert canceled.json()["pagination"]["total"] == 5


def test_pending_orders_expire_after_a_day_by_default() -> None:
    assert Settings(_env_file=None).pending_order_ttl_seconds == 86400


# --- unit limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed", [False, True])
async def test_orders_over_the_unit_limits_are_refused_naming_the_parameter(
    db: Database, database_url: str, make_key: KeyFactory, keyed: bool
) -> None:
    settings = make_settings(database_url, order_max_units_per_line=3, order_max_units=5)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            admin, client = await make_key("admin"), await make_key()
            first = await create_product(http, admin, inventory_count=50)
            second = await create_product(http, admin, inventory_count=50, name="Pen")
            headers = {**bearer(client), **({"Idempotency-Key": "limits-1"} if keyed else {})}
            too_many_on_a_line = await http.post(
                "/v1/orders", json=order_body((first, 1), (second, 4)), headers=headers
            )
            assert_error(too_many_on_a_line, 400, "invalid_request", "items[1].quantity")
            too_many_in_all = await http.post(
                "/v1/orders",
                json=order_body((first, 3), (second, 3)),
                headers={**bearer(client), "Idempotency-Key": "limits-2"}
                if keyed
                else bearer(client),
            )
            assert_error(too_many_in_all, 400, "invalid_request", "items")
            assert "at most 5 units" in too_many_in_all.json()["error"]["message"]
            await place_ok(http, client, (first, 3), (second, 2))  # at the limits
            assert await stock(http, client, first) == 47
            assert await stock(http, client, second) == 48
    async with db.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(orders)) == 1


def test_the_unit_limits_default_to_ten_thousand() -> None:
    settings = Settings(_env_file=None)
    assert settings.order_max_units_per_line == 10_000
    assert settings.order_max_units == 10_000
