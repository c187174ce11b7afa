"""Queries for events (the outbox's rows); their deliveries and attempts are ``webhooks``'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.engine import Row

from commerce_api.core.pagination import NewestFirst
from commerce_api.storage import keyset
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import events, webhook_attempts, webhook_deliveries


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a list shows: an account's (None: every account's), of a type, about an
    order, in a window."""

    account_id: str | None
    type: str | None
    order_id: str | None
    chosen: NewestFirst

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions = keyset.window(events, self.chosen)
        if self.account_id is not None:
            conditions.append(events.c.account_id == self.account_id)
        if self.type is not None:
            conditions.append(events.c.type == self.type)
        if self.order_id is not None:
            conditions.append(events.c.order_id == self.order_id)
        return conditions


async def get_event(conn: Executor, event_id: str) -> Row[Any] | None:
    return (await conn.execute(select(events).where(events.c.id == event_id))).first()


async def count_events(conn: Executor, wanted: EventFilter) -> int:
    query = select(func.count()).select_from(events).where(*wanted.conditions())
    return int(await conn.scalar(query) or 0)


async def page_events(
    conn: Executor, wanted: EventFilter, limit: int, offset: int
) -> list[Row[Any]]:
    """A page of the events, newest first (the indexes ``ix_events_*_order``)."""
    result = await conn.execute(
        select(events)
        .where(*wanted.conditions())
        .order_by(*keyset.newest_first(events))
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def delete_events_before(conn: Executor, cutoff: datetime) -> int:
    """Delete events older than ``cutoff`` with their deliveries and attempts."""
    old = select(events.c.id).where(events.c.created_at < cutoff)
    await conn.execute(delete(webhook_attempts).where(webhook_attempts.c.event_id.in_(old)))
    await conn.execute(delete(webhook_deliveries).where(webhook_deliveries.c.event_id.in_(old)))
    result = await conn.execute(delete(events).where(events.c.created_at < cutoff))
    return result.rowcount or 0
