from __future__ import annotations

from decimal import Decimal

import httpx
from client_testing import MockAPI, order_json, page_json, product_json

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
    assert dict(api.last.url.params) == {
        "status": "pending",
        "customer_id": "cus_1",
        "limit": "10",
        "offset": "0",
    }


async def test_async_list_all_walks_every_page_lazily() -> None:
    api = MockAPI().answer_with(paged)
    async with api.async_client() as client:
        products = client.products.list_all()
        assert api.requests == []
        ids = [product.id async for product in products]
    assert ids == [f"prod_{n}" for n in range(5)]
    assert len(api.requests) == 3
