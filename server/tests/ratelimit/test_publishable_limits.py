"""Publishable keys (``pk_…``) limited apart (issue 44): their own bucket per key and per key
and client address, never their account's quota; the 429 names the limit; shared through
Redis. On both backends, with the counters in this process and in a real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from commerce_api.app.factory import create_app
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.ratelimit.test_rate_limits import (
    FakeClock,
    asgi_client,
    delete_redis_prefix,
    limiter_of,
    redis_test_url,
    unique_redis_prefix,
)

ACCOUNT_QUOTA = 500  # what the review's flood of 511 used to exhaust


@asynccontextmanager
async def app_clients(settings: Settings, *ips: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """An app of its own (lifespan run, a fixed clock), and a client from each address."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        limiter_of(application).clock = FakeClock()
        clients = [asgi_client(application, ip) for ip in ips]
        try:
            yield clients
        finally:
            for http in clients:
                await http.aclose()


async def _keys(db: Database) -> tuple[str, str]:
    """A publishable and a secret (client) key of one account."""
    account_id = await factories.new_account(db)
    publishable = await factories.new_key(db, account_id, role="publishable")
    secret = await factories.new_key(db, account_id)
    return publishable.secret, secret.secret


async def test_a_storefront_flood_never_spends_the_merchants_quota(
    database_url: str, db: Database, store: dict[str, str]
) -> None:
    """The review's reproduction: 511 catalogue reads with the published key, then the
    merchant's secret key places an order."""
    publishable, secret = await _keys(db)
    product_id = await factories.new_product(db, 5)
    settings = make_settings(database_url, rate_limit_development=ACCOUNT_QUOTA, **store)
    async with app_clients(settings, "203.0.113.7", "198.51.100.1") as (visitor, merchant):
        for _ in range(511):
            read = await visitor.get("/v1/categories", headers=bearer(publishable))
            assert read.status_code == 200, read.text
        assert read.headers["x-ratelimit-limit"] == "1000"  # the per-address bucket's
        assert read.headers["x-ratelimit-remaining"] == str(1000 - 511)
        order = await factories.post_order(merchant, secret, factories.order_body((product_id, 1)))
        assert order.status_code == 201, order.text
        assert order.headers["x-ratelimit-limit"] == str(ACCOUNT_QUOTA)
        assert order.headers["x-ratelimit-remaining"] == str(ACCOUNT_QUOTA - 1)


async def test_each_publishable_limit_is_its_own_and_the_429_names_it(
    database_url: str, db: Database, store: dict[str, str]
) -> None:
    publishable, secret = await _keys(db)
    settings = make_settings(
        database_url,
        rate_limit_development=2,
        rate_limit_publishable_per_client=3,
        rate_limit_publishable_per_key=5,
        **store,
    )
    async with app_clients(settings, "203.0.113.1", "203.0.113.2", "203.0.113.3") as clients:
        first, second, third = clients
        for _ in range(3):
            assert (await first.get("/v1/products", headers=bearer(publishable))).is_success
        refused = await first.get("/v1/products", headers=bearer(publishable))
        assert_error(refused, 429, "rate_limited", reason="quota_exceeded")
        assert refused.json()["error"]["details"] == "publishable_client"
        assert "from this address" in refused.json()["error"]["message"]
        assert refused.headers["x-ratelimit-limit"] == "3"
        assert int(refused.headers["retry-after"]) >= 1

        # Another address still reads, until the key's own bucket (5) is spent.
        for _ in range(2):
            assert (await second.get("/v1/products", headers=bearer(publishable))).is_success
        spent = await third.get("/v1/products", headers=bearer(publishable))
        assert_error(spent, 429, "rate_limited", reason="quota_exceeded")
        assert spent.json()["error"]["details"] == "publishable_key"
        assert spent.headers["x-ratelimit-limit"] == "5"

        # The account's quota (2) was never touched by any of it.
        for _ in range(2):
            answer = await second.get("/v1/orders", headers=bearer(secret))
            assert answer.status_code == 200, answer.text
        over = await second.get("/v1/orders", headers=bearer(secret))
        assert_error(over, 429, "rate_limited", reason="quota_exceeded")
        assert over.json()["error"]["details"] == "X-RateLimit-Limit"


async def test_processes_on_one_redis_share_a_publishable_keys_buckets(
    database_url: str, db: Database
) -> None:
    url = await redis_test_url()
    prefix = unique_redis_prefix()
    publishable, _ = await _keys(db)
    settings = make_settings(
        database_url,
        rate_limit_publishable_per_client=4,
        redis_url=url,
        redis_key_prefix=prefix,
    )
    try:
        async with (
            app_clients(settings, "203.0.113.9") as (one,),
            app_clients(settings, "203.0.113.9") as (other,),
        ):
            for http in (one, other, one, other):
                assert (await http.get("/v1/products", headers=bearer(publishable))).is_success
            refused = await other.get("/v1/products", headers=bearer(publishable))
            assert refused.status_code == 429
            assert refused.json()["error"]["details"] == "publishable_client"
    finally:
        await delete_redis_prefix(url, prefix)
