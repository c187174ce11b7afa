"""Queries for events (the outbox's rows); their deliveries and attempts are ``webhooks``'."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.tables import events, webhook_attempts, webhook_deliveries


def _event_filters(account_id: str | None, event_type: str | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if account_id is not None:
        conditions.append(events.c.account_id == account_id)
    if event_type is not None:
        conditions.append(events.c.type == event_type)
    return conditions


async def get_event(conn: AsyncConnection, event_id: str) -> Row[Any] | None:
    return (await conn.execute(select(events).where(events.c.id == event_id))).first()


async def count_events(
    conn: AsyncConnection, account_id: str | None, event_type: str | None
) -> int:
    query = select(func.count()).select_from(events).where(*_event_filters(account_id, event_type))
    return int(await conn.scalar(query) or 0)


async def page_events(
    conn: AsyncConnection,
    account_id: str | None,
    event_type: str | None,
    limit: int,
    offset: int,
) -> list[Row[Any]]:
    result = await conn.execute(
        select(events)
        .where(*_event_filters(account_id, event_type))
        .order_by(events.c.created_at, events.c.id)
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def delete_events_before(conn: AsyncConnection, cutoff: datetime) -> int:
    """Delete events older than ``cutoff`` with their deliveries and attempts."""
    old = select(events.c.id).where(events.c.created_at < cutoff)
    await conn.execute(delete(webhook_attempts).where(webhook_attempts.c.event_id.in_(old)))
    await conn.execute(delete(webhook_deliveries).where(webhook_deliveries.c.event_id.in_(old)))
    result = await conn.execute(delete(events).where(events.c.created_at < cutoff))
    return result.rowcount or 0
