"""Queries of the console overview's figures, each a bounded read on an index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, case, delete, func, literal_column, select, text
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.core.timestamps import format_timestamp
from commerce_api.storage import instance
from commerce_api.storage.bulk import dialect_insert
from commerce_api.storage.tables import (
    ENDPOINT_IS_FAILING,
    ORDER_HOURS_UNTIL,
    ORDER_IS_PENDING,
    instance_values,
    order_hour_figures,
    orders,
    products,
    webhook_deliveries,
    webhook_endpoints,
)


def _hour_of(dialect: str) -> ColumnElement[Any]:
    """An order's hour (UTC) to group by: SQLite's ISO text cut after the hour (the range scan
    already reads it; ``strftime`` would parse every value), PostgreSQL's ``date_trunc`` in
    UTC whatever the session's zone. The constants are literals, as a bound parameter in the
    grouped expression would not be the same expression for PostgreSQL."""
    if dialect == "postgresql":
        hour: ColumnElement[str] = literal_column("'hour'")
        utc: ColumnElement[str] = literal_column("'UTC'")
        return func.date_trunc(hour, orders.c.created_at, utc)
    return func.substr(orders.c.created_at, 1, 13)


async def orders_per_hour(conn: AsyncConnection, start: datetime, end: datetime) -> list[Row[Any]]:
    """``(hour, currency, orders, revenue_minor)`` per hour and currency with orders in
    ``[start, end)``: every order placed counts; the revenue sums the totals of those not
    canceled. One range scan of ``ix_orders_created_figures``, which holds every column read."""
    hour = _hour_of(conn.dialect.name).label("hour")
    earns = orders.c.status != literal_column("'canceled'")
    revenue = func.sum(case((earns, orders.c.total_minor), else_=literal_column("0")))
    result = await conn.execute(
        select(
            hour, orders.c.currency, func.count().label("orders"), revenue.label("revenue_minor")
        )
        .where(orders.c.created_at >= start, orders.c.created_at < end)
        .group_by(literal_column("1"), orders.c.currency)
    )
    return list(result.all())


async def oldest_pending_order(conn: AsyncConnection) -> datetime | None:
    """When the oldest pending order was placed: the first row of the pending orders' partial
    index."""
    query = select(func.min(orders.c.created_at)).where(text(ORDER_IS_PENDING))
    oldest: datetime | None = await conn.scalar(query)
    return oldest


async def closed_hours_until(conn: AsyncConnection) -> datetime | None:
    """How far ``order_hour_figures`` reaches (its hours before this are all there)."""
    query = select(instance_values.c.value).where(instance_values.c.name == ORDER_HOURS_UNTIL)
    value = await conn.scalar(query)
    return None if value is None else datetime.fromisoformat(str(value)).astimezone(UTC)


async def closed_hours(conn: AsyncConnection, start: datetime, end: datetime) -> list[Row[Any]]:
    """The rows of ``order_hour_figures`` in ``[start, end)`` (on its primary key)."""
    figures = order_hour_figures.c
    result = await conn.execute(
        select(figures.hour, figures.currency, figures.orders, figures.revenue_minor).where(
            figures.hour >= start, figures.hour < end
        )
    )
    return list(result.all())


async def close_hours(
    conn: AsyncConnection, rows: Sequence[Mapping[str, Any]], until: datetime, forget: datetime
) -> None:
    """Keep the figures of closed hours (a row already there stays: it is the same), say they
    reach ``until``, and forget those before ``forget``."""
    if rows:
        await conn.execute(
            dialect_insert(conn)(order_hour_figures)
            .values(list(rows))
            .on_conflict_do_nothing(index_elements=["hour", "currency"])
        )
    await instance.set_value(conn, ORDER_HOURS_UNTIL, format_timestamp(until))
    await conn.execute(delete(order_hour_figures).where(order_hour_figures.c.hour < forget))


async def count_pending_orders(conn: AsyncConnection) -> int:
    """Every account's pending orders, on the pending orders' partial index (the sweep keeps
    them to about a day's orders)."""
    query = select(func.count()).select_from(orders).where(text(ORDER_IS_PENDING))
    return int(await conn.scalar(query) or 0)


COUNT_CAP = 10_000  # low-stock products and failing endpoints counted, at most (and one more)
BACKLOG_CAP = 100_000  # pending deliveries counted, at most (and one more)


async def _capped_count(conn: AsyncConnection, query: Select[Any], cap: int) -> int:
    """How many rows ``query`` has, counting at most ``cap + 1`` of them: a bounded read
    however many there are (a figure over ``cap`` is shown as ``cap``+)."""
    capped = select(func.count()).select_from(query.limit(cap + 1).subquery())
    return int(await conn.scalar(capped) or 0)


async def low_stock(
    conn: AsyncConnection, threshold: int, limit: int
) -> tuple[list[Row[Any]], int]:
    """Active products with at most ``threshold`` units, lowest stock first (``limit`` of
    them), and how many there are (counted up to 10,000): a pass over the active products (no
    index holds the stock, which every order changes: ``storage.tables``)."""
    wanted = (products.c.archived_at.is_(None), products.c.inventory_count <= threshold)
    result = await conn.execute(
        select(products.c.id, products.c.name, products.c.category, products.c.inventory_count)
        .where(*wanted)
        .order_by(products.c.inventory_count, products.c.created_at, products.c.id)
        .limit(limit)
    )
    total = await _capped_count(conn, select(products.c.id).where(*wanted), COUNT_CAP)
    return list(result.all()), total


async def failing_endpoints(conn: AsyncConnection, limit: int) -> tuple[list[Row[Any]], int]:
    """Live endpoints that are disabled or failing since an attempt (every account's), oldest
    first, and how many (counted up to 10,000): ``ix_webhook_endpoints_failing``."""
    failing = text(ENDPOINT_IS_FAILING)
    endpoint = webhook_endpoints.c
    result = await conn.execute(
        select(
            endpoint.id,
            endpoint.account_id,
            endpoint.url,
            endpoint.enabled,
            endpoint.disabled_reason,
            endpoint.failing_since,
        )
        .where(failing)
        .order_by(endpoint.created_at, endpoint.id)
        .limit(limit)
    )
    total = await _capped_count(conn, select(endpoint.id).where(failing), COUNT_CAP)
    return list(result.all()), total


async def outbox_backlog(conn: AsyncConnection) -> tuple[int, datetime | None]:
    """Pending deliveries (counted up to 100,000) and the earliest time one of them is due,
    both on ``ix_webhook_deliveries_due`` ``(status, next_attempt_at)``."""
    pending = webhook_deliveries.c.status == "pending"
    waiting = select(webhook_deliveries.c.event_id).where(pending)
    count = await _capped_count(conn, waiting, BACKLOG_CAP)
    earliest = select(func.min(webhook_deliveries.c.next_attempt_at)).where(pending)
    oldest: datetime | None = await conn.scalar(earliest)
    return count, oldest
