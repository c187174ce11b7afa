"""The bulk writes of a products import.

- New products are copied in (``COPY`` on PostgreSQL, one prepared statement on SQLite), and
  each copy's ``product.create`` audit rows are written by one ``INSERT … SELECT``: the
  database builds their ``changes`` from the products' columns (``catalog.service.audited``'s
  fields, ``audit.service.created``'s shape), so no audit row is built in Python. SQLite reads
  the rows just copied; PostgreSQL is sent their columns again, as arrays. Each audit id is the
  product's id under the audit prefix (``aud_`` and the product id's time and random part):
  unique as the product ids are, and in the file's order as they are.
- A large import (:func:`begin_bulk`) builds some things once, at its end, rather than row by
  row. SQLite: the insert trigger of migration 0009 is dropped and the search index filled in
  two statements; the connection's page cache is larger meanwhile. PostgreSQL, into an empty
  catalogue only: the GIN index of the search words is dropped and built again from all the
  words at the end. Both are undone inside the import's transaction, before its commit: a
  rollback restores them with everything else. On PostgreSQL a large import ends with
  ``ANALYZE`` of the products and their words, so that the first reads after it (the
  catalogue's build in every serving process) are planned with the table's new size; without
  statistics each page of the build's keyset read was a bitmap scan of the rest of the table
  and a sort (~300 ms a page at a million products, instead of ~10 ms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from commerce_api.storage.bulk import copy_columns
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import products

# The columns and values of a new product's ``product.create`` audit row, from its row ``p``.
# The price as ``core.money.to_major`` gives it: a whole number of major units as an integer,
# else the float (both backends divide as Python does, correctly rounded).
_SQLITE_AUDIT_CREATED = text(
    "INSERT INTO audit_events (id, created_at, actor_type, actor_id, action, target_type,"
    " target_id, changes) SELECT"
    " 'aud_' || substr(p.id, 6), p.created_at, :actor_type, :actor_id, 'product.create',"
    " 'product', p.id, json_object("
    "'name', json_array(NULL, p.name), 'description', json_array(NULL, p.description),"
    " 'price', json_array(NULL, CASE WHEN p.price_minor % 100 = 0 THEN p.price_minor / 100"
    " ELSE p.price_minor / 100.0 END),"
    " 'category', json_array(NULL, p.category),"
    " 'inventory_count', json_array(NULL, p.inventory_count))"
    " FROM products p WHERE p.rowid > (SELECT max(rowid) FROM products) - :count"
)
_POSTGRESQL_AUDIT_CREATED = text(
    "INSERT INTO audit_events (id, created_at, actor_type, actor_id, action, target_type,"
    " target_id, changes) SELECT"
    " 'aud_' || substr(p.id, 6), :created_at, :actor_type, :actor_id, 'product.create',"
    " 'product', p.id, json_build_object("
    "'name', json_build_array(NULL, p.name),"
    " 'description', json_build_array(NULL, p.description),"
    " 'price', json_build_array(NULL, CASE WHEN p.price_minor % 100 = 0"
    " THEN to_json(p.price_minor / 100) ELSE to_json(p.price_minor / CAST(100 AS float8)) END),"
    " 'category', json_build_array(NULL, p.category),"
    " 'inventory_count', json_build_array(NULL, p.inventory_count))"
    " FROM unnest(CAST(:id AS VARCHAR[]), CAST(:name AS VARCHAR[]), CAST(:description AS TEXT[]),"
    " CAST(:price_minor AS BIGINT[]), CAST(:category AS VARCHAR[]),"
    " CAST(:inventory_count AS INTEGER[]))"
    " AS p (id, name, description, price_minor, category, inventory_count)"
)
_AUDITED_COLUMNS = ("id", "name", "description", "price_minor", "category", "inventory_count")


async def copy_in_audited(
    conn: Executor,
    columns: Mapping[str, Sequence[Any]],
    stamps: Mapping[str, Any],
    actor: tuple[str, str],
) -> None:
    """New products in bulk, given a column at a time (``columns``, with their ``id``; and
    ``stamps``: the same value for every one, such as ``change_seq``), and their
    ``product.create`` audit rows by ``actor`` (its type and id)."""
    actor_type, actor_id = actor
    values: dict[str, Any] = {"actor_type": actor_type, "actor_id": actor_id}
    if conn.dialect.name == "sqlite":
        # SQLite's one writer is this transaction: the rows copied in are exactly the last
        # ``count`` by rowid (each insert takes the largest rowid plus one).
        values["count"] = len(columns["id"])
        await copy_columns(conn, products, columns, stamps)
        await conn.execute(_SQLITE_AUDIT_CREATED, values)
        return
    await copy_columns(conn, products, columns, stamps)
    # From the columns sent again as arrays (C on both sides), not read back from the table:
    # no join whose plan could scan the whole catalogue for each batch.
    arrays = {name: list(columns[name]) for name in _AUDITED_COLUMNS}
    await conn.execute(
        _POSTGRESQL_AUDIT_CREATED, {**values, **arrays, "created_at": stamps["created_at"]}
    )


# SQLite: the trigger of migration 0009 that indexes an inserted product for search, which
# costs about twice the rest of the insert row by row.
_SEARCH_INSERT_TRIGGER = "product_search_insert"
# SQLite: the page cache (KiB) of the connection during a large import, against the 2 MiB of
# SQLite's default: the pages of the tables and indexes it appends to stay in memory instead
# of being spilled to the WAL mid-transaction, read back, and read again at the commit to
# checksum the WAL once more (much of a large import's system time). Memory, not disk:
# it counts in the process's RSS.
BULK_CACHE_KIB = 128 * 1024
# PostgreSQL: the GIN index of the search words (migration 0012), built at the end of a large
# import into an empty catalogue rather than entry by entry; and the memory of that build.
# (Dropping the products' own B-trees and the words' foreign key too, as pg_restore does,
# measured no faster: every key is appended in order; and it would lock the products, so that
# every read of the catalogue waited for the import's commit.)
_SEARCH_WORDS_INDEX = "ix_product_search_words"
_INDEX_BUILD_MEMORY = "256MB"
# PostgreSQL: the statistics of a large import's tables, taken at its end (the docstring).
_ANALYZE = ("ANALYZE products", "ANALYZE product_search_words")


@dataclass(frozen=True, slots=True)
class BulkLoad:
    """What :func:`begin_bulk` set aside, for :func:`end_bulk` and :func:`release`."""

    search_trigger: str | None = None  # SQLite: the insert trigger's SQL
    last_search_row: int = 0  # SQLite: the search index's last row before the import
    cache_kib: int | None = None  # SQLite: the connection's page cache before the import
    at_end: tuple[str, ...] = ()  # PostgreSQL: the GIN index to build again, then ANALYZE


async def begin_bulk(conn: Executor) -> BulkLoad:
    """Set up the transaction of ``conn`` for a large import (see the module docstring);
    :func:`end_bulk` before the commit, :func:`release` in any case."""
    if conn.dialect.name == "sqlite":
        cache = await conn.scalar(text("PRAGMA cache_size"))
        await conn.exec_driver_sql(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        trigger = await conn.scalar(
            text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = :name"),
            {"name": _SEARCH_INSERT_TRIGGER},
        )
        last_row = await conn.scalar(text("SELECT coalesce(max(id), 0) FROM product_search_rows"))
        await conn.exec_driver_sql(f"DROP TRIGGER {_SEARCH_INSERT_TRIGGER}")
        return BulkLoad(str(trigger), int(last_row or 0), int(cache))
    # PostgreSQL: each new product's words row has its foreign key checked by a query that
    # PostgreSQL plans again for every row while the new table has no statistics (its cached
    # plan's choice between a generic plan and a custom one per value): a third of the copy.
    # One generic plan serves every check (an index lookup by key), in this transaction only.
    await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    # The GIN index only into an empty catalogue. Dropping the index locks the words' table
    # (searches wait for the commit); a catalogue that has products keeps its searches and
    # has its new words indexed as they are copied in, by the trigger of migration 0018.
    if await conn.scalar(text("SELECT EXISTS (SELECT 1 FROM products)")):
        return BulkLoad(at_end=_ANALYZE)
    definition = await conn.scalar(
        text("SELECT pg_get_indexdef(CAST(:name AS regclass))"), {"name": _SEARCH_WORDS_INDEX}
    )
    await conn.exec_driver_sql(f"DROP INDEX {_SEARCH_WORDS_INDEX}")
    return BulkLoad(at_end=(str(definition), *_ANALYZE))


async def end_bulk(conn: Executor, seq: int, bulk: BulkLoad) -> None:
    """Index for search the products that change ``seq`` inserted since :func:`begin_bulk`
    (as the trigger or index would have), and put back what it set aside."""
    if bulk.search_trigger is not None:
        await conn.execute(
            text(
                "INSERT INTO product_search_rows (product_id) SELECT p.id FROM products p"
                " WHERE p.change_seq = :seq"
                " AND NOT EXISTS (SELECT 1 FROM product_search_rows r WHERE r.product_id = p.id)"
            ),
            {"seq": seq},
        )
        await conn.execute(
            text(
                "INSERT INTO product_search (rowid, name, description)"
                " SELECT r.id, p.name, p.description FROM product_search_rows r"
                " JOIN products p ON p.id = r.product_id WHERE r.id > :last_row"
            ),
            {"last_row": bulk.last_search_row},
        )
        await conn.exec_driver_sql(bulk.search_trigger)
    if bulk.at_end:
        await conn.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{_INDEX_BUILD_MEMORY}'")
        for statement in bulk.at_end:
            await conn.exec_driver_sql(statement)


async def release(conn: Executor, bulk: BulkLoad) -> None:
    """Give the connection back its own settings (SQLite's page cache is the connection's, not
    the transaction's)."""
    if bulk.cache_kib is not None:
        await conn.exec_driver_sql(f"PRAGMA cache_size = {bulk.cache_kib}")
