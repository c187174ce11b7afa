"""Finding products: ``q`` (the full-text index of each backend), ``sort``, and
``GET /v1/categories``, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from commerce_api.catalog import importing, repository
from commerce_api.storage.db import Database
from tests import factories, helpers
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error

BASE_TIME = datetime(2026, 2, 1, 8, 0, tzinfo=UTC)

# (name, description, price_minor, category); created in this order, a second apart, but the
# last two share the fourth one's created_at (ties by id).
CATALOGUE = [
    ("Dotted Notebook", "A5, dotted pages", 1250, "stationery"),
    ("blue pen", "Writes in blue ink", 150, "stationery"),
    ("Zebra T-shirt", "Organic cotton, striped", 2500, "apparel"),
    ("Café crème mug", "Holds a large café au lait", 1250, "kitchen"),
    ("notebook cover", "Leather, fits the dotted notebook", 4000, "stationery"),
    ("Apron", "Cotton, with a pocket for notes", 150, "kitchen"),
]


async def seed(db: Database) -> list[dict[str, Any]]:
    """The catalogue above, as rows (in list order: created_at, then id)."""
    rows = []
    for index, (name, description, price, category) in enumerate(CATALOGUE):
        created = BASE_TIME + timedelta(seconds=min(index, 3))
        rows.append(
            factories.product_row(
                name=name,
                description=description,
                price_minor=price,
                category=category,
                created_at=created,
            )
        )
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    return sorted(rows, key=lambda row: (row["created_at"], row["id"]))


async def names(client: httpx.AsyncClient, key: str, **params: str | int) -> list[str]:
    page = await helpers.list_page(client, "/v1/products", key, **params)
    assert page["pagination"]["total"] == len(page["data"]) or "limit" in params
    return [item["name"] for item in page["data"]]


def expected_order(rows: list[dict[str, Any]], sort: str) -> list[str]:
    """The names in ``sort`` order, computed here: the key, then (created_at, id); ``-key``
    the exact reverse."""
    key = sort.removeprefix("-")

    def rank(row: dict[str, Any]) -> tuple[Any, ...]:
        first = () if key == "created_at" else (row["price_minor" if key == "price" else "name"],)
        return (*first, row["created_at"], row["id"])

    ordered = sorted(rows, key=rank, reverse=sort.startswith("-"))
    return [row["name"] for row in ordered]


# --- sort --------------------------------------------------------------------------------------


@pytest.mark.parametrize("sort", ["created_at", "-created_at", "price", "-price", "name"])
async def test_sort_orders_the_whole_list_and_pages_walk_it_once(
    sort: str, client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    rows = await seed(db)
    expected = expected_order(rows, sort)
    assert await names(client, client_key, sort=sort) == expected
    walked = []
    for offset in range(0, len(rows), 4):
        walked += await names(client, client_key, sort=sort, limit=4, offset=offset)
    assert walked == expected
    books = [row for row in rows if row["category"] == "stationery"]
    assert await names(client, client_key, sort=sort, category="stationery") == expected_order(
        books, sort
    )


async def test_default_sort_is_creation_order(
    client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    rows = await seed(db)
    assert await names(client, client_key) == [row["name"] for row in rows]


async def test_name_sort_compares_code_points(
    client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    """Uppercase before lowercase, accented letters after both: the same on both backends,
    whatever the database's locale."""
    await seed(db)
    assert await names(client, client_key, sort="name") == [
        "Apron",
        "Café crème mug",
        "Dotted Notebook",
        "Zebra T-shirt",
        "blue pen",
        "notebook cover",
    ]


@pytest.mark.parametrize("value", ["", "price ", "desc", "-name", "Price", "created_at,price"])
async def test_an_unknown_sort_is_refused_naming_it(
    value: str, client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/products", params={"sort": value}, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", "sort")


# --- q -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("notebook", ["Dotted Notebook", "notebook cover"]),  # the name, any case
        ("NOTEBOOK", ["Dotted Notebook", "notebook cover"]),
        ("dotted", ["Dotted Notebook", "notebook cover"]),  # and the description
        ("note", ["Dotted Notebook", "notebook cover", "Apron"]),  # a word's beginning
        ("cotton striped", ["Zebra T-shirt"]),  # every word
        ("striped apron", []),
        ("shirt", ["Zebra T-shirt"]),  # words split at anything but letters and digits
        ("t-shirt", ["Zebra T-shirt"]),
        ("CAFÉ", ["Café crème mug"]),  # beyond ASCII
        ("cafe", []),  # an accent is part of its letter
        ("a5", ["Dotted Notebook"]),
        ("otebook", []),  # beginnings only
        ("glass", []),
    ],
)
async def test_q_finds_the_products_with_every_word(
    q: str, found: list[str], client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    await seed(db)
    assert sorted(await names(client, client_key, q=q)) == sorted(found)


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ('"', []),  # no word: nothing
        ("*", []),
        ("'", []),
        ("-", []),
        ("\\", []),
        ("%_", []),
        ("😀", []),
        ("x" * 200, []),
        ("notebook OR pen", []),  # three words, all needed
        ("NEAR(notebook pen)", []),
        ("name:pen", []),
        ("pen & !notebook", []),
        ("pen | notebook", []),
        ("pen:*", ["blue pen"]),
        ('pen"', ["blue pen"]),
    ],
)
async def test_q_is_words_never_a_query_language(
    q: str, found: list[str], client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    """What FTS5 and tsquery would read as operators is text here: every schema-valid `q`
    is answered, with the products that have its words."""
    await seed(db)
    assert await names(client, client_key, q=q) == found


async def test_q_combines_with_category_sort_and_paging(
    client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    await seed(db)
    assert await names(client, client_key, q="cotton", sort="-price") == ["Zebra T-shirt", "Apron"]
    assert await names(client, client_key, q="cotton", category="kitchen") == ["Apron"]
    assert await names(client, client_key, q="note", sort="name") == [
        "Apron",
        "Dotted Notebook",
        "notebook cover",
    ]
    page = await helpers.list_page(
        client, "/v1/products", client_key, q="note", sort="price", limit=1, offset=1
    )
    assert [item["name"] for item in page["data"]] == ["Dotted Notebook"]
    assert page["pagination"] == {"total": 3, "limit": 1, "offset": 1, "has_more": True}


async def test_q_follows_every_change_in_the_writing_transaction(
    client: httpx.AsyncClient, client_key: str, admin_key: str, db: Database
) -> None:
    """Created, renamed, re-described, archived, restored by an import: the very next read
    finds the product by what it says now, and only by that."""
    created = await factories.create_product(
        client, admin_key, name="Linen towel", description="Soft"
    )
    product_id = created["id"]
    assert await names(client, client_key, q="linen") == ["Linen towel"]
    response = await client.patch(
        f"/v1/products/{product_id}",
        json={"name": "Hemp towel", "description": "Rough"},
        headers=bearer(admin_key),
    )
    assert response.status_code == 200, response.text
    assert await names(client, client_key, q="linen") == []
    assert await names(client, client_key, q="soft") == []
    assert await names(client, client_key, q="hemp rough") == ["Hemp towel"]
    stock = await client.patch(
        f"/v1/products/{product_id}", json={"inventory_count": 3}, headers=bearer(admin_key)
    )
    assert stock.status_code == 200
    assert await names(client, client_key, q="hemp") == ["Hemp towel"]
    response = await client.delete(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert response.status_code == 204
    assert await names(client, client_key, q="hemp") == []
    async with db.write() as conn:
        await importing.import_products(conn, None, [{"id": product_id, "name": "Wool towel"}])
    assert await names(client, client_key, q="wool rough") == ["Wool towel"]
    assert await names(client, client_key, q="hemp") == []


async def test_a_rolled_back_write_leaves_the_index_as_it_was(
    client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    await seed(db)

    class Abort(Exception):
        pass

    async def insert_then_fail() -> None:
        async with db.write() as conn:
            await repository.insert(conn, factories.product_row(name="Phantom notebook"))
            raise Abort

    with pytest.raises(Abort):
        await insert_then_fail()
    assert await names(client, client_key, q="phantom") == []
    assert await names(client, client_key, q="notebook") == ["Dotted Notebook", "notebook cover"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [("", "empty"), ("x" * 201, "too long"), ("a\nb", "a line break"), ("a\x00b", "a NUL")],
)
async def test_an_invalid_q_is_refused_naming_it(
    value: str, problem: str, client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/products", params={"q": value}, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", "q")


# --- categories --------------------------------------------------------------------------------


async def test_categories_lists_live_categories_with_their_counts(
    client: httpx.AsyncClient, client_key: str, admin_key: str, db: Database
) -> None:
    rows = await seed(db)
    apron = next(row for row in rows if row["name"] == "Apron")
    response = await client.delete(f"/v1/products/{apron['id']}", headers=bearer(admin_key))
    assert response.status_code == 204
    response = await client.get("/v1/categories", headers=bearer(client_key))
    assert response.status_code == 200, response.text
    assert response.json() == {
        "data": [
            {"name": "apparel", "product_count": 1},
            {"name": "kitchen", "product_count": 1},
            {"name": "stationery", "product_count": 3},
        ]
    }
    mug = next(row for row in rows if row["name"] == "Café crème mug")
    await client.delete(f"/v1/products/{mug['id']}", headers=bearer(admin_key))
    found = (await client.get("/v1/categories", headers=bearer(client_key))).json()
    assert [category["name"] for category in found["data"]] == ["apparel", "stationery"]


async def test_categories_of_an_empty_catalogue_is_an_empty_list(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/categories", headers=bearer(client_key))
    assert (response.status_code, response.json()) == (200, {"data": []})


async def test_categories_need_a_key(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/categories"), 401, "unauthorized")
