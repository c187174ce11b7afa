"""Several dispatchers on one database never deliver one event to one endpoint twice.

docs/design.md ("Runtime shapes"): dispatchers coordinate only through the database
(``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite serialises writers), so any number
may run side by side. Here four :class:`Dispatcher` instances, each with its own
:class:`Database` (its own engine and connections, as separate processes would have), run
concurrently (``run()`` in tasks, polling every 50 ms) against 40 events for 2 endpoints. The
receiver answers slowly (100 ms), so deliveries overlap in time, and records how many requests
for each (``webhook-id``, endpoint) are in progress at once. Every (event, endpoint) pair must be
delivered exactly once, never concurrently, with a valid signature, and end ``succeeded``; and
when a delivery's first attempt fails, exactly twice (the 500, then the retry's 200).

Half the events exist before the dispatchers start; the other half are recorded while they run
(as orders arrive in production). Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select, text

from commerce_api.accounts.service import Principal
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events, webhook_attempts, webhook_deliveries
from commerce_api.webhooks import dispatcher as dispatcher_module
from commerce_api.webhooks import service as webhooks
from commerce_api.webhooks.dispatcher import ACCOUNT_SHARE, Dispatcher, stop_dispatcher
from commerce_api.webhooks.schemas import WebhookEndpointCreate, WebhookEndpointUpdate
from tests import factories
from tests.conftest import make_settings
from tests.webhook_receiver import Receiver, Reply, eventually, running_receiver

DISPATCHERS = 4
EVENTS = 40
PATHS = ("/a", "/b")
RECEIVER_DELAY_SECONDS = 0.1
DEADLINE_SECONDS = 40.0


# Per scenario: the receiver's script for each delivery, and how many deliveries per endpoint
# follow it (the others get its last reply). "after-a-retry": the first attempt of 6 deliveries
# per endpoint gets a 500 and their retry (1 s later) a 200 (seconds of failures never disable
# an endpoint).
SCENARIOS: dict[str, tuple[tuple[Reply, ...], int | None]] = {
    "first-attempt": ((Reply(200, delay=RECEIVER_DELAY_SECONDS),), None),
    "after-a-retry": (
        (Reply(500, delay=RECEIVER_DELAY_SECONDS), Reply(200, delay=RECEIVER_DELAY_SECONDS)),
        6,
    ),
}


@pytest.fixture(params=sorted(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def receiver(scenario: str) -> Iterator[Receiver]:
    with running_receiver() as running:
        for path in PATHS:
            script, limit = SCENARIOS[scenario]
            running.reply_per_delivery(path, *script, limit=limit)
        yield running


def counting(dispatcher: Dispatcher, claimed: list[int]) -> Dispatcher:
    """Count what this dispatcher claims (run() claims through self._claim)."""
    original = dispatcher._claim

    async def claim(limit: int) -> list[Any]:
        rows = await original(limit)
        claimed.append(len(rows))
        return rows

    setattr(dispatcher, "_claim", claim)  # noqa: B010 - mypy forbids assigning a method
    return dispatcher


async def _setup(db: Database) -> tuple[Principal, str]:
    customer = await factories.new_customer(db, "Concurrent dispatchers")
    product_id = await factories.new_product(db, 10_000, category="webhooks")
    return customer.principal, product_id


def _settings(database_url: str, **overrides: Any) -> tuple[Settings, SecretBox]:
    """Dispatcher settings for these tests (fast polling, receivers on loopback), and the box
    that opens the endpoints' secrets."""
    values: dict[str, Any] = {
        "webhook_poll_seconds": 0.05,
        "webhook_timeout_seconds": 5.0,
        "webhook_allow_private_urls": True,
        **overrides,
    }
    settings = make_settings(database_url, **values)
    assert settings.secret_key is not None
    return settings, SecretBox(settings.secret_key)


async def _create_endpoint(
    db: Database,
    principal: Principal,
    url: str,
    settings: Settings,
    box: SecretBox,
    events: list[str] | None = None,
) -> dict[str, Any]:
    """A new endpoint through the service (for ``events``, or every type): its record, with
    the secret."""
    data = WebhookEndpointCreate.model_validate({"url": url, "events": events or []})
    checked = await webhooks.check_receiver_url(data.url, settings)
    async with db.write() as conn:
        return await webhooks.create_endpoint(conn, principal, data, checked, settings, box)


async def _place_orders(db: Database, principal: Principal, product_id: str, count: int) -> None:
    for _ in range(count):
        await factories.place_order(db, principal, (product_id, 1))


async def _unfinished(db: Database, account_id: str) -> int:
    """Deliveries of the account's events that are still pending."""
    async with db.read() as conn:
        count = await conn.scalar(
            select(func.count())
            .select_from(webhook_deliveries.join(events))
            .where(events.c.account_id == account_id, webhook_deliveries.c.status == "pending")
        )
    return int(count or 0)


def _fewer_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dispatchers that keep 15 attempts in flight, not 80: one alone would otherwise claim a
    test's whole backlog at once, and the others would have nothing to do side by side."""
    monkeypatch.setattr(dispatcher_module, "CONCURRENCY", 20)
    monkeypatch.setattr(dispatcher_module, "CLAIM_BATCH", 5)
    monkeypatch.setattr(dispatcher_module, "ACCOUNT_SHARE", 15)


async def test_concurrent_dispatchers_deliver_each_pair_exactly_once_and_never_in_parallel(
    db: Database,
    database_url: str,
    receiver: Receiver,
    scenario: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fewer_in_flight(monkeypatch)
    script, retried = SCENARIOS[scenario]
    settings, box = _settings(database_url, webhook_retry_schedule=(1, 1, 1))
    principal, product_id = await _setup(db)
    assert principal.account_id is not None
    secrets: dict[str, str] = {}
    endpoint_paths: dict[str, str] = {}
    for path in PATHS:
        created = await _create_endpoint(db, principal, receiver.url(path), settings, box)
        secrets[path] = created["secret"]
        endpoint_paths[created["id"]] = path
    await _place_orders(db, principal, product_id, EVENTS // 2)

    databases = [Database(database_url) for _ in range(DISPATCHERS)]
    claims: list[list[int]] = [[] for _ in databases]
    dispatchers = [
        counting(Dispatcher(settings, database, box), claimed)
        for database, claimed in zip(databases, claims, strict=True)
    ]
    tasks = [asyncio.create_task(dispatcher.run()) for dispatcher in dispatchers]
    started = time.monotonic()
    try:
        await _place_orders(db, principal, product_id, EVENTS - EVENTS // 2)
        deadline = started + DEADLINE_SECONDS
        while await _unfinished(db, principal.account_id) > 0:
            assert time.monotonic() < deadline, "deliveries still pending at the deadline"
            await asyncio.sleep(0.1)
        # Any (wrong) extra delivery would be claimed by a later pass: wait until every
        # dispatcher has claimed again after the last delivery finished (stopping them then
        # waits for whatever they claimed to be attempted).
        finished = [len(claimed) for claimed in claims]
        await eventually(
            lambda: all(len(c) > n for c, n in zip(claims, finished, strict=True)),
            within=10,
            what="a claim by every dispatcher after the last delivery",
        )
    finally:
        for dispatcher in dispatchers:
            dispatcher.stop()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=15)
        for database in databases:
            await database.dispose()
    elapsed = time.monotonic() - started
    assert all(result is None for result in results), results

    async with db.read() as conn:
        event_ids: set[str] = set(
            (
                await conn.scalars(
                    select(events.c.id).where(events.c.account_id == principal.account_id)
                )
            ).all()
        )
        deliveries = (
            await conn.execute(
                select(webhook_deliveries).where(webhook_deliveries.c.event_id.in_(event_ids))
            )
        ).all()
        attempts = (
            await conn.execute(
                select(webhook_attempts).where(webhook_attempts.c.event_id.in_(event_ids))
            )
        ).all()
    assert len(event_ids) == EVENTS
    expected_pairs = {(event_id, path) for event_id in event_ids for path in PATHS}

    requests = receiver.requests()
    delivered = Counter((request.webhook_id, request.path) for request in requests)
    assert set(delivered) == expected_pairs
    # Each pair: one request, or (the scripted ones that failed first) exactly two.
    twice = {pair for pair, n in delivered.items() if n == 2}
    wrong = {pair: n for pair, n in delivered.items() if n not in {1, 2}}
    assert wrong == {}, f"pairs delivered a wrong number of times: {wrong}"
    expected_twice = 0 if len(script) == 1 else len(PATHS) * (retried or EVENTS)
    assert len(twice) == expected_twice
    for pair in twice:
        assert [r.status for r in requests if (r.webhook_id, r.path) == pair] == [500, 200]
    overlapping = {pair: n for pair, n in receiver.max_in_flight().items() if n > 1}
    assert overlapping == {}, f"delivered concurrently: {overlapping}"
    for request in requests:
        payload = request.verify(secrets[request.path])
        assert payload["id"] == request.webhook_id
    successes = Counter((r.webhook_id, r.path) for r in requests if r.status == 200)
    assert successes == dict.fromkeys(expected_pairs, 1)  # exactly one 200 per pair
    # The dispatchers really worked side by side (else this test proves little).
    assert receiver.peak_total_in_flight > 1
    busy = [sum(claimed) for claimed in claims]
    assert sum(busy) == len(requests)
    assert sum(1 for n in busy if n > 0) >= 2, f"deliveries per dispatcher: {busy}"

    assert len(deliveries) == len(expected_pairs)
    assert {(d.event_id, endpoint_paths[d.endpoint_id]) for d in deliveries} == expected_pairs
    assert {(d.status, d.claim_token) for d in deliveries} == {("succeeded", None)}
    assert {(d.event_id, endpoint_paths[d.endpoint_id]): d.attempts for d in deliveries} == dict(
        delivered
    )
    assert len(attempts) == len(requests)
    assert Counter(a.status_code for a in attempts) == Counter(r.status for r in requests)
    assert elapsed < DEADLINE_SECONDS


FAILING_DELIVERIES = 200


_OTHER_BACKENDS = text(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid()"
)
_DEADLOCKS = text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")


async def _deadlocks(db: Database) -> tuple[int, set[int]] | None:
    """PostgreSQL's count of deadlocks detected in this database, and the other backends
    connected to it now, before this test opened any (None on SQLite)."""
    if db.is_sqlite:
        return None
    async with db.read() as conn:
        await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        count = int(await conn.scalar(_DEADLOCKS) or 0)
        backends = set((await conn.scalars(_OTHER_BACKENDS)).all())
    return count, backends


async def _deadlocks_once_gone(database_url: str, earlier: set[int]) -> int:
    """The deadlock count once every backend opened since ``earlier`` has exited: a backend
    reports its statistics (the deadlocks it detected among them) as it exits, so the count
    is then complete (bounded wait)."""
    probe = Database(database_url)
    try:
        deadline = time.monotonic() + 15
        while True:
            async with probe.read() as conn:
                others = set((await conn.scalars(_OTHER_BACKENDS)).all()) - earlier
                if not others:
                    await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                    return int(await conn.scalar(_DEADLOCKS) or 0)
            assert time.monotonic() < deadline, f"backends {others} never exited"
            await asyncio.sleep(0.05)
    finally:
        await probe.dispose()


async def test_failing_attempts_side_by_side_with_disabling_never_deadlock(
    db: Database,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 failing attempts from four dispatchers at once, on two endpoints that the failures
    disable (after 1 s) while an operator keeps re-enabling them. Each dispatcher transaction
    locks a delivery and then its endpoint, and disabling touches no delivery: no deadlock
    (PostgreSQL counts none), and every attempt that was made is recorded.

    The dispatchers keep fewer attempts in flight (15 each, 60 in all), each taking 0.6 s, so
    that failures disable the endpoints (1.2 s in, as the second wave of 60 fails) while
    deliveries still wait: the last 20 cannot start before 1.8 s. (With 0.4 s the last wave
    started at 1.2 s, as the endpoints were disabled: once an attempt costs little more than
    the receiver's delay, nothing was left waiting for the operator to re-enable them.)"""
    _fewer_in_flight(monkeypatch)
    settings, box = _settings(
        database_url,
        webhook_retry_schedule=(),  # one attempt per delivery
        webhook_disable_after_seconds=1,
    )
    deadlocks_before = await _deadlocks(db)  # first: no connection of this test is open yet
    principal, product_id = await _setup(db)
    assert principal.account_id is not None
    with running_receiver() as receiver:
        endpoint_ids = []
        for path in PATHS:
            receiver.reply(path, Reply(500, delay=0.6))
            created = await _create_endpoint(db, principal, receiver.url(path), settings, box)
            endpoint_ids.append(created["id"])
        await _place_orders(db, principal, product_id, FAILING_DELIVERIES // len(PATHS))

        reenabled = 0

        async def operator() -> None:
            nonlocal reenabled
            change = WebhookEndpointUpdate.model_validate({"enabled": True})
            while True:
                await asyncio.sleep(0.2)
                for endpoint_id in endpoint_ids:
                    async with db.write() as conn:
                        endpoint = await webhooks.get_endpoint(conn, principal, endpoint_id)
                        if not endpoint["enabled"]:
                            await webhooks.update_endpoint(
                                conn, principal, endpoint_id, change, None
                            )
                            reenabled += 1

        databases = [Database(database_url) for _ in range(DISPATCHERS)]
        dispatchers = [Dispatcher(settings, database, box) for database in databases]
        tasks = [asyncio.create_task(dispatcher.run()) for dispatcher in dispatchers]
        reenabling = asyncio.create_task(operator())
        try:
            deadline = time.monotonic() + DEADLINE_SECONDS
            while await _unfinished(db, principal.account_id) > 0:
                assert time.monotonic() < deadline, "deliveries still pending at the deadline"
                await asyncio.sleep(0.1)
        finally:
            reenabling.cancel()
            for dispatcher in dispatchers:
                dispatcher.stop()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=15)
            for database in databases:
                await database.dispose()
        requests = receiver.requests()

    unexpected = [r.getMessage() for r in caplog.records if "unexpectedly" in r.getMessage()]
    assert unexpected == []
    async with db.read() as conn:
        deliveries = (
            await conn.execute(
                select(webhook_deliveries).where(webhook_deliveries.c.endpoint_id.in_(endpoint_ids))
            )
        ).all()
        attempts = (
            await conn.execute(
                select(webhook_attempts).where(webhook_attempts.c.endpoint_id.in_(endpoint_ids))
            )
        ).all()
    assert len(deliveries) == FAILING_DELIVERIES
    assert {(d.status, d.attempts) for d in deliveries} == {("failed", 1)}
    assert len(requests) == len(attempts) == FAILING_DELIVERIES
    assert Counter((a.event_id, a.endpoint_id) for a in attempts) == {
        (d.event_id, d.endpoint_id): 1 for d in deliveries
    }
    assert reenabled > 0, "no endpoint was disabled during the run: the test proves little"
    if deadlocks_before is not None:
        count_before, earlier = deadlocks_before
        await db.dispose()  # the test's own connections (the operator's) exit too
        after = await _deadlocks_once_gone(database_url, earlier)
        assert after == count_before, f"deadlocks detected: {after} (before: {count_before})"


async def test_one_accounts_timing_out_endpoints_do_not_delay_another_account(
    db: Database, database_url: str
) -> None:
    """Account A has 16 endpoints whose receiver never answers in time, and a backlog of their
    deliveries larger than an account's share of the dispatcher; account B's events still
    arrive at once (well within one attempt timeout of their creation): A never holds every
    slot of the dispatcher, and each account's oldest delivery is claimed before anyone's
    second."""
    timeout = 2.0
    settings, box = _settings(
        database_url, webhook_retry_schedule=(0, 0, 0), webhook_timeout_seconds=timeout
    )
    hog, hog_product = await _setup(db)
    other, other_product = await _setup(db)
    with running_receiver() as receiver:
        for index in range(settings.webhook_max_endpoints):
            receiver.reply(f"/slow/{index}", Reply(200, delay=timeout * 3))
            await _create_endpoint(db, hog, receiver.url(f"/slow/{index}"), settings, box)
        await _create_endpoint(db, other, receiver.url("/fast"), settings, box)
        # More deliveries that time out than one account may have in flight: A fills its share.
        backlog = ACCOUNT_SHARE // settings.webhook_max_endpoints + 1
        await _place_orders(db, hog, hog_product, backlog)

        dispatcher = Dispatcher(settings, db, box)
        running = asyncio.create_task(dispatcher.run())
        try:
            await eventually(
                lambda: sum(r.path.startswith("/slow/") for r in receiver.requests()) >= 5,
                within=10,
                what="the slow endpoints' attempts in flight",
            )
            created: list[float] = []
            for _ in range(3):
                created.append(time.monotonic())
                await _place_orders(db, other, other_product, 1)
                await eventually(
                    lambda: len(receiver.requests("/fast")) == len(created),
                    within=timeout * 2,
                    what="the other account's delivery",
                )
                await asyncio.sleep(0.2)
        finally:
            dispatcher.stop()
            await stop_dispatcher(dispatcher, running, grace=0.5)
        arrivals = [request.arrived_at for request in receiver.requests("/fast")]

    delays = [arrived - sent for arrived, sent in zip(arrivals, created, strict=True)]
    assert max(delays) < timeout / 2, f"the other account waited {delays} s"
