"""Events: ``/v1/events`` — the account's order events, newest first, with their deliveries per
endpoint; redelivery; visibility; and the 30-day retention (``event_service.prune_events``).

The dispatcher is off in these tests, so deliveries stay ``pending`` with no attempts unless a
test writes them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from commerce_api.core.ids import new_id
from commerce_api.events import service as event_service
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events, webhook_attempts, webhook_deliveries
from tests.conftest import KeyFactory
from tests.factories import place_ok
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import account_of, action, create_product

EVENT_FIELDS = {"id", "type", "created_at", "data"}
DELIVERY_FIELDS = {"endpoint_id", "status", "next_attempt_at", "attempts"}
ATTEMPT_FIELDS = {"attempted_at", "status_code", "duration_ms", "error"}
PAGINATION_FIELDS = {"total", "limit", "offset", "has_more"}
EVENT_ID = re.compile(r"^evt_[A-Za-z0-9]+$")
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
URL = "https://receiver.example.com/webhooks"


# --- helpers -----------------------------------------------------------------------------------


def parse(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def near_now(timestamp: str, within: timedelta = timedelta(seconds=10)) -> bool:
    return abs(parse(timestamp) - datetime.now(UTC)) < within


async def list_events(client: httpx.AsyncClient, key: str, **params: str | int) -> dict[str, Any]:
    response = await client.get("/v1/events", params=params, headers=bearer(key))
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    assert set(page) == {"data", "pagination"}
    assert set(page["pagination"]) == PAGINATION_FIELDS
    return page


async def get_event(client: httpx.AsyncClient, key: str, event_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/events/{event_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    event: dict[str, Any] = response.json()
    assert set(event) == EVENT_FIELDS | {"deliveries"}
    for delivery in event["deliveries"]:
        assert set(delivery) == DELIVERY_FIELDS
        for attempt in delivery["attempts"]:
            assert set(attempt) == ATTEMPT_FIELDS
    return event


async def redeliver(client: httpx.AsyncClient, key: str, event_id: str) -> httpx.Response:
    return await client.post(f"/v1/events/{event_id}/redeliver", headers=bearer(key))


async def create_endpoint(client: httpx.AsyncClient, key: str, **body: object) -> str:
    response = await client.post(
        "/v1/webhook_endpoints", json={"url": URL, **body}, headers=bearer(key)
    )
    assert response.status_code == 201, response.text
    endpoint_id: str = response.json()["id"]
    return endpoint_id


async def fulfil(client: httpx.AsyncClient, key: str, order_id: str) -> dict[str, Any]:
    response = await action(client, key, order_id, "fulfill")
    assert response.status_code == 200, response.text
    order: dict[str, Any] = response.json()
    return order


async def cancel(client: httpx.AsyncClient, key: str, order_id: str) -> dict[str, Any]:
    response = await action(client, key, order_id, "cancel")
    assert response.status_code == 200, response.text
    order: dict[str, Any] = response.json()
    return order


async def a_history(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> list[tuple[str, dict[str, Any]]]:
    """Two orders, one fulfilled and one canceled: four events, as (type, order snapshot)."""
    product_id = await create_product(client, admin_key)
    first = await place_ok(client, client_key, (product_id, 1))
    fulfilled = await fulfil(client, admin_key, first["id"])
    second = await place_ok(client, client_key, (product_id, 2))
    canceled = await cancel(client, client_key, second["id"])
    return [
        ("order.created", first),
        ("order.fulfilled", fulfilled),
        ("order.created", second),
        ("order.canceled", canceled),
    ]


async def one_event(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Place one order; return it and its ``order.created`` event."""
    product_id = await create_product(client, admin_key)
    order = await place_ok(client, client_key, (product_id, 1))
    page = await list_events(client, client_key, type="order.created")
    [event] = [item for item in page["data"] if item["data"]["id"] == order["id"]]
    return order, event


async def delivery_rows(db: Database, event_id: str) -> dict[str, Any]:
    async with db.read() as conn:
        rows = await conn.execute(
            select(webhook_deliveries).where(webhook_deliveries.c.event_id == event_id)
        )
        return {row.endpoint_id: row for row in rows}


# --- list --------------------------------------------------------------------------------------


async def test_the_accounts_events_are_listed_newest_first_with_the_order_as_it_was(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    history = await a_history(client, admin_key, client_key)
    page = await list_events(client, client_key)
    assert page["pagination"] == {"total": 4, "limit": 20, "offset": 0, "has_more": False}
    assert [(item["type"], item["data"]) for item in page["data"]] == history[::-1]
    for item in page["data"]:
        assert set(item) == EVENT_FIELDS
        assert EVENT_ID.match(item["id"])
        assert TIMESTAMP.match(item["created_at"])
    stamps = [parse(item["created_at"]) for item in page["data"]]
    assert stamps == sorted(stamps, reverse=True)
    assert len({item["id"] for item in page["data"]}) == 4


async def test_an_event_keeps_the_snapshot_of_its_time_after_the_order_changes(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order, event = await one_event(client, admin_key, client_key)
    await fulfil(client, admin_key, order["id"])
    again = await get_event(client, client_key, event["id"])
    assert again["data"] == order
    assert again["data"]["status"] == "pending"


@pytest.mark.parametrize(
    ("event_type", "indexes"),
    [("order.created", [0, 2]), ("order.fulfilled", [1]), ("order.canceled", [3])],
)
async def test_the_list_filters_by_type(
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    event_type: str,
    indexes: list[int],
) -> None:
    history = await a_history(client, admin_key, client_key)
    page = await list_events(client, client_key, type=event_type)
    assert page["pagination"]["total"] == len(indexes)
    assert [(item["type"], item["data"]) for item in page["data"]] == [
        history[index] for index in reversed(indexes)
    ]


@pytest.mark.parametrize("event_type", ["order.shipped", "ORDER.CREATED", "", "order"])
async def test_an_unknown_type_filter_is_refused_naming_type(
    client: httpx.AsyncClient, client_key: str, event_type: str
) -> None:
    response = await client.get(
        "/v1/events", params={"type": event_type}, headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "type")


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"limit": 0}, "limit"),
        ({"offset": -1}, "offset"),
        ({"status": "pending"}, "status"),
        ({"created_gte": "2026-01-01"}, "created_gte"),
        ({"created_lt": "2026-01-01T00:00:00"}, "created_lt"),
        ({"order_id": ""}, "order_id"),
        ({"order_id": "ord_" + "x" * 61}, "order_id"),
        ({"order_id": "ord_\n"}, "order_id"),
        ({"starting_after": ""}, "starting_after"),
        ({"starting_after": "evt_x", "offset": -1}, "offset"),
    ],
)
async def test_bad_list_parameters_are_named(
    client: httpx.AsyncClient, client_key: str, params: dict[str, str | int], details: str
) -> None:
    response = await client.get("/v1/events", params=params, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", details)


async def test_paging_visits_each_event_once_in_order(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    await a_history(client, admin_key, client_key)
    everything = [item["id"] for item in (await list_events(client, client_key))["data"]]
    seen: list[str] = []
    for offset in range(0, 4, 3):
        page = await list_events(client, client_key, limit=3, offset=offset)
        assert page["pagination"] == {
            "total": 4,
            "limit": 3,
            "offset": offset,
            "has_more": offset + 3 < 4,
        }
        seen += [item["id"] for item in page["data"]]
    assert seen == everything
    filtered = await list_events(client, client_key, type="order.created", limit=1, offset=1)
    assert filtered["pagination"] == {"total": 2, "limit": 1, "offset": 1, "has_more": False}


async def test_the_limit_is_clamped_and_an_offset_past_the_end_is_empty(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    await one_event(client, admin_key, client_key)
    assert (await list_events(client, client_key, limit=500))["pagination"]["limit"] == 100
    assert await list_events(client, client_key, offset=10) == {
        "data": [],
        "pagination": {"total": 1, "limit": 20, "offset": 10, "has_more": False},
    }


async def test_an_account_without_orders_has_no_events(
    client: httpx.AsyncClient, client_key: str
) -> None:
    assert (await list_events(client, client_key))["pagination"]["total"] == 0


# --- visibility --------------------------------------------------------------------------------


async def test_another_accounts_events_are_invisible(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    other_key = await make_key()
    _, event = await one_event(client, admin_key, client_key)
    assert (await list_events(client, other_key))["pagination"]["total"] == 0
    responses = [
        await client.get(f"/v1/events/{event['id']}", headers=bearer(other_key)),
        await redeliver(client, other_key, event["id"]),
    ]
    for response in responses:
        error = assert_error(response, 404, "not_found", "id")
        assert error["message"] == f"No event with id `{event['id']}`."


@pytest.mark.parametrize("event_id", ["evt_doesnotexist", "ord_abc", "nonsense"])
async def test_an_unknown_event_is_404(
    client: httpx.AsyncClient, client_key: str, event_id: str
) -> None:
    assert_error(
        await client.get(f"/v1/events/{event_id}", headers=bearer(client_key)),
        404,
        "not_found",
        "id",
    )
    assert_error(await redeliver(client, client_key, event_id), 404, "not_found", "id")


async def test_an_admin_key_sees_every_accounts_events(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    other_key = await make_key()
    _, mine = await one_event(client, admin_key, client_key)
    _, theirs = await one_event(client, admin_key, other_key)
    page = await list_events(client, admin_key)
    assert [item["id"] for item in page["data"]] == [theirs["id"], mine["id"]]
    assert (await list_events(client, admin_key, type="order.fulfilled"))["data"] == []
    assert (await get_event(client, admin_key, theirs["id"]))["data"] == theirs["data"]
    response = await redeliver(client, admin_key, theirs["id"])
    assert response.status_code == 200, response.text


async def test_events_need_a_key(client: httpx.AsyncClient) -> None:
    for response in [
        await client.get("/v1/events"),
        await client.get("/v1/events/evt_abc"),
        await client.post("/v1/events/evt_abc/redeliver"),
    ]:
        assert_error(response, 401, "unauthorized")


# --- deliveries --------------------------------------------------------------------------------


async def test_an_event_shows_a_pending_delivery_per_endpoint_subscribed_at_event_time(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    every = await create_endpoint(client, client_key)
    fulfilled_only = await create_endpoint(client, client_key, events=["order.fulfilled"])
    created_only = await create_endpoint(client, client_key, events=["order.created"])
    disabled = await create_endpoint(client, client_key)
    patched = await client.patch(
        f"/v1/webhook_endpoints/{disabled}", json={"enabled": False}, headers=bearer(client_key)
    )
    assert patched.status_code == 200, patched.text
    deleted = await create_endpoint(client, client_key)
    gone = await client.delete(f"/v1/webhook_endpoints/{deleted}", headers=bearer(client_key))
    assert gone.status_code == 204, gone.text

    order, created = await one_event(client, admin_key, client_key)
    later = await create_endpoint(client, client_key)  # too late for order.created
    await fulfil(client, admin_key, order["id"])
    [fulfilled] = (await list_events(client, client_key, type="order.fulfilled"))["data"]

    created_view = await get_event(client, client_key, created["id"])
    assert {key: created_view[key] for key in EVENT_FIELDS} == created
    assert sorted(d["endpoint_id"] for d in created_view["deliveries"]) == sorted(
        [every, created_only]
    )
    fulfilled_view = await get_event(client, client_key, fulfilled["id"])
    assert sorted(d["endpoint_id"] for d in fulfilled_view["deliveries"]) == sorted(
        [every, fulfilled_only, later]
    )
    for view in (created_view, fulfilled_view):
        for delivery in view["deliveries"]:
            assert delivery["status"] == "pending"
            assert delivery["attempts"] == []
            assert delivery["next_attempt_at"] == view["created_at"]


async def test_an_event_without_endpoints_has_no_deliveries(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    _, event = await one_event(client, admin_key, client_key)
    assert (await get_event(client, client_key, event["id"]))["deliveries"] == []


async def test_another_accounts_endpoints_get_no_delivery(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    other_key = await make_key()
    await create_endpoint(client, other_key)
    _, event = await one_event(client, admin_key, client_key)
    assert (await get_event(client, client_key, event["id"]))["deliveries"] == []


async def test_recorded_attempts_are_listed_oldest_first_with_their_outcome(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    endpoint_id = await create_endpoint(client, client_key)
    _, event = await one_event(client, admin_key, client_key)
    first = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    retry_at = first + timedelta(minutes=5)
    async with db.write() as conn:
        await conn.execute(
            webhook_attempts.insert(),
            [
                {
                    "id": new_id("att"),
                    "event_id": event["id"],
                    "endpoint_id": endpoint_id,
                    "attempted_at": first + timedelta(seconds=5),
                    "status_code": None,
                    "duration_ms": 10000,
                    "error": "Timed out.",
                },
                {
                    "id": new_id("att"),
                    "event_id": event["id"],
                    "endpoint_id": endpoint_id,
                    "attempted_at": first,
                    "status_code": 500,
                    "duration_ms": 12,
                    "error": "HTTP 500",
                },
            ],
        )
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event["id"])
            .values(attempts=2, next_attempt_at=retry_at)
        )
    [delivery] = (await get_event(client, client_key, event["id"]))["deliveries"]
    assert delivery == {
        "endpoint_id": endpoint_id,
        "status": "pending",
        "next_attempt_at": "2026-01-02T03:09:05.678Z",
        "attempts": [
            {
                "attempted_at": "2026-01-02T03:04:05.678Z",
                "status_code": 500,
                "duration_ms": 12,
                "error": "HTTP 500",
            },
            {
                "attempted_at": "2026-01-02T03:04:10.678Z",
                "status_code": None,
                "duration_ms": 10000,
                "error": "Timed out.",
            },
        ],
    }


# --- redeliver ---------------------------------------------------------------------------------


async def test_redelivering_resets_finished_deliveries_to_pending_now(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    succeeded = await create_endpoint(client, client_key)
    failed = await create_endpoint(client, client_key)
    _, event = await one_event(client, admin_key, client_key)
    async with db.write() as conn:
        for endpoint_id, status in ((succeeded, "succeeded"), (failed, "failed")):
            await conn.execute(
                update(webhook_deliveries)
                .where(
                    webhook_deliveries.c.event_id == event["id"],
                    webhook_deliveries.c.endpoint_id == endpoint_id,
                )
                .values(status=status, attempts=8, next_attempt_at=None)
            )
    response = await redeliver(client, client_key, event["id"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == EVENT_FIELDS | {"deliveries"}
    assert {key: body[key] for key in EVENT_FIELDS} == event
    assert sorted(d["endpoint_id"] for d in body["deliveries"]) == sorted([succeeded, failed])
    for delivery in body["deliveries"]:
        assert delivery["status"] == "pending"
        assert near_now(delivery["next_attempt_at"])
    rows = await delivery_rows(db, event["id"])
    assert {row.attempts for row in rows.values()} == {0}
    assert await get_event(client, client_key, event["id"]) == body


async def test_redelivering_creates_deliveries_for_endpoints_subscribed_since(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    _, event = await one_event(client, admin_key, client_key)
    wanted = await create_endpoint(client, client_key, events=["order.created"])
    await create_endpoint(client, client_key, events=["order.canceled"])  # another type
    disabled = await create_endpoint(client, client_key)
    await client.patch(
        f"/v1/webhook_endpoints/{disabled}", json={"enabled": False}, headers=bearer(client_key)
    )
    response = await redeliver(client, client_key, event["id"])
    assert response.status_code == 200, response.text
    [delivery] = response.json()["deliveries"]
    assert delivery["endpoint_id"] == wanted
    assert delivery["status"] == "pending"
    assert delivery["attempts"] == []
    assert near_now(delivery["next_attempt_at"])
    assert set(await delivery_rows(db, event["id"])) == {wanted}


async def test_redelivering_keeps_the_attempt_history(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    endpoint_id = await create_endpoint(client, client_key)
    _, event = await one_event(client, admin_key, client_key)
    async with db.write() as conn:
        await conn.execute(
            webhook_attempts.insert().values(
                id=new_id("att"),
                event_id=event["id"],
                endpoint_id=endpoint_id,
                attempted_at=datetime.now(UTC),
                status_code=503,
                duration_ms=40,
                error="HTTP 503",
            )
        )
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event["id"])
            .values(status="failed", attempts=1, next_attempt_at=None)
        )
    response = await redeliver(client, client_key, event["id"])
    [delivery] = response.json()["deliveries"]
    assert delivery["status"] == "pending"
    assert [attempt["status_code"] for attempt in delivery["attempts"]] == [503]


async def test_redelivering_an_event_without_endpoints_changes_nothing(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    _, event = await one_event(client, admin_key, client_key)
    response = await redeliver(client, client_key, event["id"])
    assert response.status_code == 200, response.text
    assert response.json()["deliveries"] == []
    assert await delivery_rows(db, event["id"]) == {}


async def test_redeliver_takes_no_query_parameters(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    _, event = await one_event(client, admin_key, client_key)
    response = await client.post(
        f"/v1/events/{event['id']}/redeliver?endpoint_id=we_x", headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "endpoint_id")


# --- retention ---------------------------------------------------------------------------------


async def insert_event_with_history(
    db: Database, account_id: str, endpoint_id: str, created_at: datetime
) -> str:
    """An event written ``created_at`` with one failed delivery and one attempt."""
    event_id = new_id("evt")
    async with db.write() as conn:
        await conn.execute(
            events.insert().values(
                id=event_id,
                account_id=account_id,
                type="order.created",
                created_at=created_at,
                data={"id": "ord_old", "status": "pending"},
            )
        )
        await conn.execute(
            webhook_deliveries.insert().values(
                event_id=event_id,
                endpoint_id=endpoint_id,
                status="failed",
                attempts=1,
                next_attempt_at=None,
                created_at=created_at,
                updated_at=created_at,
            )
        )
        await conn.execute(
            webhook_attempts.insert().values(
                id=new_id("att"),
                event_id=event_id,
                endpoint_id=endpoint_id,
                attempted_at=created_at,
                status_code=500,
                duration_ms=3,
                error="HTTP 500",
            )
        )
    return event_id


async def count_rows(db: Database, event_id: str) -> tuple[int, int, int]:
    async with db.read() as conn:

        async def count(column: Any) -> int:
            query = select(func.count()).where(column == event_id)
            return int(await conn.scalar(query) or 0)

        return (
            await count(events.c.id),
            await count(webhook_deliveries.c.event_id),
            await count(webhook_attempts.c.event_id),
        )


async def test_pruning_deletes_only_events_older_than_30_days_with_their_deliveries(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    endpoint_id = await create_endpoint(client, client_key)
    now = datetime.now(UTC)
    old = await insert_event_with_history(db, account_id, endpoint_id, now - timedelta(days=31))
    just_old = await insert_event_with_history(
        db, account_id, endpoint_id, now - timedelta(days=30, minutes=1)
    )
    recent = await insert_event_with_history(
        db, account_id, endpoint_id, now - timedelta(days=29, hours=23)
    )
    _, fresh = await one_event(client, admin_key, client_key)
    assert (await list_events(client, client_key))["pagination"]["total"] == 4

    async with db.write() as conn:
        deleted = await event_service.prune_events(conn)

    assert deleted == 2
    assert await count_rows(db, old) == (0, 0, 0)
    assert await count_rows(db, just_old) == (0, 0, 0)
    assert await count_rows(db, recent) == (1, 1, 1)
    assert await count_rows(db, fresh["id"]) == (1, 1, 0)
    page = await list_events(client, client_key)
    assert [item["id"] for item in page["data"]] == [fresh["id"], recent]
    assert_error(
        await client.get(f"/v1/events/{old}", headers=bearer(client_key)), 404, "not_found", "id"
    )
    async with db.write() as conn:
        assert await event_service.prune_events(conn) == 0


async def test_a_second_redelivery_is_refused_until_the_first_was_attempted(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    endpoint_id = await create_endpoint(client, client_key)
    _, event = await one_event(client, admin_key, client_key)
    # No dispatcher runs here: a redelivery stays queued until the test says it was attempted.
    assert (await redeliver(client, client_key, event["id"])).status_code == 200
    key = {"Idempotency-Key": "redeliver-1"}
    response = await client.post(
        f"/v1/events/{event['id']}/redeliver", headers={**bearer(client_key), **key}
    )
    assert_error(response, 429, "rate_limited", "id")
    assert response.headers["Retry-After"] == "5"
    assert (await delivery_rows(db, event["id"]))[endpoint_id].attempts == 0

    async with db.write() as conn:
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event["id"])
            .values(status="succeeded", attempts=1, next_attempt_at=None)
        )
    # A 429 did not use up the Idempotency-Key: the same key now redelivers.
    again = await client.post(
        f"/v1/events/{event['id']}/redeliver", headers={**bearer(client_key), **key}
    )
    assert again.status_code == 200, again.text
    assert "Idempotent-Replayed" not in again.headers
    # ...and the next one waits until this one was attempted.
    assert_error(await redeliver(client, client_key, event["id"]), 429, "rate_limited", "id")
