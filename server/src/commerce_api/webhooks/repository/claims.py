"""Queries of a dispatcher's claims on outbox deliveries: which due deliveries it takes (fair
between accounts, within each endpoint's attempts in flight: ``candidates``) and what
attempting them needs. How a claim ends is ``claim_ends``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select, tuple_, update
from sqlalchemy.engine import Row

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import events, webhook_deliveries, webhook_endpoints
from commerce_api.webhooks.repository.candidates import choose, due_conditions, read_candidates
from commerce_api.webhooks.repository.claim_ends import record_interrupted
from commerce_api.webhooks.repository.outbox import keyed

deliveries = webhook_deliveries
endpoints = webhook_endpoints


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery a dispatcher claimed: attempt it now."""

    event_id: str
    endpoint_id: str
    account_id: str
    attempts: int  # before this attempt


_DELIVERY_KEY = tuple_(deliveries.c.event_id, deliveries.c.endpoint_id)


def _still_due(now: datetime) -> list[ColumnElement[bool]]:
    """``due_conditions`` as a check of deliveries found by key (see ``outbox.keyed``): a
    planner that undercounts the due rows (SQLite has no statistics; PostgreSQL's lag behind a
    burst) would rather search ``ix_webhook_deliveries_due`` for the due conditions, reading
    every due delivery, than the primary key for the keys."""
    return [term.is_(True) for term in due_conditions(now)]


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
    over every dispatcher's claims that have not lapsed (see ``candidates``). Its other due
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
    the cut-off attempt as interrupted (see ``claim_ends.record_interrupted``).
    """
    busy = busy or {}
    # Enough to fill ``limit`` after skipping what busy accounts have no room for.
    rows = await read_candidates(
        conn,
        now=now,
        per_endpoint=per_endpoint,
        per_account=per_account,
        limit=limit + sum(busy.values()),
    )
    chosen = choose(rows, busy, per_account=per_account, batch=batch, limit=limit)
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
            .where(keyed(chosen), *_still_due(now))
            .with_for_update(of=(deliveries, endpoints), skip_locked=True, key_share=True)
        )
    ).all()
    if not locked:
        return []
    await record_interrupted(conn, [row for row in locked if row.claim_token is not None], now)
    keys = [(row.event_id, row.endpoint_id) for row in locked]
    result = await conn.execute(
        update(deliveries)
        .where(keyed(keys), _DELIVERY_KEY.in_(_admitted(keys, now, per_endpoint)))
        .values(claim_token=token, claimed_until=until, claimed_at=now)
        .returning(deliveries.c.event_id, deliveries.c.endpoint_id, deliveries.c.attempts)
    )
    return [
        Claimed(
            row.event_id, row.endpoint_id, chosen[(row.event_id, row.endpoint_id)], row.attempts
        )
        for row in result
    ]


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
        .where(keyed(keys, locked))
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
