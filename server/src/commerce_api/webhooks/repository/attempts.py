"""Queries of the attempts' history: one row per attempt at a delivery, never changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Row

from commerce_api.core.ids import new_id
from commerce_api.storage.bulk import insert_rows
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import webhook_attempts

attempts = webhook_attempts

INTERRUPTED = "Interrupted: the dispatcher stopped before the attempt finished."


async def insert_attempts(conn: Executor, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add finished attempts (dicts of the table's columns) to the history, in one statement."""
    await insert_rows(conn, attempts, rows)


async def insert_interrupted(conn: Executor, rows: Sequence[Row[Any]], now: datetime) -> None:
    """The attempts these unfinished claims stand for (started at ``claimed_at``, outcome
    unknown): one history entry each."""
    await conn.execute(
        attempts.insert(),
        [
            {
                "id": new_id("att"),
                "event_id": row.event_id,
                "endpoint_id": row.endpoint_id,
                "attempted_at": row.claimed_at or now,
                "status_code": None,
                "duration_ms": None,
                "error": INTERRUPTED,
            }
            for row in rows
        ],
    )


async def attempts_of(conn: Executor, event_id: str) -> list[Row[Any]]:
    result = await conn.execute(
        select(attempts)
        .where(attempts.c.event_id == event_id)
        .order_by(attempts.c.attempted_at, attempts.c.id)
    )
    return list(result.all())
