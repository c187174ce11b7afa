"""Reasons (docs/design.md, "Reasons"): each reason of the table is produced by the situation it
names, with its row's status and code, on each backend; the table in the docs and the one in
code (``errors.REASONS``) are the same; and a sweep of every documented operation, called in the
wrong ways, meets no error without a reason of the table.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy.exc
from fastapi import FastAPI

from commerce_api.app.serving import guarded
from commerce_api.catalog import repository as catalog_repository
from commerce_api.core.errors import REASONS
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests.conftest import make_settings
from tests.factories import (
    create_product,
    new_account,
    new_key,
    order_body,
    place_ok,
    post_order,
)
from tests.helpers import bearer, serving
from tests.http.test_error_contract import assert_error
from tests.http.test_idempotency import insert_key_row, order_fingerprint
from tests.orders.test_orders import account_of

DESIGN = Path(__file__).resolve().parents[3] / "docs" / "design.md"
ROW = re.compile(r"^\| `(?P<reason>[a-z_]+)` \| (?P<status>\d{3}) \| (?P<code>[a-z_]+) \|")
BODY_TIMEOUT = 0.3


def documented_reasons() -> dict[str, tuple[int, str]]:
    """The rows of the "Reasons" table of docs/design.md: reason → (status, code)."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("**Reasons**") :]
    rows: dict[str, tuple[int, str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("**"):
            break
        if match := ROW.match(line):
            rows[match["reason"]] = (int(match["status"]), match["code"])
    return rows


def test_the_documented_table_is_the_one_in_code() -> None:
    assert documented_reasons() == dict(REASONS)


def test_reasons_are_snake_case_words() -> None:
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", reason) for reason in REASONS)


# --- each reason from its situation ------------------------------------------------------------


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Small limits, so that each situation is quick to reach."""
    return make_settings(
        database_url,
        webhook_max_endpoints=1,
        http_max_header_bytes=4096,
        http_max_requests_per_client=1,
        http_body_timeout_seconds=BODY_TIMEOUT,
    )


@dataclass
class World:
    app: FastAPI
    client: httpx.AsyncClient
    db: Database
    settings: Settings
    admin_key: str
    client_key: str
    monkeypatch: pytest.MonkeyPatch

    async def product(self, stock: int = 10) -> str:
        product_id: str = (
            await create_product(self.client, self.admin_key, inventory_count=stock)
        )["id"]
        return product_id

    async def post_product_body(self, content: bytes, content_type: str) -> httpx.Response:
        """``POST /v1/products`` as the admin, with this body sent as it is."""
        headers = {**bearer(self.admin_key), "Content-Type": content_type}
        return await self.client.post("/v1/products", content=content, headers=headers)

    def served(self, **overrides: object) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        """A client of another app on the same database, with other settings."""
        return serving(make_settings(self.settings.database_url, **overrides))

    @staticmethod
    def guarded_client(app: FastAPI, settings: Settings) -> httpx.AsyncClient:
        """A client of ``app`` as ``serve`` runs it, inside the server guard."""
        transport = httpx.ASGITransport(app=guarded(app, settings), raise_app_exceptions=False)
        return httpx.AsyncClient(transport=transport, base_url="http://testserver")


Situation = Callable[[World], Awaitable[httpx.Response]]
SITUATIONS: dict[str, Situation] = {}


def situation(reason: str) -> Callable[[Situation], Situation]:
    def register(make: Situation) -> Situation:
        SITUATIONS[reason] = make
        return make

    return register


@situation("validation_failed")
async def _(w: World) -> httpx.Response:
    body = {"name": "Lamp", "price": 10, "category": "home", "inventory_count": -1}
    return await w.client.post("/v1/products", json=body, headers=bearer(w.admin_key))


@situation("malformed_request")
async def _(w: World) -> httpx.Response:
    return await w.post_product_body(b'{"name": ', "application/json")


@situation("order_limit_exceeded")
async def _(w: World) -> httpx.Response:
    first, second = await w.product(), await w.product()
    body = order_body((first, 6000), (second, 6000))  # 12,000 units > 10,000 an order
    return await post_order(w.client, w.client_key, body)


@situation("url_not_allowed")
async def _(w: World) -> httpx.Response:
    async with w.served(webhook_allow_private_urls=False) as strict:
        body = {"url": "https://127.0.0.1/hooks"}
        return await strict.post("/v1/webhook_endpoints", json=body, headers=bearer(w.client_key))


async def _new_endpoint(w: World) -> httpx.Response:
    body = {"url": "http://127.0.0.1:9/hooks"}
    return await w.client.post("/v1/webhook_endpoints", json=body, headers=bearer(w.client_key))


@situation("endpoint_limit_reached")
async def _(w: World) -> httpx.Response:
    assert (await _new_endpoint(w)).status_code == 201  # the one allowed here
    return await _new_endpoint(w)


@situation("missing_api_key")
async def _(w: World) -> httpx.Response:
    return await w.client.get("/v1/orders")


@situation("malformed_authorization")
async def _(w: World) -> httpx.Response:
    return await w.client.get("/v1/orders", headers={"Authorization": f"Basic {w.client_key}"})


@situation("invalid_api_key")
async def _(w: World) -> httpx.Response:
    return await w.client.get("/v1/orders", headers=bearer("sk_sandbox_" + "x" * 40))


@situation("wrong_environment")
async def _(w: World) -> httpx.Response:
    live = "sk_live_" + w.client_key.removeprefix("sk_sandbox_")
    return await w.client.get("/v1/orders", headers=bearer(live))


@situation("forbidden")
async def _(w: World) -> httpx.Response:
    body = {"name": "Lamp", "price": 10, "category": "home", "inventory_count": 1}
    return await w.client.post("/v1/products", json=body, headers=bearer(w.client_key))


@situation("publishable_key_not_allowed")
async def _(w: World) -> httpx.Response:
    account_id = await new_account(w.db)
    publishable = await new_key(w.db, account_id, role="publishable")
    body = order_body((await w.product(), 1))
    return await post_order(w.client, publishable.secret, body)


@situation("origin_not_allowed")
async def _(w: World) -> httpx.Response:
    preflight = {"Origin": "https://unlisted.example", "Access-Control-Request-Method": "POST"}
    return await w.client.options("/v1/orders", headers=preflight)


@situation("not_found")
async def _(w: World) -> httpx.Response:
    return await w.client.get("/v1/orders/ord_missing", headers=bearer(w.client_key))


@situation("unknown_route")
async def _(w: World) -> httpx.Response:
    return await w.client.get("/v1/prodcts", headers=bearer(w.client_key))


@situation("method_not_allowed")
async def _(w: World) -> httpx.Response:
    return await w.client.put("/v1/orders", json={}, headers=bearer(w.client_key))


@situation("request_timeout")
async def _(w: World) -> httpx.Response:
    async def stalled() -> AsyncIterator[bytes]:
        yield b'{"customer_id": '
        await asyncio.sleep(60)  # the rest never comes (within the deadline)

    async with w.guarded_client(w.app, w.settings) as guarded_client:
        headers = {**bearer(w.client_key), "Content-Type": "application/json"}
        return await guarded_client.post("/v1/orders", content=stalled(), headers=headers)


@situation("insufficient_stock")
async def _(w: World) -> httpx.Response:
    product_id = await w.product(stock=2)
    return await post_order(w.client, w.client_key, order_body((product_id, 3)))


@situation("invalid_transition")
async def _(w: World) -> httpx.Response:
    order = await place_ok(w.client, w.client_key, (await w.product(), 1))
    cancel = f"/v1/orders/{order['id']}/cancel"
    assert (await w.client.post(cancel, headers=bearer(w.client_key))).status_code == 200
    return await w.client.post(cancel, headers=bearer(w.client_key))


@situation("endpoint_disabled")
async def _(w: World) -> httpx.Response:
    created = await _new_endpoint(w)
    assert created.status_code == 201, created.text
    endpoint = f"/v1/webhook_endpoints/{created.json()['id']}"
    disabled = await w.client.patch(endpoint, json={"enabled": False}, headers=bearer(w.client_key))
    assert disabled.status_code == 200, disabled.text
    since = {"since": "2026-11-21T08:00:00Z"}
    return await w.client.post(f"{endpoint}/recover", json=since, headers=bearer(w.client_key))


@situation("idempotency_key_in_use")
async def _(w: World) -> httpx.Response:
    body = order_body((await w.product(), 1))
    # The first request with the key is still running (its claim is fresh and unanswered).
    await insert_key_row(w.db, await account_of(w.db, w.client_key), "k1", order_fingerprint(body))
    headers = {**bearer(w.client_key), "Idempotency-Key": "k1"}
    return await w.client.post("/v1/orders", json=body, headers=headers)


@situation("payload_too_large")
async def _(w: World) -> httpx.Response:
    return await w.post_product_body(
        b'{"name": "' + b"x" * (1024 * 1024) + b'"}', "application/json"
    )


@situation("unsupported_media_type")
async def _(w: World) -> httpx.Response:
    return await w.post_product_body(b"name=Lamp", "text/plain")


@situation("idempotency_key_reused")
async def _(w: World) -> httpx.Response:
    product_id = await w.product()
    headers = {**bearer(w.client_key), "Idempotency-Key": "k2"}
    first = await w.client.post("/v1/orders", json=order_body((product_id, 1)), headers=headers)
    assert first.status_code == 201, first.text
    return await w.client.post("/v1/orders", json=order_body((product_id, 2)), headers=headers)


@situation("quota_exceeded")
async def _(w: World) -> httpx.Response:
    async with w.served(rate_limit_development=1) as limited:
        assert (await limited.get("/v1/products", headers=bearer(w.client_key))).is_success
        return await limited.get("/v1/products", headers=bearer(w.client_key))


@situation("redelivery_pending")
async def _(w: World) -> httpx.Response:
    assert (await _new_endpoint(w)).status_code == 201
    order = await place_ok(w.client, w.client_key, (await w.product(), 1))
    listed = await w.client.get("/v1/events", headers=bearer(w.client_key))
    [event] = [e for e in listed.json()["data"] if e["data"]["id"] == order["id"]]
    redeliver = f"/v1/events/{event['id']}/redeliver"
    # No dispatcher runs here: the first redelivery stays queued.
    assert (await w.client.post(redeliver, headers=bearer(w.client_key))).status_code == 200
    return await w.client.post(redeliver, headers=bearer(w.client_key))


@situation("header_too_large")
async def _(w: World) -> httpx.Response:
    async with w.guarded_client(w.app, w.settings) as guarded_client:
        headers = {**bearer(w.client_key), "X-Padding": "x" * 5000}
        return await guarded_client.get("/v1/products", headers=headers)


async def _explode() -> None:
    raise RuntimeError("unexpected")


@situation("internal_error")
async def _(w: World) -> httpx.Response:
    w.app.add_api_route("/v1/_test_explode", _explode, methods=["GET"])
    return await w.client.get("/v1/_test_explode")


@situation("server_busy")
async def _(w: World) -> httpx.Response:
    started = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        started.set()
        await asyncio.sleep(BODY_TIMEOUT / 2)  # in flight for a while (within its deadline)
        yield b'{"customer_id": "c"}'

    async with w.guarded_client(w.app, w.settings) as guarded_client:
        headers = {**bearer(w.client_key), "Content-Type": "application/json"}
        first = asyncio.create_task(
            guarded_client.post("/v1/orders", content=slow_body(), headers=headers)
        )
        await started.wait()
        second = await guarded_client.get("/v1/products", headers=bearer(w.client_key))
        await first
    return second


@situation("service_unavailable")
async def _(w: World) -> httpx.Response:
    async def unreachable() -> None:
        raise ConnectionRefusedError("the database is down")

    w.monkeypatch.setattr(w.app.state.services.db, "ping", unreachable)
    return await w.client.get("/readyz")


@situation("storage_full")
async def _(w: World) -> httpx.Response:
    async def full(*_args: object, **_kwargs: object) -> None:
        raise sqlalchemy.exc.OperationalError(
            "INSERT …", {}, sqlite3.OperationalError("database or disk is full")
        )

    w.monkeypatch.setattr(catalog_repository, "insert", full)
    body = {"name": "Lamp", "price": 10, "category": "home", "inventory_count": 1}
    return await w.client.post("/v1/products", json=body, headers=bearer(w.admin_key))


def test_every_reason_has_its_situation() -> None:
    assert set(SITUATIONS) == set(REASONS)


@pytest.mark.parametrize("reason", sorted(REASONS))
async def test_each_reason_is_produced_by_the_situation_it_names(
    reason: str,
    app: FastAPI,
    client: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    admin_key: str,
    client_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = World(app, client, db, settings, admin_key, client_key, monkeypatch)
    response = await SITUATIONS[reason](world)
    status, code = REASONS[reason]  # type: ignore[index]
    assert_error(response, status, code, reason=reason)


# --- a sweep: every documented operation, called in the wrong ways -----------------------------


def _operations(app: FastAPI) -> list[tuple[str, str]]:
    document = app.openapi()
    return [
        (method.upper(), path.replace("{id}", "x_missing"))
        for path, operations in document["paths"].items()
        for method in operations
    ]


async def test_every_error_of_the_documented_operations_carries_a_reason_of_the_table(
    app: FastAPI,
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    publishable_key: str,
) -> None:
    """Each operation without a key, with a bad one, with each role, with an unknown query
    parameter, with a body that is not JSON and with one that is not valid: whatever it
    answers, an error carries the envelope and a reason whose row has its status and code."""
    ways: list[dict[str, Any]] = [
        {},
        {"headers": bearer("sk_sandbox_unknown")},
        {"headers": bearer(client_key)},
        {"headers": bearer(admin_key)},
        {"headers": bearer(publishable_key)},
        {"headers": bearer(client_key), "params": {"limt": "5"}},
        {"headers": {**bearer(admin_key), "Content-Type": "application/json"}, "content": b"{"},
        {"headers": bearer(client_key), "json": {"unexpected": [1]}},
        {"headers": bearer(admin_key), "content": b"x"},
        {"headers": bearer(client_key), "params": {"limit": "0"}},
    ]
    seen: set[str] = set()
    for method, path in _operations(app):
        for way in ways:
            if method in {"GET", "DELETE"} and ("content" in way or "json" in way):
                continue
            response = await client.request(method, path, **way)
            if response.status_code >= 400:
                error = assert_error(
                    response, response.status_code, response.json()["error"]["code"]
                )
                seen.add(error["reason"])
    assert {"missing_api_key", "invalid_api_key", "forbidden", "not_found"} <= seen, seen
    assert "publishable_key_not_allowed" in seen
    assert {"validation_failed", "malformed_request", "unsupported_media_type"} <= seen, seen
