"""``GET /v1/audit_events`` on both backends: admin keys only, newest first, its filters,
pagination and the ``starting_after`` cursor (as ``GET /v1/events``); and the pruning of rows
past ``COMMERCE_AUDIT_RETENTION_DAYS``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from commerce_api.accounts.service import CreatedKey
from commerce_api.audit import service as audit
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests.conftest import make_settings
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error

START = datetime(2026, 3, 1, 12, tzinfo=UTC)
ACTOR = audit.Actor("key", "key_admin1")


def a_history() -> list[dict[str, Any]]:
    """Six rows a minute apart: three products' creations by one key, then an order fulfilled
    by another, canceled by the sweeper, a product updated by the CLI."""
    other = audit.Actor("key", "key_admin2")
    specs: list[tuple[audit.Actor, audit.Action, tuple[str, str]]] = [
        (ACTOR, "product.create", ("product", "prod_a")),
        (ACTOR, "product.create", ("product", "prod_b")),
        (ACTOR, "product.create", ("product", "prod_c")),
        (other, "order.fulfill", ("order", "ord_a")),
        (audit.SWEEPER, "order.cancel", ("order", "ord_b")),
        (audit.CLI, "product.update", ("product", "prod_a")),
    ]
    return [
        audit.audit_row(
            actor, action, target, {"x": [index, index + 1]}, START + timedelta(minutes=index)
        )
        for index, (actor, action, target) in enumerate(specs)
    ]


async def listed(client: httpx.AsyncClient, key: str, **params: Any) -> dict[str, Any]:
    response = await client.get("/v1/audit_events", params=params, headers=bearer(key))
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def actions(page: dict[str, Any]) -> list[str]:
    return [f"{row['action']} {row['target']['id']}" for row in page["data"]]


async def test_admin_keys_list_newest_first_with_the_filters(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    history = a_history()
    async with db.write() as conn:
        await audit.record_many(conn, history)
    page = await listed(client, admin.secret)
    # The admin fixture's own key (created directly) is not audited: only these six.
    assert [row["id"] for row in page["data"]] == [row["id"] for row in reversed(history)]
    assert page["pagination"] == {"total": 6, "limit": 20, "offset": 0, "has_more": False}
    newest = page["data"][0]
    assert newest == {
        "id": history[-1]["id"],
        "created_at": format_timestamp(START + timedelta(minutes=5)),
        "actor": {"type": "system", "id": "cli"},
        "action": "product.update",
        "target": {"type": "product", "id": "prod_a"},
        "changes": {"x": [5, 6]},
    }
    by_target = await listed(client, admin.secret, target_id="prod_a")
    assert actions(by_target) == ["product.update prod_a", "product.create prod_a"]
    by_actor = await listed(client, admin.secret, actor_id="key_admin1")
    assert actions(by_actor) == [
        "product.create prod_c",
        "product.create prod_b",
        "product.create prod_a",
    ]
    assert actions(await listed(client, admin.secret, actor_id="sweeper")) == ["order.cancel ord_b"]
    assert actions(await listed(client, admin.secret, action="order.fulfill")) == [
        "order.fulfill ord_a"
    ]
    window = await listed(
        client,
        admin.secret,
        created_gte=format_timestamp(START + timedelta(minutes=1)),
        created_lt=format_timestamp(START + timedelta(minutes=3)),
    )
    assert actions(window) == ["product.create prod_c", "product.create prod_b"]
    both = await listed(client, admin.secret, actor_id="key_admin1", target_id="prod_b")
    assert actions(both) == ["product.create prod_b"]
    assert (await listed(client, admin.secret, action="key.revoke"))["data"] == []


async def test_pages_by_offset_and_by_cursor(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    history = a_history()
    async with db.write() as conn:
        await audit.record_many(conn, history)
    newest_first = [row["id"] for row in reversed(history)]
    first = await listed(client, admin.secret, limit=2)
    assert [row["id"] for row in first["data"]] == newest_first[:2]
    assert first["pagination"] == {"total": 6, "limit": 2, "offset": 0, "has_more": True}
    after = first["data"][-1]["id"]
    second = await listed(client, admin.secret, limit=2, starting_after=after)
    assert [row["id"] for row in second["data"]] == newest_first[2:4]
    assert second["pagination"] == {"total": 6, "limit": 2, "offset": 2, "has_more": True}
    # A row recorded meanwhile does not shift the cursor's pages.
    async with db.write() as conn:
        await audit.record(conn, audit.CLI, "product.archive", ("product", "prod_z"))
    third = await listed(client, admin.secret, limit=2, starting_after=second["data"][-1]["id"])
    assert [row["id"] for row in third["data"]] == newest_first[4:]
    assert third["pagination"]["has_more"] is False
    by_offset = await listed(client, admin.secret, limit=2, offset=3)  # the new row counts
    assert [row["id"] for row in by_offset["data"]] == [newest_first[2], newest_first[3]]
    missing = await client.get(
        "/v1/audit_events", params={"starting_after": "aud_nope"}, headers=bearer(admin.secret)
    )
    assert_error(missing, 404, "not_found", "starting_after")


async def test_client_keys_are_refused_and_keys_are_needed(
    client: httpx.AsyncClient, customer: CreatedKey
) -> None:
    refused = await client.get("/v1/audit_events", headers=bearer(customer.secret))
    assert_error(refused, 403, "unauthorized", "Authorization", reason="forbidden")
    assert_error(await client.get("/v1/audit_events"), 401, "unauthorized", "Authorization")


async def test_filters_are_validated(client: httpx.AsyncClient, admin: CreatedKey) -> None:
    for params in ({"action": ""}, {"target_id": "x" * 65}, {"created_gte": "yesterday"}):
        response = await client.get("/v1/audit_events", params=params, headers=bearer(admin.secret))
        assert response.status_code == 400, params


async def test_rows_past_the_retention_are_pruned(db: Database) -> None:
    now = utcnow()
    rows = [
        audit.audit_row(
            audit.CLI, "product.create", ("product", f"prod_{days}"), {}, now - timedelta(days=days)
        )
        for days in (400, 366, 364, 0)
    ]
    async with db.write() as conn:
        await audit.record_many(conn, rows)
    async with db.write() as conn:
        assert await audit.prune_audit_events(conn, 365) == 2
    async with db.read() as conn:
        page = await audit.list_audit_events(conn, limit=10, offset=0)
    assert [row["target"]["id"] for row in page["data"]] == ["prod_0", "prod_364"]
    async with db.write() as conn:
        assert await audit.prune_audit_events(conn, 1) == 1


def test_the_retention_setting_defaults_to_a_year(database_url: str, settings: Settings) -> None:
    assert settings.audit_retention_days == 365
    assert make_settings(database_url, audit_retention_days=30).audit_retention_days == 30
