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
from sqlalchemy import text, update

from commerce_api.console.pages import exports, order_export, order_list
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


async def test_search_by_any_part_of_an_order_id_or_customer_id(
    console: httpx.AsyncClient, client_key: str, product_id: str
) -> None:
    first = await _order(console, client_key, product_id, "cus_ann")
    second = await _order(console, client_key, product_id, "cus_ann")
    other = await _order(console, client_key, product_id, "cus_bob")
    short = await _order(console, client_key, product_id, "cx")

    by_id = await console.get("/dashboard/orders", params={"q": second["id"]})
    assert _listed(by_id.text) == [second["id"]]
    newest_first = [short, other, second, first]

    def matching(term: str) -> list[str]:  # a random id may say "Bob" or "ANn" too
        term = term.lower()
        return [
            order["id"]
            for order in newest_first
            if term in order["id"].lower() or term in order["customer_id"].lower()
        ]

    by_customer = await console.get("/dashboard/orders", params={"q": "cus_ann"})
    assert _listed(by_customer.text) == [second["id"], first["id"]]  # newest first
    for part in ("bob", "BOB", "s_b", "cus_bob"):  # any part, any case; `_` is itself
        found = await console.get("/dashboard/orders", params={"q": part})
        assert _listed(found.text) == matching(part), part
        assert other["id"] in _listed(found.text)
    assert _listed((await console.get("/dashboard/orders?q=ann")).text) == matching("ann")
    # An order id's first characters, or its last ones, find that order.
    assert _listed((await console.get(f"/dashboard/orders?q={other['id'][:-1]}")).text) == [
        other["id"]
    ]
    assert _listed((await console.get(f"/dashboard/orders?q={first['id'][-8:]}")).text) == [
        first["id"]
    ]
    # Shorter than three characters: a whole id only.
    assert _listed((await console.get("/dashboard/orders?q=cx")).text) == [short["id"]]
    assert _listed((await console.get("/dashboard/orders?q=bo")).text) == []
    page = await console.get("/dashboard/orders")
    assert "3 characters or more" in page.text  # the search's hint says so
    for nothing in ("ord_doesnotexist", "%ob", "c%b", '"bob"'):  # LIKE's and FTS5's syntax
        nobody = await console.get("/dashboard/orders", params={"q": nothing})
        assert _listed(nobody.text) == [], nothing
        assert "No orders match." in nobody.text
    # An order id with a filter it does not pass is no match either.
    assert (
        _listed((await console.get(f"/dashboard/orders?q={first['id']}&status=canceled")).text)
        == []
    )
    malformed = await console.get("/dashboard/orders", params={"q": "a\x00b"})
    assert malformed.status_code == 400
    assert 'role="alert"' in malformed.text


async def _not_indexed(db: Database) -> int:
    """How many orders the search has not indexed yet (migration 0020)."""
    count = {
        "sqlite": "SELECT count(*) FROM orders WHERE rowid > "
        "(SELECT order_rowid FROM order_search_mark)",
        "postgresql": "SELECT count(*) FROM order_search_pending",
    }
    async with db.read() as conn:
        return int(await conn.scalar(text(count[conn.dialect.name])) or 0)


async def test_orders_placed_together_are_each_found_by_the_search(
    console: httpx.AsyncClient, client_key: str, product_id: str, db: Database
) -> None:
    """Orders the desk writes in one batch are each found by the search, which indexes the
    orders placed since the last search first: none is missed, none is left unindexed."""
    not_indexed = await _not_indexed(db)
    placed = await asyncio.gather(
        *(_order(console, client_key, product_id, f"cus_batch_{n:02d}") for n in range(30))
    )
    assert await _not_indexed(db) == not_indexed + 30
    found = await console.get("/dashboard/orders", params={"q": "batch_"})
    assert "All 30 matching" in found.text
    assert await _not_indexed(db) == 0
    for order in placed[::7]:
        one = await console.get("/dashboard/orders", params={"q": order["customer_id"][-6:]})
        assert _listed(one.text) == [order["id"]]


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
    assert header == list(order_export.HEADERS["order"])
    assert header[:8] == [
        *("id", "created_at", "status", "customer_id", "total", "currency", "items", "lines")
    ]
    assert [row[0] for row in rows] == [order["id"] for order in reversed(placed)]
    assert reads == 3  # 5 orders in chunks of 2, each read after the last one's id
    by_id = {row[0]: row for row in rows}
    assert by_id[placed[1]["id"]][3] == 'cus "quoted", with comma'
    assert by_id[placed[2]["id"]][3] == "'=HYPERLINK(1)"  # a spreadsheet shows it, never runs it
    assert by_id[placed[0]["id"]][2] == "canceled"
    assert by_id[placed[3]["id"]][1:7] == [
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
    assert 'action="/dashboard/orders/export"' in page.text
    assert '<input type="hidden" name="status" value="pending">' in page.text


def _fields(header: list[str], row: list[str]) -> dict[str, str]:
    return dict(zip(header, row, strict=True))


async def test_csv_export_has_the_address_lines_and_tracking_per_order_or_per_line(
    console: httpx.AsyncClient, client_key: str, admin_key: str, product_id: str
) -> None:
    other = await factories.create_product(console, admin_key, name="=cmd|' /C calc'!A0")
    address = {
        "street": "@1 Main St",
        "line2": "Flat 2",
        "city": "Springfield",
        "state": "IL",
        "postal_code": "12345",
        "country": "US",
    }
    shipped = await factories.place_ok(
        console,
        client_key,
        (product_id, 2),
        (other["id"], 1),
        customer_id="cus_ship",
        shipping_address=address,
    )
    waiting = await factories.place_ok(console, client_key, (product_id, 3), customer_id="cus_wait")
    tracking = {"carrier": "UPS", "number": "+1Z999", "url": "https://ups.example/t/1Z999"}
    fulfilled = await console.post(
        f"/v1/orders/{shipped['id']}/fulfill",
        json={"tracking": tracking},
        headers=bearer(client_key),
    )
    assert fulfilled.status_code == 200, fulfilled.text

    header, *rows = _csv(await console.get("/dashboard/orders/export?rows=order"))
    by_id = {row[0]: _fields(header, row) for row in rows}
    assert set(by_id) == {shipped["id"], waiting["id"]}
    order = by_id[shipped["id"]]
    assert order["items"] == "3"
    name = factories.product_body()["name"]
    assert order["lines"] == (
        f"2 × {name} ({product_id}) @ 12.50; 1 × =cmd|' /C calc'!A0 ({other['id']}) @ 12.50"
    )
    assert {key: order[f"ship_{key}"] for key in address} == {**address, "street": "'@1 Main St"}
    assert order["tracking_carrier"] == "UPS"
    assert order["tracking_number"] == "'+1Z999"  # neutralised: no formula
    assert order["tracking_url"] == tracking["url"]
    assert order["fulfilled_at"] == fulfilled.json()["fulfilled_at"]
    assert by_id[waiting["id"]]["tracking_carrier"] == ""

    response = await console.get("/dashboard/orders/export", params={"rows": "line"})
    assert re.search(
        r'filename="order-lines-\d{8}-\d{6}\.csv"', response.headers["content-disposition"]
    )
    header, *rows = _csv(response)
    assert header == list(order_export.HEADERS["line"])
    lines = [_fields(header, row) for row in rows]
    assert [(line["id"], line["line"]) for line in lines] == [
        (waiting["id"], "1"),
        (shipped["id"], "1"),
        (shipped["id"], "2"),
    ]
    assert [
        (line["product_id"], line["name"], line["quantity"], line["unit_price"]) for line in lines
    ] == [
        (product_id, name, "3", "12.50"),
        (product_id, name, "2", "12.50"),
        (other["id"], "'=cmd|' /C calc'!A0", "1", "12.50"),
    ]
    assert {line["ship_city"] for line in lines} == {"Springfield"}
    assert [line["tracking_number"] for line in lines] == ["", "'+1Z999", "'+1Z999"]

    wrong = await console.get("/dashboard/orders/export", params={"rows": "product"})
    assert wrong.status_code == 400
    assert "rows is order or line" in wrong.text


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
    ("path", "count", "action", "message"),
    [
        ("bulk", 0, "fulfil", "Select at least one order"),
        ("bulk/run", 0, "fulfil", "Select at least one order"),
        ("bulk", 101, "fulfil", "Select at most 100 orders at a time (101 were selected)"),
        # A confirmation of "all matching" names up to 500 orders; no more.
        ("bulk/run", 501, "fulfil", "Select at most 500 orders at a time (501 were selected)"),
        ("bulk", 1, "delete", "Choose Fulfil or Cancel"),
        ("bulk/run", 1, "delete", "Choose Fulfil or Cancel"),
    ],
)
async def test_a_bulk_selection_out_of_bounds_changes_nothing(
    console: httpx.AsyncClient,
    client_key: str,
    product_id: str,
    path: str,
    count: int,
    action: str,
    message: str,
) -> None:
    order_id = (await _order(console, client_key, product_id))["id"]
    ids = [order_id] + [f"ord_{n:024d}" for n in range(count - 1)] if count else []
    token = await page_token(console, "/dashboard/orders")
    form = {"csrf_token": token, "action": action, "id": ids}
    response = await console.post(f"/dashboard/orders/{path}", data=form)
    assert response.status_code == 400, path
    assert message in response.text
    order = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert order.json()["status"] == "pending"


async def test_bulk_on_all_matching_orders_confirms_them_by_id_then_fulfils_each(
    console: httpx.AsyncClient, client_key: str, product_id: str
) -> None:
    """ "All N matching" takes every order the list's filters match, over every page: the
    confirmation names each of them (an order placed after it is left alone), and the run
    fulfils each in a transaction of its own."""
    bobs = [await _order(console, client_key, product_id, "cus_bob") for _ in range(23)]
    ann = await _order(console, client_key, product_id, "cus_ann")
    token = await page_token(console, "/dashboard/orders")
    listed = await console.get("/dashboard/orders?q=bob")
    assert "All 23 matching" in listed.text
    form = {"csrf_token": token, "action": "fulfil", "matching": "all", "back": "q=bob"}
    confirm = await console.post("/dashboard/orders/bulk", data=form)
    assert confirm.status_code == 200, confirm.text[:2000]
    named = re.findall(r'<input type="hidden" name="id" value="(ord_\w+)">', confirm.text)
    assert sorted(named) == sorted(order["id"] for order in bobs)
    assert "Fulfil 23 orders?" in confirm.text
    late = await _order(console, client_key, product_id, "cus_bob")
    run = {"csrf_token": form_token(confirm.text), "action": "fulfil", "id": named, "back": "q=bob"}
    result = await console.post("/dashboard/orders/bulk/run", data=run)
    assert result.status_code == 200, result.text[:2000]
    assert "23 done, 0 refused" in result.text
    assert result.text.count("status-done") == 23
    for order in [*bobs, ann, late]:
        answer = await console.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
        expected = "pending" if order in (ann, late) else "fulfilled"
        assert answer.json()["status"] == expected, order["id"]

    nothing = {**form, "back": "q=nobody"}
    refused = await console.post("/dashboard/orders/bulk", data=nothing)
    assert refused.status_code == 400
    assert "No order matches" in refused.text


async def test_bulk_on_all_matching_refuses_more_than_it_takes(
    console: httpx.AsyncClient, client_key: str, product_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(order_list, "MAX_MATCHING", 2)
    for _ in range(3):
        await _order(console, client_key, product_id, "cus_bob")
    token = await page_token(console, "/dashboard/orders")
    form = {"csrf_token": token, "action": "cancel", "matching": "all", "back": "q=bob"}
    refused = await console.post("/dashboard/orders/bulk", data=form)
    assert refused.status_code == 400
    assert "3 orders match: at most 2 are changed at a time" in refused.text
    # The run takes only what a confirmation names.
    run = await console.post("/dashboard/orders/bulk/run", data=form)
    assert run.status_code == 400
    assert "Confirm the orders first" in run.text


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
