"""Recording events. Always called inside the transaction of the change being reported, so
the change and its event commit together or not at all."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.ids import new_id
from commerce_api.tables import events
from commerce_api.timestamps import utcnow
from commerce_api.webhooks import repository as webhooks


async def record_event(
    conn: AsyncConnection, *, account_id: str, type: str, data: dict[str, Any]
) -> str:
    event_id = new_id("evt")
    now = utcnow()
    await conn.execute(
        events.insert().values(
            id=event_id, account_id=account_id, type=type, created_at=now, data=data
        )
    )
    # The outbox entries, one per subscribed endpoint, in the same transaction as the event.
    endpoint_ids = await webhooks.subscribed_endpoints(conn, account_id, type)
    await webhooks.enqueue(conn, event_id, endpoint_ids, now)
    return event_id
