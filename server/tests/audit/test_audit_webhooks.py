"""Webhook endpoints and redeliveries in the audit trail, on both backends: created, updated,
disabled and re-enabled, rotated (never the secret), recovered, deleted; an event redelivered.
A refused change leaves no row."""

from __future__ import annotations

import json

import httpx

from commerce_api.accounts.service import CreatedKey
from commerce_api.storage.db import Database
from tests import factories
from tests.audit.helpers import by, key_actor, trail
from tests.helpers import bearer

URL = "http://127.0.0.1:9/hook"


async def test_an_endpoints_changes_are_recorded_by_its_key_without_secrets(
    client: httpx.AsyncClient, db: Database, customer: CreatedKey
) -> None:
    auth = bearer(customer.secret)
    created = await client.post(
        "/v1/webhook_endpoints", json={"url": URL, "events": ["order.created"]}, headers=auth
    )
    assert created.status_code == 201
    endpoint = created.json()
    path = f"/v1/webhook_endpoints/{endpoint['id']}"
    assert (await client.patch(path, json={"description": "Shop"}, headers=auth)).is_success
    assert (await client.patch(path, json={"description": "Shop"}, headers=auth)).is_success
    assert (await client.patch(path, json={"enabled": False}, headers=auth)).is_success
    assert (await client.patch(path, json={"enabled": True}, headers=auth)).is_success
    rotated = await client.post(f"{path}/rotate_secret", headers=auth)
    assert rotated.status_code == 200
    recovered = await client.post(
        f"{path}/recover", json={"since": "2026-01-01T00:00:00Z"}, headers=auth
    )
    assert recovered.status_code == 200
    assert (await client.delete(path, headers=auth)).status_code == 204
    assert (await client.delete(path, headers=auth)).status_code == 404  # no row for it

    rows = await trail(db, target_id=endpoint["id"])
    assert [row["action"] for row in rows] == [
        "endpoint.create",
        "endpoint.update",
        "endpoint.update",
        "endpoint.reenable",
        "endpoint.rotate_secret",
        "endpoint.recover",
        "endpoint.delete",
    ]
    assert {by(row) for row in rows} == {key_actor(customer.id)}
    assert all(row["target"] == {"type": "endpoint", "id": endpoint["id"]} for row in rows)
    assert rows[0]["changes"] == {
        "url": [None, URL],
        "events": [None, ["order.created"]],
        "enabled": [None, True],
    }
    assert rows[1]["changes"] == {"description": [None, "Shop"]}
    assert rows[2]["changes"] == {"enabled": [True, False]}
    assert rows[3]["changes"] == {"enabled": [False, True]}
    assert rows[4]["changes"] == rows[5]["changes"] == {}
    assert list(rows[6]["changes"]) == ["deleted_at"]
    text = json.dumps(rows)
    assert endpoint["secret"] not in text
    assert rotated.json()["secret"] not in text
    assert "whsec_" not in text


async def test_a_redelivery_is_recorded_and_a_refused_one_is_not(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    auth = bearer(customer.secret)
    await client.post("/v1/webhook_endpoints", json={"url": URL}, headers=auth)
    product = await factories.create_product(client, admin.secret)
    await factories.place_ok(client, customer.secret, (product["id"], 1))
    (event,) = (await client.get("/v1/events", headers=auth)).json()["data"]
    first = await client.post(f"/v1/events/{event['id']}/redeliver", headers=auth)
    assert first.status_code == 200
    second = await client.post(f"/v1/events/{event['id']}/redeliver", headers=auth)
    assert second.status_code == 429  # still queued: refused, not recorded
    (row,) = await trail(db, target_id=event["id"])
    assert (row["action"], by(row), row["changes"]) == (
        "event.redeliver",
        key_actor(customer.id),
        {},
    )
    assert row["target"] == {"type": "event", "id": event["id"]}


async def test_a_receiver_urls_query_string_is_redacted_in_the_trail(
    client: httpx.AsyncClient, db: Database, customer: CreatedKey
) -> None:
    auth = bearer(customer.secret)
    url = "http://127.0.0.1:9/hook?token=abc&v=2"
    created = await client.post("/v1/webhook_endpoints", json={"url": url}, headers=auth)
    assert created.status_code == 201
    endpoint = created.json()
    assert endpoint["url"] == url  # the endpoint itself keeps its URL
    path = f"/v1/webhook_endpoints/{endpoint['id']}"
    moved = await client.patch(path, json={"url": "http://127.0.0.1:9/h?token=xyz"}, headers=auth)
    assert moved.is_success

    create, update = await trail(db, target_id=endpoint["id"])
    assert create["changes"]["url"] == [
        None,
        "http://127.0.0.1:9/hook?token=[redacted]&v=[redacted]",
    ]
    assert update["changes"]["url"] == [
        "http://127.0.0.1:9/hook?token=[redacted]&v=[redacted]",
        "http://127.0.0.1:9/h?token=[redacted]",
    ]
    text = json.dumps([create, update])
    assert "abc" not in text
    assert "xyz" not in text
