"""``commerce-api orders fulfill ORDER_ID``, run as a real process against both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from commerce_api.accounts.service import Principal
from commerce_api.core.ids import new_id
from commerce_api.orders import service as orders_service
from commerce_api.storage.tables import events, orders, products
from tests import factories
from tests.cli.test_cli import Cli, query


@pytest.fixture
def cli(database_url: str, tmp_path: Path, pycache: Path) -> Cli:
    """The CLI on a clean, migrated database of each backend."""
    return Cli(database_url, tmp_path, pycache)


async def place_order(database_url: str, *, quantity: int = 2) -> tuple[str, str, str]:
    """A pending order placed through the service; (order id, account id, product id)."""
    async with factories.opened(database_url) as db:
        customer = await factories.new_customer(db, "CLI shop")
        product_id = await factories.new_product(db, 10, name="Mug", category="kitchen")
        order = await factories.place_order(db, customer.principal, (product_id, quantity))
    return str(order["id"]), customer.account_id, product_id


async def order_row(database_url: str, order_id: str) -> Any:
    [row] = await query(database_url, select(orders).where(orders.c.id == order_id))
    return row


async def event_types(database_url: str, order_id: str) -> list[str]:
    rows = await query(database_url, select(events).order_by(events.c.created_at, events.c.id))
    return [row.type for row in rows if row.data["id"] == order_id]


async def cancel(database_url: str, order_id: str) -> None:
    async with factories.opened(database_url) as db, db.write() as conn:
        operator = Principal(new_id("key"), None, "admin", "production")
        await orders_service.cancel_order(conn, operator, order_id)


async def test_fulfill_marks_the_order_fulfilled_prints_its_id_and_records_the_event(
    cli: Cli,
) -> None:
    order_id, account_id, product_id = await place_order(cli.database_url, quantity=3)
    result = (await cli.run("orders", "fulfill", order_id)).ok()
    assert result.last_line == order_id

    row = await order_row(cli.database_url, order_id)
    assert row.status == "fulfilled"
    assert row.fulfilled_at is not None
    assert row.updated_at == row.fulfilled_at
    assert row.canceled_at is None

    rows = await query(
        cli.database_url,
        select(events).where(events.c.type == "order.fulfilled"),
    )
    [event] = [row for row in rows if row.data["id"] == order_id]
    assert event.id.startswith("evt_")
    assert event.account_id == account_id
    assert event.data["status"] == "fulfilled"
    assert event.data["fulfilled_at"] is not None
    assert event.data["items"] == [
        {"product_id": product_id, "name": "Mug", "quantity": 3, "unit_price": 19.99}
    ]
    assert event.data["total"] == 59.97
    assert await event_types(cli.database_url, order_id) == ["order.created", "order.fulfilled"]

    [(stock,)] = await query(
        cli.database_url, select(products.c.inventory_count).where(products.c.id == product_id)
    )
    assert stock == 7  # fulfilment keeps the reserved units out of stock


@pytest.mark.parametrize("order_id", ["ord_doesnotexist", "not-an-order"])
async def test_fulfilling_an_unknown_order_fails_naming_it(cli: Cli, order_id: str) -> None:
    result = await cli.run("orders", "fulfill", order_id)
    assert result.returncode != 0
    assert order_id in result.stderr
    assert "Traceback" not in result.stderr


async def test_fulfilling_twice_fails_the_second_time_and_writes_one_event(cli: Cli) -> None:
    order_id, _, _ = await place_order(cli.database_url)
    (await cli.run("orders", "fulfill", order_id)).ok()
    first = await order_row(cli.database_url, order_id)

    again = await cli.run("orders", "fulfill", order_id)
    assert again.returncode != 0
    assert "fulfilled" in again.stderr
    assert "Traceback" not in again.stderr
    assert order_id not in again.stdout.splitlines()
    assert await order_row(cli.database_url, order_id) == first
    assert await event_types(cli.database_url, order_id) == ["order.created", "order.fulfilled"]


async def test_a_canceled_order_cannot_be_fulfilled(cli: Cli) -> None:
    order_id, _, _ = await place_order(cli.database_url)
    await cancel(cli.database_url, order_id)
    result = await cli.run("orders", "fulfill", order_id)
    assert result.returncode != 0
    assert "canceled" in result.stderr
    assert (await order_row(cli.database_url, order_id)).status == "canceled"
    assert await event_types(cli.database_url, order_id) == ["order.created", "order.canceled"]


async def test_fulfill_with_tracking_options_puts_it_on_the_order_and_its_event(cli: Cli) -> None:
    order_id, _, _ = await place_order(cli.database_url)
    url = "https://ups.example/track?n=1Z999AA1"
    result = await cli.run(
        "orders",
        "fulfill",
        order_id,
        "--carrier",
        "UPS",
        "--tracking-number",
        " 1Z999AA1 ",  # trimmed, as the console's form is
        "--tracking-url",
        url,
    )
    assert result.ok().last_line == order_id
    tracking = {"carrier": "UPS", "number": "1Z999AA1", "url": url}
    row = await order_row(cli.database_url, order_id)
    assert (row.status, row.tracking) == ("fulfilled", tracking)
    [event] = await query(
        cli.database_url, select(events).where(events.c.type == "order.fulfilled")
    )
    assert event.data["tracking"] == tracking


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            ["--carrier", "UPS", "--tracking-number", "1Z", "--tracking-url", "http://x.example"],
            "tracking.url",
        ),
        (["--tracking-number", "1Z"], "tracking.carrier"),
        (["--carrier", "UPS", "--tracking-url", "https://x.example/1Z"], "tracking.number"),
    ],
)
async def test_an_invalid_tracking_fails_naming_it_and_changes_nothing(
    cli: Cli, options: list[str], named: str
) -> None:
    order_id, _, _ = await place_order(cli.database_url)
    result = await cli.run("orders", "fulfill", order_id, *options)
    assert result.returncode != 0
    assert named in result.stderr
    assert "Traceback" not in result.stderr
    row = await order_row(cli.database_url, order_id)
    assert (row.status, row.tracking) == ("pending", None)
    assert await event_types(cli.database_url, order_id) == ["order.created"]
