"""Recording events. Always called inside the transaction of the change being reported, so
the change and its event commit together or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Executor, insert_rows
from commerce_api.storage.tables import events, webhook_deliveries
from commerce_api.webhooks import repository as webhooks


@dataclass(frozen=True, slots=True)
class NewEvent:
    account_id: str
    data: dict[str, Any]
    created_at: datetime


async def record_event(
    conn: AsyncConnection, *, account_id: str, type: str, data: dict[str, Any]
) -> str:
    """Record one event of ``type`` now; its id."""
    (event_id,) = await record_events(conn, type, [NewEvent(account_id, data, utcnow())])
    return event_id


async def record_events(conn: Executor, type_: str, new_events: Sequence[NewEvent]) -> list[str]:
    """Record events of one type (a batch of orders' ``order.created``), each with its outbox
    deliveries — one per subscribed endpoint of its account — in the caller's transaction; a
    fixed number of statements however many events. Their ids, in order."""
    if not new_events:
        return []
    ids = [new_id("evt") for _ in new_events]
    rows = [
        {
            "id": event_id,
            "account_id": event.account_id,
            "type": type_,
            "created_at": event.created_at,
            "data": event.data,
        }
        for event_id, event in zip(ids, new_events, strict=True)
    ]
    await insert_rows(conn, events, rows)
    subscribed = await webhooks.subscribers(conn, {event.account_id for event in new_events}, type_)
    deliveries = [
        webhooks.new_delivery(event_id, endpoint_id, event.created_at)
        for event_id, event in zip(ids, new_events, strict=True)
        for endpoint_id in sorted(subscribed.get(event.account_id, ()))
    ]
    await insert_rows(conn, webhook_deliveries, deliveries)
    return ids
