"""The webhook dispatcher against real HTTP receivers, on both backends.

docs/design.md ("Webhooks"): deliveries follow Standard Webhooks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``; any Standard Webhooks library verifies them);
the envelope is ``{id, type, created_at, data}``; any 2xx succeeds, anything else is retried on
the schedule with the same ``webhook-id``; redirects are not followed; ``410 Gone`` disables
the endpoint, and so does failure sustained for ``COMMERCE_WEBHOOK_DISABLE_AFTER_SECONDS``
(never a burst); a disabled endpoint's deliveries wait and resume when it is re-enabled; a
delivery claimed by a dispatcher that dies becomes due again when its claim expires; at
delivery the receiver URL is checked again
against the private-address policy.

Dispatchers are driven directly (``run_once`` for a single pass, ``run`` in a task where the
loop itself is under test). The receivers are real HTTP servers on 127.0.0.1 (see
``tests/webhook_receiver.py``), and every delivery they get is verified with
``standardwebhooks`` as an integrator would. Data is set up through the services: an account
and a client principal, a product, endpoints (``webhooks.service.create_endpoint``) and orders
(``orders.desk.create_order``, which records ``order.created`` and its deliveries).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from standardwebhooks.webhooks import WebhookVerificationError

from commerce_api.accounts.service import Principal
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.events import repository as event_repository
from commerce_api.events import service as event_service
from commerce_api.orders import service as order_service
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events, webhook_deliveries, webhook_endpoints
from commerce_api.webhooks import dispatcher as dispatcher_module
from commerce_api.webhooks import service as webhooks
from commerce_api.webhooks.dispatcher import Claim, Dispatcher, stop_dispatcher
from commerce_api.webhooks.policy import GONE_REASON, judge_attempt
from commerce_api.webhooks.recording import Finished
from commerce_api.webhooks.repository import claim_ends, claims, outbox
from commerce_api.webhooks.repository.attempts import INTERRUPTED, attempts_of
from commerce_api.webhooks.schemas import WebhookEndpointCreate, WebhookEndpointUpdate
from tests import factories
from tests.conftest import make_settings
from tests.helpers import Clock
from tests.webhook_receiver import Receiver, Reply, eventually, running_receiver
from tests.webhooks.test_dispatcher_concurrency import counting

MAX_PASSES = 20  # run_once calls per drain: far more than any test needs


@dataclass
class World:
    """One account with a client principal and a product, on one backend's database."""

    db: Database
    database_url: str
    principal: Principal
    product_id: str
    dispatchers: list[Dispatcher] = field(default_factory=list)
    receivers: list[Receiver] = field(default_factory=list)
    secrets: dict[str, list[str]] = field(default_factory=dict)  # receiver URL → its secrets

    def watch(self, receiver: Receiver) -> Receiver:
        """At teardown, every request this receiver got must verify with its URL's secret."""
        self.receivers.append(receiver)
        return receiver

    def verify_everything_received(self) -> None:
        for receiver in self.receivers:
            for request in receiver.requests():
                known = self.secrets.get(receiver.base_url + request.path, [])
                assert known, f"a request to {request.path} that no endpoint stands for"
                errors: list[Exception] = []
                for secret in known:
                    try:
                        payload = request.verify(secret)
                    except WebhookVerificationError as exc:
                        errors.append(exc)
                        continue
                    assert payload["id"] == request.webhook_id
                    break
                else:
                    raise AssertionError(f"a delivery that does not verify: {errors}")

    def settings(self, **overrides: object) -> Settings:
        values: dict[str, object] = {
            "webhook_retry_schedule": (0, 0, 0),
            "webhook_poll_seconds": 0.05,
            "webhook_timeout_seconds": 1.0,
            "webhook_allow_private_urls": True,
            **overrides,
        }
        return make_settings(self.database_url, **values)

    @property
    def secret_box(self) -> SecretBox:
        secret_key = self.settings().secret_key
        assert secret_key is not None
        return SecretBox(secret_key)

    def dispatcher(self, db: Database | None = None, **overrides: object) -> Dispatcher:
        """A dispatcher on this database (closed at teardown)."""
        dispatcher = Dispatcher(self.settings(**overrides), db or self.db, self.secret_box)
        self.dispatchers.append(dispatcher)
        return dispatcher

    async def endpoint(self, url: str, events: list[str] | None = None) -> tuple[str, str]:
        """A new endpoint through the service: (id, secret)."""
        data = WebhookEndpointCreate.model_validate({"url": url, "events": events or []})
        settings = self.settings()
        checked = await webhooks.check_receiver_url(data.url, settings)
        async with self.db.write() as conn:
            created = await webhooks.create_endpoint(
                conn, self.principal, data, checked, settings, self.secret_box
            )
        self.secrets.setdefault(url, []).append(created["secret"])
        return created["id"], created["secret"]

    async def order(self) -> tuple[dict[str, Any], str]:
        """A new order through the service: (the order record, its order.created event id)."""
        order = await factories.place_order(self.db, self.principal, (self.product_id, 1))
        return order, await self.latest_event_id()

    async def fulfil(self, order_id: str) -> str:
        async with self.db.write() as conn:
            await order_service.fulfill_order(conn, self.principal, order_id, "sandbox")
        return await self.latest_event_id()

    async def latest_event_id(self) -> str:
        async with self.db.read() as conn:
            event_id = await conn.scalar(
                select(events.c.id)
                .where(events.c.account_id == self.principal.account_id)
                .order_by(events.c.created_at.desc(), events.c.id.desc())
                .limit(1)
            )
        assert isinstance(event_id, str)
        return event_id

    async def event(self, event_id: str) -> Any:
        async with self.db.read() as conn:
            return await event_repository.get_event(conn, event_id)

    async def delivery(self, event_id: str, endpoint_id: str) -> Any:
        async with self.db.read() as conn:
            rows = await outbox.deliveries_of(conn, event_id)
        matching = [row for row in rows if row.endpoint_id == endpoint_id]
        assert len(matching) == 1, f"deliveries of {event_id}: {rows}"
        return matching[0]

    async def deliveries(self, event_id: str) -> list[Any]:
        async with self.db.read() as conn:
            return await outbox.deliveries_of(conn, event_id)

    async def attempts(self, event_id: str, endpoint_id: str | None = None) -> list[Any]:
        async with self.db.read() as conn:
            rows = await attempts_of(conn, event_id)
        return [row for row in rows if endpoint_id is None or row.endpoint_id == endpoint_id]

    async def endpoint_row(self, endpoint_id: str) -> Any:
        async with self.db.read() as conn:
            query = select(webhook_endpoints).where(webhook_endpoints.c.id == endpoint_id)
            return (await conn.execute(query)).first()

    async def set_endpoint(self, endpoint_id: str, **values: object) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                update(webhook_endpoints)
                .where(webhook_endpoints.c.id == endpoint_id)
                .values(**values)
            )


@pytest.fixture
async def world(db: Database, database_url: str) -> AsyncIterator[World]:
    customer = await factories.new_customer(db, "Webhook receiver account")
    product_id = await factories.new_product(db, 10_000, category="webhooks")
    principal = customer.principal
    state = World(db=db, database_url=database_url, principal=principal, product_id=product_id)
    try:
        yield state
    finally:
        for dispatcher in state.dispatchers:
            # stop() then run(): the loop does not start; run() releases claims and closes
            # its HTTP client (that is how every dispatcher ends).
            dispatcher.stop()
            await asyncio.wait_for(dispatcher.run(), timeout=10)
    # Every delivery any receiver got verifies, as an integrator's receiver would check.
    state.verify_everything_received()


@pytest.fixture
def receiver(world: World) -> Iterator[Receiver]:
    with running_receiver() as running:
        yield world.watch(running)


@contextlib.asynccontextmanager
async def delivering(dispatcher: Dispatcher, *, stop_within: float = 10) -> AsyncIterator[None]:
    """``dispatcher.run()`` in a task for the block; then stop it, which must end in time."""
    task = asyncio.create_task(dispatcher.run())
    try:
        yield
    finally:
        dispatcher.stop()
        await asyncio.wait_for(task, timeout=stop_within)


async def drain(dispatcher: Dispatcher, *, passes: int = MAX_PASSES) -> int:
    """Run passes until one finds nothing due; returns how many deliveries were attempted."""
    total = 0
    for _ in range(passes):
        done = await dispatcher.run_once()
        if done == 0:
            return total
        total += done
    raise AssertionError(f"still finding due deliveries after {passes} passes")


def assert_standard_headers(request: Any, event_id: str) -> None:
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == event_id
    timestamp = int(request.headers["webhook-timestamp"])
    assert abs(timestamp - time.time()) < 30
    assert request.headers["webhook-signature"].startswith("v1,")


async def claim_as(
    dispatcher: Dispatcher, conn: AsyncConnection, now: datetime, *, limit: int
) -> list[Any]:
    """What ``dispatcher`` claims now, as its own ``run_once`` would (its lease, token, cap)."""
    return await claims.claim_due(
        conn,
        now=now,
        until=now + dispatcher.lease,
        token=dispatcher.token,
        limit=limit,
        per_endpoint=dispatcher.settings.webhook_max_in_flight_per_endpoint,
    )


# --- a delivery ---------------------------------------------------------------------------------


async def test_delivery_is_a_signed_envelope_of_the_event(world: World, receiver: Receiver) -> None:
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    order, event_id = await world.order()
    dispatcher = world.dispatcher()

    assert await dispatcher.run_once() == 1

    [request] = receiver.requests()
    assert request.path == "/hook"
    assert_standard_headers(request, event_id)
    assert len(request.headers["webhook-signature"].split(" ")) == 1
    payload = request.verify(secret)  # as an integrator's receiver would
    event = await world.event(event_id)
    assert payload == {
        "id": event_id,
        "type": "order.created",
        "created_at": format_timestamp(event.created_at),
        "data": order,
    }
    assert payload == event_service.render_event(event)  # what GET /v1/events/{id} shows
    assert payload["data"]["id"] == order["id"]
    with pytest.raises(WebhookVerificationError):
        request.verify(f"whsec_{'A' * 43}=")  # another secret does not verify

    [attempt] = await world.attempts(event_id)
    assert attempt.endpoint_id == endpoint_id
    assert attempt.status_code == 200
    assert attempt.error is None
    assert isinstance(attempt.duration_ms, int)
    assert attempt.duration_ms >= 0
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("succeeded", 1, None)
    assert (delivery.claim_token, delivery.claimed_until) == (None, None)

    assert await dispatcher.run_once() == 0  # nothing more is due
    assert len(receiver.requests()) == 1


async def test_each_subscribed_endpoint_gets_its_own_signed_delivery(
    world: World, receiver: Receiver
) -> None:
    first_id, first_secret = await world.endpoint(receiver.url("/first"))
    second_id, second_secret = await world.endpoint(receiver.url("/second"), ["order.created"])
    await world.endpoint(receiver.url("/other"), ["order.canceled"])  # not subscribed
    _, event_id = await world.order()

    assert await drain(world.dispatcher()) == 2

    assert sorted(r.path for r in receiver.requests()) == ["/first", "/second"]
    [first] = receiver.requests("/first")
    [second] = receiver.requests("/second")
    assert first.verify(first_secret) == second.verify(second_secret)
    with pytest.raises(WebhookVerificationError):
        first.verify(second_secret)
    for endpoint_id in (first_id, second_id):
        assert (await world.delivery(event_id, endpoint_id)).status == "succeeded"


async def test_attempts_that_finish_together_are_recorded_in_one_commit(
    world: World, receiver: Receiver
) -> None:
    """The outcomes of attempts finishing at the same moment share a transaction (a group
    commit), each with its delivery's state and its attempt in the history."""
    endpoint_ids = [(await world.endpoint(receiver.url(f"/e{i}")))[0] for i in range(8)]
    _, event_id = await world.order()
    dispatcher = world.dispatcher()

    assert await drain(dispatcher) == 8

    batches, recorded = dispatcher._records.batches, dispatcher._records.items
    assert recorded == 8
    assert batches < recorded, "every outcome was committed on its own"
    for endpoint_id in endpoint_ids:
        assert (await world.delivery(event_id, endpoint_id)).status == "succeeded"
    async with world.db.read() as conn:
        history = await attempts_of(conn, event_id)
    assert sorted(row.endpoint_id for row in history) == sorted(endpoint_ids)


async def test_fulfilment_is_delivered_as_order_fulfilled(world: World, receiver: Receiver) -> None:
    _, secret = await world.endpoint(receiver.url())
    order, _ = await world.order()
    event_id = await world.fulfil(order["id"])

    assert await drain(world.dispatcher()) == 2

    # Claimed in one pass, sent side by side: no order between them is promised.
    payloads = {p["type"]: p for p in (r.verify(secret) for r in receiver.requests())}
    assert sorted(payloads) == ["order.created", "order.fulfilled"]
    assert payloads["order.fulfilled"]["id"] == event_id
    assert payloads["order.fulfilled"]["data"]["status"] == "fulfilled"
    assert payloads["order.created"]["data"]["status"] == "pending"


# --- retries ------------------------------------------------------------------------------------


async def test_a_500_is_retried_with_the_same_id_until_the_schedule_runs_out(
    world: World, receiver: Receiver
) -> None:
    receiver.reply("/hook", Reply(500))
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()

    # Schedule 0,0,0: the first attempt and three retries, each due at once.
    assert await drain(world.dispatcher(webhook_retry_schedule=(0, 0, 0))) == 4

    requests = receiver.requests()
    assert len(requests) == 4
    for request in requests:
        assert_standard_headers(request, event_id)  # the same webhook-id every time
        assert request.verify(secret)["id"] == event_id
    attempts = await world.attempts(event_id, endpoint_id)
    assert [(a.status_code, a.error) for a in attempts] == [(500, "HTTP 500")] * 4
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 4, None)
    endpoint = await world.endpoint_row(endpoint_id)
    assert endpoint.failing_since is not None
    assert endpoint.enabled is True  # failing for seconds, not days


async def test_retries_wait_for_the_schedule_and_a_success_ends_the_failing_spell(
    world: World, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.reply("/hook", Reply(500), Reply(503), Reply(200))
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    clock = Clock()  # the dispatcher's time: moved by hand instead of waiting for the schedule
    monkeypatch.setattr(dispatcher_module, "utcnow", clock)
    dispatcher = world.dispatcher(webhook_retry_schedule=(1, 1))

    for expected_attempts, status in [(1, 500), (2, 503)]:
        before = clock.now
        assert await dispatcher.run_once() == 1
        delivery = await world.delivery(event_id, endpoint_id)
        assert (delivery.status, delivery.attempts) == ("pending", expected_attempts)
        wait = delivery.next_attempt_at - before
        assert timedelta(seconds=0.99) <= wait <= timedelta(seconds=1), wait
        assert await dispatcher.run_once() == 0  # not due yet
        clock.advance(0.9)
        assert await dispatcher.run_once() == 0  # nor a moment before the schedule says
        assert len(receiver.requests()) == expected_attempts
        assert (await world.endpoint_row(endpoint_id)).failing_since is not None
        assert receiver.requests()[-1].status == status
        clock.advance(0.2)

    assert await dispatcher.run_once() == 1
    assert [r.status for r in receiver.requests()] == [500, 503, 200]
    assert {r.webhook_id for r in receiver.requests()} == {event_id}
    for request in receiver.requests():
        request.verify(secret)
    attempts = await world.attempts(event_id, endpoint_id)
    assert [(a.status_code, a.error) for a in attempts] == [
        (500, "HTTP 500"),
        (503, "HTTP 503"),
        (200, None),
    ]
    times = [attempt.attempted_at for attempt in attempts]
    assert all(
        later - earlier >= timedelta(seconds=1) for earlier, later in itertools.pairwise(times)
    )
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts) == ("succeeded", 3)
    assert (await world.endpoint_row(endpoint_id)).failing_since is None


@pytest.mark.parametrize("status", [301, 302, 307])
async def test_redirects_are_not_followed(world: World, status: int) -> None:
    with running_receiver() as first, running_receiver() as elsewhere:
        world.watch(first)
        world.watch(elsewhere)
        first.reply("/hook", Reply(status, headers=(("Location", elsewhere.url("/moved")),)))
        endpoint_id, secret = await world.endpoint(first.url("/hook"))
        _, event_id = await world.order()

        assert await world.dispatcher(webhook_retry_schedule=(0,)).run_once() == 1

        assert elsewhere.requests() == []
        [request] = first.requests()
        request.verify(secret)
        [attempt] = await world.attempts(event_id, endpoint_id)
        assert (attempt.status_code, attempt.error) == (status, f"HTTP {status}")
        delivery = await world.delivery(event_id, endpoint_id)
        assert delivery.status == "pending"  # a failure: retried, not succeeded

        assert await drain(world.dispatcher(webhook_retry_schedule=(0,))) == 1
        assert elsewhere.requests() == []
        assert len(first.requests()) == 2
        assert (await world.delivery(event_id, endpoint_id)).status == "failed"


async def test_a_timeout_is_recorded_as_an_error_without_status(
    world: World, receiver: Receiver
) -> None:
    receiver.reply("/slow", Reply(200, delay=1.5))
    endpoint_id, _ = await world.endpoint(receiver.url("/slow"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher(webhook_timeout_seconds=0.3, webhook_retry_schedule=(60,))

    started = time.monotonic()
    assert await dispatcher.run_once() == 1
    assert time.monotonic() - started < 1.4  # gave up at the timeout, not at the answer

    assert len(receiver.requests()) == 1
    [attempt] = await world.attempts(event_id, endpoint_id)
    assert attempt.status_code is None
    assert attempt.error
    assert "timed out" in attempt.error.lower()
    assert 250 <= attempt.duration_ms < 1400
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts) == ("pending", 1)  # retried later
    assert (await world.endpoint_row(endpoint_id)).failing_since is not None


async def test_the_timeout_bounds_the_whole_attempt_even_against_a_trickling_receiver(
    world: World, receiver: Receiver
) -> None:
    """A receiver that sends its answer a header line at a time (never silent for long) must
    not hold an attempt longer than the timeout: the setting is per delivery attempt, and an
    attempt that outlives its claim's lease would be delivered again, concurrently."""
    receiver.reply("/trickle", Reply(200, delay=1.8, trickle=True))
    endpoint_id, _ = await world.endpoint(receiver.url("/trickle"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher(webhook_timeout_seconds=0.5, webhook_retry_schedule=(60,))

    started = time.monotonic()
    assert await asyncio.wait_for(dispatcher.run_once(), timeout=10) == 1
    elapsed = time.monotonic() - started

    [attempt] = await world.attempts(event_id, endpoint_id)
    assert (attempt.status_code, attempt.error, elapsed < 1.2) == (None, "Timed out.", True), (
        f"the attempt took {elapsed:.1f} s with a 0.5 s timeout: {attempt}"
    )


async def test_a_connection_refused_is_recorded_as_an_error(world: World) -> None:
    with running_receiver() as gone:
        url = gone.url("/hook")
    endpoint_id, _ = await world.endpoint(url)  # nothing listens there any more
    _, event_id = await world.order()

    assert await world.dispatcher(webhook_retry_schedule=(60,)).run_once() == 1

    [attempt] = await world.attempts(event_id, endpoint_id)
    assert attempt.status_code is None
    assert attempt.error
    assert (await world.delivery(event_id, endpoint_id)).status == "pending"


# --- endpoint health ----------------------------------------------------------------------------


async def test_one_batch_of_outcomes_is_recorded_as_the_attempts_one_by_one_would_be(
    world: World, receiver: Receiver
) -> None:
    """Three attempts for one endpoint finish together — a 410 first, then two successes — and
    are recorded in one batch: each delivery closed with its own outcome and one attempt
    counted, each attempt in the history, and the endpoint disabled by the 410 although the
    batch's last attempt succeeded (as when recorded one at a time)."""
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    event_ids = [(await world.order())[1] for _ in range(3)]
    dispatcher = world.dispatcher(webhook_retry_schedule=(0, 0, 0))
    now = utcnow()
    async with world.db.write() as conn:
        claimed = await claim_as(dispatcher, conn, now, limit=20)
    assert sorted(c.event_id for c in claimed) == sorted(event_ids)
    codes = dict(zip(event_ids, (410, 200, 204), strict=True))
    finished = [
        Finished(
            event_id,
            endpoint_id,
            judge_attempt(status_code=codes[event_id], attempts_before=0, schedule=(0,), now=now),
            now,
            codes[event_id],
            3,
            None,
        )
        for event_id in event_ids
    ]

    async with world.db.write_batch() as conn:
        assert await dispatcher._record_batch(conn, finished) == [True, True, True]

    for event_id, status in zip(event_ids, ("failed", "succeeded", "succeeded"), strict=True):
        delivery = await world.delivery(event_id, endpoint_id)
        assert (delivery.status, delivery.attempts, delivery.claim_token) == (status, 1, None)
        [attempt] = await world.attempts(event_id)
        assert attempt.status_code == codes[event_id]
    endpoint = await world.endpoint_row(endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, GONE_REASON)
    assert endpoint.failing_since is None


async def test_410_disables_the_endpoint_and_later_events_are_not_sent(
    world: World, receiver: Receiver
) -> None:
    receiver.reply("/gone", Reply(410))
    gone_id, _ = await world.endpoint(receiver.url("/gone"))
    live_id, live_secret = await world.endpoint(receiver.url("/live"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher(webhook_retry_schedule=(0, 0, 0))

    assert await drain(dispatcher) == 2

    assert len(receiver.requests("/gone")) == 1  # not retried
    [attempt] = await world.attempts(event_id, gone_id)
    assert attempt.status_code == 410
    assert (await world.delivery(event_id, gone_id)).status == "failed"
    endpoint = await world.endpoint_row(gone_id)
    assert endpoint.enabled is False
    assert endpoint.disabled_reason
    assert "410" in endpoint.disabled_reason
    rendered = await _rendered_endpoint(world, gone_id)
    assert rendered["enabled"] is False
    assert rendered["disabled_reason"] == endpoint.disabled_reason

    _, later_id = await world.order()
    assert [d.endpoint_id for d in await world.deliveries(later_id)] == [live_id]
    assert await drain(dispatcher) == 1
    assert len(receiver.requests("/gone")) == 1
    assert [r.verify(live_secret)["id"] for r in receiver.requests("/live")] == [
        event_id,
        later_id,
    ]


async def _rendered_endpoint(world: World, endpoint_id: str) -> dict[str, Any]:
    async with world.db.read() as conn:
        return await webhooks.get_endpoint(conn, world.principal, endpoint_id)


async def test_a_burst_of_failures_never_disables_the_endpoint(
    world: World, receiver: Receiver
) -> None:
    """30 failed deliveries, in passes and side by side, within seconds: the endpoint is failing
    since the first of them, and still enabled."""
    receiver.reply("/hook", Reply(500))
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    dispatcher = world.dispatcher(webhook_retry_schedule=())  # one attempt per delivery
    before = utcnow()

    for _ in range(10):
        await world.order()
        assert await dispatcher.run_once() == 1
    for _ in range(20):
        await world.order()
    assert await drain(dispatcher) == 20

    assert len(receiver.requests()) == 30
    endpoint = await world.endpoint_row(endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, None)
    assert before <= endpoint.failing_since <= before + timedelta(seconds=5)


async def test_failure_sustained_past_the_period_disables_and_the_deliveries_wait(
    world: World, receiver: Receiver
) -> None:
    """Failing since longer than COMMERCE_WEBHOOK_DISABLE_AFTER_SECONDS: the next failure
    disables the endpoint, naming since when. Its pending deliveries stay pending and are not
    attempted while it is disabled; re-enabled, they are delivered."""
    receiver.reply("/hook", Reply(503))
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    since = utcnow().replace(microsecond=0) - timedelta(days=3, seconds=1)
    await world.set_endpoint(endpoint_id, failing_since=since)
    _, first_id = await world.order()
    dispatcher = world.dispatcher(webhook_retry_schedule=(0, 0))

    assert await dispatcher.run_once() == 1

    endpoint = await world.endpoint_row(endpoint_id)
    assert endpoint.enabled is False
    assert endpoint.disabled_reason == (
        f"Every delivery attempt has failed since {format_timestamp(since)}."
    )
    assert (await _rendered_endpoint(world, endpoint_id))["disabled_reason"] == (
        endpoint.disabled_reason
    )
    first = await world.delivery(first_id, endpoint_id)
    assert (first.status, first.attempts) == ("pending", 1)  # one retry left, waiting
    _, later_id = await world.order()  # no delivery for a disabled endpoint's later events
    assert await world.deliveries(later_id) == []
    assert await drain(dispatcher) == 0
    assert len(receiver.requests()) == 1

    receiver.reply("/hook", Reply(200))
    async with world.db.write() as conn:
        change = WebhookEndpointUpdate.model_validate({"enabled": True})
        await webhooks.update_endpoint(conn, world.principal, endpoint_id, change, None)
    endpoint = await world.endpoint_row(endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.failing_since) == (
        True,
        None,
        None,
    )

    assert await drain(dispatcher) == 1
    assert [r.verify(secret)["id"] for r in receiver.requests()] == [first_id, first_id]
    first = await world.delivery(first_id, endpoint_id)
    assert (first.status, first.attempts) == ("succeeded", 2)


async def test_a_success_ends_the_failing_spell(world: World, receiver: Receiver) -> None:
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    await world.set_endpoint(endpoint_id, failing_since=utcnow() - timedelta(days=2))
    await world.order()

    assert await world.dispatcher().run_once() == 1

    endpoint = await world.endpoint_row(endpoint_id)
    assert (endpoint.failing_since, endpoint.enabled) == (None, True)


async def until_attempted(world: World, event_id: str, within: float = 10) -> None:
    """Until the event has had an attempt (a poll with a deadline)."""
    deadline = time.monotonic() + within
    while not await world.attempts(event_id):
        assert time.monotonic() < deadline, f"{event_id} was never attempted"
        await asyncio.sleep(0.02)


async def test_a_receiver_down_during_a_burst_gets_every_event_when_it_returns(
    world: World,
) -> None:
    """Nothing listens at the receiver's address while 15 orders arrive, each one after the
    dispatcher has tried (and failed) to deliver the one before; then it comes back on the
    same port. Every event arrives, once it is back; the endpoint stays enabled."""
    with running_receiver() as probe:
        port = probe.port
    url = f"http://127.0.0.1:{port}/hook"
    endpoint_id, _ = await world.endpoint(url)  # its deliveries are verified at teardown
    dispatcher = world.dispatcher(webhook_retry_schedule=(1, 1, 1, 2, 2, 4, 8))
    async with delivering(dispatcher):
        event_ids = []
        for _ in range(15):
            event_id = (await world.order())[1]
            event_ids.append(event_id)
            await until_attempted(world, event_id)
        with running_receiver(port=port) as back:
            world.watch(back)
            await eventually(
                lambda: {r.webhook_id for r in back.requests()} >= set(event_ids),
                within=30,
                what="every event delivered after the receiver came back",
            )

    for event_id in event_ids:
        delivery = await world.delivery(event_id, endpoint_id)
        assert delivery.status == "succeeded"
        failed = [a for a in await world.attempts(event_id) if a.status_code is None]
        assert failed, "the receiver was down for this event's first attempt"
    endpoint = await world.endpoint_row(endpoint_id)
    assert (endpoint.enabled, endpoint.failing_since) == (True, None)


async def test_a_pending_delivery_to_a_deleted_endpoint_is_closed_unsent(
    world: World, receiver: Receiver
) -> None:
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    assert (await world.delivery(event_id, endpoint_id)).status == "pending"
    async with world.db.write() as conn:
        await webhooks.delete_endpoint(conn, world.principal, endpoint_id)

    assert await world.dispatcher().run_once() == 1

    assert receiver.requests() == []
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.next_attempt_at) == ("failed", None)
    assert (delivery.claim_token, delivery.claimed_until) == (None, None)
    assert await world.dispatcher().run_once() == 0
    assert receiver.requests() == []


async def test_a_pending_delivery_to_a_disabled_endpoint_waits_unclaimed(
    world: World, receiver: Receiver
) -> None:
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    async with world.db.write() as conn:
        change = WebhookEndpointUpdate.model_validate({"enabled": False})
        await webhooks.update_endpoint(conn, world.principal, endpoint_id, change, None)

    assert await world.dispatcher().run_once() == 0

    assert receiver.requests() == []
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.claim_token) == ("pending", 0, None)


async def test_an_endpoint_disabled_while_it_is_claimed_leaves_the_delivery_waiting(
    world: World, receiver: Receiver
) -> None:
    """Disabled between the claim's choice of deliveries and its read of their endpoints (on
    PostgreSQL another transaction may commit in between): the attempt is not made, the
    claim is given back, and the delivery still waits."""
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher()
    now = utcnow()
    async with world.db.write() as conn:
        [claimed] = await claim_as(dispatcher, conn, now, limit=20)
    await world.set_endpoint(endpoint_id, enabled=False)
    async with world.db.read() as conn:
        events, endpoints = await claims.claimed_rows(conn, [claimed])

    await dispatcher._attempt_one(Claim(claimed, events[event_id], endpoints[endpoint_id]))

    assert receiver.requests() == []
    assert await world.attempts(event_id) == []
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.claim_token) == ("pending", 0, None)


# --- signing secrets ----------------------------------------------------------------------------


async def test_after_a_rotation_both_secrets_verify_until_the_old_one_expires(
    world: World, receiver: Receiver
) -> None:
    endpoint_id, old_secret = await world.endpoint(receiver.url("/hook"))
    async with world.db.write() as conn:
        rotated = await webhooks.rotate_secret(conn, world.principal, endpoint_id, world.secret_box)
    new_secret = rotated["secret"]
    world.secrets[receiver.url("/hook")].append(new_secret)
    assert new_secret != old_secret
    dispatcher = world.dispatcher()

    _, during_id = await world.order()
    assert await dispatcher.run_once() == 1
    [during] = receiver.requests()
    assert during.webhook_id == during_id
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert during.verify(old_secret)["id"] == during_id
    assert during.verify(new_secret)["id"] == during_id

    past = utcnow() - timedelta(seconds=1)
    await world.set_endpoint(endpoint_id, previous_secret_expires_at=past)
    _, after_id = await world.order()
    assert await dispatcher.run_once() == 1
    [_, after] = receiver.requests()
    assert after.webhook_id == after_id
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert after.verify(new_secret)["id"] == after_id
    with pytest.raises(WebhookVerificationError):
        after.verify(old_secret)


# --- claims: crashes and stops ------------------------------------------------------------------


async def test_a_dead_dispatchers_claim_delays_the_delivery_until_it_expires(
    world: World, receiver: Receiver
) -> None:
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    dead = world.dispatcher()
    now = utcnow()
    async with world.db.write() as conn:  # claimed, then the process "died"
        claimed = await claim_as(dead, conn, now, limit=20)
    assert [(row.event_id, row.endpoint_id) for row in claimed] == [(event_id, endpoint_id)]
    assert dead.lease > timedelta(seconds=dead.settings.webhook_timeout_seconds)
    survivor = world.dispatcher()

    assert await survivor.run_once() == 0  # the claim still holds
    assert receiver.requests() == []
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.claim_token) == ("pending", dead.token)

    async with world.db.write() as conn:  # the lease runs out
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event_id)
            .values(claimed_until=utcnow() - timedelta(seconds=1))
        )
    assert await survivor.run_once() == 1

    [request] = receiver.requests()
    assert request.verify(secret)["id"] == event_id
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.claim_token) == ("succeeded", 2, None)
    # The dead dispatcher's claim stands for an attempt it had started: recorded, interrupted.
    interrupted, succeeded = await world.attempts(event_id)
    assert (interrupted.status_code, interrupted.duration_ms, interrupted.error) == (
        None,
        None,
        INTERRUPTED,
    )
    assert abs(interrupted.attempted_at - now) < timedelta(seconds=1)
    assert succeeded.status_code == 200
    # The dead dispatcher's late finish cannot overwrite what the survivor recorded.
    async with world.db.write() as conn:
        kept = await claim_ends.finish_deliveries(
            conn,
            [(event_id, endpoint_id)],
            dead.token,
            {"status": "failed", "updated_at": utcnow()},
            attempted=True,
        )
    assert kept == set()
    assert (await world.delivery(event_id, endpoint_id)).status == "succeeded"


async def test_stop_releases_the_dispatchers_unfinished_claims(
    world: World, receiver: Receiver
) -> None:
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    _, mine = await world.order()
    _, theirs = await world.order()
    stopping = world.dispatcher()
    other = world.dispatcher()
    now = utcnow()
    async with world.db.write() as conn:
        [row] = await claim_as(stopping, conn, now, limit=1)
        assert row.event_id == mine
        [row] = await claim_as(other, conn, now, limit=1)
        assert row.event_id == theirs

    stopping.stop()
    await asyncio.wait_for(stopping.run(), timeout=5)

    released = await world.delivery(mine, endpoint_id)
    assert (released.status, released.claim_token, released.claimed_until) == (
        "pending",
        None,
        None,
    )
    [interrupted] = await world.attempts(mine)  # the claim stood for an attempt under way
    assert (released.attempts, interrupted.error) == (1, INTERRUPTED)
    kept = await world.delivery(theirs, endpoint_id)  # another dispatcher's claim is untouched
    assert kept.claim_token == other.token
    assert receiver.requests() == []

    assert await drain(world.dispatcher()) == 1  # due again at once, for anyone
    [request] = receiver.requests()
    assert request.verify(secret)["id"] == mine


async def test_stop_lets_an_attempt_in_flight_finish_and_records_it(
    world: World, receiver: Receiver
) -> None:
    receiver.reply("/hook", Reply(200, delay=0.5))
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher()
    async with delivering(dispatcher, stop_within=5):
        await eventually(lambda: len(receiver.requests()) == 1, within=5, what="a request")

    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts, delivery.claim_token) == ("succeeded", 1, None)
    [attempt] = await world.attempts(event_id, endpoint_id)
    assert attempt.status_code == 200


async def test_an_attempt_cut_off_at_stop_is_recorded_as_interrupted(
    world: World, receiver: Receiver
) -> None:
    """Stopped with less grace than the receiver takes: the attempt in flight is cancelled and
    the history shows it (interrupted), then the retry; the receiver saw both."""
    receiver.reply("/hook", Reply(200, delay=1.0), Reply(200))
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    dispatcher = world.dispatcher()
    task = asyncio.create_task(dispatcher.run())
    await eventually(lambda: len(receiver.requests()) == 1, within=5, what="the first attempt")
    await stop_dispatcher(dispatcher, task, grace=0.1)

    [interrupted] = await world.attempts(event_id, endpoint_id)
    assert (interrupted.status_code, interrupted.duration_ms, interrupted.error) == (
        None,
        None,
        INTERRUPTED,
    )
    assert await drain(world.dispatcher()) == 1
    assert len(receiver.requests()) == 2
    history = await world.attempts(event_id, endpoint_id)
    assert [a.error for a in history] == [INTERRUPTED, None]
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts) == ("succeeded", 2)


async def test_an_attempt_cut_off_by_a_killed_dispatcher_is_in_the_history(
    world: World, receiver: Receiver
) -> None:
    """A dispatcher that dies mid-attempt (no clean-up at all): once its claim lapses, the next
    dispatcher records the cut-off attempt as interrupted and makes its own. The receiver saw
    two attempts; the history shows two."""
    receiver.reply("/hook", Reply(200, delay=1.0), Reply(200))
    endpoint_id, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    dying = world.dispatcher()
    attempt = asyncio.create_task(dying.run_once())
    await eventually(lambda: len(receiver.requests()) == 1, within=5, what="the first attempt")
    attempt.cancel()  # as a SIGKILL would: nothing recorded, the claim left in place
    await asyncio.gather(attempt, return_exceptions=True)
    async with world.db.write() as conn:  # the lease runs out
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event_id)
            .values(claimed_until=utcnow() - timedelta(seconds=1))
        )

    assert await drain(world.dispatcher()) == 1

    assert len(receiver.requests()) == 2
    history = await world.attempts(event_id, endpoint_id)
    assert [(a.status_code, a.error) for a in history] == [
        (None, INTERRUPTED),
        (200, None),
    ]
    assert (await world.delivery(event_id, endpoint_id)).attempts == 2


async def test_a_redelivery_requested_during_an_attempt_does_not_overlap_it(
    world: World, receiver: Receiver
) -> None:
    """One (event, endpoint) is never being delivered twice at once, even when a client asks
    for a redelivery while an attempt is in flight; and the attempt in flight is recorded."""
    receiver.reply("/hook", Reply(200, delay=0.6))
    endpoint_id, secret = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    first, second = world.dispatcher(), world.dispatcher()

    in_flight = asyncio.create_task(first.run_once())
    await eventually(lambda: len(receiver.requests()) == 1, within=5, what="the first attempt")
    async with world.db.write() as conn:
        await event_service.redeliver_event(conn, world.principal, event_id)
    overlapping = await asyncio.wait_for(second.run_once(), timeout=5)
    assert await asyncio.wait_for(in_flight, timeout=5) == 1
    await drain(second)

    for request in receiver.requests():
        assert request.verify(secret)["id"] == event_id
    assert receiver.max_in_flight()[(event_id, "/hook")] == 1, (
        f"delivered twice at once (the second dispatcher claimed {overlapping})"
    )
    assert len(await world.attempts(event_id, endpoint_id)) == len(receiver.requests())
    assert (await world.delivery(event_id, endpoint_id)).status == "succeeded"


async def test_run_delivers_as_events_arrive_and_stops_promptly(
    world: World, receiver: Receiver
) -> None:
    _, secret = await world.endpoint(receiver.url("/hook"))
    dispatcher = world.dispatcher(webhook_poll_seconds=0.05)
    claims: list[int] = []
    counting(dispatcher, claims)
    task = asyncio.create_task(dispatcher.run())
    try:
        await eventually(lambda: len(claims) >= 3, within=5, what="idle polling first")
        assert claims[:3] == [0, 0, 0]
        assert receiver.requests() == []
        order, event_id = await world.order()
        await eventually(lambda: len(receiver.requests()) == 1, within=5, what="delivery")
        fulfilled_id = await world.fulfil(order["id"])
        await eventually(lambda: len(receiver.requests()) == 2, within=5, what="2nd delivery")
    finally:
        dispatcher.stop()
        started = time.monotonic()
        await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - started < 2
    assert [r.verify(secret)["id"] for r in receiver.requests()] == [event_id, fulfilled_id]


# --- the receiver URL policy at delivery --------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("http://127.0.0.1:{port}/hook", "https"),
        ("https://127.0.0.1:{port}/hook", "non-public address (127.0.0.1)"),
        ("https://localhost:{port}/hook", "non-public address"),
    ],
)
async def test_a_private_url_is_refused_at_delivery_when_the_policy_forbids_it(
    world: World, receiver: Receiver, template: str, reason: str
) -> None:
    # Registered while private URLs were allowed (a sandbox), delivered by a production-like
    # dispatcher that forbids them.
    endpoint_id, _ = await world.endpoint(template.format(port=receiver.port))
    _, event_id = await world.order()
    strict = world.dispatcher(webhook_allow_private_urls=False, webhook_retry_schedule=(60,))
    assert strict.settings.allow_private_webhook_urls is False

    assert await strict.run_once() == 1

    assert receiver.requests() == []
    [attempt] = await world.attempts(event_id, endpoint_id)
    assert attempt.status_code is None
    assert attempt.error
    assert attempt.error.startswith("Refused receiver URL")
    assert reason in attempt.error
    delivery = await world.delivery(event_id, endpoint_id)
    assert (delivery.status, delivery.attempts) == ("pending", 1)


async def test_one_accounts_backlog_is_drained_without_waiting_for_the_poll(
    world: World, receiver: Receiver
) -> None:
    """60 due deliveries of one account: the dispatcher keeps claiming as attempts finish
    (the account's share of the slots is not "nothing due"), never idling a poll interval
    while work waits."""
    await world.endpoint(receiver.url("/hook"))  # deliveries verified at teardown
    for _ in range(60):
        await world.order()
    dispatcher = world.dispatcher(webhook_poll_seconds=3.0)
    started = time.monotonic()
    async with delivering(dispatcher):
        await eventually(lambda: len(receiver.requests()) == 60, within=30, what="60 deliveries")
    elapsed = time.monotonic() - started
    assert elapsed < 6.0, f"60 deliveries took {elapsed:.1f} s with a 3 s poll interval"


async def test_deliveries_to_one_receiver_reuse_kept_alive_connections(
    world: World, receiver: Receiver
) -> None:
    """Deliveries one after another to one receiver go over one kept-alive connection."""
    await world.endpoint(receiver.url("/hook"))
    dispatcher = world.dispatcher()
    for _ in range(5):
        await world.order()
        assert await drain(dispatcher) == 1
    assert len(receiver.requests("/hook")) == 5
    assert dispatcher._sender.connections_opened == 1


async def test_a_slow_endpoint_does_not_hold_up_a_fast_one(
    world: World, receiver: Receiver
) -> None:
    """An account's endpoint that takes 2 s to answer, beside one that answers at once: the
    fast one's deliveries arrive at once, while the slow one's attempts are still in flight
    (each attempt has its own connection; none waits for another receiver's)."""
    receiver.reply("/slow", Reply(200, delay=2.0))
    await world.endpoint(receiver.url("/slow"))
    await world.endpoint(receiver.url("/fast"))
    for _ in range(10):
        await world.order()
    dispatcher = world.dispatcher(webhook_timeout_seconds=5.0)
    started = time.monotonic()
    async with delivering(dispatcher):
        await eventually(
            lambda: len(receiver.requests("/fast")) == 10, within=10, what="the fast deliveries"
        )
        fast_done = time.monotonic() - started
        assert fast_done < 1.0, f"the fast endpoint's deliveries took {fast_done:.1f} s"
        # Every slow attempt is under way before the first could have been answered (2 s):
        # they run side by side (on a busy machine the last may land just after the fast ones).
        await eventually(
            lambda: len(receiver.requests("/slow")) == 10,
            within=max(0.0, 1.9 - (time.monotonic() - started)),
            what="the slow attempts under way side by side",
        )
