"""Catalogue behaviour of ``/v1/products``: shapes, pagination, money, strict types, writes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from commerce_api.catalog import repository
from commerce_api.catalog import service as catalog_service
from commerce_api.core.ids import new_id
from commerce_api.storage.db import Database
from tests import factories, helpers
from tests.helpers import Clock, bearer
from tests.http.test_error_contract import assert_error

# Through PgBouncer too (conftest.py): transaction pooling must not change an answer.
pytestmark = pytest.mark.pgbouncer

LIST_FIELDS = {"id", "name", "description", "price", "category", "created_at"}
DETAIL_FIELDS = LIST_FIELDS | {"inventory_count", "updated_at"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")

BASE_TIME = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def product_body(**overrides: object) -> dict[str, object]:
    return factories.product_body(
        **{"description": "A5, dotted", "inventory_count": 3, **overrides}
    )


async def create(client: httpx.AsyncClient, admin_key: str, **overrides: object) -> dict[str, Any]:
    response = await client.post(
        "/v1/products", json=product_body(**overrides), headers=bearer(admin_key)
    )
    assert response.status_code == 201, response.text
    product: dict[str, Any] = response.json()
    return product


async def insert_products(
    db: Database,
    count: int,
    *,
    category: str = "books",
    same_time_every: int = 1,
    start: datetime = BASE_TIME,
) -> list[str]:
    """Insert ``count`` products directly; ``same_time_every`` of them share a created_at."""
    rows = []
    for index in range(count):
        created = start + timedelta(seconds=index // same_time_every)
        rows.append(
            {
                "id": new_id("prod"),
                "name": f"Product {index}",
                "description": "",
                "price_minor": 100 + index,
                "category": category,
                "inventory_count": index,
                "created_at": created,
                "updated_at": created,
            }
        )
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    ordered = sorted(rows, key=lambda row: (row["created_at"], row["id"]))
    return [str(row["id"]) for row in ordered]


async def list_page(client: httpx.AsyncClient, key: str, **params: str | int) -> dict[str, Any]:
    return await helpers.list_page(client, "/v1/products", key, **params)


def parse_timestamp(value: str) -> datetime:
    assert TIMESTAMP.match(value), value
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() == timedelta(0)
    return parsed


# --- create and read ---------------------------------------------------------------------------


async def test_admin_creates_a_product_with_location_and_full_fields(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post("/v1/products", json=product_body(), headers=bearer(admin_key))
    assert response.status_code == 201
    product = response.json()
    assert set(product) == DETAIL_FIELDS
    assert product["id"].startswith("prod_")
    assert response.headers["location"] == f"/v1/products/{product['id']}"
    assert product == {
        "id": product["id"],
        "name": "Notebook",
        "description": "A5, dotted",
        "price": 12.5,
        "category": "stationery",
        "inventory_count": 3,
        "created_at": product["created_at"],
        "updated_at": product["created_at"],
    }


async def test_created_product_is_readable_at_its_location(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    created = await client.post("/v1/products", json=product_body(), headers=bearer(admin_key))
    fetched = await client.get(created.headers["location"], headers=bearer(client_key))
    assert fetched.status_code == 200
    assert fetched.json() == created.json()
    assert set(fetched.json()) == DETAIL_FIELDS


async def test_optional_fields_take_defaults(client: httpx.AsyncClient, admin_key: str) -> None:
    response = await client.post(
        "/v1/products",
        json={"name": "Pen", "price": 1, "category": "stationery"},
        headers=bearer(admin_key),
    )
    assert response.status_code == 201, response.text
    assert response.json()["description"] == ""
    assert response.json()["inventory_count"] == 0


async def test_list_items_have_exactly_the_list_fields(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    created = await create(client, admin_key)
    page = await list_page(client, client_key)
    assert len(page["data"]) == 1
    item = page["data"][0]
    assert set(item) == LIST_FIELDS
    assert item == {key: created[key] for key in LIST_FIELDS}


async def test_timestamps_are_iso_8601_utc_ending_in_z(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    created = await create(client, admin_key)
    after = datetime.now(UTC) + timedelta(seconds=1)
    for field in ("created_at", "updated_at"):
        assert created[field].endswith("Z")
        assert before <= parse_timestamp(created[field]) <= after
    item = (await list_page(client, client_key))["data"][0]
    assert item["created_at"].endswith("Z")
    parse_timestamp(item["created_at"])


# --- pagination --------------------------------------------------------------------------------


async def test_empty_catalogue_lists_nothing(client: httpx.AsyncClient, client_key: str) -> None:
    response = await client.get("/v1/products", headers=bearer(client_key))
    assert response.status_code == 200
    assert response.json() == {
        "data": [],
        "pagination": {"total": 0, "limit": 20, "offset": 0, "has_more": False},
    }


async def test_default_limit_is_20(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    ids = await insert_products(db, 25)
    page = await list_page(client, client_key)
    assert [item["id"] for item in page["data"]] == ids[:20]
    assert page["pagination"] == {"total": 25, "limit": 20, "offset": 0, "has_more": True}


@pytest.mark.parametrize("limit", [101, 500, 2**31, 10**30])
async def test_limit_above_100_is_clamped(
    client: httpx.AsyncClient, db: Database, client_key: str, limit: int
) -> None:
    await insert_products(db, 105)
    page = await list_page(client, client_key, limit=limit)
    assert len(page["data"]) == 100
    assert page["pagination"] == {"total": 105, "limit": 100, "offset": 0, "has_more": True}


async def test_limit_of_exactly_100_is_applied(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    await insert_products(db, 100)
    page = await list_page(client, client_key, limit=100)
    assert len(page["data"]) == 100
    assert page["pagination"] == {"total": 100, "limit": 100, "offset": 0, "has_more": False}


@pytest.mark.parametrize("offset", [5, 6, 1000, 2**53 - 1])
async def test_offset_at_or_past_total_returns_empty_page(
    client: httpx.AsyncClient, db: Database, client_key: str, offset: int
) -> None:
    await insert_products(db, 5)
    page = await list_page(client, client_key, offset=offset)
    assert page["data"] == []
    assert page["pagination"] == {"total": 5, "limit": 20, "offset": offset, "has_more": False}


async def test_offset_beyond_javascript_safe_integers_is_rejected(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get(
        "/v1/products", params={"offset": 2**53}, headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "offset")


@pytest.mark.parametrize(
    ("limit", "offset", "size", "has_more"),
    [
        (5, 0, 5, True),  # a full page with items after it
        (5, 5, 5, False),  # the last full page ends exactly at total
        (10, 0, 10, False),  # one page holding everything
        (11, 0, 10, False),  # a page larger than total
        (3, 9, 1, False),  # a short last page
        (3, 6, 3, True),  # one item remains after this page
    ],
)
async def test_has_more_at_page_boundaries(
    client: httpx.AsyncClient,
    db: Database,
    client_key: str,
    limit: int,
    offset: int,
    size: int,
    has_more: bool,
) -> None:
    ids = await insert_products(db, 10)
    page = await list_page(client, client_key, limit=limit, offset=offset)
    assert [item["id"] for item in page["data"]] == ids[offset : offset + size]
    assert page["pagination"] == {
        "total": 10,
        "limit": limit,
        "offset": offset,
        "has_more": has_more,
    }


async def test_paging_visits_each_product_exactly_once_in_creation_order(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    # Groups of three share a created_at, so the id decides the order inside each group.
    expected = await insert_products(db, 45, same_time_every=3)
    seen: list[str] = []
    created: list[str] = []
    offset = 0
    while True:
        page = await list_page(client, client_key, limit=7, offset=offset)
        assert page["pagination"]["total"] == 45
        seen.extend(item["id"] for item in page["data"])
        created.extend(item["created_at"] for item in page["data"])
        offset += 7
        assert page["pagination"]["has_more"] == (offset < 45)
        if not page["pagination"]["has_more"]:
            break
    assert len(seen) == 45
    assert len(set(seen)) == 45
    assert seen == expected
    assert created == sorted(created)


async def test_api_created_products_list_in_creation_order(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    ids = [(await create(client, admin_key, name=f"P{index}"))["id"] for index in range(5)]
    page = await list_page(client, client_key)
    assert [item["id"] for item in page["data"]] == ids


async def test_category_filter_returns_only_that_category(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    books = await insert_products(db, 4, category="books")
    await insert_products(db, 3, category="toys", start=BASE_TIME + timedelta(minutes=1))
    await insert_products(db, 2, category="Books", start=BASE_TIME + timedelta(minutes=2))
    page = await list_page(client, client_key, category="books")
    assert [item["id"] for item in page["data"]] == books
    assert {item["category"] for item in page["data"]} == {"books"}
    assert page["pagination"] == {"total": 4, "limit": 20, "offset": 0, "has_more": False}


async def test_category_filter_paginates_within_the_category(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    toys = await insert_products(db, 5, category="toys")
    await insert_products(db, 5, category="books")
    page = await list_page(client, client_key, category="toys", limit=2, offset=2)
    assert [item["id"] for item in page["data"]] == toys[2:4]
    assert page["pagination"] == {"total": 5, "limit": 2, "offset": 2, "has_more": True}


async def test_unknown_category_lists_nothing(
    client: httpx.AsyncClient, db: Database, client_key: str
) -> None:
    await insert_products(db, 3)
    page = await list_page(client, client_key, category="nope")
    assert page["data"] == []
    assert page["pagination"]["total"] == 0


@pytest.mark.parametrize("category", ["", "x" * 101, "bad\x00value"])
async def test_invalid_category_filter_is_rejected(
    client: httpx.AsyncClient, client_key: str, category: str
) -> None:
    response = await client.get(
        "/v1/products", params={"category": category}, headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "category")


# --- money -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "rendered"),
    [
        (19.99, b'"price":19.99'),
        (0.1, b'"price":0.1'),
        (0.01, b'"price":0.01'),
        (1000000, b'"price":1000000'),
        (0, b'"price":0'),
        (1.1, b'"price":1.1'),
        (4.35, b'"price":4.35'),  # 4.35 * 100 == 434.99999999999994 in binary floats
        (0.07, b'"price":0.07'),
        (1.15, b'"price":1.15'),
        (2.5, b'"price":2.5'),
        (99999999.99, b'"price":99999999.99'),
    ],
)
async def test_prices_are_exact(
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    price: float,
    rendered: bytes,
) -> None:
    created = await client.post(
        "/v1/products", json=product_body(price=price), headers=bearer(admin_key)
    )
    assert created.status_code == 201, created.text
    assert created.json()["price"] == price
    assert rendered in created.content
    fetched = await client.get(f"/v1/products/{created.json()['id']}", headers=bearer(client_key))
    assert rendered in fetched.content
    listed = await client.get("/v1/products", headers=bearer(client_key))
    assert rendered in listed.content


@pytest.mark.parametrize(
    "price",
    [19.999, 0.001, "19.99", True, False, -1, -0.01, None, [19.99], {"amount": 1}, 1e300],
    ids=repr,
)
async def test_invalid_prices_are_rejected(
    client: httpx.AsyncClient, admin_key: str, price: object
) -> None:
    response = await client.post(
        "/v1/products", json=product_body(price=price), headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", "price")


@pytest.mark.parametrize("raw", [b"NaN", b"Infinity", b"-Infinity"])
async def test_non_finite_prices_are_rejected(
    client: httpx.AsyncClient, admin_key: str, raw: bytes
) -> None:
    content = b'{"name": "X", "category": "c", "price": ' + raw + b"}"
    response = await client.post(
        "/v1/products",
        content=content,
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    assert_error(response, 400, "invalid_request")


# --- strict types ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["2", 2.5, 2.1, True, -1, 2**31, None], ids=repr)
async def test_inventory_count_must_be_a_non_negative_integer(
    client: httpx.AsyncClient, admin_key: str, value: object
) -> None:
    response = await client.post(
        "/v1/products", json=product_body(inventory_count=value), headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", "inventory_count")


async def test_inventory_count_accepts_a_whole_number_written_as_a_decimal(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    # JSON Schema counts 2.0 as an integer, so the documented schema admits it.
    response = await client.post(
        "/v1/products", json=product_body(inventory_count=2.0), headers=bearer(admin_key)
    )
    assert response.status_code == 201
    assert response.json()["inventory_count"] == 2
    assert isinstance(response.json()["inventory_count"], int)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("name", 5),
        ("name", "x" * 201),
        ("name", "line\nbreak"),
        ("category", ""),
        ("category", ["books"]),
        ("description", 1),
        ("description", "nul\x00byte"),
    ],
    ids=repr,
)
async def test_invalid_text_fields_are_rejected(
    client: httpx.AsyncClient, admin_key: str, field: str, value: object
) -> None:
    response = await client.post(
        "/v1/products", json=product_body(**{field: value}), headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", field)


async def test_lone_surrogate_in_text_is_rejected(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    content = b'{"name": "bad \\ud800 name", "price": 1, "category": "c"}'
    response = await client.post(
        "/v1/products",
        content=content,
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    assert_error(response, 400, "invalid_request", "name")


async def test_empty_body_is_rejected(client: httpx.AsyncClient, admin_key: str) -> None:
    response = await client.post(
        "/v1/products", headers={**bearer(admin_key), "Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request", "body")


@pytest.mark.parametrize("body", [[], "x", 1, None], ids=repr)
async def test_body_that_is_not_an_object_is_rejected(
    client: httpx.AsyncClient, admin_key: str, body: object
) -> None:
    response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
    assert_error(response, 400, "invalid_request", "body")


@pytest.mark.parametrize("field", ["id", "created_at", "updated_at"])
async def test_server_managed_fields_cannot_be_set(
    client: httpx.AsyncClient, admin_key: str, field: str
) -> None:
    response = await client.post(
        "/v1/products", json=product_body(**{field: "prod_x"}), headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", field)


# --- update ------------------------------------------------------------------------------------


async def test_patch_changes_only_the_given_fields_and_bumps_updated_at(
    client: httpx.AsyncClient, admin_key: str, client_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(BASE_TIME)  # the catalogue's time, moved by hand
    monkeypatch.setattr(catalog_service, "utcnow", clock)
    created = await create(client, admin_key)
    clock.advance(1)
    response = await client.patch(
        f"/v1/products/{created['id']}",
        json={"price": 15.25, "inventory_count": 9},
        headers=bearer(admin_key),
    )
    assert response.status_code == 200, response.text
    updated = response.json()
    assert set(updated) == DETAIL_FIELDS
    assert updated == {
        **created,
        "price": 15.25,
        "inventory_count": 9,
        "updated_at": updated["updated_at"],
    }
    assert parse_timestamp(updated["updated_at"]) == clock.now
    assert parse_timestamp(created["updated_at"]) == clock.now - timedelta(seconds=1)
    fetched = await client.get(f"/v1/products/{created['id']}", headers=bearer(client_key))
    assert fetched.json() == updated


async def test_patch_with_every_field(client: httpx.AsyncClient, admin_key: str) -> None:
    created = await create(client, admin_key)
    changes = {
        "name": "Sketchbook",
        "description": "A4\nplain",
        "price": 0.1,
        "category": "art",
        "inventory_count": 0,
    }
    response = await client.patch(
        f"/v1/products/{created['id']}", json=changes, headers=bearer(admin_key)
    )
    assert response.status_code == 200, response.text
    assert {key: response.json()[key] for key in changes} == changes
    assert response.json()["created_at"] == created["created_at"]


async def test_empty_patch_keeps_every_field(client: httpx.AsyncClient, admin_key: str) -> None:
    created = await create(client, admin_key)
    response = await client.patch(
        f"/v1/products/{created['id']}", json={}, headers=bearer(admin_key)
    )
    assert response.status_code == 200, response.text
    assert {key: value for key, value in response.json().items() if key != "updated_at"} == {
        key: value for key, value in created.items() if key != "updated_at"
    }


@pytest.mark.parametrize("field", ["name", "description", "price", "category", "inventory_count"])
async def test_patch_with_null_is_rejected_naming_the_field(
    client: httpx.AsyncClient, admin_key: str, client_key: str, field: str
) -> None:
    created = await create(client, admin_key)
    response = await client.patch(
        f"/v1/products/{created['id']}", json={field: None}, headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", field)
    fetched = await client.get(f"/v1/products/{created['id']}", headers=bearer(client_key))
    assert fetched.json() == created


@pytest.mark.parametrize(
    ("field", "value"),
    [("price", 1.001), ("price", "2"), ("inventory_count", "2"), ("inventory_count", 2.5)],
    ids=repr,
)
async def test_patch_validates_like_create(
    client: httpx.AsyncClient, admin_key: str, field: str, value: object
) -> None:
    created = await create(client, admin_key)
    response = await client.patch(
        f"/v1/products/{created['id']}", json={field: value}, headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", field)


async def test_patch_with_unknown_field_is_rejected(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    created = await create(client, admin_key)
    response = await client.patch(
        f"/v1/products/{created['id']}", json={"stock": 3}, headers=bearer(admin_key)
    )
    assert_error(response, 400, "invalid_request", "stock")


@pytest.mark.parametrize("product_id", ["prod_" + "z" * 24, "nonsense", "ord_abc"])
async def test_patch_of_unknown_product_is_not_found(
    client: httpx.AsyncClient, admin_key: str, product_id: str
) -> None:
    response = await client.patch(
        f"/v1/products/{product_id}", json={"name": "X"}, headers=bearer(admin_key)
    )
    assert_error(response, 404, "not_found", "id")


# --- delete (archive) --------------------------------------------------------------------------


async def test_delete_archives_the_product(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    kept = await create(client, admin_key, name="Kept")
    archived = await create(client, admin_key, name="Archived")
    response = await client.delete(f"/v1/products/{archived['id']}", headers=bearer(admin_key))
    assert response.status_code == 204
    assert response.content == b""

    page = await list_page(client, client_key)
    assert [item["id"] for item in page["data"]] == [kept["id"]]
    assert page["pagination"]["total"] == 1

    fetched = await client.get(f"/v1/products/{archived['id']}", headers=bearer(client_key))
    assert_error(fetched, 404, "not_found", "id")

    again = await client.delete(f"/v1/products/{archived['id']}", headers=bearer(admin_key))
    assert_error(again, 404, "not_found", "id")


async def test_archived_product_cannot_be_patched(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    product = await create(client, admin_key)
    deleted = await client.delete(f"/v1/products/{product['id']}", headers=bearer(admin_key))
    assert deleted.status_code == 204
    response = await client.patch(
        f"/v1/products/{product['id']}", json={"name": "Back"}, headers=bearer(admin_key)
    )
    assert_error(response, 404, "not_found", "id")


async def test_archived_product_leaves_the_category_filter(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await create(client, admin_key, category="toys")
    await client.delete(f"/v1/products/{product['id']}", headers=bearer(admin_key))
    page = await list_page(client, client_key, category="toys")
    assert page["data"] == []
    assert page["pagination"]["total"] == 0


@pytest.mark.parametrize("product_id", ["prod_" + "z" * 24, "nonsense"])
async def test_delete_of_unknown_product_is_not_found(
    client: httpx.AsyncClient, admin_key: str, product_id: str
) -> None:
    response = await client.delete(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert_error(response, 404, "not_found", "id")
