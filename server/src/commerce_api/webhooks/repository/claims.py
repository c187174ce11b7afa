"""Queries of a dispatcher's claims on outbox deliveries: which due deliveries it takes (fair
between accounts, within each endpoint's attempts in flight), what attempting them needs, and
how a claim ends: the attempt's outcome recorded, or the claim given back or lapsed."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    FromClause,
    Select,
    Subquery,
    and_,
    func,
    or_,
    select,
    text,
    tuple_,
    union,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.db import Executor
from commerce_api.storage.tables import events, webhook_deliveries, webhook_endpoints
from commerce_api.webhooks.repository import attempts

deliveries = webhook_deliveries
endpoints = webhook_endpoints

CLAIM_WINDOW = 200  # due deliveries read from each end of the backlog per claim (see claim_due)
CLAIM_SCAN = 2_000  # ...of the first this many there, past endpoints at their cap


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery a dispatcher claimed: attempt it now."""

    event_id: str
    endpoint_id: str
    account_id: str
    attempts: int  # before this attempt


_DELIVERY_KEY = tuple_(deliveries.c.event_id, deliveries.c.endpoint_id)


def _keyed(
    keys: Collection[tuple[str, str]], table: FromClause = deliveries
) -> ColumnElement[bool]:
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
    per_endpoint: int,
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

    Gentle with receivers: an endpoint has at most ``per_endpoint`` attempts in flight, counted
    over every dispatcher's claims that have not lapsed (see :func:`_in_flight`). Its other due
    deliveries wait for a free slot, unclaimed; an endpoint at its cap takes no room in the
    candidates, so it holds up no other endpoint (unless more than ``CLAIM_SCAN`` deliveries
    of endpoints at their cap lie at each end of the backlog).

    Candidates are read without locks; the claim then locks them, and their endpoints' rows,
    with ``FOR NO KEY UPDATE SKIP LOCKED`` on PostgreSQL, so several dispatchers claim side by
    side without waiting on each other (one that loses a race claims fewer this time); SQLite
    serialises writers anyway (``BEGIN IMMEDIATE``). A claim skips an endpoint that another
    claim holds, so claims of one endpoint follow one another, and the next statement, which
    claims, counts every earlier claim of it (see :func:`_admitted`); new deliveries' foreign-key
    checks (``FOR KEY SHARE``) do not wait on the endpoint's lock, and the claim itself waits on
    no lock, so it is in no deadlock cycle. A claim that is not completed (the dispatcher died)
    lapses at ``until``, freeing its slot, and the delivery is due again; its next claim records
    the cut-off attempt as interrupted (see :func:`_record_interrupted`).
    """
    busy = busy or {}
    in_flight = _in_flight(now).cte("in_flight")
    # Ranking every due delivery would cost a scan and a sort of the whole backlog at every
    # claim. The candidates are the WINDOW oldest and the WINDOW newest due deliveries instead
    # (two index range scans): a backlog's head, and whatever just became due, which is where
    # another account's new deliveries and retries are while a backlog drains.
    # Not a join: PostgreSQL plans NOT IN (subquery) as a filter on the index scan (the few
    # disabled endpoints, hashed once), so each window reads its rows in index order. As a
    # semi-join, whenever its statistics undercount the due rows (a fresh outbox, or a burst
    # in one whose rows are mostly delivered), it joined and sorted the whole backlog
    # instead: 30-50 ms per claim at 30,000 due.
    attemptable = deliveries.c.endpoint_id.not_in(
        select(endpoints.c.id).where(
            endpoints.c.enabled.is_(False), endpoints.c.deleted_at.is_(None)
        )
    )
    saturated = select(in_flight.c.endpoint_id).where(in_flight.c.attempts >= per_endpoint)
    windows: list[Subquery] = []
    for newest_first in (False, True):
        # An endpoint at its cap is passed over, or its backlog would fill the window and hold
        # up the others; but only within CLAIM_SCAN rows of each end, so that a claim never
        # reads the whole backlog of an endpoint that is at its cap (at 30,000 due, that
        # tripled a claim's time; an endpoint is held up only behind more than CLAIM_SCAN
        # deliveries of saturated endpoints at both ends).
        scanned = (
            select(deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.next_attempt_at)
            .where(*_due(now), attemptable)
            .order_by(_oldest_or_newest(deliveries, newest_first))
            .limit(CLAIM_SCAN)
            .subquery()
        )
        windows.append(
            select(scanned)
            .where(scanned.c.endpoint_id.not_in(saturated))
            .order_by(_oldest_or_newest(scanned, newest_first))
            .limit(CLAIM_WINDOW)
            .subquery()
        )
    due = union(*(select(window) for window in windows)).subquery()
    # As many of each endpoint's as it has free slots (as far as this read can tell)...
    endpoint_rank = func.row_number().over(
        partition_by=due.c.endpoint_id, order_by=(due.c.next_attempt_at, due.c.event_id)
    )
    ranked = (
        select(
            due.c.event_id,
            due.c.endpoint_id,
            due.c.next_attempt_at,
            endpoint_rank.label("endpoint_rank"),
            func.coalesce(in_flight.c.attempts, 0).label("in_flight"),
        )
        .select_from(due.outerjoin(in_flight, in_flight.c.endpoint_id == due.c.endpoint_id))
        .subquery()
    )
    # ...then, of those, each account's oldest first.
    rank = func.row_number().over(
        partition_by=endpoints.c.account_id,
        order_by=(ranked.c.next_attempt_at, ranked.c.event_id),
    )
    candidates = (
        select(
            ranked.c.event_id,
            ranked.c.endpoint_id,
            ranked.c.next_attempt_at,
            endpoints.c.account_id,
            rank.label("rank"),
        )
        .select_from(ranked.join(endpoints, endpoints.c.id == ranked.c.endpoint_id))
        .where(ranked.c.in_flight + ranked.c.endpoint_rank <= per_endpoint)
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
        in_flight_here = busy.get(row.account_id, 0)
        if per_account is not None and (
            taken.get(row.account_id, 0) >= per_account
            or (in_flight_here and per_account - in_flight_here < batch)
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
            .select_from(deliveries.join(endpoints, endpoints.c.id == deliveries.c.endpoint_id))
            .where(_keyed(chosen), *_still_due(now))
            .with_for_update(of=(deliveries, endpoints), skip_locked=True, key_share=True)
        )
    ).all()
    if not locked:
        return []
    await _record_interrupted(conn, [row for row in locked if row.claim_token is not None], now)
    keys = [(row.event_id, row.endpoint_id) for row in locked]
    result = await conn.execute(
        update(deliveries)
        .where(_keyed(keys), _DELIVERY_KEY.in_(_admitted(keys, now, per_endpoint)))
        .values(claim_token=token, claimed_until=until, claimed_at=now)
        .returning(deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.attempts)
    )
    return [
        Claimed(
            row.event_id, row.endpoint_id, chosen[(row.event_id, row.endpoint_id)], row.attempts
        )
        for row in result
    ]


def _oldest_or_newest(table: FromClause, newest_first: bool) -> ColumnElement[Any]:
    column = table.c.next_attempt_at
    return column.desc() if newest_first else column.asc()


def _in_flight(now: datetime) -> Select[tuple[str, int]]:
    """Per endpoint with any, its attempts in flight: its deliveries claimed by a dispatcher
    whose claim has not lapsed (a dead dispatcher's claims stop counting when they lapse).
    Read from ``ix_webhook_deliveries_claimed``, which holds only the claimed deliveries."""
    return (
        select(deliveries.c.endpoint_id, func.count().label("attempts"))
        .where(deliveries.c.claim_token.is_not(None), deliveries.c.claimed_until >= now)
        .group_by(deliveries.c.endpoint_id)
    )


def _admitted(
    keys: Collection[tuple[str, str]], now: datetime, per_endpoint: int
) -> Select[tuple[str, str]]:
    """Of the locked deliveries with these keys, those their endpoints have slots for, oldest
    first: per endpoint, ``per_endpoint`` less its attempts in flight.

    Run as the claim's last statement, after the one that locked the endpoints' rows: on
    PostgreSQL a statement sees what was committed before it began, and every other claim of
    these endpoints had committed before their locks came free, so none is missed and the cap
    cannot be overshot by claims side by side (SQLite has one writer at a time anyway).
    """
    locked = deliveries.alias("locked_delivery")
    claimed = deliveries.alias("claimed_delivery")
    ranked = (
        select(
            locked.c.event_id,
            locked.c.endpoint_id,
            func.row_number()
            .over(
                partition_by=locked.c.endpoint_id,
                order_by=(locked.c.next_attempt_at, locked.c.event_id),
            )
            .label("rank"),
        )
        .where(_keyed(keys, locked))
        .subquery()
    )
    attempts_in_flight = (
        select(func.count())
        .select_from(claimed)
        .where(
            claimed.c.endpoint_id == ranked.c.endpoint_id,
            claimed.c.claim_token.is_not(None),
            claimed.c.claimed_until >= now,
        )
        .scalar_subquery()
    )
    return select(ranked.c.event_id, ranked.c.endpoint_id).where(
        ranked.c.rank <= per_endpoint - attempts_in_flight
    )


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
