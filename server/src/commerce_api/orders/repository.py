"""Queries for orders and their lines: one order read, the lists and their search, status
changes, stock given back. A batch's own statements are ``placement_repository`` (both backends)
and ``batch_repository`` (PostgreSQL's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.engine import Row

from commerce_api.core.pagination import NewestFirst
from commerce_api.orders.search_repository import search_condition
from commerce_api.storage import freshness, keyset
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import ORDER_IS_PENDING, order_items, orders, products


async def release_stock(conn: Executor, product_id: str, quantity: int) -> None:
    """Give reserved units back (archived products too: the units are still there)."""
    await conn.execute(
        update(products)
        .where(products.c.id == product_id)
        .values(inventory_count=products.c.inventory_count + quantity)
    )
    await freshness.touch(conn, freshness.STOCK)


async def get_order(conn: Executor, order_id: str) -> Row[Any] | None:
    return (await conn.execute(select(orders).where(orders.c.id == order_id))).first()


async def lines_of(conn: Executor, order_ids: Sequence[str]) -> list[Row[Any]]:
    if not order_ids:
        return []
    result = await conn.execute(
        select(order_items)
        .where(order_items.c.order_id.in_(order_ids))
        .order_by(order_items.c.order_id, order_items.c.position)
    )
    return list(result.all())


def _filters(
    dialect: str,
    account_id: str | None,
    status: str | None,
    customer_id: str | None,
    chosen: NewestFirst,
    search: str | None,
) -> list[ColumnElement[bool]]:
    conditions = keyset.window(orders, chosen)
    if account_id is not None:
        conditions.append(orders.c.account_id == account_id)
    if status is not None:
        conditions.append(orders.c.status == status)
    if customer_id is not None:
        conditions.append(orders.c.customer_id == customer_id)
    if search:
        conditions.append(search_condition(dialect, search))
    return conditions


async def count_orders(
    conn: Executor,
    account_id: str | None,
    status: str | None,
    customer_id: str | None,
    chosen: NewestFirst,
    *,
    search: str | None = None,
) -> int:
    """How many orders pass the filters (``search``: :func:`search_condition`)."""
    where = _filters(conn.dialect.name, account_id, status, customer_id, chosen, search)
    return int(await conn.scalar(select(func.count()).select_from(orders).where(*where)) or 0)


async def page_orders(
    conn: Executor,
    account_id: str | None,
    status: str | None,
    customer_id: str | None,
    chosen: NewestFirst,
    limit: int,
    offset: int,
    *,
    search: str | None = None,
) -> list[Row[Any]]:
    """A page of the orders, newest first (the indexes ``ix_orders_*_order``; with ``search``,
    the search's index first)."""
    where = _filters(conn.dialect.name, account_id, status, customer_id, chosen, search)
    result = await conn.execute(
        select(orders)
        .where(*where)
        .order_by(*keyset.newest_first(orders))
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def change_status(
    conn: Executor,
    order_id: str,
    *,
    from_status: str,
    to_status: str,
    at: datetime,
    stamp: str,
    tracking: Mapping[str, str | None] | None = None,
) -> bool:
    """Move an order between states if it is still in ``from_status``, one version on (with
    its ``tracking``, when given); False otherwise.

    Conditional, so two concurrent cancels (or a cancel and a fulfil) cannot both win; the
    version moves in the same statement, so no change is ever seen without its version.
    """
    changes: dict[str, Any] = {stamp: at}
    if tracking is not None:
        changes["tracking"] = dict(tracking)
    result = await conn.execute(
        update(orders)
        .where(orders.c.id == order_id, orders.c.status == from_status)
        .values(status=to_status, updated_at=at, version=orders.c.version + 1, **changes)
        .returning(orders.c.id)
    )
    return result.first() is not None


async def pending_created_before(conn: Executor, cutoff: datetime, limit: int) -> list[Row[Any]]:
    """Pending orders older than ``cutoff``, oldest first (on their partial index)."""
    query = (
        select(orders)
        .where(text(ORDER_IS_PENDING), orders.c.created_at < cutoff)
        .order_by(orders.c.created_at, orders.c.id)
        .limit(limit)
    )
    return list((await conn.execute(query)).all())
