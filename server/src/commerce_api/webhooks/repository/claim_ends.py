"""Queries of how a dispatcher's claim on a delivery ends: its attempt's outcome recorded (or the
delivery closed unattempted), the claim given back by a dispatcher that stops, or found lapsed
by the next claim — an attempt cut off, recorded as interrupted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Row

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import webhook_deliveries
from commerce_api.webhooks.repository import attempts
from commerce_api.webhooks.repository.outbox import keyed

deliveries = webhook_deliveries


async def record_interrupted(conn: Executor, rows: Sequence[Row[Any]], now: datetime) -> None:
    """The attempts these unfinished claims stand for (started at ``claimed_at``, outcome
    unknown): one history entry each, counted in the delivery's attempts."""
    if not rows:
        return
    await attempts.insert_interrupted(conn, rows, now)
    keys = [(row.event_id, row.endpoint_id) for row in rows]
    await conn.execute(
        update(deliveries)
        .where(keyed(keys))
        .values(
            attempts=deliveries.c.attempts + 1,
            claim_token=None,
            claimed_until=None,
            claimed_at=None,
        )
    )


async def finish_deliveries(
    conn: Executor,
    keys: Sequence[tuple[str, str]],
    token: str,
    values: Mapping[str, Any],
    *,
    attempted: bool,
) -> set[tuple[str, str]]:
    """Close, reschedule or give back claimed deliveries (``(event_id, endpoint_id)`` each),
    all with the same ``values``; returns those whose claim still held (the rest belong to
    another dispatcher now and are left alone). ``attempted``: each had one attempt, counted
    as ``attempts + 1`` (the claim pinned the delivery's attempts)."""
    counted = {"attempts": deliveries.c.attempts + 1} if attempted else {}
    result = await conn.execute(
        update(deliveries)
        .where(keyed(keys), deliveries.c.claim_token == token)
        .values(claim_token=None, claimed_until=None, claimed_at=None, **counted, **values)
        .returning(deliveries.c.event_id, deliveries.c.endpoint_id)
    )
    return {(row.event_id, row.endpoint_id) for row in result}


async def release_claims(conn: Executor, token: str, now: datetime) -> None:
    """Give back what a stopping dispatcher claimed and did not finish: attempts it cut off,
    recorded as interrupted. The deliveries are due again at once."""
    unfinished = select(
        deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.claimed_at
    ).where(deliveries.c.claim_token == token)
    await record_interrupted(conn, (await conn.execute(unfinished)).all(), now)
