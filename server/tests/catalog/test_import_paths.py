"""The import's fast paths write what its plain paths write: a CSV file's columns checked at
once agree with its records checked one by one; an import into an empty catalogue (its search
index built at the end on PostgreSQL) is stored, searched and audited as one into a catalogue
that has products; the audit rows the database writes are those of ``audit.service``."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from sqlalchemy import select, text

from commerce_api.audit import service as audit
from commerce_api.catalog import importing
from commerce_api.catalog.import_file import CsvRecords, InvalidImport
from commerce_api.catalog.import_rules import FieldError, csv_new_products, new_product_columns
from commerce_api.catalog.service import audited
from commerce_api.storage.db import Database
from commerce_api.storage.tables import audit_events, products
from tests.catalog.test_import import LARGE, csv_file, run, search

HEADER = ["name", "description", "price", "category", "inventory_count"]
PLAIN = ["Lamp", "A lamp, for reading.\nTwo lines.", "19.99", "home", "3"]
# Cells of one column each (the others PLAIN's), as an export or a person might write them.
CELLS: list[tuple[str, str]] = [
    ("price", "19.9"),
    ("price", " 19.99"),
    ("price", "1e3"),
    ("price", "0019.99"),
    ("price", "19.999"),
    ("price", "-1.00"),
    ("price", "99999999.99"),
    ("price", "100000000.00"),
    ("price", "100000000.01"),
    ("price", ""),
    ("inventory_count", "007"),
    ("inventory_count", "+5"),
    ("inventory_count", "1_000"),
    ("inventory_count", " 4"),
    ("inventory_count", "2147483647"),
    ("inventory_count", "2147483648"),
    ("inventory_count", "-1"),
    ("name", ""),
    ("name", "x" * 200),
    ("name", "x" * 201),
    ("name", "a\nb"),
    ("name", "Ünïcode ☃"),
    ("name", "'=SUM(A1)"),
    ("name", "'quoted"),
    ("name", "=1"),
    ("description", ""),
    ("description", "bell\x07"),
    ("description", "tab\tok\r\n"),
    ("description", "x" * 5001),
    ("category", "c" * 100),
    ("category", "c" * 101),
]


def record_by_record(header: list[str], rows: list[list[str]]) -> list[dict[str, Any]] | str:
    """The columns the record-by-record checks give, or the first error they raise."""
    content = io.StringIO()
    csv.writer(content).writerows([header, *rows])
    records = CsvRecords(io.StringIO(content.getvalue(), newline=""))
    try:
        return [new_product_columns(located.record) for located in records]
    except (InvalidImport, FieldError) as exc:
        return str(exc)


def at_once(header: list[str], rows: list[list[str]]) -> list[dict[str, Any]] | None:
    new = csv_new_products(header, rows)
    if new is None:
        return None
    columns = new.columns()
    return [{name: column[index] for name, column in columns.items()} for index in range(len(new))]


@pytest.mark.parametrize(("column", "cell"), CELLS)
def test_columns_checked_at_once_agree_with_records_checked_one_by_one(
    column: str, cell: str
) -> None:
    row = [cell if name == column else value for name, value in zip(HEADER, PLAIN, strict=True)]
    rows = [PLAIN, row, PLAIN]
    expected = record_by_record(HEADER, rows)
    found = at_once(HEADER, rows)
    # At once, or (anything not plainly valid) None: the records are then checked one by one.
    assert found is None or found == expected


def test_plain_rows_are_checked_at_once_with_each_columns_default() -> None:
    rows = [PLAIN, ["Kettle", "", "0.00", "kitchen", "0"], PLAIN]
    assert at_once(HEADER, rows) == record_by_record(HEADER, rows)
    assert at_once(["price", "name", "category"], [["5.50", "Mug", "kitchen"]]) == [
        {"name": "Mug", "description": "", "price_minor": 550, "category": "kitchen"}
        | {"inventory_count": 0}
    ]
    for header, rows in [
        (["id", *HEADER], [["", *PLAIN]]),  # an id column: records (creates or updates)
        (HEADER, [PLAIN, PLAIN[:4]]),  # a short row: records (the error names its line)
        (["name", "name", "price", "category"], [["a", "b", "1.00", "c"]]),
        (["name", "price"], [["a", "1.00"]]),  # no category: records (the error says so)
    ]:
        assert at_once(header, rows) is None


async def imported(db: Database, seq: int) -> dict[str, Any]:
    """What change ``seq`` (an import) wrote: its products (in list order, without their
    ids and times), their audit rows, and which of them search finds."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(products)
                .where(products.c.change_seq == seq)
                .order_by(products.c.created_at, products.c.id)
            )
        ).all()
        trail = {
            row.target_id: row
            for row in (
                await conn.execute(
                    select(audit_events).where(
                        audit_events.c.target_id.in_([row.id for row in rows])
                    )
                )
            ).all()
        }
        found = await search(conn, "zebra")
    for row in rows:  # each product's audit row is its create, as audit.service writes it
        event = trail[row.id]
        assert event.id == "aud_" + row.id.removeprefix("prod_")
        assert (event.actor_type, event.actor_id) == ("system", "cli")
        assert (event.action, event.target_type) == ("product.create", "product")
        assert event.created_at == row.created_at
        assert event.changes == audit.created(audited(dict(row._mapping)))
    assert len(trail) == len(rows)
    columns = ("name", "description", "price_minor", "category", "inventory_count")
    return {
        "products": [tuple(getattr(row, column) for column in columns) for row in rows],
        "found": [row.name for row in rows if row.id in found],
    }


async def set_aside(db: Database) -> list[str]:
    """What a large import sets aside and puts back: SQLite, the insert trigger that fills the
    search index; PostgreSQL, the GIN index of the words (and with it every other index of the
    products and of their words, and the words' foreign key: all as they were)."""
    async with db.read() as conn:
        if conn.dialect.name == "sqlite":
            query = "SELECT sql FROM sqlite_master WHERE name = 'product_search_insert'"
        else:
            query = (
                "SELECT indexdef FROM pg_indexes"
                " WHERE tablename IN ('products', 'product_search_words')"
                " UNION ALL SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = CAST('product_search_words' AS regclass) ORDER BY 1"
            )
        return [str(row[0]) for row in (await conn.execute(text(query))).all()]


async def last_change(db: Database) -> int:
    async with db.read() as conn:
        return int(
            await conn.scalar(
                select(products.c.change_seq).order_by(products.c.change_seq.desc()).limit(1)
            )
            or 0
        )


async def test_an_import_into_an_empty_catalogue_is_one_into_a_catalogue_with_products(
    db: Database,
) -> None:
    index = await set_aside(db)
    await run(db, csv_file(LARGE))  # into an empty catalogue
    first = await imported(db, await last_change(db))
    await run(db, csv_file(LARGE))  # into one with products
    second = await imported(db, await last_change(db))
    assert first == second
    assert len(first["products"]) == LARGE
    assert first["found"] == [f"Item {index}" for index in range(0, LARGE, 10)]
    assert await set_aside(db) == index
    if db.backend == "postgresql":  # analyzed: the next reads are planned for its size
        async with db.read() as conn:
            counted = await conn.scalar(
                text("SELECT reltuples FROM pg_class WHERE relname = 'products'")
            )
        assert counted >= 2 * LARGE * 0.9


async def test_a_bad_file_into_an_empty_catalogue_changes_nothing(db: Database) -> None:
    index = await set_aside(db)
    with pytest.raises(importing.InvalidImport):
        await run(db, csv_file(LARGE, bad_line=LARGE))
    async with db.read() as conn:
        assert await conn.scalar(select(products.c.id).limit(1)) is None
        assert await conn.scalar(select(audit_events.c.id).limit(1)) is None
    assert await set_aside(db) == index
    await run(db, csv_file(30))
    async with db.read() as conn:
        assert len(await search(conn, "zebra")) == 3


async def test_the_database_audits_awkward_values_as_audit_service_does(db: Database) -> None:
    rows = [
        ['Say "hi" \\ there', "tab\tline\nend ☃ é", "19.99", "home", "3"],
        ["Whole", "", "100.00", "c", "0"],
        ["Tiny", "", "0.01", "c", "2147483647"],
        ["Most", "", "99999999.99", "c", "1"],
        ["Free", "", "0.00", "c", "1"],
    ]
    content = io.StringIO()
    csv.writer(content).writerows([HEADER, *rows])
    await run(db, io.BytesIO(content.getvalue().encode()))
    stored = await imported(db, await last_change(db))  # checks each audit row
    assert [row[0] for row in stored["products"]] == [row[0] for row in rows]
