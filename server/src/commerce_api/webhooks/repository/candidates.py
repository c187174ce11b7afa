"""The candidates of a claim: due deliveries read without locks, fair between accounts, past
the endpoints at their cap of attempts in flight; and the ones a dispatcher takes of them
(``claims.claim_due`` then locks and claims those)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, FromClause, Select, Subquery, func, or_, select, text, union
from sqlalchemy.engine import Row

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import webhook_deliveries, webhook_endpoints

deliveries = webhook_deliveries
endpoints = webhook_endpoints

CLAIM_WINDOW = 200  # due deliveries read from each end of the backlog per claim (see claim_due)
CLAIM_SCAN = 2_000  # ...of the first this many there, past endpoints at their cap


def due_conditions(now: datetime) -> list[ColumnElement[bool]]:
    """What makes a delivery due at ``now``: pending, its time come, and no claim on it that
    has not lapsed."""
    return [
        deliveries.c.status == "pending",
        deliveries.c.next_attempt_at <= now,
        or_(deliveries.c.claimed_until.is_(None), deliveries.c.claimed_until < now),
    ]


async def read_candidates(
    conn: Executor,
    *,
    now: datetime,
    per_endpoint: int,
    per_account: int | None,
    limit: int,
) -> Sequence[Row[Any]]:
    """Up to ``limit`` due deliveries, each account's oldest first, then each one's second
    oldest, and so on (``rank``: its place among its account's; ``account_id`` with it): as many
    of each endpoint's as it has free slots (``per_endpoint`` less its attempts in flight, as
    far as this read can tell), and at most ``per_account`` of an account's. Read without
    locks, from two windows of the backlog (its oldest and its newest deliveries)."""
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
            .where(*due_conditions(now), attemptable)
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
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        # For the same reason: with the due rows undercounted, a bitmap scan of every due row
        # and a sort looks as cheap as reading the index in order; it is not.
        await conn.execute(text("SET LOCAL enable_bitmapscan = off"))
    rows = (await conn.execute(query.limit(limit))).all()
    if postgresql:
        await conn.execute(text("SET LOCAL enable_bitmapscan TO DEFAULT"))
    return rows


def choose(
    rows: Sequence[Row[Any]],
    busy: Mapping[str, int],
    *,
    per_account: int | None,
    batch: int,
    limit: int,
) -> dict[tuple[str, str], str]:
    """Of the candidates, in their order, those a dispatcher takes: ``limit`` at most; an
    account's up to ``per_account``, counting the ``busy`` attempts it already has in flight;
    an account with attempts in flight only when it has room for ``batch``. The account of
    each, by ``(event_id, endpoint_id)``."""
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
    return chosen


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
