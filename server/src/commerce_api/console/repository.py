"""Queries of the console: its sessions, and reads the API has no list for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    case,
    delete,
    func,
    literal,
    literal_column,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.catalog.repository import DETAIL_COLUMNS
from commerce_api.core.timestamps import format_timestamp
from commerce_api.storage import instance
from commerce_api.storage.bulk import dialect_insert
from commerce_api.storage.tables import (
    ENDPOINT_IS_FAILING,
    ORDER_HOURS_UNTIL,
    ORDER_IS_PENDING,
    accounts,
    api_keys,
    console_sessions,
    events,
    instance_values,
    order_hour_figures,
    orders,
    products,
    webhook_deliveries,
    webhook_endpoints,
)

# --- sessions ----------------------------------------------------------------------------------


async def insert_session(
    conn: AsyncConnection, *, token_hash: str, key_id: str, now: datetime
) -> None:
    await conn.execute(
        console_sessions.insert().values(
            token_hash=token_hash, key_id=key_id, created_at=now, last_seen_at=now
        )
    )


async def session_with_key(conn: AsyncConnection, token_hash: str) -> Row[Any] | None:
    """The session and the current state of its key (role, account, revocation)."""
    result = await conn.execute(
        select(
            console_sessions.c.key_id,
            console_sessions.c.last_seen_at,
            api_keys.c.account_id,
            api_keys.c.role,
            api_keys.c.revoked_at,
        )
        .join(api_keys, api_keys.c.id == console_sessions.c.key_id)
        .where(console_sessions.c.token_hash == token_hash)
    )
    return result.first()


async def touch_session(conn: AsyncConnection, token_hash: str, now: datetime) -> None:
    await conn.execute(
        update(console_sessions)
        .where(console_sessions.c.token_hash == token_hash)
        .values(last_seen_at=now)
    )


async def delete_session(conn: AsyncConnection, token_hash: str) -> None:
    await conn.execute(delete(console_sessions).where(console_sessions.c.token_hash == token_hash))


async def delete_idle_sessions(conn: AsyncConnection, seen_before: datetime) -> int:
    result = await conn.execute(
        delete(console_sessions).where(console_sessions.c.last_seen_at < seen_before)
    )
    return int(result.rowcount or 0)


# --- reads -------------------------------------------------------------------------------------


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


# --- the overview ------------------------------------------------------------------------------


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
