"""Two lines for one product are one line: accepted and merged, their quantities summed, and
still bounded by the unit limits and the stock (issue 31; they used to be refused)."""

from __future__ import annotations

import httpx
import pytest

from commerce_api.orders.domain import RequestedLine, merge_lines
from commerce_api.storage.db import Database
from tests import helpers
from tests.conftest import KeyFactory, make_settings
from tests.factories import create_product, order_body, place_ok
from tests.factories import post_order as place
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import Snapshot, snapshot


def test_merge_lines_sums_each_products_quantities_at_its_first_line() -> None:
    assert merge_lines([("a", 1), ("b", 1), ("a", 2), ("c", 4), ("b", 5)]) == [
        RequestedLine("a", 3, 0),
        RequestedLine("b", 6, 1),
        RequestedLine("c", 4, 3),
    ]


async def test_two_lines_for_one_product_are_one_line_of_both_quantities(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    a = await create_product(client, admin_key, name="Pen", price=2.5, inventory_count=10)
    b = await create_product(client, admin_key, name="Ink", price=4, inventory_count=10)
    order = await place_ok(client, client_key, (a["id"], 1), (b["id"], 1), (a["id"], 2))

    assert order["items"] == [
        {"product_id": a["id"], "name": "Pen", "quantity": 3, "unit_price": 2.5},
        {"product_id": b["id"], "name": "Ink", "quantity": 1, "unit_price": 4},
    ]
    assert order["total"] == 11.5
    fetched = await client.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert fetched.json() == order
    created = await client.get(
        "/v1/events", params={"type": "order.created"}, headers=bearer(client_key)
    )
    assert [event["data"] for event in created.json()["data"]] == [order]
    assert await snapshot(db) == Snapshot(1, 2, 1, {a["id"]: 7, b["id"]: 9})


async def test_merged_lines_short_of_stock_name_the_products_first_line_and_take_nothing(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    a = await create_product(client, admin_key, inventory_count=3)
    b = await create_product(client, admin_key, inventory_count=3)
    before = await snapshot(db)
    response = await place(client, client_key, order_body((b["id"], 1), (a["id"], 2), (a["id"], 2)))
    error = assert_error(
        response, 409, "invalid_request", "items[1].quantity", reason="insufficient_stock"
    )
    assert "4 requested, 3 available" in error["message"]
    assert await snapshot(db) == before


@pytest.mark.parametrize(
    ("lines", "details", "message"),
    [
        # Each line is within the per-line limit (3); together they are not.
        ([("a", 2), ("b", 1), ("a", 2)], "items[2].quantity", "the lines for `a` add up to 4"),
        ([("a", 4)], "items[0].quantity", "at most 3 units."),
        # Each product within the per-line limit once merged, the order over its own (5).
        ([("a", 2), ("b", 3), ("a", 1)], "items", "at most 5 units in all; this one has 6"),
    ],
)
async def test_merged_lines_are_bounded_by_the_unit_limits(
    database_url: str,
    make_key: KeyFactory,
    lines: list[tuple[str, int]],
    details: str,
    message: str,
) -> None:
    settings = make_settings(database_url, order_max_units_per_line=3, order_max_units=5)
    async with helpers.serving(settings) as http:
        admin, client_key = await make_key("admin"), await make_key()
        ids = {name: (await create_product(http, admin, inventory_count=50))["id"] for name in "ab"}
        before = await _stock(http, client_key, ids)
        body = order_body(*((ids[name], quantity) for name, quantity in lines))
        error = assert_error(
            await place(http, client_key, body),
            400,
            "invalid_request",
            details,
            reason="order_limit_exceeded",
        )
        assert message.replace("`a`", f"`{ids['a']}`") in error["message"]
        assert await _stock(http, client_key, ids) == before
        # Merged within the limits, the same products on several lines are accepted.
        merged = await place_ok(http, client_key, (ids["a"], 1), (ids["b"], 1), (ids["a"], 2))
        assert [item["quantity"] for item in merged["items"]] == [3, 1]


async def _stock(http: httpx.AsyncClient, key: str, ids: dict[str, str]) -> dict[str, int]:
    return {
        name: (await http.get(f"/v1/products/{product_id}", headers=bearer(key))).json()[
            "inventory_count"
        ]
        for name, product_id in ids.items()
    }
