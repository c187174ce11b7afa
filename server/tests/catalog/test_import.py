"""The streamed import on both backends: a large file is one catalogue change that search
finds, a bad one changes nothing and says where, and the fast rules agree with the schemas."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select, text

from commerce_api.catalog import importing, repository, search_repository
from commerce_api.catalog.import_file import read_records
from commerce_api.catalog.import_rules import FieldError, changed_columns, new_product_columns
from commerce_api.catalog.schemas import ProductCreate, ProductUpdate
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database
from commerce_api.storage.tables import audit_events, products

LARGE = 20_000  # several batches (importing.BATCH_ROWS)


def csv_file(count: int, bad_line: int | None = None) -> io.BytesIO:
    """A CSV of ``count`` products (every tenth has the word "zebra"); line ``bad_line`` has a
    price with three decimals."""
    lines = ["name,description,price,category,inventory_count"]
    for index in range(count):
        word = "zebra" if index % 10 == 0 else "plain"
        price = "1.234" if len(lines) + 1 == bad_line else f"{index % 500}.25"
        lines.append(f'Item {index},"A {word} thing, no. {index}",{price},cat-{index % 7},{index}')
    return io.BytesIO(("\n".join(lines) + "\n").encode())


async def run(db: Database, stream: io.BytesIO) -> importing.ImportResult:
    async with db.write(bounded=False) as conn:
        return await importing.import_records(conn, None, read_records("p.csv", stream))


async def snapshot(db: Database) -> tuple[Any, ...]:
    async with db.read() as conn:
        rows = (await conn.execute(select(products).order_by(products.c.id))).all()
        audits = await conn.scalar(select(func.count()).select_from(audit_events))
        counter = await conn.scalar(
            text("SELECT value FROM instance_values WHERE name = 'catalog_version'")
        )
        found = await search(conn, "zebra")
    return rows, audits, counter, found


async def search(conn: Any, word: str) -> set[str]:
    dialect = conn.dialect.name
    statement = search_repository.search_ids(dialect)
    match = search_repository.search_match(dialect, [word])
    return {row[0] for row in (await conn.execute(statement, {"match": match})).all()}


async def test_a_large_import_is_one_change_that_search_finds(db: Database) -> None:
    existing = new_id("prod")
    async with db.write() as conn:
        await repository.insert(
            conn,
            {
                "id": existing,
                "name": "Old",
                "description": "old words",
                "price_minor": 100,
                "category": "c",
                "inventory_count": 1,
                "created_at": utcnow(),
                "updated_at": utcnow(),
            },
        )
    assert await run(db, csv_file(LARGE)) == importing.ImportResult(created=LARGE, updated=0)
    async with db.write() as conn:  # an update by id, in an import of its own
        update = io.BytesIO(f'id,name,description\n{existing},Renamed,"now a zebra"\n'.encode())
        records = read_records("u.csv", update)
        result = await importing.import_records(conn, None, records)
    assert result == importing.ImportResult(created=0, updated=1)

    async with db.read() as conn:
        stamps = (
            await conn.execute(
                select(products.c.change_seq, func.count())
                .where(products.c.id != existing)
                .group_by(products.c.change_seq)
            )
        ).all()
        names: list[str] = list(
            (
                await conn.scalars(
                    select(products.c.name)
                    .where(products.c.id != existing)
                    .order_by(products.c.created_at, products.c.id)
                )
            ).all()
        )
        renamed = (await conn.execute(select(products).where(products.c.id == existing))).one()
        creates = await conn.scalar(
            select(func.count())
            .select_from(audit_events)
            .where(audit_events.c.action == "product.create")
        )
        found = await search(conn, "zebra")
        ids: set[str] = set((await conn.scalars(select(products.c.id))).all())
    [(seq, count)] = [(int(row[0]), int(row[1])) for row in stamps]
    assert count == LARGE  # one change number for the whole import
    assert renamed.change_seq == seq + 1
    assert renamed.name == "Renamed"
    assert names == [f"Item {index}" for index in range(LARGE)]  # the file's order
    assert creates == LARGE
    assert len(found) == LARGE // 10 + 1
    assert found <= ids
    async with db.write() as conn:  # the insert trigger is back: a later product is found
        await importing.import_products(
            conn, None, [{"name": "Zebra crossing", "price": 1, "category": "c"}]
        )
    async with db.read() as conn:
        assert len(await search(conn, "zebra")) == LARGE // 10 + 2


@pytest.mark.parametrize("bad_line", [2, 12_345, LARGE + 1])
async def test_a_bad_file_changes_nothing_and_names_line_and_column(
    db: Database, bad_line: int
) -> None:
    await run(db, csv_file(30))
    before = await snapshot(db)
    with pytest.raises(importing.InvalidImport) as info:
        await run(db, csv_file(LARGE, bad_line=bad_line))
    assert str(info.value) == (
        f"line {bad_line}, column price: must have at most two decimal places"
    )
    assert await snapshot(db) == before


GOOD = {"name": "Lamp", "price": 19.99, "category": "home"}
CASES: list[dict[str, Any]] = [
    GOOD,
    {**GOOD, "description": "Tab\tand\nnew line", "inventory_count": 2.0},
    {**GOOD, "price": 0},
    {**GOOD, "price": 100_000_000},
    {**GOOD, "price": 100_000_000.01},
    {**GOOD, "price": 0.001},
    {**GOOD, "price": -0.01},
    {**GOOD, "price": float("nan")},
    {**GOOD, "price": True},
    {**GOOD, "price": "1"},
    {**GOOD, "name": ""},
    {**GOOD, "name": "x" * 200},
    {**GOOD, "name": "x" * 201},
    {**GOOD, "name": "a\nb"},
    {**GOOD, "name": "\ud800"},
    {**GOOD, "name": 5},
    {**GOOD, "description": "x" * 5001},
    {**GOOD, "description": "bell\x07"},
    {**GOOD, "category": "c" * 101},
    {**GOOD, "inventory_count": -1},
    {**GOOD, "inventory_count": 2_147_483_648},
    {**GOOD, "inventory_count": 1.5},
    {**GOOD, "inventory_count": "3"},
    {**GOOD, "inventory_count": False},
    {**GOOD, "colour": "red"},
    {"name": "Lamp", "category": "home"},
]


@pytest.mark.parametrize("record", CASES)
def test_the_rules_agree_with_the_schemas(record: dict[str, Any]) -> None:
    def accepted(check: Any, *args: Any) -> bool:
        try:
            check(*args)
        except (FieldError, ValidationError):
            return False
        return True

    assert accepted(new_product_columns, record) == accepted(ProductCreate.model_validate, record)
    change = {key: value for key, value in record.items() if key != "category"}
    assert accepted(changed_columns, {"id": new_id("prod"), **change}) == accepted(
        ProductUpdate.model_validate, change
    )


def test_a_json_file_is_read_a_chunk_at_a_time_with_each_records_line() -> None:
    records = [
        {"name": f"Item {index}", "description": "é" * (index % 90), "price": index / 4}
        for index in range(3000)  # several of the reader's chunks
    ]
    content = "\ufeff[\n" + ",\n".join(json.dumps(record) for record in records) + "\n]\n"
    located = list(read_records("p.json", io.BytesIO(content.encode())))
    assert [item.record for item in located] == records
    assert [item.place for item in located[:2]] == ["line 2", "line 3"]
    assert located[-1].place == f"line {len(records) + 1}"
