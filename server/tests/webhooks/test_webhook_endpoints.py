"""Webhook endpoints: ``/v1/webhook_endpoints`` — registration, the secret shown once and kept
encrypted, listing, updates, deletion, secret rotation, visibility, the receiver-URL policy of
sandbox and production, and the encryption key's life cycle."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from commerce_api.accounts import service as accounts
from commerce_api.app.factory import create_app
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox, SecretKeyMissing
from commerce_api.storage.db import Database
from commerce_api.storage.tables import instance_values, metadata, webhook_endpoints
from tests import helpers
from tests.conftest import KeyFactory, make_settings
from tests.helpers import TIMESTAMP, bearer
from tests.helpers import running_app as running
from tests.http.test_error_contract import assert_error

ENDPOINT_FIELDS = {
    "id",
    "url",
    "events",
    "description",
    "enabled",
    "disabled_reason",
    "created_at",
    "updated_at",
}
SECRET_FORMAT = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")
ENDPOINT_ID = re.compile(r"^we_[A-Za-z0-9]+$")
URL = "https://receiver.example.com/webhooks"
PATH = "/v1/webhook_endpoints"


# --- helpers -----------------------------------------------------------------------------------


async def create(client: httpx.AsyncClient, key: str, **body: object) -> httpx.Response:
    return await client.post(PATH, json={"url": URL, **body}, headers=bearer(key))


async def create_ok(client: httpx.AsyncClient, key: str, **body: object) -> dict[str, Any]:
    response = await create(client, key, **body)
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def get_ok(client: httpx.AsyncClient, key: str, endpoint_id: str) -> dict[str, Any]:
    response = await client.get(f"{PATH}/{endpoint_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def patch(
    client: httpx.AsyncClient, key: str, endpoint_id: str, body: dict[str, object]
) -> httpx.Response:
    return await client.patch(f"{PATH}/{endpoint_id}", json=body, headers=bearer(key))


async def patch_ok(
    client: httpx.AsyncClient, key: str, endpoint_id: str, body: dict[str, object]
) -> dict[str, Any]:
    response = await patch(client, key, endpoint_id, body)
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    assert set(endpoint) == ENDPOINT_FIELDS
    return endpoint


async def list_page(client: httpx.AsyncClient, key: str, **params: int) -> dict[str, Any]:
    return await helpers.list_page(client, PATH, key, **params)


async def rotate(client: httpx.AsyncClient, key: str, endpoint_id: str) -> httpx.Response:
    return await client.post(f"{PATH}/{endpoint_id}/rotate_secret", headers=bearer(key))


async def endpoint_row(db: Database, endpoint_id: str) -> Any:
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(webhook_endpoints).where(webhook_endpoints.c.id == endpoint_id)
            )
        ).first()
    assert row is not None
    return row


def secret_box(app: FastAPI) -> SecretBox:
    secret_box: SecretBox = app.state.services.secret_box
    return secret_box


def parse(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


async def every_stored_value(db: Database) -> list[str]:
    """Every non-null value of every table, as text."""
    values: list[str] = []
    async with db.read() as conn:
        for table in metadata.sorted_tables:
            for row in await conn.execute(select(table)):
                for value in row:
                    if isinstance(value, bytes | bytearray | memoryview):
                        values.append(bytes(value).decode("utf-8", "replace"))
                    elif value is not None:
                        values.append(str(value))
    return values


# --- create ------------------------------------------------------------------------------------


async def test_creating_an_endpoint_returns_201_with_location_and_the_secret(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await create(
        client, client_key, events=["order.created"], description="Shop backend"
    )
    assert response.status_code == 201, response.text
    endpoint = response.json()
    assert set(endpoint) == ENDPOINT_FIELDS | {"secret"}
    assert ENDPOINT_ID.match(endpoint["id"])
    assert response.headers["location"] == f"{PATH}/{endpoint['id']}"
    assert SECRET_FORMAT.match(endpoint["secret"])
    assert endpoint["url"] == URL
    assert endpoint["events"] == ["order.created"]
    assert endpoint["description"] == "Shop backend"
    assert endpoint["enabled"] is True
    assert endpoint["disabled_reason"] is None
    assert TIMESTAMP.match(endpoint["created_at"])
    assert endpoint["updated_at"] == endpoint["created_at"]


async def test_events_and_description_are_optional(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    assert endpoint["events"] == []
    assert endpoint["description"] is None


async def test_the_created_endpoint_is_readable_at_its_location_without_its_secret(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await create(client, client_key, events=["order.canceled"])
    created = response.json()
    fetched = await client.get(response.headers["location"], headers=bearer(client_key))
    assert fetched.status_code == 200, fetched.text
    assert fetched.json() == {key: value for key, value in created.items() if key != "secret"}


async def test_each_endpoint_gets_its_own_secret(
    client: httpx.AsyncClient, client_key: str
) -> None:
    first = await create_ok(client, client_key)
    second = await create_ok(client, client_key)
    assert first["id"] != second["id"]
    assert first["secret"] != second["secret"]


async def test_the_secret_is_never_returned_by_get_list_or_patch(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    secret = endpoint["secret"]
    responses = [
        await client.get(f"{PATH}/{endpoint['id']}", headers=bearer(client_key)),
        await client.get(PATH, headers=bearer(client_key)),
        await patch(client, client_key, endpoint["id"], {"description": "changed"}),
    ]
    for response in responses:
        assert response.status_code == 200, response.text
        assert secret not in response.text
        assert "secret" not in response.text
    assert set((await list_page(client, client_key))["data"][0]) == ENDPOINT_FIELDS


async def test_the_secret_is_stored_encrypted(
    app: FastAPI, db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    secret = endpoint["secret"]
    row = await endpoint_row(db, endpoint["id"])
    assert secret not in row.secret_encrypted
    assert secret.removeprefix("whsec_") not in row.secret_encrypted
    assert row.previous_secret_encrypted is None
    assert secret_box(app).decrypt(row.secret_encrypted) == secret


async def test_the_secret_is_nowhere_in_the_database_in_plain_text(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    rotated = (await rotate(client, client_key, endpoint["id"])).json()
    for secret in (endpoint["secret"], rotated["secret"]):
        raw = secret.removeprefix("whsec_")
        assert not [value for value in await every_stored_value(db) if raw in value]


@pytest.mark.parametrize("call", ["create", "rotate_secret"])
async def test_an_idempotent_call_keeps_no_plain_text_secret_in_the_database(
    db: Database, client: httpx.AsyncClient, client_key: str, call: str
) -> None:
    headers = {**bearer(client_key), "Idempotency-Key": "create-endpoint-1"}
    response = await client.post(PATH, json={"url": URL}, headers=headers)
    assert response.status_code == 201, response.text
    if call == "rotate_secret":
        response = await client.post(
            f"{PATH}/{response.json()['id']}/rotate_secret",
            headers={**bearer(client_key), "Idempotency-Key": "rotate-1"},
        )
        assert response.status_code == 200, response.text
    raw = response.json()["secret"].removeprefix("whsec_")
    assert not [value for value in await every_stored_value(db) if raw in value]


async def test_an_idempotency_key_on_create_replays_the_same_endpoint_and_secret(
    client: httpx.AsyncClient, client_key: str
) -> None:
    headers = {**bearer(client_key), "Idempotency-Key": "endpoint-42"}
    body = {"url": URL, "events": ["order.created"]}
    first = await client.post(PATH, json=body, headers=headers)
    second = await client.post(PATH, json=body, headers=headers)
    assert first.status_code == second.status_code == 201, second.text
    assert second.headers.get("idempotent-replayed") == "true"
    assert second.json() == first.json()
    assert second.headers["location"] == first.headers["location"]
    assert (await list_page(client, client_key))["pagination"]["total"] == 1


async def test_a_reused_idempotency_key_with_another_url_is_422(
    client: httpx.AsyncClient, client_key: str
) -> None:
    headers = {**bearer(client_key), "Idempotency-Key": "endpoint-43"}
    await client.post(PATH, json={"url": URL}, headers=headers)
    response = await client.post(PATH, json={"url": URL + "/other"}, headers=headers)
    assert_error(response, 422, "invalid_request")
    assert (await list_page(client, client_key))["pagination"]["total"] == 1


async def test_event_types_are_deduplicated_and_sorted(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(
        client, client_key, events=["order.fulfilled", "order.created", "order.fulfilled"]
    )
    assert endpoint["events"] == ["order.created", "order.fulfilled"]
    assert (await get_ok(client, client_key, endpoint["id"]))["events"] == endpoint["events"]


@pytest.mark.parametrize(
    ("events", "details"),
    [
        (["order.shipped"], "events[0]"),
        (["order.created", "order.refunded"], "events[1]"),
        (["ORDER.CREATED"], "events[0]"),
        ([""], "events[0]"),
        ([1], "events[0]"),
        ("order.created", "events"),
        (None, "events"),
    ],
)
async def test_an_unknown_event_type_is_refused_naming_its_position(
    client: httpx.AsyncClient, client_key: str, events: object, details: str
) -> None:
    response = await create(client, client_key, events=events)
    error = assert_error(response, 400, "invalid_request", details)
    assert details in error["message"]
    assert (await list_page(client, client_key))["pagination"]["total"] == 0


@pytest.mark.parametrize(
    "url",
    [
        "ftp://receiver.example.com/webhooks",
        "https://user:pass@receiver.example.com/webhooks",
        "https://user@receiver.example.com/webhooks",
        "https://receiver.example.com/webhooks#fragment",
        "receiver.example.com/webhooks",
        "//receiver.example.com/webhooks",
        "/webhooks",
        "https://",
        "",
        "https://receiver.example.com:0/webhooks",
        "https://receiver.example.com:65536/webhooks",
        "https://receiver.example.com/" + "a" * 2030,
        "https://receiver example.com/",
        "https://receiver.example.com/\nx",
    ],
)
async def test_a_malformed_url_is_refused_naming_url(
    client: httpx.AsyncClient, client_key: str, url: str
) -> None:
    response = await client.post(PATH, json={"url": url}, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", "url")
    assert (await list_page(client, client_key))["pagination"]["total"] == 0


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({}, "url"),
        ({"url": 5}, "url"),
        ({"url": URL, "description": "two\nlines"}, "description"),
        ({"url": URL, "description": "x" * 501}, "description"),
        ({"url": URL, "secret": "whsec_mine"}, "secret"),
        ({"url": URL, "enabled": False}, "enabled"),
    ],
)
async def test_an_invalid_create_body_is_refused_naming_the_field(
    client: httpx.AsyncClient, client_key: str, body: dict[str, object], details: str
) -> None:
    response = await client.post(PATH, json=body, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", details)


async def test_a_url_of_2048_characters_is_accepted(
    client: httpx.AsyncClient, client_key: str
) -> None:
    prefix = "https://receiver.example.com/"
    url = prefix + "a" * (2048 - len(prefix))
    endpoint = await create_ok(client, client_key, url=url)
    assert endpoint["url"] == url


# --- list and get ------------------------------------------------------------------------------


async def test_the_list_pages_through_the_accounts_endpoints_oldest_first(
    client: httpx.AsyncClient, client_key: str
) -> None:
    created = [
        (await create_ok(client, client_key, url=f"{URL}/{index}"))["id"] for index in range(5)
    ]
    seen: list[str] = []
    for offset in range(0, 6, 2):
        page = await list_page(client, client_key, limit=2, offset=offset)
        assert page["pagination"] == {
            "total": 5,
            "limit": 2,
            "offset": offset,
            "has_more": offset + 2 < 5,
        }
        seen += [item["id"] for item in page["data"]]
    assert seen == created
    whole = await list_page(client, client_key)
    assert [item["id"] for item in whole["data"]] == created
    assert all(set(item) == ENDPOINT_FIELDS for item in whole["data"])


async def test_the_list_clamps_the_limit_and_an_offset_past_the_end_is_empty(
    client: httpx.AsyncClient, client_key: str
) -> None:
    await create_ok(client, client_key)
    clamped = await list_page(client, client_key, limit=1000)
    assert clamped["pagination"]["limit"] == 100
    beyond = await list_page(client, client_key, offset=5)
    assert beyond == {
        "data": [],
        "pagination": {"total": 1, "limit": 20, "offset": 5, "has_more": False},
    }


@pytest.mark.parametrize(
    ("params", "details"), [({"limit": 0}, "limit"), ({"offset": -1}, "offset")]
)
async def test_bad_list_parameters_are_named(
    client: httpx.AsyncClient, client_key: str, params: dict[str, int], details: str
) -> None:
    response = await client.get(PATH, params=params, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", details)


async def test_an_empty_account_lists_no_endpoints(
    client: httpx.AsyncClient, client_key: str
) -> None:
    page = await list_page(client, client_key)
    assert page == {
        "data": [],
        "pagination": {"total": 0, "limit": 20, "offset": 0, "has_more": False},
    }


@pytest.mark.parametrize("endpoint_id", ["we_doesnotexist", "prod_abc", "nonsense", "we_"])
async def test_an_unknown_endpoint_is_404_for_every_verb(
    client: httpx.AsyncClient, client_key: str, endpoint_id: str
) -> None:
    responses = [
        await client.get(f"{PATH}/{endpoint_id}", headers=bearer(client_key)),
        await patch(client, client_key, endpoint_id, {"description": "x"}),
        await client.delete(f"{PATH}/{endpoint_id}", headers=bearer(client_key)),
        await rotate(client, client_key, endpoint_id),
    ]
    for response in responses:
        assert_error(response, 404, "not_found", "id")


# --- update ------------------------------------------------------------------------------------


async def test_patching_the_url_changes_only_the_url(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key, events=["order.created"], description="d")
    updated = await patch_ok(client, client_key, endpoint["id"], {"url": URL + "/v2"})
    assert updated["url"] == URL + "/v2"
    assert updated["events"] == ["order.created"]
    assert updated["description"] == "d"
    assert updated["created_at"] == endpoint["created_at"]
    assert parse(updated["updated_at"]) >= parse(endpoint["updated_at"])
    assert await get_ok(client, client_key, endpoint["id"]) == updated


async def test_patching_events_deduplicates_and_sorts_them(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    updated = await patch_ok(
        client,
        client_key,
        endpoint["id"],
        {"events": ["order.fulfilled", "order.canceled", "order.canceled"]},
    )
    assert updated["events"] == ["order.canceled", "order.fulfilled"]
    emptied = await patch_ok(client, client_key, endpoint["id"], {"events": []})
    assert emptied["events"] == []
    assert await get_ok(client, client_key, endpoint["id"]) == emptied


async def test_patching_the_description_sets_and_null_clears_it(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    described = await patch_ok(client, client_key, endpoint["id"], {"description": "ERP"})
    assert described["description"] == "ERP"
    cleared = await patch_ok(client, client_key, endpoint["id"], {"description": None})
    assert cleared["description"] is None


async def test_patching_enabled_false_disables_without_a_reason(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    disabled = await patch_ok(client, client_key, endpoint["id"], {"enabled": False})
    assert disabled["enabled"] is False
    assert disabled["disabled_reason"] is None
    assert (await get_ok(client, client_key, endpoint["id"]))["enabled"] is False


async def test_re_enabling_clears_the_disabled_reason_and_the_failing_spell(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    since = utcnow() - timedelta(days=4)
    reason = f"Every delivery attempt has failed since {format_timestamp(since)}."
    async with db.write() as conn:
        await conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint["id"])
            .values(enabled=False, disabled_reason=reason, failing_since=since)
        )
    shown = await get_ok(client, client_key, endpoint["id"])
    assert (shown["enabled"], shown["disabled_reason"]) == (False, reason)
    enabled = await patch_ok(client, client_key, endpoint["id"], {"enabled": True})
    assert enabled["enabled"] is True
    assert enabled["disabled_reason"] is None
    row = await endpoint_row(db, endpoint["id"])
    assert (row.failing_since, row.disabled_reason) == (None, None)


async def test_patching_other_fields_keeps_a_disabled_reason(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    reason = "The receiver answered 410 Gone."
    async with db.write() as conn:
        await conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint["id"])
            .values(enabled=False, disabled_reason=reason, failing_since=utcnow())
        )
    updated = await patch_ok(client, client_key, endpoint["id"], {"description": "note"})
    assert (updated["enabled"], updated["disabled_reason"]) == (False, reason)
    assert (await endpoint_row(db, endpoint["id"])).failing_since is not None


async def test_patching_several_fields_at_once(client: httpx.AsyncClient, client_key: str) -> None:
    endpoint = await create_ok(client, client_key)
    body: dict[str, object] = {
        "url": URL + "/all",
        "events": ["order.created"],
        "description": "all",
        "enabled": False,
    }
    updated = await patch_ok(client, client_key, endpoint["id"], body)
    assert {key: updated[key] for key in body} == body


async def test_an_empty_patch_changes_nothing_but_is_ok(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key, description="same")
    updated = await patch_ok(client, client_key, endpoint["id"], {})
    for field in ENDPOINT_FIELDS - {"updated_at"}:
        assert updated[field] == endpoint[field]


@pytest.mark.parametrize("field", ["url", "events", "enabled"])
async def test_patching_a_field_to_null_is_refused_naming_it(
    client: httpx.AsyncClient, client_key: str, field: str
) -> None:
    endpoint = await create_ok(client, client_key, events=["order.created"])
    response = await patch(client, client_key, endpoint["id"], {field: None})
    error = assert_error(response, 400, "invalid_request", field)
    assert "null" in error["message"]
    secretless = {key: value for key, value in endpoint.items() if key != "secret"}
    assert await get_ok(client, client_key, endpoint["id"]) == secretless


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({"url": "ftp://receiver.example.com/"}, "url"),
        ({"url": "https://u:p@receiver.example.com/"}, "url"),
        ({"url": "https://receiver.example.com/#x"}, "url"),
        ({"url": "receiver.example.com"}, "url"),
        ({"events": ["order.shipped"]}, "events[0]"),
        ({"enabled": "yes"}, "enabled"),
        ({"secret": "whsec_x"}, "secret"),
        ({"id": "we_other"}, "id"),
    ],
)
async def test_an_invalid_patch_is_refused_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, client_key: str, body: dict[str, object], details: str
) -> None:
    endpoint = await create_ok(client, client_key)
    response = await patch(client, client_key, endpoint["id"], body)
    assert_error(response, 400, "invalid_request", details)
    secretless = {key: value for key, value in endpoint.items() if key != "secret"}
    assert await get_ok(client, client_key, endpoint["id"]) == secretless


# --- delete ------------------------------------------------------------------------------------


async def test_deleting_an_endpoint_is_204_and_then_it_is_gone(
    client: httpx.AsyncClient, client_key: str
) -> None:
    kept = await create_ok(client, client_key)
    endpoint = await create_ok(client, client_key)
    response = await client.delete(f"{PATH}/{endpoint['id']}", headers=bearer(client_key))
    assert response.status_code == 204, response.text
    assert response.content == b""
    again = [
        await client.get(f"{PATH}/{endpoint['id']}", headers=bearer(client_key)),
        await patch(client, client_key, endpoint["id"], {"enabled": True}),
        await client.delete(f"{PATH}/{endpoint['id']}", headers=bearer(client_key)),
        await rotate(client, client_key, endpoint["id"]),
    ]
    for gone in again:
        assert_error(gone, 404, "not_found", "id")
    page = await list_page(client, client_key)
    assert [item["id"] for item in page["data"]] == [kept["id"]]
    assert page["pagination"]["total"] == 1


# --- rotate_secret -----------------------------------------------------------------------------


async def test_rotating_issues_a_new_secret_and_keeps_the_old_one_for_24_hours(
    app: FastAPI, db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    before = await endpoint_row(db, endpoint["id"])
    response = await rotate(client, client_key, endpoint["id"])
    assert response.status_code == 200, response.text
    rotated = response.json()
    assert set(rotated) == ENDPOINT_FIELDS | {"secret"}
    assert SECRET_FORMAT.match(rotated["secret"])
    assert rotated["secret"] != endpoint["secret"]
    assert rotated["id"] == endpoint["id"]
    assert rotated["created_at"] == endpoint["created_at"]
    row = await endpoint_row(db, endpoint["id"])
    box_of_app = secret_box(app)
    assert box_of_app.decrypt(row.secret_encrypted) == rotated["secret"]
    assert row.previous_secret_encrypted == before.secret_encrypted
    assert box_of_app.decrypt(row.previous_secret_encrypted) == endpoint["secret"]
    expected = parse(rotated["updated_at"]) + timedelta(hours=24)
    assert abs(row.previous_secret_expires_at - expected) < timedelta(seconds=5)
    assert abs(row.previous_secret_expires_at - datetime.now(UTC) - timedelta(hours=24)) < (
        timedelta(minutes=1)
    )
    assert rotated["secret"] not in row.secret_encrypted
    fetched = await client.get(f"{PATH}/{endpoint['id']}", headers=bearer(client_key))
    assert "secret" not in fetched.json()


async def test_rotating_twice_keeps_the_secret_it_replaced(
    app: FastAPI, db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    first = (await rotate(client, client_key, endpoint["id"])).json()
    second = (await rotate(client, client_key, endpoint["id"])).json()
    assert len({endpoint["secret"], first["secret"], second["secret"]}) == 3
    row = await endpoint_row(db, endpoint["id"])
    assert secret_box(app).decrypt(row.secret_encrypted) == second["secret"]
    assert secret_box(app).decrypt(row.previous_secret_encrypted) == first["secret"]


async def test_rotate_secret_takes_no_query_parameters(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    response = await client.post(
        f"{PATH}/{endpoint['id']}/rotate_secret?keep=false", headers=bearer(client_key)
    )
    assert_error(response, 400, "invalid_request", "keep")


# --- visibility and roles ----------------------------------------------------------------------


async def test_another_accounts_endpoint_is_404_for_every_verb_and_unchanged(
    db: Database, client: httpx.AsyncClient, client_key: str, make_key: KeyFactory
) -> None:
    other_key = await make_key()
    endpoint = await create_ok(client, client_key)
    before = await endpoint_row(db, endpoint["id"])
    responses = [
        await client.get(f"{PATH}/{endpoint['id']}", headers=bearer(other_key)),
        await patch(client, other_key, endpoint["id"], {"url": URL + "/stolen"}),
        await client.delete(f"{PATH}/{endpoint['id']}", headers=bearer(other_key)),
        await rotate(client, other_key, endpoint["id"]),
    ]
    for response in responses:
        error = assert_error(response, 404, "not_found", "id")
        assert error["message"] == f"No webhook endpoint with id `{endpoint['id']}`."
    assert await endpoint_row(db, endpoint["id"]) == before
    assert (await list_page(client, other_key))["pagination"]["total"] == 0
    assert (await list_page(client, client_key))["pagination"]["total"] == 1


async def test_each_account_lists_only_its_own_endpoints(
    client: httpx.AsyncClient, client_key: str, make_key: KeyFactory
) -> None:
    other_key = await make_key()
    mine = await create_ok(client, client_key)
    theirs = await create_ok(client, other_key)
    assert [e["id"] for e in (await list_page(client, client_key))["data"]] == [mine["id"]]
    assert [e["id"] for e in (await list_page(client, other_key))["data"]] == [theirs["id"]]


async def test_keys_of_one_account_share_its_endpoints(
    db: Database, settings: Settings, client: httpx.AsyncClient
) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Two keys", "development")
        first = await accounts.create_key(conn, settings.environment, account_id=account_id)
        second = await accounts.create_key(conn, settings.environment, account_id=account_id)
    endpoint = await create_ok(client, first.secret)
    assert (await get_ok(client, second.secret, endpoint["id"]))["id"] == endpoint["id"]


async def test_an_admin_key_without_an_account_is_403_on_webhook_endpoints(
    client: httpx.AsyncClient, client_key: str, admin_key: str
) -> None:
    endpoint = await create_ok(client, client_key)
    responses = [
        await create(client, admin_key),
        await client.get(PATH, headers=bearer(admin_key)),
        await client.get(f"{PATH}/{endpoint['id']}", headers=bearer(admin_key)),
        await patch(client, admin_key, endpoint["id"], {"enabled": False}),
        await client.delete(f"{PATH}/{endpoint['id']}", headers=bearer(admin_key)),
        await rotate(client, admin_key, endpoint["id"]),
    ]
    for response in responses:
        assert_error(response, 403, "unauthorized")
    assert (await get_ok(client, client_key, endpoint["id"]))["enabled"] is True


async def test_webhook_endpoints_need_a_key(client: httpx.AsyncClient) -> None:
    responses = [
        await client.post(PATH, json={"url": URL}),
        await client.get(PATH),
        await client.get(f"{PATH}/we_abc"),
        await client.patch(f"{PATH}/we_abc", json={}),
        await client.delete(f"{PATH}/we_abc"),
        await client.post(f"{PATH}/we_abc/rotate_secret"),
    ]
    for response in responses:
        assert_error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"


# --- the receiver-URL policy -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost:3000/hook",
        "http://10.0.0.5/hook",
        "https://0x7f000001/hook",
        "http://receiver.internal/hook",
    ],
)
async def test_the_sandbox_accepts_private_and_local_receivers(
    client: httpx.AsyncClient, client_key: str, url: str
) -> None:
    endpoint = await create_ok(client, client_key, url=url)
    assert endpoint["url"] == url


async def test_the_sandbox_accepts_an_ipv6_loopback_receiver(
    client: httpx.AsyncClient, client_key: str
) -> None:
    endpoint = await create_ok(client, client_key, url="http://[::1]:8080/hook")
    assert endpoint["url"] == "http://[::1]:8080/hook"


NON_PUBLIC_URLS = [
    "http://127.0.0.1/hook",
    "http://receiver.example.com/hook",
    "https://127.0.0.1/hook",
    "https://127.0.0.1:8443/hook",
    "https://127.1/hook",
    "https://0x7f000001/hook",
    "https://2130706433/hook",
    "https://0177.0.0.1/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::1]/hook",
    "https://localhost/hook",
    "https://10.0.0.1/hook",
    "https://192.168.1.1/hook",
    "https://172.16.0.1/hook",
    "https://169.254.169.254/latest",
    "https://100.64.0.1/hook",
    "https://224.0.0.1/hook",
    "https://0.0.0.0/hook",
    "https://240.0.0.1/hook",
]


@dataclass(frozen=True)
class Instance:
    app: FastAPI
    http: httpx.AsyncClient
    client_key: str


@pytest.fixture
async def production(database_url: str) -> AsyncIterator[Instance]:
    """A production instance (private URLs refused by default), with a production key."""
    db = Database(database_url)
    try:
        async with db.write() as conn:
            account_id = await accounts.create_account(conn, "Live shop", "production")
            key = await accounts.create_key(conn, "production", account_id=account_id)
    finally:
        await db.dispose()
    settings = make_settings(
        database_url, environment="production", webhook_allow_private_urls=False
    )
    async with running(settings) as (app, http):
        yield Instance(app, http, key.secret)


@pytest.fixture
async def strict_sandbox(database_url: str, client_key: str) -> AsyncIterator[Instance]:
    """A sandbox whose operator turned private receiver URLs off."""
    settings = make_settings(database_url, webhook_allow_private_urls=False)
    async with running(settings) as (app, http):
        yield Instance(app, http, client_key)


def public_dns(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """Answer every name lookup with ``address`` (no real DNS in tests)."""

    async def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> Any:
        if ":" in address:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, 443, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 443))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("url", NON_PUBLIC_URLS)
async def test_production_refuses_http_and_non_public_receivers_naming_url(
    production: Instance, url: str
) -> None:
    response = await production.http.post(
        PATH, json={"url": url}, headers=bearer(production.client_key)
    )
    assert_error(response, 400, "invalid_request", "url")
    assert (await list_page(production.http, production.client_key))["pagination"]["total"] == 0


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "https://0x7f000001/hook"])
async def test_a_sandbox_with_private_urls_turned_off_refuses_them(
    strict_sandbox: Instance, url: str
) -> None:
    response = await strict_sandbox.http.post(
        PATH, json={"url": url}, headers=bearer(strict_sandbox.client_key)
    )
    assert_error(response, 400, "invalid_request", "url")


async def test_production_refuses_a_host_name_resolving_to_a_private_address(
    production: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch, "10.20.30.40")
    response = await production.http.post(
        PATH, json={"url": URL}, headers=bearer(production.client_key)
    )
    error = assert_error(response, 400, "invalid_request", "url")
    assert "non-public address" in error["message"]
    # The resolved address is not revealed: it would map the operator's network for a caller.
    assert "10.20.30.40" not in error["message"]


async def test_production_refuses_a_host_name_that_does_not_resolve(
    production: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*args: object, **kwargs: object) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", failing)
    response = await production.http.post(
        PATH, json={"url": URL}, headers=bearer(production.client_key)
    )
    assert_error(response, 400, "invalid_request", "url")


async def test_production_accepts_a_public_https_receiver(
    production: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch, "93.184.216.34")
    by_name = await create_ok(production.http, production.client_key)
    assert by_name["url"] == URL
    by_address = await create_ok(
        production.http, production.client_key, url="https://93.184.216.34/hook"
    )
    assert by_address["url"] == "https://93.184.216.34/hook"


async def test_production_rechecks_the_url_on_patch(
    production: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch, "93.184.216.34")
    endpoint = await create_ok(production.http, production.client_key)
    for url in ("https://127.0.0.1/hook", "https://[::ffff:127.0.0.1]/", "http://example.com/"):
        response = await patch(production.http, production.client_key, endpoint["id"], {"url": url})
        assert_error(response, 400, "invalid_request", "url")
    public_dns(monkeypatch, "192.168.0.10")
    response = await patch(
        production.http, production.client_key, endpoint["id"], {"url": URL + "/moved"}
    )
    assert_error(response, 400, "invalid_request", "url")
    assert (await get_ok(production.http, production.client_key, endpoint["id"]))["url"] == URL


async def test_receiver_names_are_resolved_before_the_write_transaction_opens(
    production: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow resolver must never hold the database's write lock (SQLite's ``BEGIN IMMEDIATE``)
    or a pooled connection: no lookup happens while its request holds a write transaction.
    (Tracked per task: the app's housekeeping may write in its own task meanwhile.)"""
    writing: set[asyncio.Task[Any] | None] = set()
    lookups_during_a_write: list[str] = []
    original_write = Database.write

    @contextlib.asynccontextmanager
    async def tracked_write(self: Database) -> AsyncIterator[Any]:
        async with original_write(self) as conn:
            writing.add(asyncio.current_task())
            try:
                yield conn
            finally:
                writing.discard(asyncio.current_task())

    async def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> Any:
        if asyncio.current_task() in writing:
            lookups_during_a_write.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 443))]

    monkeypatch.setattr(Database, "write", tracked_write)
    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    endpoint = await create_ok(production.http, production.client_key)
    await patch_ok(production.http, production.client_key, endpoint["id"], {"url": URL + "/moved"})
    assert lookups_during_a_write == []


# --- how many endpoints ------------------------------------------------------------------------


async def test_an_account_has_at_most_the_configured_number_of_endpoints(
    database_url: str, client_key: str
) -> None:
    settings = make_settings(database_url, webhook_max_endpoints=2)
    async with running(settings) as (_, http):
        first = await create_ok(http, client_key)
        await create_ok(http, client_key)
        response = await create(http, client_key)
        assert_error(response, 400, "invalid_request", "url")
        assert "at most 2 webhook endpoints" in response.json()["error"]["message"]
        assert (await list_page(http, client_key))["pagination"]["total"] == 2
        # A deleted endpoint no longer counts.
        deleted = await http.delete(f"{PATH}/{first['id']}", headers=bearer(client_key))
        assert deleted.status_code == 204
        await create_ok(http, client_key)


def test_the_default_endpoint_limit_is_sixteen() -> None:
    assert Settings(_env_file=None).webhook_max_endpoints == 16


# --- the encryption key ------------------------------------------------------------------------


async def test_production_without_a_secret_key_refuses_to_start(database_url: str) -> None:
    settings = make_settings(database_url, environment="production", secret_key=None)
    application = create_app(settings)
    with pytest.raises(SecretKeyMissing, match="COMMERCE_SECRET_KEY"):
        async with application.router.lifespan_context(application):
            pass


async def test_a_sandbox_without_a_secret_key_keeps_one_generated_key_in_its_database(
    database_url: str, db: Database, client_key: str
) -> None:
    settings = make_settings(database_url, secret_key=None)
    async with running(settings) as (first_app, first):
        endpoint = await create_ok(first, client_key)
    async with running(settings) as (second_app, second):
        rotated = (await rotate(second, client_key, endpoint["id"])).json()
        second_box = secret_box(second_app)
    row = await endpoint_row(db, endpoint["id"])
    assert second_box.decrypt(row.previous_secret_encrypted) == endpoint["secret"]
    assert second_box.decrypt(row.secret_encrypted) == rotated["secret"]
    assert secret_box(first_app).decrypt(row.secret_encrypted) == rotated["secret"]
    async with db.read() as conn:
        keys: list[str] = list(
            await conn.scalars(
                select(instance_values.c.value).where(instance_values.c.name == "secret_key")
            )
        )
    assert len(keys) == 1
    assert endpoint["secret"] not in keys[0]


async def test_two_sandbox_apps_started_together_share_the_generated_key(
    database_url: str, client_key: str
) -> None:
    settings = make_settings(database_url, secret_key=None)
    async with running(settings) as (first_app, first), running(settings) as (second_app, _):
        endpoint = await create_ok(first, client_key)
        token = secret_box(first_app).encrypt(endpoint["secret"])
        assert secret_box(second_app).decrypt(token) == endpoint["secret"]


async def test_a_configured_secret_key_is_used_instead_of_a_generated_one(
    database_url: str, db: Database, client_key: str
) -> None:
    key = "configured-secret-key-0123456789abcdef"
    async with running(make_settings(database_url, secret_key=key)) as (_, http):
        endpoint = await create_ok(http, client_key)
    row = await endpoint_row(db, endpoint["id"])
    assert SecretBox(key).decrypt(row.secret_encrypted) == endpoint["secret"]
    async with db.read() as conn:
        names: list[str] = list(await conn.scalars(select(instance_values.c.name)))
    assert "secret_key" not in names


async def test_a_rotated_secret_key_re_encrypts_stored_secrets_at_start(
    database_url: str, db: Database, client_key: str
) -> None:
    old_key = "old-secret-key-0123456789abcdef-0123456789"
    new_key = "new-secret-key-0123456789abcdef-0123456789"
    async with running(make_settings(database_url, secret_key=old_key)) as (_, http):
        endpoint = await create_ok(http, client_key)
        rotated = await http.post(
            f"{PATH}/{endpoint['id']}/rotate_secret", headers=bearer(client_key)
        )
        assert rotated.status_code == 200, rotated.text
    rotation = make_settings(database_url, secret_key=new_key, secret_key_previous=old_key)
    async with running(rotation) as (_, http):
        assert (await get_ok(http, client_key, endpoint["id"]))["id"] == endpoint["id"]
    # Both stored secrets now open with the new key alone: the old one can be retired.
    row = await endpoint_row(db, endpoint["id"])
    assert SecretBox(new_key).decrypt(row.secret_encrypted) == rotated.json()["secret"]
    assert SecretBox(new_key).decrypt(row.previous_secret_encrypted) == endpoint["secret"]
    async with running(make_settings(database_url, secret_key=new_key)) as (_, http):
        assert (await get_ok(http, client_key, endpoint["id"]))["id"] == endpoint["id"]
