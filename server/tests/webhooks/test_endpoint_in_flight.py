"""Receivers are not flooded: at most ``COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT`` attempts to
one endpoint at a time, across every dispatcher on the database (issue 32).

docs/webhooks.md ("Delivery"): a backlog reaches an endpoint that many POSTs at a time; its
other due deliveries wait for a free slot (neither failed nor delayed by the retry schedule),
and another endpoint is served meanwhile. The count is of claims that have not lapsed, so a
dead dispatcher's slots come free when its claims do. Claims of one endpoint by dispatchers
side by side follow one another (PostgreSQL: the claim locks the endpoint's row, skipping it
when another claim holds it), so together they never exceed the cap.

Real receivers (``tests/webhook_receiver.py``) count the requests in progress at once; the
slow ones answer after a delay, so attempts overlap. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import ClauseElement, CursorResult, Dialect, Executable, select, update

from commerce_api.core.timestamps import utcnow
from commerce_api.orders import service as order_service
from commerce_api.storage.db import Database, Executor
from commerce_api.storage.tables import webhook_deliveries
from commerce_api.webhooks.dispatcher import Dispatcher, stop_dispatcher
from commerce_api.webhooks.repository import candidates, claims
from tests import factories
from tests.webhook_receiver import Reply, eventually, running_receiver
from tests.webhooks.test_dispatcher_concurrency import (
    _create_endpoint,
    _place_orders,
    _settings,
    _setup,
    _unfinished,
    counting,
)

CAP = 3
BACKLOG = 50
SLOW_SECONDS = 0.1  # how long the slow receiver takes to answer
LEASE = timedelta(minutes=1)


async def test_a_backlog_reaches_a_slow_receiver_at_most_the_cap_at_a_time(
    db: Database, database_url: str
) -> None:
    """50 due deliveries to one slow endpoint, a cap of 3: the receiver never has more than 3
    requests in progress, and gets every delivery exactly once."""
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=CAP)
    principal, product_id = await _setup(db)
    assert principal.account_id is not None
    with running_receiver() as receiver:
        receiver.reply("/hook", Reply(200, delay=SLOW_SECONDS))
        await _create_endpoint(db, principal, receiver.url("/hook"), settings, box)
        await _place_orders(db, principal, product_id, BACKLOG)
        dispatcher = Dispatcher(settings, db, box)
        running = asyncio.create_task(dispatcher.run())
        try:
            await eventually(
                lambda: len(receiver.requests()) == BACKLOG, within=20, what="the backlog"
            )
        finally:
            await stop_dispatcher(dispatcher, running)
        requests = receiver.requests()
        assert receiver.peak_total_in_flight == CAP, "not the cap's worth at a time"
    assert Counter(request.webhook_id for request in requests) == dict.fromkeys(
        {request.webhook_id for request in requests}, 1
    )
    assert await _unfinished(db, principal.account_id) == 0


async def test_dispatchers_side_by_side_together_never_exceed_the_cap(
    db: Database, database_url: str
) -> None:
    """Two dispatchers, each with its own database connections (as two processes would have),
    drain one slow endpoint's backlog together: between them, never more than 3 attempts at
    once."""
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=CAP)
    principal, product_id = await _setup(db)
    assert principal.account_id is not None
    databases = [Database(database_url) for _ in range(2)]
    claimed_counts: list[list[int]] = [[] for _ in databases]
    with running_receiver() as receiver:
        receiver.reply("/hook", Reply(200, delay=SLOW_SECONDS))
        await _create_endpoint(db, principal, receiver.url("/hook"), settings, box)
        await _place_orders(db, principal, product_id, BACKLOG)
        dispatchers = [
            counting(Dispatcher(settings, database, box), claimed)
            for database, claimed in zip(databases, claimed_counts, strict=True)
        ]
        tasks = [asyncio.create_task(dispatcher.run()) for dispatcher in dispatchers]
        try:
            await eventually(
                lambda: len(receiver.requests()) == BACKLOG, within=20, what="the backlog"
            )
        finally:
            await asyncio.gather(
                *(
                    stop_dispatcher(dispatcher, task)
                    for dispatcher, task in zip(dispatchers, tasks, strict=True)
                )
            )
            for database in databases:
                await database.dispose()
        requests = receiver.requests()
        assert receiver.peak_total_in_flight <= CAP
    assert len({request.webhook_id for request in requests}) == BACKLOG == len(requests)
    assert await _unfinished(db, principal.account_id) == 0
    # Both took part (else this test proves little).
    assert all(sum(claimed) > 0 for claimed in claimed_counts), claimed_counts


async def test_an_endpoint_at_its_cap_does_not_hold_up_another(
    db: Database, database_url: str
) -> None:
    """One endpoint answers in 1 s and has a backlog, at its cap of 2; deliveries to another
    endpoint of the same account still arrive at once, and the slow one never has more than
    2 requests in progress."""
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=2)
    principal, product_id = await _setup(db)
    with running_receiver() as slow, running_receiver() as fast:
        slow.reply("/hook", Reply(200, delay=1.0))
        await _create_endpoint(db, principal, slow.url("/hook"), settings, box)
        await _place_orders(db, principal, product_id, 20)  # the slow endpoint's backlog
        await _create_endpoint(db, principal, fast.url("/hook"), settings, box)
        dispatcher = Dispatcher(settings, db, box)
        running = asyncio.create_task(dispatcher.run())
        try:
            await eventually(lambda: len(slow.requests()) == 2, within=5, what="the slow ones")
            for count in range(1, 4):
                await _place_orders(db, principal, product_id, 1)
                await eventually(
                    lambda: len(fast.requests()) == count,  # noqa: B023 - awaited right here
                    within=0.5,
                    what=f"delivery {count} to the other endpoint",
                )
        finally:
            await stop_dispatcher(dispatcher, running, grace=0.5)
        assert slow.peak_total_in_flight == 2
        assert fast.peak_total_in_flight == 1


async def test_a_delivery_behind_a_saturated_endpoints_backlog_is_not_held_up(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim reads the oldest and the newest due deliveries only (windows of 5 here): the one
    delivery to another endpoint lies between 10 older and 10 newer deliveries to a slow
    endpoint at its cap, outside both windows unless the claim passes over the saturated
    endpoint's rows; it arrives at once, not after the slow endpoint's backlog."""
    monkeypatch.setattr(candidates, "CLAIM_WINDOW", 5)
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=2)
    principal, product_id = await _setup(db)
    with running_receiver() as slow, running_receiver() as fast:
        slow.reply("/hook", Reply(200, delay=1.0))
        await _create_endpoint(
            db, principal, slow.url("/hook"), settings, box, events=["order.created"]
        )
        await _create_endpoint(
            db, principal, fast.url("/hook"), settings, box, events=["order.fulfilled"]
        )
        await _place_orders(db, principal, product_id, 10)
        order = await factories.place_order(db, principal, (product_id, 1))
        async with db.write() as conn:
            await order_service.fulfill_order(conn, principal, order["id"], "sandbox")
        await _place_orders(db, principal, product_id, 10)
        dispatcher = Dispatcher(settings, db, box)
        running = asyncio.create_task(dispatcher.run())
        try:
            await eventually(lambda: len(slow.requests()) == 2, within=5, what="the slow ones")
            await eventually(
                lambda: len(fast.requests()) == 1, within=0.5, what="the other endpoint's"
            )
        finally:
            await stop_dispatcher(dispatcher, running, grace=0.5)
        assert slow.peak_total_in_flight == 2


async def test_a_dead_dispatchers_claims_hold_their_slots_until_they_lapse(
    db: Database, database_url: str
) -> None:
    """A dispatcher that claimed an endpoint's whole cap and died: no one else attempts the
    endpoint until its claims lapse; then the slots are free again."""
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=2)
    principal, product_id = await _setup(db)
    with running_receiver() as receiver:
        endpoint = await _create_endpoint(db, principal, receiver.url("/hook"), settings, box)
        await _place_orders(db, principal, product_id, 4)
        dead = Dispatcher(settings, db, box)
        survivor = Dispatcher(settings, db, box)
        try:
            now = utcnow()
            async with db.write() as conn:  # claimed, then the process "died"
                claimed = await claims.claim_due(
                    conn,
                    now=now,
                    until=now + dead.lease,
                    token=dead.token,
                    limit=20,
                    per_endpoint=2,
                )
            assert len(claimed) == 2
            assert await survivor.run_once() == 0  # the endpoint is at its cap
            assert receiver.requests() == []

            async with db.write() as conn:  # the dead dispatcher's claims lapse
                await conn.execute(
                    update(webhook_deliveries)
                    .where(webhook_deliveries.c.endpoint_id == endpoint["id"])
                    .values(claimed_until=utcnow() - timedelta(seconds=1))
                )
            assert await survivor.run_once() == 2
            assert await survivor.run_once() == 2
            assert len(receiver.requests()) == 4
        finally:
            survivor.stop()
            await asyncio.wait_for(survivor.run(), timeout=10)
            dead.stop()
            await asyncio.wait_for(dead.run(), timeout=10)


async def _claim(conn: Executor, token: str, limit: int = 20) -> list[claims.Claimed]:
    """One dispatcher's claim (named ``token``), capped at ``CAP`` per endpoint."""
    now = utcnow()
    return await claims.claim_due(
        conn, now=now, until=now + LEASE, token=token, limit=limit, per_endpoint=CAP
    )


async def test_claims_side_by_side_take_turns_on_an_endpoint(
    db: Database, database_url: str
) -> None:
    """PostgreSQL, where claims run side by side: while one claim of an endpoint is under way
    (its transaction open), another dispatcher's claim skips that endpoint — it could not count
    the first one's claims yet — and takes another endpoint's delivery; an order placed
    meanwhile, which makes deliveries to the endpoint, does not wait for the claim. Once the
    first claim is committed, the next one counts it."""
    if db.is_sqlite:
        pytest.skip("SQLite admits one writer at a time: two claims cannot overlap")
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=CAP)
    principal, product_id = await _setup(db)
    with running_receiver() as receiver:
        busy = await _create_endpoint(db, principal, receiver.url("/busy"), settings, box)
        await _place_orders(db, principal, product_id, 5)
        async with factories.opened(database_url) as other:
            async with db.write_batch() as conn:
                [mine] = await _claim(conn, "first", limit=1)
                assert mine.endpoint_id == busy["id"]
                idle = await _create_endpoint(
                    other, principal, receiver.url("/idle"), settings, box
                )
                await asyncio.wait_for(_place_orders(other, principal, product_id, 1), 5)
                async with other.write_batch() as beside:
                    theirs = await asyncio.wait_for(_claim(beside, "second"), 5)
                assert [row.endpoint_id for row in theirs] == [idle["id"]]
            async with other.write_batch() as after:
                later = await _claim(after, "second")
    assert [row.endpoint_id for row in later] == [busy["id"]] * (CAP - 1)


@dataclass
class _ClaimedMeanwhile:
    """A claim's connection that runs ``meanwhile`` (in another transaction, committed) just
    before the claim's statement that locks what it chose: so that ``meanwhile`` falls between
    the claim's read of its candidates and its locks."""

    conn: Executor
    meanwhile: Callable[[], Awaitable[None]]

    @property
    def dialect(self) -> Dialect:
        return self.conn.dialect

    @property
    def info(self) -> dict[Any, Any]:
        return self.conn.info

    async def execute(self, statement: Executable, parameters: Any = None) -> CursorResult[Any]:
        if isinstance(statement, ClauseElement) and "FOR NO KEY UPDATE" in str(
            statement.compile(dialect=self.dialect)
        ):
            await self.meanwhile()
        return await self.conn.execute(statement, parameters)

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> Any:
        return await self.conn.exec_driver_sql(statement, parameters)

    async def scalar(self, statement: Executable, parameters: Any = None) -> Any:
        return await self.conn.scalar(statement, parameters)

    async def get_raw_connection(self) -> Any:
        return await self.conn.get_raw_connection()


async def test_a_claim_committed_after_another_read_its_candidates_is_counted(
    db: Database, database_url: str
) -> None:
    """PostgreSQL: another dispatcher's claim of 2 of the endpoint's deliveries commits after
    this claim read its candidates (which counted none in flight) and before it locked them:
    the claim counts it when it claims, and takes 1, not 3."""
    if db.is_sqlite:
        pytest.skip("SQLite admits one writer at a time: nothing commits during a claim")
    settings, box = _settings(database_url, webhook_max_in_flight_per_endpoint=CAP)
    principal, product_id = await _setup(db)
    with running_receiver() as receiver:
        endpoint = await _create_endpoint(db, principal, receiver.url("/hook"), settings, box)
        await _place_orders(db, principal, product_id, 5)
        async with db.read() as conn:
            newest: list[str] = list(
                await conn.scalars(
                    select(webhook_deliveries.c.event_id)
                    .where(webhook_deliveries.c.endpoint_id == endpoint["id"])
                    .order_by(
                        webhook_deliveries.c.next_attempt_at.desc(),
                        webhook_deliveries.c.event_id.desc(),
                    )
                    .limit(2)
                )
            )

        async def claim_the_newest_two() -> None:
            now = utcnow()
            async with factories.opened(database_url) as other, other.write() as conn:
                await conn.execute(
                    update(webhook_deliveries)
                    .where(webhook_deliveries.c.event_id.in_(newest))
                    .values(claim_token="other", claimed_until=now + LEASE, claimed_at=now)
                )

        async with db.write_batch() as batch:
            claimed = await _claim(_ClaimedMeanwhile(batch, claim_the_newest_two), "this")
    assert len(claimed) == CAP - len(newest)
    assert {row.event_id for row in claimed}.isdisjoint(newest)
