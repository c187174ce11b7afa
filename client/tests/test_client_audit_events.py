"""``client.audit_events``: the audit trail's list, its filters, and paging by cursor (sync and
async), as ``client.events``'."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from client_testing import BASE_URL, MockAPI, audit_event_json, page_json

from commerce_client import AuditActor, AuditEvent, AuditTarget


def test_list_sends_the_filters_and_reads_the_rows() -> None:
    api = MockAPI().reply(json=page_json([audit_event_json()], total=1))
    since = datetime(2026, 11, 1, tzinfo=UTC)
    with api.client() as client:
        page = client.audit_events.list(
            target_id="prod_1",
            actor_id="key_1",
            action="product.update",
            created_gte=since,
            created_lt="2026-12-01T00:00:00Z",
            limit=5,
            starting_after="aud_9",
        )
    assert (api.last.method, str(api.last.url).split("?")[0]) == ("GET", f"{BASE_URL}/audit_events")
    assert dict(api.last.url.params) == {
        "target_id": "prod_1",
        "actor_id": "key_1",
        "action": "product.update",
        "created_gte": "2026-11-01T00:00:00+00:00",
        "created_lt": "2026-12-01T00:00:00Z",
        "limit": "5",
        "starting_after": "aud_9",
    }
    (row,) = page.data
    assert isinstance(row, AuditEvent)
    assert row.actor == AuditActor(type="key", id="key_1")
    assert row.target == AuditTarget(type="product", id="prod_1")
    assert row.action == "product.update"
    assert row.changes == {"price": [12.5, 10], "inventory_count": [3, 0]}
    assert row.created_at == datetime(2026, 11, 21, 8, 12, 41, 123000, tzinfo=UTC)
    assert page.pagination.total == 1


def _by_cursor(rows: list[dict[str, Any]]) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("starting_after")
        start = [row["id"] for row in rows].index(after) + 1 if after else 0
        return httpx.Response(200, json=page_json(rows[start : start + 2], total=3, offset=start))

    return answer


def test_list_all_pages_with_the_cursor() -> None:
    rows = [audit_event_json(id=f"aud_{n}") for n in (3, 2, 1)]
    api = MockAPI().answer_with(_by_cursor(rows))
    with api.client() as client:
        ids = [row.id for row in client.audit_events.list_all(action="order.fulfill", page_size=2)]
    assert ids == ["aud_3", "aud_2", "aud_1"]
    assert [r.url.params.get("starting_after") for r in api.requests] == [None, "aud_2"]
    assert all("offset" not in r.url.params for r in api.requests)
    assert {r.url.params["action"] for r in api.requests} == {"order.fulfill"}


async def test_async_list_and_list_all() -> None:
    system = audit_event_json(actor={"type": "system", "id": "sweeper"}, changes={})
    api = MockAPI().reply(json=page_json([system], total=1))
    async with api.async_client() as client:
        page = await client.audit_events.list(actor_id="sweeper")
    assert dict(api.last.url.params) == {"actor_id": "sweeper"}
    assert page.data[0].actor == AuditActor(type="system", id="sweeper")
    assert page.data[0].changes == {}

    rows = [audit_event_json(id=f"aud_{n}") for n in (3, 2, 1)]
    api = MockAPI().answer_with(_by_cursor(rows))
    async with api.async_client() as client:
        ids = [row.id async for row in client.audit_events.list_all(target_id="ord_1", page_size=2)]
    assert ids == ["aud_3", "aud_2", "aud_1"]
    assert {r.url.params["target_id"] for r in api.requests} == {"ord_1"}
