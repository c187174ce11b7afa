from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import httpx
import pytest
from client_testing import MockAPI, event_json, order_json, page_json, product_json

BOOKS = [product_json(id=f"prod_{n}") for n in range(5)]


def paged(request: httpx.Request) -> httpx.Response:
    """Products served two per page, whatever the requested limit."""
    offset = int(request.url.params.get("offset", "0"))
    return httpx.Response(200, json=page_json(BOOKS[offset : offset + 2], total=5, offset=offset))


def test_list_returns_one_page() -> None:
    api = MockAPI().reply(json=page_json(BOOKS[:2], total=5))
    with api.client() as client:
        page = client.products.list(category="books", limit=2, offset=0)
    assert [p.id for p in page.data] == ["prod_0", "prod_1"]
    assert page.data[0].price == Decimal("19.99")
    assert page.pagination.total == 5
    assert page.has_more
    assert page.next_offset == 2
    assert len(page) == 2
    assert dict(api.last.url.params) == {"category": "books", "limit": "2", "offset": "0"}


def test_list_sends_only_the_parameters_given() -> None:
    api = MockAPI().reply(json=page_json([], total=0))
    with api.client() as client:
        page = client.products.list()
    assert api.last.url.query == b""
    assert page.next_offset is None


def test_list_all_walks_every_page_and_stops_when_has_more_is_false() -> None:
    api = MockAPI().answer_with(paged)
    with api.client() as client:
        ids = [product.id for product in client.products.list_all(category="books")]
    assert ids == [f"prod_{n}" for n in range(5)]
    assert [r.url.params["offset"] for r in api.requests] == ["0", "2", "4"]
    assert {r.url.params["limit"] for r in api.requests} == {"100"}
    assert {r.url.params["category"] for r in api.requests} == {"books"}


def test_list_all_is_lazy() -> None:
    api = MockAPI().answer_with(paged)
    with api.client() as client:
        products = client.products.list_all(page_size=2)
        assert api.requests == []
        first = next(products)
        assert first.id == "prod_0"
        assert len(api.requests) == 1
        next(products)
        assert len(api.requests) == 1
        next(products)
        assert len(api.requests) == 2


def test_list_all_stops_on_an_empty_page_even_if_has_more() -> None:
    broken = {"data": [], "pagination": {"total": 9, "limit": 2, "offset": 0, "has_more": True}}
    api = MockAPI().reply(json=broken)
    with api.client() as client:
        assert list(client.orders.list_all()) == []
    assert len(api.requests) == 1


def test_orders_list_all_passes_its_filters() -> None:
    api = MockAPI().reply(json=page_json([order_json()], total=1))
    with api.client() as client:
        orders = list(client.orders.list_all(status="pending", customer_id="cus_1", page_size=10))
    assert [o.id for o in orders] == ["ord_1"]
    assert dict(api.last.url.params) == {"status": "pending", "customer_id": "cus_1", "limit": "10"}


NEWEST_FIRST = [order_json(id=f"ord_{n}") for n in (5, 4, 3, 2, 1)]


def by_cursor(request: httpx.Request) -> httpx.Response:
    """Orders served newest first, two per page after ``starting_after``."""
    after = request.url.params.get("starting_after")
    ids = [order["id"] for order in NEWEST_FIRST]
    start = ids.index(after) + 1 if after else 0
    items = NEWEST_FIRST[start : start + 2]
    return httpx.Response(200, json=page_json(items, total=5, offset=start))


def test_orders_list_all_pages_with_the_cursor_not_the_offset() -> None:
    api = MockAPI().answer_with(by_cursor)
    with api.client() as client:
        ids = [order.id for order in client.orders.list_all(customer_id="cus_1", page_size=2)]
    assert ids == ["ord_5", "ord_4", "ord_3", "ord_2", "ord_1"]
    assert [r.url.params.get("starting_after") for r in api.requests] == [None, "ord_4", "ord_2"]
    assert all("offset" not in r.url.params for r in api.requests)
    assert {r.url.params["customer_id"] for r in api.requests} == {"cus_1"}


async def test_async_events_list_all_pages_with_the_cursor() -> None:
    events = [event_json(id=f"evt_{n}") for n in (3, 2, 1)]

    def answer(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("starting_after")
        start = [e["id"] for e in events].index(after) + 1 if after else 0
        return httpx.Response(200, json=page_json(events[start : start + 2], total=3, offset=start))

    api = MockAPI().answer_with(answer)
    async with api.async_client() as client:
        ids = [event.id async for event in client.events.list_all(order_id="ord_1", page_size=2)]
    assert ids == ["evt_3", "evt_2", "evt_1"]
    assert [r.url.params.get("starting_after") for r in api.requests] == [None, "evt_2"]
    assert {r.url.params["order_id"] for r in api.requests} == {"ord_1"}


def test_time_ranges_are_sent_as_rfc_3339_and_must_be_aware() -> None:
    api = MockAPI().reply(json=page_json([], total=0))
    since = datetime(2026, 1, 1, 12, 30, tzinfo=timezone(timedelta(hours=1)))
    with api.client() as client:
        client.events.list(
            type="order.created", created_gte=since, created_lt="2026-02-01T00:00:00Z"
        )
        assert dict(api.last.url.params) == {
            "type": "order.created",
            "created_gte": "2026-01-01T12:30:00+01:00",
            "created_lt": "2026-02-01T00:00:00Z",
        }
        client.orders.list(starting_after="ord_9", created_lt=since)
        assert dict(api.last.url.params) == {
            "starting_after": "ord_9",
            "created_lt": "2026-01-01T12:30:00+01:00",
        }
        with pytest.raises(ValueError, match="created_gte must be timezone-aware"):
            client.orders.list(created_gte=datetime(2026, 1, 1))
    assert len(api.requests) == 2


async def test_async_list_all_walks_every_page_lazily() -> None:
    api = MockAPI().answer_with(paged)
    async with api.async_client() as client:
        products = client.products.list_all()
        assert api.requests == []
        ids = [product.id async for product in products]
    assert ids == [f"prod_{n}" for n in range(5)]
    assert len(api.requests) == 3
