"""Queries of the outbox: one delivery row per event and endpoint, made with the event, made
due again by a redelivery or a recovery, and read back for the event's history (a dispatcher's
claims on the rows are ``claims``; ``keyed`` finds rows by key for them)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, FromClause, and_, func, or_, select, tuple_, update
from sqlalchemy.engine import Row

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import events, webhook_deliveries

deliveries = webhook_deliveries


def keyed(keys: Collection[tuple[str, str]], table: FromClause = deliveries) -> ColumnElement[bool]:
    """The deliveries with these ``(event_id, endpoint_id)`` keys, found through the primary
    key by its first column. Alone, ``(event_id, endpoint_id) IN (…)`` is no index search on
    SQLite (it scanned the whole outbox, for every claim and every batch of outcomes), and
    PostgreSQL, whenever its statistics lag behind the outbox (a fresh one, a burst), took it
    to ``ix_webhook_deliveries_endpoint_id`` (every delivery of the endpoint). So the pairs
    are only checked (``IS TRUE``: the same in a WHERE clause, and no index condition) on the
    rows ``event_id IN (…)`` finds.
    """
    return and_(
        table.c.event_id.in_(sorted({event_id for event_id, _ in keys})),
        tuple_(table.c.event_id, table.c.endpoint_id).in_(list(keys)).is_(True),
    )


async def pending_summary(conn: Executor) -> tuple[int, datetime | None]:
    """How many deliveries are pending, and the earliest ``next_attempt_at`` among them (None
    when none is): one query on the ``(status, next_attempt_at)`` index (the ``/metrics``
    outbox gauges)."""
    query = select(func.count(), func.min(deliveries.c.next_attempt_at)).where(
        deliveries.c.status == "pending"
    )
    pending, oldest = tuple((await conn.execute(query)).one())
    return int(pending), oldest


def new_delivery(event_id: str, endpoint_id: str, now: datetime) -> dict[str, Any]:
    """The outbox row of a delivery made now: pending, due at once, no attempt yet."""
    return {
        "event_id": event_id,
        "endpoint_id": endpoint_id,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
    }


async def has_queued_redelivery(conn: Executor, event_id: str, now: datetime) -> bool:
    """Whether a redelivery of the event still waits for its first attempt: a delivery that was
    reset (``enqueue`` moves ``updated_at`` past ``created_at``), is pending, has no attempt since,
    and no dispatcher is attempting it right now."""
    query = select(deliveries.c.event_id).where(
        deliveries.c.event_id == event_id,
        deliveries.c.status == "pending",
        deliveries.c.attempts == 0,
        deliveries.c.updated_at > deliveries.c.created_at,
        or_(deliveries.c.claimed_until.is_(None), deliveries.c.claimed_until < now),
    )
    return (await conn.execute(query.limit(1))).first() is not None


def _due_again(now: datetime) -> dict[str, Any]:
    """A delivery's values once it is sent again: pending, due now, a fresh retry schedule."""
    return {"status": "pending", "attempts": 0, "next_attempt_at": now, "updated_at": now}


async def enqueue(
    conn: Executor, event_id: str, endpoint_ids: Sequence[str], now: datetime
) -> None:
    """Make (or make due again) one delivery per endpoint, with a fresh retry schedule (in
    endpoint order: two redeliveries of one event lock its rows in the same order)."""
    for endpoint_id in sorted(endpoint_ids):
        reset = await conn.execute(
            update(deliveries)
            .where(deliveries.c.event_id == event_id, deliveries.c.endpoint_id == endpoint_id)
            # A claim in progress is left alone: its holder records its attempt and the outcome,
            # and no second dispatcher can start on the pair meanwhile.
            .values(**_due_again(now))
            .returning(deliveries.c.event_id)
        )
        if reset.first() is None:
            await conn.execute(deliveries.insert().values(new_delivery(event_id, endpoint_id, now)))


async def requeue_failed(conn: Executor, endpoint_id: str, since: datetime, now: datetime) -> int:
    """Make due again, as :func:`enqueue` does, every delivery to the endpoint of an event
    created at or after ``since`` that failed: given up (``failed``: its schedule ran out, or
    a 410) or waiting for a retry after a failed attempt. Not one that succeeded, nor one not
    attempted yet, nor one being attempted right now (its claim stands; the dispatcher's
    outcome follows). How many.

    One statement. The rows are locked in event order, skipping any a dispatcher holds at this
    moment (it is finishing an attempt), so this never waits on a dispatcher, nor two
    recoveries on each other in a cycle (PostgreSQL; SQLite's writer is alone anyway).
    """
    row = deliveries.alias("failed_delivery")  # not correlated with the UPDATE's own table
    failed = (
        select(row.c.event_id)
        .where(
            row.c.endpoint_id == endpoint_id,
            or_(row.c.status == "failed", and_(row.c.status == "pending", row.c.attempts > 0)),
            or_(row.c.claimed_until.is_(None), row.c.claimed_until < now),
            row.c.event_id.in_(select(events.c.id).where(events.c.created_at >= since)),
        )
        .order_by(row.c.event_id)
        .with_for_update(skip_locked=True)
    )
    result = await conn.execute(
        update(deliveries)
        .where(deliveries.c.endpoint_id == endpoint_id, deliveries.c.event_id.in_(failed))
        .values(**_due_again(now))
        .returning(deliveries.c.event_id)
    )
    return len(result.all())


async def deliveries_of(conn: Executor, event_id: str) -> list[Row[Any]]:
    result = await conn.execute(
        select(deliveries)
        .where(deliveries.c.event_id == event_id)
        .order_by(deliveries.c.created_at, deliveries.c.endpoint_id)
    )
    return list(result.all())


def subscribed_deliveries_sql(new_events: str, event_type: str) -> str:
    """PostgreSQL: ``INSERT`` the deliveries of the events in ``new_events`` (a relation with
    ``id``, ``account_id`` and ``created_at``) of type ``event_type`` (an SQL expression), one
    per enabled endpoint of the event's account that wants the type — :func:`new_delivery`
    rows for :func:`endpoints.subscribers`, for a statement that also writes the events."""
    return (
        "INSERT INTO webhook_deliveries"  # noqa: S608 - the caller's relation and expression
        " (event_id, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)"
        " SELECT e.id, w.id, 'pending', 0, e.created_at, e.created_at, e.created_at"
        f" FROM {new_events} AS e JOIN webhook_endpoints AS w ON w.account_id = e.account_id"
        " AND w.deleted_at IS NULL AND w.enabled"
        # endpoints.subscribes: no types (null or []) means every type
        " AND (coalesce(w.event_types::jsonb, 'null') IN ('null', '[]')"
        f" OR w.event_types::jsonb @> jsonb_build_array({event_type}))"
    )
