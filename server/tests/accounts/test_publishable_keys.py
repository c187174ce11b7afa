"""Publishable keys (``pk_…``, issue 31): an account's key that reads the catalogue and nothing
else, on both backends, whichever path answers (the fast lane or the routes), counted apart
from its account's quota (issue 44)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from starlette.types import Receive, Scope, Send

from commerce_api.accounts import service as accounts
from commerce_api.app.services import Services
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests import factories
from tests.conftest import make_settings
from tests.console.helpers import sign_in
from tests.helpers import bearer, running_app, serving
from tests.http.test_error_contract import assert_error


class LaneSpy:
    """The app's fast lane, noting which requests it answered itself."""

    def __init__(self, lane: Any) -> None:
        self.lane = lane
        self.answered: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        rest: Receive | None = await self.lane(scope, receive, send)
        if rest is None:
            self.answered.append(f"{scope['method']} {scope['path']}")
        return rest


@pytest.fixture
def lane(app: FastAPI) -> LaneSpy:
    spy = LaneSpy(app.fast_lane)  # type: ignore[attr-defined]
    app.fast_lane = spy  # type: ignore[attr-defined]
    return spy


async def test_a_publishable_key_reads_the_catalogue_on_the_fast_lane(
    client: httpx.AsyncClient, publishable_key: str, services: Services, lane: LaneSpy
) -> None:
    assert publishable_key.startswith("pk_sandbox_")
    (product_id,) = await factories.new_products(services.db, 1)
    listed = await client.get("/v1/products", headers=bearer(publishable_key))
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json()["data"]] == [product_id]
    one = await client.get(f"/v1/products/{product_id}", headers=bearer(publishable_key))
    assert one.status_code == 200
    assert one.json()["id"] == product_id
    categories = await client.get("/v1/categories", headers=bearer(publishable_key))
    assert categories.status_code == 200, categories.text
    assert categories.json()["data"] == [{"name": "widgets", "product_count": 1}]
    assert lane.answered == [
        "GET /v1/products",
        f"GET /v1/products/{product_id}",
        "GET /v1/categories",
    ]


async def test_a_publishable_key_reads_the_catalogue_on_the_routes_too(
    app: FastAPI, client: httpx.AsyncClient, publishable_key: str, services: Services
) -> None:
    (product_id,) = await factories.new_products(services.db, 1)
    app.fast_lane = None  # type: ignore[attr-defined]
    for path in ("/v1/products", f"/v1/products/{product_id}", "/v1/categories"):
        response = await client.get(path, headers=bearer(publishable_key))
        assert response.status_code == 200, (path, response.text)


def _refused(response: httpx.Response) -> None:
    error = assert_error(response, 403, "unauthorized", "Authorization")
    assert error["reason"] == "publishable_key_not_allowed"
    assert "Publishable keys" in error["message"]
    assert "secret key" in error["message"]


OTHER_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/orders", {}),
    ("GET", "/v1/orders/ord_x", {}),
    ("POST", "/v1/orders/ord_x/cancel", {}),
    ("POST", "/v1/orders/ord_x/fulfill", {}),
    ("GET", "/v1/events", {}),
    ("GET", "/v1/events/evt_x", {}),
    ("GET", "/v1/webhook_endpoints", {}),
    ("POST", "/v1/webhook_endpoints", {"json": {"url": "https://example.com/hook"}}),
    ("POST", "/v1/products", {"json": {"name": "Lamp", "price": 1, "category": "home"}}),
    ("PATCH", "/v1/products/prod_x", {"json": {"name": "Lamp"}}),
    ("DELETE", "/v1/products/prod_x", {}),
]


@pytest.mark.parametrize("fast_lane", [True, False], ids=["fast-lane", "routes"])
async def test_every_other_route_refuses_a_publishable_key_saying_why(
    fast_lane: bool,
    app: FastAPI,
    client: httpx.AsyncClient,
    publishable_key: str,
    services: Services,
) -> None:
    if not fast_lane:
        app.fast_lane = None  # type: ignore[attr-defined]
    product_id = await factories.new_product(services.db, 10)
    order = factories.order_body((product_id, 1))
    refused = await factories.post_order(client, publishable_key, order)
    _refused(refused)
    for method, path, extra in OTHER_ROUTES:
        response = await client.request(method, path, headers=bearer(publishable_key), **extra)
        _refused(response)
    # Nothing was written: no order, the stock untouched.
    product = await client.get(f"/v1/products/{product_id}", headers=bearer(publishable_key))
    assert product.json()["inventory_count"] == 10


async def test_a_publishable_key_refused_is_not_an_idempotent_result(
    client: httpx.AsyncClient, publishable_key: str, services: Services
) -> None:
    """The refusal comes before the ``Idempotency-Key`` is claimed, as a 401 does."""
    (product_id,) = await factories.new_products(services.db, 1)
    headers = {**bearer(publishable_key), "Idempotency-Key": "k-1"}
    body = factories.order_body((product_id, 1))
    for _ in range(2):
        response = await client.post("/v1/orders", json=body, headers=headers)
        _refused(response)
        assert "idempotent-replayed" not in response.headers


async def test_a_revoked_publishable_key_is_refused(
    client: httpx.AsyncClient, db: Database, services: Services
) -> None:
    account_id = await factories.new_account(db)
    key = await factories.new_key(db, account_id, role="publishable")
    assert (await client.get("/v1/products", headers=bearer(key.secret))).status_code == 200
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)
    response = await client.get("/v1/products", headers=bearer(key.secret))
    assert_error(response, 401, "unauthorized", "Authorization", reason="invalid_api_key")


async def test_a_live_publishable_key_on_a_sandbox_instance_names_the_environment(
    client: httpx.AsyncClient, publishable_key: str
) -> None:
    live = "pk_live_" + publishable_key.removeprefix("pk_sandbox_")
    response = await client.get("/v1/products", headers=bearer(live))
    error = assert_error(response, 401, "unauthorized", "Authorization", reason="wrong_environment")
    assert "pk_live_" in error["message"]


async def test_a_production_instance_issues_pk_live_keys_that_work_there(
    settings: Settings, db: Database
) -> None:
    account_id = await factories.new_account(db)
    key = await factories.new_key(db, account_id, role="publishable", environment="production")
    assert key.secret.startswith("pk_live_")
    production = settings.model_copy(update={"environment": "production"})
    async with serving(production) as http:
        response = await http.get("/v1/products", headers=bearer(key.secret))
    assert response.status_code == 200, response.text


async def test_a_publishable_key_is_counted_apart_from_its_accounts_quota(
    database_url: str, db: Database
) -> None:
    """Its requests count in its own bucket (here the per-address one, the smaller), never the
    account's quota, with the same headers and a 429 naming its limit at the end of it, on the
    fast lane and on the routes."""
    account_id = await factories.new_account(db)
    secret = (await factories.new_key(db, account_id)).secret
    publishable = (await factories.new_key(db, account_id, role="publishable")).secret
    settings = make_settings(
        database_url, rate_limit_development=3, rate_limit_publishable_per_client=3
    )
    async with running_app(settings) as (app, http):
        first = await http.get("/v1/products", headers=bearer(publishable))
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit"] == "3"
        assert first.headers["x-ratelimit-remaining"] == "2"
        mine = await http.get("/v1/orders", headers=bearer(secret))
        assert mine.status_code == 200
        assert mine.headers["x-ratelimit-remaining"] == "2"  # the account's own, untouched
        refused = await http.get("/v1/orders", headers=bearer(publishable))  # counted: a 403
        assert refused.status_code == 403
        assert refused.headers["x-ratelimit-remaining"] == "1"
        assert (await http.get("/v1/products", headers=bearer(publishable))).status_code == 200
        over = await http.get("/v1/products", headers=bearer(publishable))
        assert_error(over, 429, "rate_limited", reason="quota_exceeded")
        assert over.json()["error"]["details"] == "publishable_client"
        assert "retry-after" in over.headers
        app.fast_lane = None  # type: ignore[attr-defined]
        again = await http.get("/v1/products/prod_x", headers=bearer(publishable))
        assert_error(again, 429, "rate_limited", reason="quota_exceeded")
        still = await http.get("/v1/orders", headers=bearer(secret))
        assert still.status_code == 200
        assert still.headers["x-ratelimit-remaining"] == "1"


async def test_a_publishable_key_cannot_sign_in_to_the_console(
    client: httpx.AsyncClient, publishable_key: str
) -> None:
    response = await sign_in(client, publishable_key)
    assert response.status_code == 403
    assert "This is a publishable key." in response.text
    assert "commerce_console_session" not in response.headers.get("set-cookie", "")


async def test_a_publishable_key_belongs_to_an_account(db: Database) -> None:
    with pytest.raises(ValueError, match="publishable key belongs to an account"):
        async with db.write() as conn:
            await accounts.create_key(conn, "sandbox", account_id=None, role="publishable")


async def test_the_database_keeps_roles_to_the_three_it_knows(db: Database) -> None:
    account_id = await factories.new_account(db)
    key = await factories.new_key(db, account_id, role="publishable")
    async with db.read() as conn:
        stored = await conn.scalar(text("SELECT role FROM api_keys WHERE id = :id"), {"id": key.id})
        listed = {info.id: info.role for info in await accounts.list_keys(conn)}
    assert stored == listed[key.id] == "publishable"
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO api_keys (id, account_id, role, prefix, last4, key_hash, "
                    "created_at) VALUES ('key_x', :account, 'storefront', 'pk_sandbox_', "
                    "'abcd', 'h', CURRENT_TIMESTAMP)"
                ),
                {"account": account_id},
            )
