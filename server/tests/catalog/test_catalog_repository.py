"""Catalogue queries and the all-or-nothing product import, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from commerce_api.catalog import repository
from commerce_api.catalog.importing import (
    ImportResult,
    InvalidImport,
    import_products,
    parse_import_file,
)
from commerce_api.catalog.service import list_products
from commerce_api.core.ids import new_id
from commerce_api.storage.db import Database
from commerce_api.storage.tables import products

T0 = datetime(2026, 11, 21, 8, 0, 0, tzinfo=UTC)


def product_row(
    *,
    id: str | None = None,
    name: str = "Widget",
    category: str = "tools",
    price_minor: int = 1999,
    inventory_count: int = 5,
    created_at: datetime = T0,
    archived_at: datetime | None = None,
) -> dict[str, Any]:
    return {
        "id": id or new_id("prod"),
        "name": name,
        "description": f"About {name}",
        "price_minor": price_minor,
        "category": category,
        "inventory_count": inventory_count,
        "created_at": created_at,
        "updated_at": created_at,
        "archived_at": archived_at,
    }


async def insert_rows(db: Database, rows: list[dict[str, Any]]) -> None:
    async with db.write() as conn:
        for row in rows:
            await repository.insert(conn, row)


async def page_ids(
    db: Database, category: str | None = None, limit: int = 100, offset: int = 0
) -> list[str]:
    async with db.read() as conn:
        rows = await repository.page_active(conn, category, limit, offset)
    return [row.id for row in rows]


async def all_products(db: Database) -> dict[str, dict[str, Any]]:
    async with db.read() as conn:
        result = await conn.execute(select(products))
        return {row.id: dict(row._mapping) for row in result}


# --- queries --------------------------------------------------------------------------------------


async def test_insert_and_get(db: Database) -> None:
    row = product_row(name="Lamp", price_minor=4250, inventory_count=7)
    await insert_rows(db, [row])
    async with db.read() as conn:
        found = await repository.get_active(conn, row["id"])
        assert await _stored(conn, row["id"])
        assert not await _stored(conn, new_id("prod"))
        assert await repository.get_active(conn, new_id("prod")) is None
    assert found is not None
    assert found.name == "Lamp"
    assert found.price_minor == 4250
    assert found.inventory_count == 7
    assert found.created_at == T0
    assert found.updated_at == T0


async def test_list_is_ordered_by_created_at_then_id(db: Database) -> None:
    same_time = [product_row(id=f"prod_{suffix}") for suffix in ("m", "C", "z", "a", "Q")]
    earlier = product_row(id="prod_zzz", created_at=T0 - timedelta(microseconds=1))
    later = product_row(id="prod_AAA", created_at=T0 + timedelta(microseconds=1))
    await insert_rows(db, [same_time[0], later, same_time[1], earlier, *same_time[2:]])
    expected = ["prod_zzz", *sorted(row["id"] for row in same_time), "prod_AAA"]
    assert await page_ids(db) == expected


async def test_equal_created_at_is_broken_by_id_across_pages(db: Database) -> None:
    rows = [product_row() for _ in range(25)]
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    expected = sorted(row["id"] for row in rows)
    pages = [await page_ids(db, limit=7, offset=offset) for offset in range(0, 28, 7)]
    assert [len(page) for page in pages] == [7, 7, 7, 4]
    assert [item for page in pages for item in page] == expected


async def test_archived_rows_are_excluded_from_count_and_page(db: Database) -> None:
    active = [product_row(created_at=T0 + timedelta(seconds=i)) for i in range(3)]
    archived = product_row(archived_at=T0)
    await insert_rows(db, [*active, archived])
    async with db.write() as conn:
        assert await repository.archive(conn, active[1]["id"], T0 + timedelta(hours=1))
        assert not await repository.archive(conn, active[1]["id"], T0 + timedelta(hours=2))
        assert await repository.count_active(conn, None) == 2
        assert await repository.count_all(conn) == 4
        assert await repository.get_active(conn, archived["id"]) is None
        assert await repository.get_active(conn, active[1]["id"]) is None
        assert await _stored(conn, archived["id"])
    assert await page_ids(db) == [active[0]["id"], active[2]["id"]]
    stored = (await all_products(db))[active[1]["id"]]
    assert stored["archived_at"] == T0 + timedelta(hours=1)
    assert stored["updated_at"] == T0 + timedelta(hours=1)


async def test_update_active_skips_archived_and_unknown(db: Database) -> None:
    active, archived = product_row(), product_row(archived_at=T0)
    await insert_rows(db, [active, archived])
    async with db.write() as conn:
        assert await repository.update_active(conn, active["id"], {"name": "Renamed"})
        assert not await repository.update_active(conn, archived["id"], {"name": "Renamed"})
        assert not await repository.update_active(conn, new_id("prod"), {"name": "Renamed"})
        assert await repository.update_any(conn, archived["id"], {"name": "Touched"})
    stored = await all_products(db)
    assert stored[active["id"]]["name"] == "Renamed"
    assert stored[archived["id"]]["name"] == "Touched"


async def test_category_filter(db: Database) -> None:
    books = [product_row(category="books", created_at=T0 + timedelta(seconds=i)) for i in range(3)]
    tools = [product_row(category="tools", created_at=T0 + timedelta(seconds=i)) for i in range(2)]
    archived_book = product_row(category="books", archived_at=T0)
    await insert_rows(db, [*tools, *books, archived_book])
    async with db.read() as conn:
        assert await repository.count_active(conn, "books") == 3
        assert await repository.count_active(conn, "tools") == 2
        assert await repository.count_active(conn, "Books") == 0
        assert await repository.count_active(conn, "garden") == 0
    assert await page_ids(db, "books") == [row["id"] for row in books]
    assert await page_ids(db, "books", limit=1, offset=1) == [books[1]["id"]]
    assert await page_ids(db, "garden") == []


async def test_list_products_service_page(db: Database) -> None:
    rows = [
        product_row(price_minor=price, created_at=T0 + timedelta(seconds=i))
        for i, price in enumerate([1999, 10, 100, 7])
    ]
    await insert_rows(db, rows)
    async with db.read() as conn:
        page = await list_products(conn, category=None, limit=3, offset=0)
        last = await list_products(conn, category=None, limit=3, offset=3)
        past = await list_products(conn, category=None, limit=3, offset=10)
    assert [item["price"] for item in page["data"]] == [19.99, 0.1, 1]
    assert page["data"][0]["created_at"] == "2026-11-21T08:00:00.000Z"
    assert page["pagination"] == {"total": 4, "limit": 3, "offset": 0, "has_more": True}
    assert [item["price"] for item in last["data"]] == [0.07]
    assert last["pagination"]["has_more"] is False
    assert past["data"] == []
    assert past["pagination"] == {"total": 4, "limit": 3, "offset": 10, "has_more": False}


# --- import ---------------------------------------------------------------------------------------


def record(name: str = "Widget", **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"About {name}",
        "price": 19.99,
        "category": "tools",
        "inventory_count": 3,
        **overrides,
    }


async def run_import(db: Database, records: list[dict[str, Any]]) -> ImportResult:
    async with db.write() as conn:
        return await import_products(conn, None, records)


async def test_import_creates_products(db: Database) -> None:
    result = await run_import(db, [record("A"), record("B", price=0.07, inventory_count=0)])
    assert result == ImportResult(created=2, updated=0)
    stored = sorted((await all_products(db)).values(), key=lambda row: row["name"])
    assert [(row["name"], row["price_minor"], row["inventory_count"]) for row in stored] == [
        ("A", 1999, 3),
        ("B", 7, 0),
    ]
    assert all(row["id"].startswith("prod_") for row in stored)
    assert all(row["archived_at"] is None for row in stored)


async def _stored(conn: Any, product_id: str) -> bool:
    """Whether a row with this id is in the table, archived or not."""
    found = await conn.scalar(select(products.c.id).where(products.c.id == product_id))
    return found is not None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"price": 1.234}, "record 2, field price: must have at most two decimal places"),
        ({"price": -1}, "record 2, field price: must not be negative"),
        ({"price": "19.99"}, "record 2, field price: must be a number"),
        ({"price": True}, "record 2, field price: must be a number"),
        ({"inventory_count": -1}, "record 2, field inventory_count: must be a whole number"),
        ({"inventory_count": 2.5}, "record 2, field inventory_count: must be a whole number"),
        ({"name": ""}, "record 2, field name: must be 1 to 200 characters long"),
        ({"name": "a\nb"}, "record 2, field name: must not contain control characters"),
        ({"colour": "red"}, "record 2, field colour: is not a product field"),
        ({"id": "not-an-id"}, "record 2, field id: 'not-an-id' is not a product id"),
        ({"id": 42}, "record 2, field id: 42 is not a product id"),
    ],
)
async def test_import_is_all_or_nothing(db: Database, bad: dict[str, Any], message: str) -> None:
    existing = product_row(name="Existing")
    await insert_rows(db, [existing])
    before = await all_products(db)
    records = [
        {"id": existing["id"], "name": "Changed", "price": 1},
        {**record("Bad"), **bad},
        record("After"),
    ]
    with pytest.raises(InvalidImport) as info:
        await run_import(db, records)
    assert str(info.value).startswith(message), str(info.value)
    assert await all_products(db) == before


async def test_import_missing_field_names_record_and_field(db: Database) -> None:
    bad = record("Bad")
    del bad["price"]
    with pytest.raises(InvalidImport, match=r"record 3, field price: is required"):
        await run_import(db, [record("A"), record("B"), bad, record("D")])
    assert await all_products(db) == {}


async def test_import_of_an_unknown_id_writes_nothing(db: Database) -> None:
    unknown = new_id("prod")
    with pytest.raises(InvalidImport, match=f"record 2: no product with id `{unknown}`"):
        await run_import(db, [record("A"), {"id": unknown, "name": "Ghost"}])
    assert await all_products(db) == {}


async def test_import_with_id_updates_and_restores_an_archived_product(db: Database) -> None:
    archived = product_row(name="Old", archived_at=T0, inventory_count=1)
    untouched = product_row(name="Untouched")
    await insert_rows(db, [archived, untouched])
    result = await run_import(
        db,
        [
            {"id": archived["id"], "name": "Restored", "price": 25.5, "inventory_count": 9},
            record("New"),
        ],
    )
    assert result == ImportResult(created=1, updated=1)
    stored = await all_products(db)
    assert len(stored) == 3
    restored = stored[archived["id"]]
    assert restored["archived_at"] is None
    assert restored["name"] == "Restored"
    assert restored["price_minor"] == 2550
    assert restored["inventory_count"] == 9
    assert restored["description"] == "About Old"  # omitted fields keep their value
    assert restored["category"] == "tools"
    assert restored["created_at"] == T0
    assert restored["updated_at"] > T0
    kept = stored[untouched["id"]]
    assert kept == {**untouched, "change_seq": kept["change_seq"]}
    assert kept["change_seq"] < restored["change_seq"]  # the import's change is the later one
    async with db.read() as conn:
        assert await repository.get_active(conn, archived["id"]) is not None


async def test_import_update_refuses_null(db: Database) -> None:
    existing = product_row()
    await insert_rows(db, [existing])
    before = await all_products(db)
    with pytest.raises(InvalidImport, match=r"record 1, field price: must not be null"):
        await run_import(db, [{"id": existing["id"], "price": None}])
    assert await all_products(db) == before


async def test_import_of_nothing(db: Database) -> None:
    assert await run_import(db, []) == ImportResult(created=0, updated=0)


# --- parsing import files -------------------------------------------------------------------------


def test_parse_json_array() -> None:
    content = '[{"name": "A", "price": 19.99, "category": "x"}, {"id": "prod_1", "price": 1}]'
    assert parse_import_file("products.json", content) == [
        {"name": "A", "price": 19.99, "category": "x"},
        {"id": "prod_1", "price": 1},
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "line 1: expected a JSON array"),
        ('[{"name": "A"},\n {"name": }]', "line 2: not valid JSON"),
        ('[{"name": "A"}\n\n{"name": "B"}]', "line 3: not valid JSON: expected ',' or ']'"),
        ('[{"name": "A"}] []', "line 1: not valid JSON: extra data"),
        ('{"name": "A"}', "expected a JSON array"),
        ('[{"name": "A"}, 3]', "expected a JSON array"),
        ('"text"', "expected a JSON array"),
    ],
)
def test_parse_json_rejects_non_arrays(content: str, message: str) -> None:
    with pytest.raises(InvalidImport, match=message):
        parse_import_file("products.json", content)


def test_parse_csv() -> None:
    content = (
        "id,name,description,price,category,inventory_count\n"
        ',Lamp,"Bright, warm",19.99,home,5\n'
        "prod_abc,Desk,,0.1,home, 7 \n"
        ",Pen,Blue,3,office,0\n"
    )
    assert parse_import_file("Products.CSV", content) == [
        {
            "name": "Lamp",
            "description": "Bright, warm",
            "price": Decimal("19.99"),
            "category": "home",
            "inventory_count": 5,
        },
        {
            "id": "prod_abc",
            "name": "Desk",
            "description": "",
            "price": Decimal("0.1"),
            "category": "home",
            "inventory_count": 7,
        },
        {
            "name": "Pen",
            "description": "Blue",
            "price": Decimal("3"),
            "category": "office",
            "inventory_count": 0,
        },
    ]


def test_parse_csv_without_optional_columns() -> None:
    content = "name,price,category\nLamp,19.99,home\n"
    assert parse_import_file("p.csv", content) == [
        {"name": "Lamp", "price": Decimal("19.99"), "category": "home"}
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name,price,category\nLamp,19.99,home,extra\n", "line 2: wrong number of columns"),
        ("name,price,category\nLamp,19.99,home\nDesk,5\n", "line 3: wrong number of columns"),
        ("name,price,category\nLamp,cheap,home\n", "line 2, column price: must be a number"),
        ("name,price,inventory_count\nLamp,1,many\n", "line 2, column inventory_count: must"),
        ("name,price,inventory_count\nLamp,1,1.5\n", "line 2, column inventory_count: must"),
        ("name,colour\nLamp,red\n", "line 1, column colour: unknown column"),
        ('name,price\n"Lamp\nXL",1\n"Desk,x\n', "line 4: not valid CSV"),
    ],
)
def test_parse_csv_errors_name_the_line(content: str, message: str) -> None:
    with pytest.raises(InvalidImport, match=message):
        parse_import_file("p.csv", content)


async def test_csv_records_import(db: Database) -> None:
    content = "name,description,price,category,inventory_count\nLamp,Bright,19.99,home,5\n"
    result = await run_import(db, parse_import_file("p.csv", content))
    assert result == ImportResult(created=1, updated=0)
    [stored] = (await all_products(db)).values()
    assert stored["price_minor"] == 1999
    assert stored["inventory_count"] == 5


async def test_csv_price_with_three_decimals_is_refused(db: Database) -> None:
    content = "name,price,category\nLamp,19.999,home\n"
    with pytest.raises(
        InvalidImport, match="record 1, field price: must have at most two decimal places"
    ):
        await run_import(db, parse_import_file("p.csv", content))
    assert await all_products(db) == {}


def test_parse_csv_with_a_byte_order_mark() -> None:
    content = "\ufeffname,price,category\nLamp,19.99,home\n"
    assert parse_import_file("p.csv", content) == [
        {"name": "Lamp", "price": Decimal("19.99"), "category": "home"}
    ]
