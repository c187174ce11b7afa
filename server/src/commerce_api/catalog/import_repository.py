"""The bulk writes of a products import: rows copied in, and on SQLite the search index filled
in two statements at the end instead of by a trigger row by row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.bulk import copy_rows
from commerce_api.storage.tables import products


async def copy_in(conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows that already carry their ``change_seq`` (an import's one change), in bulk:
    ``COPY`` on PostgreSQL, one prepared statement on SQLite (``storage.bulk.copy_rows``)."""
    await copy_rows(conn, products, rows)


# SQLite: a bulk import indexes its new products for search in two statements at its end
# (``index_paused_products``) rather than by the insert trigger of migration 0009, row by row,
# which costs about twice the rest of the insert. The trigger is dropped inside the import's
# transaction and created again from its own SQL before the commit: no other connection ever
# sees it missing, and a rollback restores it with everything else.
_SEARCH_INSERT_TRIGGER = "product_search_insert"


async def pause_search_index(conn: AsyncConnection) -> tuple[str, int] | None:
    """SQLite: stop indexing inserted products for search until :func:`index_paused_products`,
    in this transaction; what that needs. PostgreSQL: None (its trigger stays: disabling it
    would lock out every order's stock change for the whole import)."""
    if conn.dialect.name != "sqlite":
        return None
    trigger = await conn.scalar(
        text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = :name"),
        {"name": _SEARCH_INSERT_TRIGGER},
    )
    last_row = await conn.scalar(text("SELECT coalesce(max(id), 0) FROM product_search_rows"))
    await conn.exec_driver_sql(f"DROP TRIGGER {_SEARCH_INSERT_TRIGGER}")
    return str(trigger), int(last_row or 0)


async def index_paused_products(conn: AsyncConnection, seq: int, paused: tuple[str, int]) -> None:
    """Index for search the products change ``seq`` inserted since :func:`pause_search_index`
    (as its trigger would have), and put the trigger back."""
    trigger, last_row = paused
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
        {"last_row": last_row},
    )
    await conn.exec_driver_sql(trigger)
