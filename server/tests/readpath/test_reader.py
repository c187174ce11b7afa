"""The read path's reader runs the catalogue's own statements, compiled for each driver, and
its rows are the engine's rows: same columns, same order, same values (on both backends)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson

from commerce_api.catalog import repository
from commerce_api.catalog.service import list_item, product_detail
from commerce_api.core.ids import new_id
from commerce_api.readpath import statements
from commerce_api.readpath.rows import ListRow, micros
from commerce_api.readpath.service import ReadPath
from commerce_api.storage.db import Database
from commerce_api.storage.tables import UTCDateTime
from tests.catalog.test_catalog_repository import T0, insert_rows, product_row

DETAIL_NAMES = tuple(column.name for column in repository.DETAIL_COLUMNS)
LIST_NAMES = tuple(column.name for column in repository.LIST_COLUMNS)
KEY_NAMES = tuple(column.name for column in repository.KEY_COLUMNS)


def selected(names: tuple[str, ...]) -> str:
    return "SELECT " + ", ".join(f"products.{name}" for name in names) + " \nFROM products \n"


def test_the_hot_path_sql_is_the_catalogue_statements_compiled() -> None:
    assert statements.PRODUCT_SQLITE == (
        "SELECT products.id, products.name, products.description, products.price_minor, "
        "products.category, products.created_at, products.inventory_count, products.updated_at "
        "\nFROM products \nWHERE products.id = ? AND products.archived_at IS NULL"
    )
    batch, keys = statements.PRODUCTS_POSTGRESQL, statements.KEYS_SQLITE
    assert batch == (
        selected(DETAIL_NAMES)
        + "WHERE products.id = ANY ($1::TEXT[]) AND products.archived_at IS NULL"
    )
    assert keys == (
        selected(KEY_NAMES)
        + "WHERE products.archived_at IS NULL ORDER BY products.created_at, products.id"
    )


def test_the_sqlite_list_row_has_the_declared_list_columns() -> None:
    # list_rows_sqlite builds ListRow positionally and converts the one timestamp, row[5].
    assert ListRow._fields == LIST_NAMES
    timestamps = [
        index
        for index, column in enumerate(repository.LIST_COLUMNS)
        if isinstance(column.type, UTCDateTime)
    ]
    assert timestamps == [5]


async def read_back(db: Database, product_id: str) -> tuple[dict[str, Any] | None, Any]:
    """The reader's record (as a dict) and the engine's row for one product."""
    read_path = await ReadPath.open(db, "sandbox")
    try:
        record = await read_path.reader.product(product_id)
    finally:
        await read_path.close()
    async with db.read() as conn:
        row = await repository.get_active(conn, product_id)
    return (None if record is None else vars(record)), row


async def test_the_reader_reads_what_the_engine_reads(db: Database) -> None:
    row = product_row(name="Lamp", price_minor=4250, inventory_count=7)
    row["created_at"] = T0 + timedelta(microseconds=123_456)
    row["updated_at"] = T0 + timedelta(hours=1, microseconds=7)
    await insert_rows(db, [row])
    record, engine_row = await read_back(db, row["id"])
    assert record is not None
    assert engine_row is not None
    assert tuple(record) == DETAIL_NAMES
    assert record == dict(engine_row._mapping)
    assert record["created_at"].tzinfo is not None
    assert product_detail(engine_row) == {
        "id": row["id"],
        "name": "Lamp",
        "description": "About Lamp",
        "price": 42.5,
        "category": "tools",
        "created_at": "2026-11-21T08:00:00.123Z",
        "inventory_count": 7,
        "updated_at": "2026-11-21T09:00:00.000Z",
    }


async def test_the_reader_skips_archived_and_unknown_products(db: Database) -> None:
    archived = product_row(archived_at=T0)
    await insert_rows(db, [archived])
    for product_id in (archived["id"], new_id("prod")):
        assert await read_back(db, product_id) == (None, None)


async def test_the_index_rows_are_the_engines_rows(db: Database) -> None:
    """What the in-memory catalogue is built from (``key_rows``), the change feed
    (``changes``) and a page's items (``list_items``) are the engine's rows, on both
    backends."""
    rows = [product_row(created_at=T0 + timedelta(microseconds=i * 1001)) for i in range(5)]
    rows.append(product_row(archived_at=T0))
    await insert_rows(db, rows)
    async with db.read() as conn:
        keys = (await conn.execute(repository.ACTIVE_KEYS)).all()
        changed = (
            await conn.execute(repository.CHANGES, {"seq": 0, "id": "", "limit": 10, "skip": 0})
        ).all()
        listed = (
            await conn.execute(
                repository.LIST_ITEMS_POSTGRESQL
                if not db.is_sqlite
                else repository.LIST_ITEMS_SQLITE,
                {
                    "ids": [row["id"] for row in rows]
                    if not db.is_sqlite
                    else orjson.dumps([row["id"] for row in rows]).decode()
                },
            )
        ).all()
    assert len(keys) == 5
    assert len(changed) == 6  # the archived one too
    read_path = await ReadPath.open(db, "sandbox")
    try:
        found = [
            row
            async for columns in read_path.reader.key_columns()
            for row in zip(*columns, strict=True)
        ]
        feed = await read_path.reader.changes(0, "", 10)
        items = await read_path.reader.list_items([row["id"] for row in rows])
    finally:
        await read_path.close()
    assert found == [(*row[:4], micros(row.created_at)) for row in keys]
    assert feed == [tuple(row) for row in changed]
    assert sorted(items) == sorted(tuple(row) for row in listed)
    by_id = {row.id: list_item(row) for row in listed}
    assert {row.id: list_item(row) for row in items} == by_id
