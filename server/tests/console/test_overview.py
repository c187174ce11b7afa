"""The console overview from the database (issue 29), on both backends: orders and revenue per
hour and per day (charts with a title per bar, and the same numbers in tables) over orders
placed at chosen times, low-stock products, endpoints failing now and the outbox's backlog."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database
from commerce_api.storage.tables import (
    order_hour_figures,
    orders,
    products,
    webhook_deliveries,
    webhook_endpoints,
)
from tests import factories
from tests.console.helpers import sign_in
from tests.helpers import bearer


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


def _rows(html: str, table_id: str) -> dict[str, tuple[int, str]]:
    """A period table's rows: label → (orders, revenue)."""
    table = html[html.index(f'<table id="{table_id}">') :]
    table = table[: table.index("</table>")]
    found = re.findall(
        r'<tr><th scope="row">([^<]+)</th><td class="num">(\d+)</td>'
        r'<td class="num">([^<]+)</td></tr>',
        table,
    )
    return {label: (int(count), revenue) for label, count, revenue in found}


def _hour_label(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H}:00 UTC"


def _day_label(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d} (UTC)"


async def _placed_at(db: Database, order: dict[str, Any], at: datetime, **values: object) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(orders).where(orders.c.id == order["id"]).values(created_at=at, **values)
        )


async def test_charts_count_orders_and_revenue_per_hour_and_day(
    console: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    product = await factories.new_product(db, 100)  # 19.99 each
    placed = [await factories.place_ok(console, client_key, (product, 1)) for _ in range(6)]
    now = utcnow()
    recent = now.replace(minute=5, second=0, microsecond=0) - timedelta(hours=3)
    older = (now - timedelta(days=2)).replace(hour=10, minute=30, second=0, microsecond=0)
    await _placed_at(db, placed[0], recent)
    await _placed_at(db, placed[1], recent + timedelta(minutes=20))
    await _placed_at(db, placed[2], recent, status="canceled")  # counted, not in the revenue
    await _placed_at(db, placed[3], older)
    await _placed_at(db, placed[4], older, currency="EUR")  # another currency: not summed
    await _placed_at(db, placed[5], now - timedelta(days=40))  # older than 30 days: left out

    page = (await console.get("/dashboard")).text

    hours = _rows(page, "hours-table")
    assert len(hours) == 24
    assert hours[_hour_label(recent)] == (3, "39.98 USD")
    assert sum(count for count, _ in hours.values()) == 3  # the older orders are days ago
    days = _rows(page, "days-table")
    assert len(days) == 30
    assert days[_day_label(recent)] == (3, "39.98 USD")
    assert days[_day_label(older)] == (2, "19.99 USD")
    assert sum(count for count, _ in days.values()) == 5
    # Each bar's title names its hour or day and its number (shown on hover).
    assert f"<title>{_hour_label(recent)}: 3 orders</title>" in page
    assert f"<title>{_hour_label(recent)}: 39.98 USD</title>" in page
    assert f"<title>{_day_label(older)}: 2 orders</title>" in page
    assert page.count('<svg class="chart') == 4
    assert 'role="img" aria-label="Orders per day: 5 orders in all' in page


async def test_low_stock_failing_endpoints_and_the_outbox_backlog(
    console: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    low, at_threshold, enough, archived, plenty = await factories.new_products(db, 2, 5, 6, 0, 99)
    async with db.write() as conn:
        await conn.execute(
            update(products).where(products.c.id == archived).values(archived_at=utcnow())
        )
    ids = []
    for path in ("/healthy", "/disabled", "/failing"):
        response = await console.post(
            "/v1/webhook_endpoints",
            json={"url": f"http://127.0.0.1:9{path}"},
            headers=bearer(client_key),
        )
        ids.append(response.json()["id"])
    healthy, disabled, failing = ids
    async with db.write() as conn:
        endpoint = webhook_endpoints.c
        await conn.execute(
            update(webhook_endpoints)
            .where(endpoint.id == disabled)
            .values(enabled=False, disabled_reason="Receiver gone (410)")
        )
        await conn.execute(
            update(webhook_endpoints)
            .where(endpoint.id == failing)
            .values(failing_since=utcnow() - timedelta(hours=2))
        )
    # One order: a delivery to each enabled endpoint; one of them overdue by two minutes.
    await factories.place_ok(console, client_key, (plenty, 1))
    async with db.write() as conn:
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.endpoint_id == failing)
            .values(next_attempt_at=utcnow() - timedelta(seconds=120))
        )

    page = (await console.get("/dashboard")).text

    figures = re.findall(r'<p class="figure">(\d+)</p>', page)
    assert figures[:2] == ["1", "2"]  # a pending order; two deliveries waiting
    oldest = re.search(r'<span id="outbox-oldest">(\d+)</span>', page)
    assert oldest is not None
    assert 119 <= int(oldest.group(1)) < 600
    low_stock = page[page.index('id="low-stock-table"') :].split("</table>")[0]
    assert '<span id="low-stock-total">2</span>' in page
    assert low_stock.index(low) < low_stock.index(at_threshold)  # lowest first
    assert enough not in low_stock
    assert archived not in low_stock
    failing_table = page[page.index('id="failing-table"') :].split("</table>")[0]
    assert '<span id="failing-total">2</span>' in page
    assert disabled in failing_table
    assert "Receiver gone (410)" in failing_table
    assert failing in failing_table
    assert "failing</span> since" in failing_table
    assert healthy not in failing_table


async def test_an_empty_shop_has_empty_charts(console: httpx.AsyncClient) -> None:
    page = await console.get("/dashboard")
    assert page.status_code == 200
    assert 'aria-label="Orders per hour: 0 orders in all"' in page.text
    assert '<span id="low-stock-total">0</span>' in page.text
    assert '<span id="failing-total">0</span>' in page.text


async def test_closed_hours_are_kept_in_the_rollup(
    console: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    product = await factories.new_product(db, 100)  # 19.99 each
    placed = [await factories.place_ok(console, client_key, (product, 1)) for _ in range(3)]
    then = (utcnow() - timedelta(days=2)).replace(hour=9, minute=15, second=0, microsecond=0)
    await _placed_at(db, placed[0], then, status="fulfilled")
    await _placed_at(db, placed[1], then, status="canceled")
    # placed[2] stays pending, this hour: the hours before the last one are closed.

    first = (await console.get("/dashboard")).text
    assert _rows(first, "days-table")[_day_label(then)] == (2, "19.99 USD")
    assert sum(count for count, _ in _rows(first, "hours-table").values()) == 1
    async with db.read() as conn:
        kept = (await conn.execute(select(order_hour_figures))).all()
    assert [(row.hour, row.currency, row.orders, row.revenue_minor) for row in kept] == [
        (then.replace(minute=0), "USD", 2, 1999)
    ]

    # A closed hour is read from the rollup: a change no service makes (orders are never moved
    # nor their totals changed) is not seen; the open hours are read from the orders.
    async with db.write() as conn:
        await conn.execute(
            update(orders).where(orders.c.id == placed[0]["id"]).values(total_minor=1)
        )
    extra = await factories.place_ok(console, client_key, (product, 2))
    again = (await console.get("/dashboard")).text
    assert _rows(again, "days-table")[_day_label(then)] == (2, "19.99 USD")
    assert sum(count for count, _ in _rows(again, "hours-table").values()) == 2
    assert extra["total"] == 39.98
