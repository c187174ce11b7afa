"""Queries of what the console's pages list that the API has no list for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, literal, select, tuple_
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.catalog.repository import DETAIL_COLUMNS
from commerce_api.storage.tables import accounts, events, products, webhook_deliveries


async def list_accounts(conn: AsyncConnection) -> list[Row[Any]]:
    result = await conn.execute(
        select(accounts.c.id, accounts.c.name, accounts.c.tier, accounts.c.created_at).order_by(
            accounts.c.created_at, accounts.c.id
        )
    )
    return list(result.all())


def _catalogue(
    category: str | None, name: str | None, max_stock: int | None
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [products.c.archived_at.is_(None)]
    if category:
        conditions.append(products.c.category == category)
    if name:
        conditions.append(func.lower(products.c.name).contains(name.lower(), autoescape=True))
    if max_stock is not None:
        conditions.append(products.c.inventory_count <= max_stock)
    return conditions


async def count_products(
    conn: AsyncConnection, category: str | None, name: str | None, max_stock: int | None = None
) -> int:
    query = select(func.count()).select_from(products).where(*_catalogue(category, name, max_stock))
    return int(await conn.scalar(query) or 0)


async def page_products(
    conn: AsyncConnection,
    category: str | None,
    name: str | None,
    limit: int,
    offset: int,
    max_stock: int | None = None,
) -> Sequence[Row[Any]]:
    """Active products with their stock, in the API's (created_at, id) order; with
    ``max_stock``, only those with at most that many units."""
    result = await conn.execute(
        select(*DETAIL_COLUMNS)
        .where(*_catalogue(category, name, max_stock))
        .order_by(products.c.created_at, products.c.id)
        .limit(limit)
        .offset(offset)
    )
    return result.all()


async def products_after(
    conn: AsyncConnection,
    category: str | None,
    name: str | None,
    max_stock: int | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> Sequence[Row[Any]]:
    """The products of :func:`page_products` after ``after`` (a product's created_at and id),
    by keyset: a deep chunk costs what the first does."""
    conditions = _catalogue(category, name, max_stock)
    if after is not None:
        created_at, id_ = products.c.created_at, products.c.id
        cursor = tuple_(literal(after[0], created_at.type), literal(after[1], id_.type))
        conditions += [created_at >= after[0], tuple_(created_at, id_) > cursor]
    result = await conn.execute(
        select(*DETAIL_COLUMNS)
        .where(*conditions)
        .order_by(products.c.created_at, products.c.id)
        .limit(limit)
    )
    return result.all()


async def categories(conn: AsyncConnection) -> list[str]:
    result = await conn.execute(
        select(products.c.category)
        .where(products.c.archived_at.is_(None))
        .distinct()
        .order_by(products.c.category)
    )
    return list(result.scalars())


async def order_events(conn: AsyncConnection, account_id: str, order_id: str) -> list[Row[Any]]:
    """The events about one order, oldest first (on ``ix_events_order_id_order``)."""
    result = await conn.execute(
        select(events.c.id, events.c.type, events.c.created_at)
        .where(events.c.account_id == account_id, events.c.order_id == order_id)
        .order_by(events.c.created_at, events.c.id)
    )
    return list(result.all())


async def delivery_states(conn: AsyncConnection, event_ids: Sequence[str]) -> list[Row[Any]]:
    """``(event_id, status, attempts)`` of every delivery of these events (a page's, on the
    primary key): at most one per endpoint of each event's account."""
    if not event_ids:
        return []
    result = await conn.execute(
        select(
            webhook_deliveries.c.event_id,
            webhook_deliveries.c.status,
            webhook_deliveries.c.attempts,
        ).where(webhook_deliveries.c.event_id.in_(event_ids))
    )
    return list(result.all())
