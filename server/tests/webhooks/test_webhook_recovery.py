"""Ordering and recovery for receivers (issue 31), on both backends, against real HTTP
receivers: each delivery's ``data`` carries the order's ``version`` and the event its
``created_at``, so a receiver can drop a stale delivery; ``POST
/v1/webhook_endpoints/{id}/recover`` queues again exactly the endpoint's failed deliveries
(given up, or waiting for a retry) of the events created since a moment, and the dispatcher
then delivers them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import update

from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.storage.tables import events
from tests import factories
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.webhook_receiver import Receiver, Reply
from tests.webhooks.test_dispatcher import World, drain, receiver, world

__all__ = ["receiver", "world"]  # the fixtures, shared with test_dispatcher


async def _client_key(world: World) -> str:
    """Another client key of the world's account, for its HTTP calls."""
    assert world.principal.account_id is not None
    key = await factories.new_key(world.db, world.principal.account_id)
    return key.secret


async def _recover(
    client: httpx.AsyncClient, key: str, endpoint_id: str, since: str
) -> httpx.Response:
    return await client.post(
        f"/v1/webhook_endpoints/{endpoint_id}/recover", json={"since": since}, headers=bearer(key)
    )


def _state(delivery: Any) -> tuple[str, int]:
    return delivery.status, delivery.attempts


async def test_each_delivery_carries_the_orders_version_and_the_events_created_at(
    world: World, receiver: Receiver
) -> None:
    _, secret = await world.endpoint(receiver.url())
    order, created_id = await world.order()
    fulfilled_id = await world.fulfil(order["id"])

    assert await drain(world.dispatcher()) == 2

    payloads = {p["id"]: p for p in (r.verify(secret) for r in receiver.requests())}
    for event_id, version in [(created_id, 1), (fulfilled_id, 2)]:
        event = await world.event(event_id)
        assert payloads[event_id]["created_at"] == format_timestamp(event.created_at)
        assert payloads[event_id]["data"]["id"] == order["id"]
        assert payloads[event_id]["data"]["version"] == version

    # A receiver that keeps the highest version it has seen of each order ignores the
    # created event if it comes last (deliveries may arrive in any order).
    seen: dict[str, int] = {}
    for event_id in (fulfilled_id, created_id):
        data = payloads[event_id]["data"]
        if data["version"] > seen.get(data["id"], 0):
            seen[data["id"]] = data["version"]
    assert seen == {order["id"]: 2}


async def test_recover_queues_again_exactly_the_failed_deliveries_since_the_moment(
    world: World, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    key = await _client_key(world)
    hook, _ = await world.endpoint(receiver.url("/hook"))
    other, _ = await world.endpoint(receiver.url("/other"))  # the account's second endpoint
    receiver.reply("/other", Reply(500))

    receiver.reply("/hook", Reply(500))
    _, too_old = await world.order()  # failed, but before the moment
    await drain(world.dispatcher(webhook_retry_schedule=(0,)))
    async with world.db.write() as conn:
        long_ago = utcnow() - timedelta(hours=1)
        await conn.execute(update(events).where(events.c.id == too_old).values(created_at=long_ago))
    since = format_timestamp(utcnow() - timedelta(minutes=1))

    receiver.reply("/hook", Reply(200))
    _, delivered = await world.order()  # succeeded
    await drain(world.dispatcher(webhook_retry_schedule=(0,)))
    receiver.reply("/hook", Reply(500))
    _, given_up = await world.order()  # failed: its schedule ran out
    await drain(world.dispatcher(webhook_retry_schedule=(0,)))
    _, retrying = await world.order()  # failed once, its retry an hour away
    assert await world.dispatcher(webhook_retry_schedule=(3600,)).run_once() == 2
    _, not_yet = await world.order()  # not attempted yet

    before = {
        event_id: _state(await world.delivery(event_id, hook))
        for event_id in (too_old, delivered, given_up, retrying, not_yet)
    }
    assert before == {
        too_old: ("failed", 2),
        delivered: ("succeeded", 1),
        given_up: ("failed", 2),
        retrying: ("pending", 1),
        not_yet: ("pending", 0),
    }
    others_before = [_state(await world.delivery(e, other)) for e in (given_up, retrying)]

    response = await _recover(client, key, hook, since)

    assert response.status_code == 200, response.text
    assert response.json() == {"recovered": 2}
    now = utcnow()
    for event_id in (given_up, retrying):
        delivery = await world.delivery(event_id, hook)
        assert _state(delivery) == ("pending", 0)  # a fresh schedule
        assert delivery.next_attempt_at <= now
    for event_id in (too_old, delivered, not_yet):
        assert _state(await world.delivery(event_id, hook)) == before[event_id]
    assert [_state(await world.delivery(e, other)) for e in (given_up, retrying)] == others_before

    receiver.reply("/hook", Reply(200))
    sent_before = len(receiver.requests("/hook"))
    await drain(world.dispatcher(webhook_retry_schedule=(3600,)))
    resent = [r.webhook_id for r in receiver.requests("/hook")[sent_before:]]
    assert sorted(resent) == sorted([given_up, retrying, not_yet])
    for event_id in (given_up, retrying, not_yet):
        assert _state(await world.delivery(event_id, hook)) == ("succeeded", 1)
    assert _state(await world.delivery(too_old, hook)) == ("failed", 2)

    again = await _recover(client, key, hook, since)  # nothing failed is left
    assert again.json() == {"recovered": 0}


async def test_recover_on_a_disabled_endpoint_is_refused_until_it_is_enabled(
    world: World, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    key = await _client_key(world)
    receiver.reply("/hook", Reply(500))
    hook, _ = await world.endpoint(receiver.url("/hook"))
    _, event_id = await world.order()
    await drain(world.dispatcher(webhook_retry_schedule=()))
    await world.set_endpoint(hook, enabled=False, disabled_reason="The receiver answered 410 Gone.")
    since = format_timestamp(utcnow() - timedelta(minutes=1))

    refused = await _recover(client, key, hook, since)

    assert_error(refused, 409, "invalid_request", "enabled", reason="endpoint_disabled")
    assert "410 Gone" in refused.json()["error"]["message"]
    assert _state(await world.delivery(event_id, hook)) == ("failed", 1)

    enabled = await client.patch(
        f"/v1/webhook_endpoints/{hook}", json={"enabled": True}, headers=bearer(key)
    )
    assert enabled.status_code == 200, enabled.text
    assert (await _recover(client, key, hook, since)).json() == {"recovered": 1}


async def test_recover_names_what_it_cannot_use(
    world: World, client: httpx.AsyncClient, admin_key: str
) -> None:
    key = await _client_key(world)
    hook, _ = await world.endpoint("http://127.0.0.1:9/hook")
    stranger = (await factories.new_customer(world.db, "Another account")).secret
    now = format_timestamp(utcnow())

    for since in ("2026-11-21", "2026-11-21T08:12:41", "1795250000", ""):
        bad = await _recover(client, key, hook, since)
        assert_error(bad, 400, "invalid_request", "since", reason="validation_failed")
    missing = await client.post(
        f"/v1/webhook_endpoints/{hook}/recover", json={}, headers=bearer(key)
    )
    assert_error(missing, 400, "invalid_request", "since", reason="validation_failed")
    assert_error(
        await _recover(client, stranger, hook, now), 404, "not_found", "id", reason="not_found"
    )
    assert_error(
        await _recover(client, admin_key, hook, now), 403, "unauthorized", reason="forbidden"
    )
