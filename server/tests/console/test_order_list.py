"""The console's orders list on both backends: its search and filters, its streamed CSV
export, and its bulk fulfil and cancel (confirmed first, each order through the API's service
call, a refusal shown without stopping the others)."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from commerce_api.console.pages import exports
from commerce_api.orders import repository as orders_repository
from commerce_api.storage.db import Database
from commerce_api.storage.tables import orders
from tests import factories
from tests.console.helpers import form_token, page_token, sign_in
from tests.helpers import bearer


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


@pytest.fixture
async def product_id(console: httpx.AsyncClient, admin_key: str) -> str:
    product = await factories.create_product(console, admin_key, inventory_count=100)
    return str(product["id"])


async def _order(
    client: httpx.AsyncClient, client_key: str, product_id: str, customer_id: str = "cus_42"
) -> dict[str, Any]:
    return await factories.place_ok(client, client_key, (product_id, 2), customer_id=customer_id)


async def _created_at(db: Database, order_id: str, when: datetime) -> None:
    async with db.write() as conn:
        await conn.execute(update(orders).where(orders.c.id == order_id).values(created_at=when))


def _listed(html: str) -> list[str]:
    """The order ids of a list page, in its order."""
    return re.findall(r'<a href="/dashboard/orders/(ord_\w+)">', html)


def _csv(response: httpx.Response) -> list[list[str]]:
    assert response.status_code == 200, response.text[:2000]
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(response.text.removeprefix("\ufeff"))))


async def test_search_by_order_id_or_customer_id(
    console: httpx.AsyncClient, client_key: str, product_id: str
) -> None:
    first = await _order(console, client_key, product_id, "cus_ann")
    second = await _order(console, client_key, product_id, "cus_ann")
    other = await _order(console, client_key, product_id, "cus_bob")

    by_id = await console.get("/dashboard/orders", params={"q": second["id"]})
    assert _listed(by_id.text) == [second["id"]]
    by_customer = await console.get("/dashboard/orders", params={"q": "cus_ann"})
    assert _listed(by_customer.text) == [second["id"], first["id"]]  # newest first
    assert _listed((await console.get("/dashboard/orders?q=cus_bob")).text) == [other["id"]]
    nobody = await console.get("/dashboard/orders?q=ord_doesnotexist")
    assert _listed(nobody.text) == []
    assert "No orders match." in nobody.text
    # An order id with a filter it does not pass is no match either.
    assert (
        _listed((await console.get(f"/dashboard/orders?q={first['id']}&status=canceled")).text)
        == []
    )
    malformed = await console.get("/dashboard/orders", params={"q": "a\x00b"})
    assert malformed.status_code == 400
    assert 'role="alert"' in malformed.text


async def test_filter_by_status_and_created_days(
    console: httpx.AsyncClient, client_key: str, product_id: str, db: Database
) -> None:
    early = await _order(console, client_key, product_id)
    late_in_day = await _order(console, client_key, product_id)
    next_day = await _order(console, client_key, product_id)
    await _created_at(db, early["id"], datetime(2026, 3, 9, 23, 59, 59, tzinfo=UTC))
    await _created_at(db, late_in_day["id"], datetime(2026, 3, 10, 23, 59, 59, tzinfo=UTC))
    await _created_at(db, next_day["id"], datetime(2026, 3, 11, 0, 0, 0, tzinfo=UTC))
    cancel = await console.post(
        f"/v1/orders/{late_in_day['id']}/cancel", headers=bearer(client_key)
    )
    assert cancel.status_code == 200

    one_day = await console.get("/dashboard/orders?created_from=2026-03-10&created_to=2026-03-10")
    assert _listed(one_day.text) == [late_in_day["id"]]  # the last day is included, whole
    assert 'value="2026-03-10"' in one_day.text
    from_day = await console.get("/dashboard/orders?created_from=2026-03-10")
    assert _listed(from_day.text) == [next_day["id"], late_in_day["id"]]
    to_day = await console.get("/dashboard/orders?created_to=2026-03-10")
    assert _listed(to_day.text) == [late_in_day["id"], early["id"]]
    pending = await console.get("/dashboard/orders?status=pending&created_to=2026-03-10")
    assert _listed(pending.text) == [early["id"]]

    reversed_days = await console.get(
        "/dashboard/orders?created_from=2026-03-11&created_to=2026-03-10"
    )
    assert reversed_days.status_code == 400
    assert _listed(reversed_days.text) == []
    bad_day = await console.get("/dashboard/orders?created_from=yesterday")
    assert bad_day.status_code == 400
    assert "2026-11-24" in bad_day.text  # the message shows the form a day takes


async def test_csv_export_streams_every_order_of_the_filtered_list(
    console: httpx.AsyncClient,
    client_key: str,
    product_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)
    reads = 0
    page_orders = orders_repository.page_orders

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await page_orders(*args, **kwargs)

    monkeypatch.setattr(orders_repository, "page_orders", counted)
    customers = ["cus_1", 'cus "quoted", with comma', "=HYPERLINK(1)", "cus_4", "cus_5"]
    placed = [await _order(console, client_key, product_id, name) for name in customers]
    await console.post(f"/v1/orders/{placed[0]['id']}/cancel", headers=bearer(client_key))

    response = await console.get("/dashboard/orders/export")
    disposition = response.headers["content-disposition"]
    assert re.fullmatch(r'attachment; filename="orders-\d{8}-\d{6}\.csv"', disposition)
    header, *rows = _csv(response)
    assert header == ["id", "created_at", "status", "customer_id", "total", "currency", "items"]
    assert [row[0] for row in rows] == [order["id"] for order in reversed(placed)]
    assert reads == 3  # 5 orders in chunks of 2, each read after the last one's id
    by_id = {row[0]: row for row in rows}
    assert by_id[placed[1]["id"]][3] == 'cus "quoted", with comma'
    assert by_id[placed[2]["id"]][3] == "'=HYPERLINK(1)"  # a spreadsheet shows it, never runs it
    assert by_id[placed[0]["id"]][2] == "canceled"
    assert by_id[placed[3]["id"]][1:] == [
        placed[3]["created_at"],
        "pending",
        "cus_4",
        "25.00",
        "USD",
        "2",
    ]
    assert '"cus ""quoted"", with comma"' in response.text  # RFC 4180 quoting

    pending = _csv(await console.get("/dashboard/orders/export?status=pending"))
    assert len(pending) == 1 + 4
    one = _csv(await console.get(f"/dashboard/orders/export?q={placed[4]['id']}"))
    assert [row[0] for row in one[1:]] == [placed[4]["id"]]
    page = await console.get("/dashboard/orders?status=pending")
    assert 'href="/dashboard/orders/export?status=pending"' in page.text


async def _bulk(
    console: httpx.AsyncClient, action: str, ids: list[str], token: str
) -> httpx.Response:
    """Select ``ids`` on the list, confirm on the confirmation page: the result page."""
    form = {"csrf_token": token, "action": action, "id": ids, "back": "status=pending"}
    confirm = await console.post("/dashboard/orders/bulk", data=form)
    assert confirm.status_code == 200, confirm.text[:2000]
    for order_id in ids:
        assert f'<input type="hidden" name="id" value="{order_id}">' in confirm.text
    assert 'action="/dashboard/orders/bulk/run"' in confirm.text
    hidden = dict(
        re.findall(r'<input type="hidden" name="(action|back)" value="([^"]*)">', confirm.text)
    )
    assert hidden == {"action": action, "back": "status=pending"}
    form = {"csrf_token": form_token(confirm.text), "id": ids, **hidden}
    return await console.post("/dashboard/orders/bulk/run", data=form)


async def test_bulk_fulfil_shows_a_canceled_order_refused_and_fulfils_the_others(
    console: httpx.AsyncClient, client_key: str, product_id: str
) -> None:
    placed = [await _order(console, client_key, product_id) for _ in range(3)]
    ids = [order["id"] for order in placed]
    await console.post(f"/v1/orders/{ids[1]}/cancel", headers=bearer(client_key))
    token = await page_token(console, "/dashboard/orders")

    result = await _bulk(console, "fulfil", ids, token)
    assert result.status_code == 200
    assert "2 done, 1 refused" in result.text
    rows = re.findall(r"<tr>(.*?)</tr>", result.text, re.S)
    outcome = {order_id: row for row in rows for order_id in ids if f">{order_id}</code>" in row}
    assert ">fulfilled</span>" in outcome[ids[0]]
    assert ">refused</span>" in outcome[ids[1]]
    assert "invalid_transition" in outcome[ids[1]]
    assert ">fulfilled</span>" in outcome[ids[2]]
    assert 'href="/dashboard/orders?status=pending"' in result.text  # back to the list
    statuses = [
        (await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))).json()["status"]
        for order_id in ids
    ]
    assert statuses == ["fulfilled", "canceled", "fulfilled"]


async def test_bulk_cancel_returns_the_stock(
    console: httpx.AsyncClient, client_key: str, admin_key: str, product_id: str
) -> None:
    ids = [(await _order(console, client_key, product_id))["id"] for _ in range(2)]
    token = await page_token(console, "/dashboard/orders")
    result = await _bulk(console, "cancel", ids, token)
    assert "2 done, 0 refused" in result.text
    for order_id in ids:
        order = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
        assert order.json()["status"] == "canceled"
    product = await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert product.json()["inventory_count"] == 100


async def test_the_confirmation_changes_nothing_and_the_run_needs_the_csrf_token(
    console: httpx.AsyncClient, client_key: str, product_id: str
) -> None:
    order_id = (await _order(console, client_key, product_id))["id"]
    token = await page_token(console, "/dashboard/orders")
    confirm = await console.post(
        "/dashboard/orders/bulk", data={"csrf_token": token, "action": "cancel", "id": [order_id]}
    )
    assert "Cancel 1 order?" in confirm.text
    for path in ("/dashboard/orders/bulk", "/dashboard/orders/bulk/run"):
        for wrong in ({}, {"csrf_token": "forged"}):
            refused = await console.post(path, data={"action": "cancel", "id": [order_id], **wrong})
            assert refused.status_code == 403, path
            assert "Form expired" in refused.text
    order = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert order.json()["status"] == "pending"


@pytest.mark.parametrize(
    ("count", "action", "message"),
    [
        (0, "fulfil", "Select at least one order"),
        (101, "fulfil", "Select at most 100 orders at a time (101 were selected)"),
        (1, "delete", "Choose Fulfil or Cancel"),
    ],
)
async def test_a_bulk_selection_out_of_bounds_changes_nothing(
    console: httpx.AsyncClient,
    client_key: str,
    product_id: str,
    count: int,
    action: str,
    message: str,
) -> None:
    order_id = (await _order(console, client_key, product_id))["id"]
    ids = [order_id] + [f"ord_{n:024d}" for n in range(count - 1)] if count else []
    token = await page_token(console, "/dashboard/orders")
    for path in ("/dashboard/orders/bulk", "/dashboard/orders/bulk/run"):
        response = await console.post(path, data={"csrf_token": token, "action": action, "id": ids})
        assert response.status_code == 400, path
        assert message in response.text
    order = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert order.json()["status"] == "pending"


async def test_the_export_sends_each_chunk_as_it_is_read(
    app: FastAPI,
    console: httpx.AsyncClient,
    client_key: str,
    product_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streamed: the header goes before the first read, each chunk before the next read."""
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)
    reads = 0
    page_orders = orders_repository.page_orders

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await page_orders(*args, **kwargs)

    monkeypatch.setattr(orders_repository, "page_orders", counted)
    for _ in range(5):
        await _order(console, client_key, product_id)
    cookie = f"commerce_console_session={console.cookies['commerce_console_session']}"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/dashboard/orders/export",
        "raw_path": b"/dashboard/orders/export",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    done = asyncio.Event()
    sent: list[tuple[int, bytes]] = []  # the reads made when each part of the body was sent

    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()  # the client stays until the whole body has come
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
        elif message["type"] == "http.response.body":
            sent.append((reads, message.get("body", b"")))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    parts = [(count, body.count(b"\r\n")) for count, body in sent if body]
    assert parts == [(0, 1), (1, 2), (2, 2), (3, 1)]  # the header, then 2 + 2 + 1 orders
