"""Queries for products. Active products are those not archived.

The reads of active products are declared here once, as statements: the read path
(``readpath/reader.py``) runs the same statements compiled to SQL text, without the engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, ColumnElement, Select, Text, any_, bindparam, func, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage import freshness
from commerce_api.storage.tables import products

LIST_COLUMNS = (
    products.c.id,
    products.c.name,
    products.c.description,
    products.c.price_minor,
    products.c.category,
    products.c.created_at,
)
DETAIL_COLUMNS = (*LIST_COLUMNS, products.c.inventory_count, products.c.updated_at)
ACTIVE = products.c.archived_at.is_(None)
LIST_ORDER = (products.c.created_at, products.c.id)


def _active_by_id(id_condition: ColumnElement[bool]) -> Select[Any]:
    return select(*DETAIL_COLUMNS).where(id_condition, ACTIVE)


ACTIVE_PRODUCT = _active_by_id(products.c.id == bindparam("id"))
"""One active product by ``id``."""
ACTIVE_PRODUCTS = _active_by_id(products.c.id == any_(bindparam("ids", type_=ARRAY(Text))))
"""The active ones among a list of ``ids`` (PostgreSQL only: ``id = ANY(ids)``)."""
ACTIVE_LIST = select(*LIST_COLUMNS).where(ACTIVE).order_by(*LIST_ORDER)
"""Every active product's list fields, in list order."""


def _active(category: str | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [ACTIVE]
    if category is not None:
        conditions.append(products.c.category == category)
    return conditions


async def count_active(conn: AsyncConnection, category: str | None) -> int:
    total = await conn.scalar(select(func.count()).select_from(products).where(*_active(category)))
    return int(total or 0)


async def page_active(
    conn: AsyncConnection, category: str | None, limit: int, offset: int
) -> Sequence[Row[Any]]:
    result = await conn.execute(
        select(*LIST_COLUMNS)
        .where(*_active(category))
        .order_by(*LIST_ORDER)
        .limit(limit)
        .offset(offset)
    )
    return result.all()


async def get_active(conn: AsyncConnection, product_id: str) -> Row[Any] | None:
    """Through the engine, for a write's response (it must see its own uncommitted row; the
    read path's connections cannot)."""
    row: Row[Any] | None = (await conn.execute(ACTIVE_PRODUCT, {"id": product_id})).first()
    return row


# Every write below changes what the cached product list shows, so each bumps its version
# stamp in the same transaction (see readpath/freshness.py). Stock changes by orders do not:
# list items carry no inventory_count.


async def insert(conn: AsyncConnection, values: Mapping[str, Any]) -> None:
    await conn.execute(products.insert().values(**values))
    await freshness.bump(conn, freshness.CATALOG)


async def insert_many(conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
    if rows:
        await conn.execute(products.insert(), list(rows))
        await freshness.bump(conn, freshness.CATALOG)


async def update_active(conn: AsyncConnection, product_id: str, values: Mapping[str, Any]) -> bool:
    result = await conn.execute(
        update(products)
        .where(products.c.id == product_id, ACTIVE)
        .values(**values)
        .returning(products.c.id)
    )
    if result.first() is None:
        return False
    await freshness.bump(conn, freshness.CATALOG)
    return True


async def update_any(conn: AsyncConnection, product_id: str, values: Mapping[str, Any]) -> bool:
    result = await conn.execute(
        update(products)
        .where(products.c.id == product_id)
        .values(**values)
        .returning(products.c.id)
    )
    if result.first() is None:
        return False
    await freshness.bump(conn, freshness.CATALOG)
    return True


async def archive(conn: AsyncConnection, product_id: str, at: datetime) -> bool:
    return await update_active(conn, product_id, {"archived_at": at, "updated_at": at})


async def stream_active(
    conn: AsyncConnection, partition: int = 2000
) -> AsyncIterator[Sequence[Row[Any]]]:
    """Every active product's list fields, in list order, a partition at a time (for the
    in-memory snapshot)."""
    result = await conn.stream(ACTIVE_LIST)
    async for rows in result.partitions(partition):
        yield rows


async def count_all(conn: AsyncConnection) -> int:
    return int(await conn.scalar(select(func.count()).select_from(products)) or 0)
