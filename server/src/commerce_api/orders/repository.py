"""Queries for orders, their lines, and the stock they reserve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage import freshness
from commerce_api.storage.db import Executor, insert_rows
from commerce_api.storage.tables import order_items, orders, products


async def release_stock(conn: AsyncConnection, product_id: str, quantity: int) -> None:
    """Give reserved units back (archived products too: the units are still there)."""
    await conn.execute(
        update(products)
        .where(products.c.id == product_id)
        .values(inventory_count=products.c.inventory_count + quantity)
    )
    await freshness.touch(conn, freshness.STOCK)


async def insert_orders(
    conn: Executor, new_orders: Sequence[Mapping[str, Any]], lines: Sequence[Mapping[str, Any]]
) -> None:
    """New orders and their lines, one statement each however many."""
    await insert_rows(conn, orders, new_orders)
    await insert_rows(conn, order_items, lines)


async def get_order(conn: AsyncConnection, order_id: str) -> Row[Any] | None:
    return (await conn.execute(select(orders).where(orders.c.id == order_id))).first()


async def lines_of(conn: AsyncConnection, order_ids: Sequence[str]) -> list[Row[Any]]:
    if not order_ids:
        return []
    result = await conn.execute(
        select(order_items)
        .where(order_items.c.order_id.in_(order_ids))
        .order_by(order_items.c.order_id, order_items.c.position)
    )
    return list(result.all())


def _filters(
    account_id: str | None, status: str | None, customer_id: str | None
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if account_id is not None:
        conditions.append(orders.c.account_id == account_id)
    if status is not None:
        conditions.append(orders.c.status == status)
    if customer_id is not None:
        conditions.append(orders.c.customer_id == customer_id)
    return conditions


async def count_orders(
    conn: AsyncConnection, account_id: str | None, status: str | None, customer_id: str | None
) -> int:
    where = _filters(account_id, status, customer_id)
    return int(await conn.scalar(select(func.count()).select_from(orders).where(*where)) or 0)


async def page_orders(
    conn: AsyncConnection,
    account_id: str | None,
    status: str | None,
    customer_id: str | None,
    limit: int,
    offset: int,
) -> list[Row[Any]]:
    result = await conn.execute(
        select(orders)
        .where(*_filters(account_id, status, customer_id))
        .order_by(orders.c.created_at, orders.c.id)
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def change_status(
    conn: AsyncConnection,
    order_id: str,
    *,
    from_status: str,
    to_status: str,
    at: datetime,
    stamp: str,
) -> bool:
    """Move an order between states if it is still in ``from_status``; False otherwise.

    Conditional, so two concurrent cancels (or a cancel and a fulfil) cannot both win.
    """
    result = await conn.execute(
        update(orders)
        .where(orders.c.id == order_id, orders.c.status == from_status)
        .values(status=to_status, updated_at=at, **{stamp: at})
        .returning(orders.c.id)
    )
    return result.first() is not None


async def pending_created_before(
    conn: AsyncConnection, cutoff: datetime, limit: int
) -> list[Row[Any]]:
    """Pending orders older than ``cutoff``, oldest first."""
    query = (
        select(orders)
        .where(orders.c.status == "pending", orders.c.created_at < cutoff)
        .order_by(orders.c.created_at, orders.c.id)
        .limit(limit)
    )
    return list((await conn.execute(query)).all())
