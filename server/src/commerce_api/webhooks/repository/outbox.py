"""Queries of the outbox: one delivery row per event and endpoint, made with the event,
claimed by a dispatcher, then closed or rescheduled with the attempt's outcome."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, text, tuple_, union, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.db import Executor
from commerce_api.storage.tables import events, webhook_deliveries, webhook_endpoints
from commerce_api.webhooks.repository import attempts

deliveries = webhook_deliveries
endpoints = webhook_endpoints


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


async def has_queued_redelivery(conn: AsyncConnection, event_id: str, now: datetime) -> bool:
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
    conn: AsyncConnection, event_id: str, endpoint_ids: Sequence[str], now: datetime
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


async def requeue_failed(
    conn: AsyncConnection, endpoint_id: str, since: datetime, now: datetime
) -> int:
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


CLAIM_WINDOW = 200  # due deliveries read from each end of the backlog per claim (see claim_due)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery a dispatcher claimed: attempt it now."""

    event_id: str
    endpoint_id: str
    account_id: str
    attempts: int  # before this attempt


_DELIVERY_KEY = tuple_(deliveries.c.event_id, deliveries.c.endpoint_id)


def _keyed(keys: Collection[tuple[str, str]]) -> ColumnElement[bool]:
    """The deliveries with these ``(event_id, endpoint_id)`` keys, found through the primary
    key by its first column. Alone, ``(event_id, endpoint_id) IN (…)`` is no index search on
    SQLite (it scanned the whole outbox, for every claim and every batch of outcomes), and
    PostgreSQL, whenever its statistics lag behind the outbox (a fresh one, a burst), took it
    to ``ix_webhook_deliveries_endpoint_id`` (every delivery of the endpoint). So the pairs
    are only checked (``IS TRUE``: the same in a WHERE clause, and no index condition) on the
    rows ``event_id IN (…)`` finds.
    """
    return and_(
        deliveries.c.event_id.in_(sorted({event_id for event_id, _ in keys})),
        _DELIVERY_KEY.in_(list(keys)).is_(True),
    )


def _due(now: datetime) -> list[ColumnElement[bool]]:
    return [
        deliveries.c.status == "pending",
        deliveries.c.next_attempt_at <= now,
        or_(deliveries.c.claimed_until.is_(None), deliveries.c.claimed_until < now),
    ]


def _still_due(now: datetime) -> list[ColumnElement[bool]]:
    """``_due`` as a check of deliveries found by key (see ``_keyed``): a planner that
    undercounts the due rows (SQLite has no statistics; PostgreSQL's lag behind a burst) would
    rather search ``ix_webhook_deliveries_due`` for the due conditions, reading every due
    delivery, than the primary key for the keys."""
    return [term.is_(True) for term in _due(now)]


async def claim_due(
    conn: Executor,
    *,
    now: datetime,
    until: datetime,
    token: str,
    limit: int,
    per_account: int | None = None,
    busy: Mapping[str, int] | None = None,
    batch: int = 1,
) -> list[Claimed]:
    """Claim up to ``limit`` due deliveries for one dispatcher until ``until``; the dispatcher
    attempts each at once.

    Fair between accounts: each account's oldest due delivery comes first, then each one's
    second oldest, and so on, so a newcomer's delivery is never queued behind another
    account's backlog; and an account gets at most ``per_account`` attempts in flight on this
    dispatcher, counting the ``busy`` ones it already has; an account with attempts in flight is
    given more only when it has room for ``batch`` (so a backlog is claimed a batch at a time,
    not one claim per finished attempt). A disabled endpoint's deliveries wait (a deleted
    one's are claimed, to be closed).

    Candidates are read without locks; the claim then locks them with ``FOR UPDATE SKIP
    LOCKED`` on PostgreSQL, so several dispatchers claim side by side without waiting on each
    other (one that loses a race claims fewer this time); SQLite serialises writers anyway
    (``BEGIN IMMEDIATE``). A claim that is not completed (the dispatcher died) lapses at
    ``until`` and the delivery is due again; its next claim records the cut-off attempt as
    interrupted (see :func:`_record_interrupted`).
    """
    busy = busy or {}
    # Ranking every due delivery would cost a scan and a sort of the whole backlog at every
    # claim. The candidates are the WINDOW oldest and the WINDOW newest due deliveries instead
    # (two index range scans): a backlog's head, and whatever just became due, which is where
    # another account's new deliveries and retries are while a backlog drains.
    # Not a join: PostgreSQL plans NOT IN (subquery) as a filter on the index scan (the few
    # disabled endpoints, hashed once), so each window reads 200 rows in index order. As a
    # semi-join, whenever its statistics undercount the due rows (a fresh outbox, or a burst
    # in one whose rows are mostly delivered), it joined and sorted the whole backlog
    # instead: 30-50 ms per claim at 30,000 due.
    attemptable = deliveries.c.endpoint_id.not_in(
        select(endpoints.c.id).where(
            endpoints.c.enabled.is_(False), endpoints.c.deleted_at.is_(None)
        )
    )
    windows = [
        select(deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.next_attempt_at)
        .where(*_due(now), attemptable)
        .order_by(order)
        .limit(CLAIM_WINDOW)
        .subquery()
        for order in (deliveries.c.next_attempt_at.asc(), deliveries.c.next_attempt_at.desc())
    ]
    due = union(*(select(window) for window in windows)).subquery()
    rank = (
        func.row_number()
        .over(partition_by=endpoints.c.account_id, order_by=(due.c.next_attempt_at, due.c.event_id))
        .label("rank")
    )
    candidates = (
        select(
            due.c.event_id, due.c.endpoint_id, due.c.next_attempt_at, endpoints.c.account_id, rank
        )
        .select_from(due.join(endpoints, endpoints.c.id == due.c.endpoint_id))
        .subquery()
    )
    query = select(candidates).order_by(
        candidates.c.rank, candidates.c.next_attempt_at, candidates.c.event_id
    )
    if per_account is not None:
        query = query.where(candidates.c.rank <= per_account)
    # Enough to fill ``limit`` after skipping what busy accounts have no room for.
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        # For the same reason: with the due rows undercounted, a bitmap scan of every due row
        # and a sort looks as cheap as reading the index in order; it is not.
        await conn.execute(text("SET LOCAL enable_bitmapscan = off"))
    rows = (await conn.execute(query.limit(limit + sum(busy.values())))).all()
    if postgresql:
        await conn.execute(text("SET LOCAL enable_bitmapscan TO DEFAULT"))
    taken: dict[str, int] = dict(busy)
    chosen: dict[tuple[str, str], str] = {}
    for row in rows:
        in_flight = busy.get(row.account_id, 0)
        if per_account is not None and (
            taken.get(row.account_id, 0) >= per_account
            or (in_flight and per_account - in_flight < batch)
        ):
            continue
        taken[row.account_id] = taken.get(row.account_id, 0) + 1
        chosen[(row.event_id, row.endpoint_id)] = row.account_id
        if len(chosen) == limit:
            break
    if not chosen:
        return []
    locked = (
        await conn.execute(
            select(
                deliveries.c.event_id,
                deliveries.c.endpoint_id,
                deliveries.c.claim_token,
                deliveries.c.claimed_at,
            )
            .where(_keyed(chosen), *_still_due(now))
            .with_for_update(skip_locked=True)
        )
    ).all()
    if not locked:
        return []
    await _record_interrupted(conn, [row for row in locked if row.claim_token is not None], now)
    result = await conn.execute(
        update(deliveries)
        .where(_keyed([(row.event_id, row.endpoint_id) for row in locked]))
        .values(claim_token=token, claimed_until=until, claimed_at=now)
        .returning(deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.attempts)
    )
    return [
        Claimed(
            row.event_id, row.endpoint_id, chosen[(row.event_id, row.endpoint_id)], row.attempts
        )
        for row in result
    ]


async def _record_interrupted(conn: Executor, rows: Sequence[Row[Any]], now: datetime) -> None:
    """The attempts these unfinished claims stand for (started at ``claimed_at``, outcome
    unknown): one history entry each, counted in the delivery's attempts."""
    if not rows:
        return
    await attempts.insert_interrupted(conn, rows, now)
    keys = [(row.event_id, row.endpoint_id) for row in rows]
    await conn.execute(
        update(deliveries)
        .where(_keyed(keys))
        .values(
            attempts=deliveries.c.attempts + 1,
            claim_token=None,
            claimed_until=None,
            claimed_at=None,
        )
    )


async def claimed_rows(
    conn: Executor, claimed: Sequence[Claimed]
) -> tuple[dict[str, Row[Any]], dict[str, Row[Any]]]:
    """The events and the endpoints of claimed deliveries, by id: read with the claim, in its
    transaction (two queries for the whole claim, not two per attempt)."""
    if not claimed:
        return {}, {}
    event_ids = sorted({row.event_id for row in claimed})
    endpoint_ids = sorted({row.endpoint_id for row in claimed})
    found_events = await conn.execute(select(events).where(events.c.id.in_(event_ids)))
    found_endpoints = await conn.execute(select(endpoints).where(endpoints.c.id.in_(endpoint_ids)))
    return {row.id: row for row in found_events}, {row.id: row for row in found_endpoints}


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
        .where(_keyed(keys), deliveries.c.claim_token == token)
        .values(claim_token=None, claimed_until=None, claimed_at=None, **counted, **values)
        .returning(deliveries.c.event_id, deliveries.c.endpoint_id)
    )
    return {(row.event_id, row.endpoint_id) for row in result}


async def release_claims(conn: AsyncConnection, token: str, now: datetime) -> None:
    """Give back what a stopping dispatcher claimed and did not finish: attempts it cut off,
    recorded as interrupted. The deliveries are due again at once."""
    unfinished = select(
        deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.claimed_at
    ).where(deliveries.c.claim_token == token)
    await _record_interrupted(conn, (await conn.execute(unfinished)).all(), now)


async def deliveries_of(conn: AsyncConnection, event_id: str) -> list[Row[Any]]:
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
