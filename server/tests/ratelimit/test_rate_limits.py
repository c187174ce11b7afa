"""Rate limits through the HTTP app (docs/design.md, "Rate limits").

Per account, in fixed windows aligned to the epoch, counted for every request including errors;
``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` on every response (unauthenticated ones are
limited per client IP at the development quota); a 429 ``rate_limited`` adds ``Retry-After``.
Health endpoints are exempt. The limiter's clock is replaced by a fake one, so the windows are
deterministic. Redis tests use a real Redis with a unique key prefix, deleted afterwards.
"""

from __future__ import annotations

import asyncio
import math
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from commerce_api.accounts import service as accounts
from commerce_api.app.factory import create_app
from commerce_api.ratelimit.limiter import RateLimiter
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests.conftest import KeyFactory, make_settings
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error

MIB = 1024 * 1024
HOUR = 3600
QUOTA = 5  # development tier, and unauthenticated requests per IP
PRODUCTION_QUOTA = 7
WINDOW_START = 1_700_000_000 - 1_700_000_000 % HOUR
NOW = WINDOW_START + 1234.25
RESET = WINDOW_START + HOUR
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")

# --- Redis: a real server, a unique prefix per test, keys deleted afterwards ---------------------

REDIS_URL = os.environ.get("COMMERCE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REQUIRE_REDIS = (
    os.environ.get("COMMERCE_TEST_REQUIRE_REDIS") == "1"
    or os.environ.get("COMMERCE_TEST_REQUIRE_POSTGRES") == "1"
    or os.environ.get("CI", "").lower() == "true"
)
UNREACHABLE_REDIS_URL = "redis://127.0.0.1:1/0"


async def redis_test_url() -> str:
    """The test Redis URL if Redis answers; else skip (or fail where Redis is required)."""
    redis = Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        pong = redis.ping()
        assert not isinstance(pong, bool)  # the asyncio client returns an awaitable
        await pong
    except Exception as exc:
        message = f"Redis is not reachable at {REDIS_URL}: {exc!r}"
        if REQUIRE_REDIS:
            pytest.fail(message)
        pytest.skip(message + " (set COMMERCE_TEST_REDIS_URL)")
    finally:
        await redis.aclose()
    return REDIS_URL


def unique_redis_prefix() -> str:
    return f"commerce-test-{uuid.uuid4().hex}:"


async def redis_keys(url: str, prefix: str) -> list[bytes]:
    redis = Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        return [key async for key in redis.scan_iter(match=f"{prefix}*", count=1000)]
    finally:
        await redis.aclose()


async def delete_redis_prefix(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (and only those)."""
    assert prefix.startswith("commerce-test-"), prefix
    keys = await redis_keys(url, prefix)
    if not keys:
        return
    redis = Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        await redis.delete(*keys)
    finally:
        await redis.aclose()


# --- apps and clients ----------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def settings(database_url: str) -> Settings:
    """The conftest's settings with small quotas (``app``, ``client``, ``make_key`` use them)."""
    return make_settings(
        database_url, rate_limit_development=QUOTA, rate_limit_production=PRODUCTION_QUOTA
    )


def limiter_of(app: FastAPI) -> RateLimiter:
    limiter: RateLimiter = app.state.services.rate_limiter
    return limiter


@pytest.fixture
def clock(app: FastAPI) -> FakeClock:
    fake = FakeClock()
    limiter_of(app).clock = fake
    return fake


def asgi_client(app: FastAPI, ip: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(ip, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


@asynccontextmanager
async def serving(
    settings: Settings, clock: FakeClock
) -> AsyncIterator[tuple[RateLimiter, httpx.AsyncClient]]:
    """An app of its own (lifespan run) with ``clock``; yields its limiter and a client."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        limiter = limiter_of(application)
        limiter.clock = clock
        async with asgi_client(application) as http:
            yield limiter, http


def rate_headers(response: httpx.Response) -> tuple[int, int, int]:
    """``(limit, remaining, reset)`` from the response; fails if any header is missing."""
    missing = [name for name in RATE_HEADERS if name not in response.headers]
    assert not missing, f"{response.status_code} lacks {missing}: {dict(response.headers)}"
    return (
        int(response.headers["x-ratelimit-limit"]),
        int(response.headers["x-ratelimit-remaining"]),
        int(response.headers["x-ratelimit-reset"]),
    )


def assert_rate_limited(response: httpx.Response, limit: int, clock: FakeClock) -> None:
    """A 429 ``rate_limited`` envelope with Retry-After in seconds and the three headers."""
    assert_error(response, 429, "rate_limited")
    assert rate_headers(response) == (limit, 0, RESET)
    retry_after = response.headers.get("retry-after")
    assert retry_after is not None, "a 429 carries Retry-After"
    assert retry_after.isdigit(), f"Retry-After is whole seconds, got {retry_after!r}"
    assert int(retry_after) == math.ceil(RESET - clock.now)
    assert int(retry_after) >= 1


async def exhaust_quota(http: httpx.AsyncClient, key: str, clock: FakeClock, limit: int) -> None:
    """Send ``limit`` admitted requests, checking the count-down, then one refused one."""
    for expected_remaining in range(limit - 1, -1, -1):
        response = await http.get("/v1/products", headers=bearer(key))
        assert response.status_code == 200, response.text
        assert rate_headers(response) == (limit, expected_remaining, RESET)
        assert "retry-after" not in response.headers
    assert_rate_limited(await http.get("/v1/products", headers=bearer(key)), limit, clock)


# --- the quota -----------------------------------------------------------------------------------


async def test_requests_count_down_to_a_429_and_the_next_window_admits_again(
    settings: Settings, make_key: KeyFactory, store: dict[str, str]
) -> None:
    key = await make_key()
    clock = FakeClock()
    async with serving(settings.model_copy(update=store), clock) as (limiter, http):
        await exhaust_quota(http, key, clock, QUOTA)
        # Still refused later in the same window, with a shorter Retry-After.
        clock.now = RESET - 0.5
        assert_rate_limited(await http.get("/v1/products", headers=bearer(key)), QUOTA, clock)

        clock.now = RESET + 10.0  # the next window
        response = await http.get("/v1/products", headers=bearer(key))
        assert response.status_code == 200, response.text
        assert rate_headers(response) == (QUOTA, QUOTA - 1, RESET + HOUR)
        assert "retry-after" not in response.headers
        assert limiter.store_errors == 0


async def test_a_refused_request_is_not_served(
    client: httpx.AsyncClient, clock: FakeClock, make_key: KeyFactory
) -> None:
    """The 429 is answered before the route: a refused POST creates nothing."""
    admin = await make_key("admin", "development")
    product = {"name": "Mug", "price": 8.5, "category": "kitchen"}
    limit, _, _ = rate_headers(await client.get("/v1/products", headers=bearer(admin)))
    for _ in range(limit - 1):
        await client.get("/v1/products", headers=bearer(admin))
    refused = await client.post("/v1/products", json=product, headers=bearer(admin))
    assert_rate_limited(refused, limit, clock)
    clock.now = RESET + 1.0
    listed = await client.get("/v1/products", headers=bearer(admin))
    assert listed.status_code == 200
    assert listed.json()["data"] == []


async def test_another_account_keeps_its_own_quota(
    client: httpx.AsyncClient, clock: FakeClock, make_key: KeyFactory
) -> None:
    first, second = await make_key(), await make_key()
    await exhaust_quota(client, first, clock, QUOTA)
    response = await client.get("/v1/products", headers=bearer(second))
    assert response.status_code == 200
    assert rate_headers(response) == (QUOTA, QUOTA - 1, RESET)
    assert_rate_limited(await client.get("/v1/products", headers=bearer(first)), QUOTA, clock)


async def test_keys_of_one_account_share_its_quota(
    client: httpx.AsyncClient, clock: FakeClock, db: Database, settings: Settings
) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Two keys", "development")
        keys = [
            (await accounts.create_key(conn, settings.environment, account_id=account_id)).secret
            for _ in range(2)
        ]
    remaining = []
    for index in range(QUOTA):
        response = await client.get("/v1/products", headers=bearer(keys[index % 2]))
        assert response.status_code == 200
        remaining.append(rate_headers(response)[1])
    assert remaining == [4, 3, 2, 1, 0]
    assert_rate_limited(await client.get("/v1/products", headers=bearer(keys[1])), QUOTA, clock)


async def test_a_production_account_gets_the_production_limit(
    client: httpx.AsyncClient, clock: FakeClock, make_key: KeyFactory
) -> None:
    key = await make_key("client", "production")
    await exhaust_quota(client, key, clock, PRODUCTION_QUOTA)
    development = await make_key("client", "development")
    response = await client.get("/v1/products", headers=bearer(development))
    assert rate_headers(response) == (QUOTA, QUOTA - 1, RESET)


async def test_operator_keys_count_against_themselves(
    client: httpx.AsyncClient, clock: FakeClock, make_key: KeyFactory
) -> None:
    first, second = await make_key("admin"), await make_key("admin")
    limit, remaining, reset = rate_headers(await client.get("/v1/products", headers=bearer(first)))
    assert (remaining, reset) == (limit - 1, RESET)
    assert rate_headers(await client.get("/v1/products", headers=bearer(second)))[1] == limit - 1
    assert rate_headers(await client.get("/v1/products", headers=bearer(first)))[1] == limit - 2


# --- unauthenticated requests --------------------------------------------------------------------


async def test_unauthenticated_requests_are_limited_per_ip_at_the_development_quota(
    app: FastAPI, clock: FakeClock, make_key: KeyFactory
) -> None:
    invalid = {"Authorization": "Bearer sk_sandbox_" + "x" * 40}
    async with asgi_client(app, "203.0.113.7") as http, asgi_client(app, "203.0.113.8") as other:
        # No key and an invalid key count against the same IP quota.
        for index in range(QUOTA):
            headers = invalid if index % 2 else {}
            response = await http.get("/v1/products", headers=headers)
            assert_error(response, 401, "unauthorized")
            assert rate_headers(response) == (QUOTA, QUOTA - 1 - index, RESET)
        assert_rate_limited(await http.get("/v1/products"), QUOTA, clock)
        assert_rate_limited(await http.get("/v1/products", headers=invalid), QUOTA, clock)

        # Another IP has its own quota.
        response = await other.get("/v1/products")
        assert_error(response, 401, "unauthorized")
        assert rate_headers(response) == (QUOTA, QUOTA - 1, RESET)

        # A valid key from the spent IP counts against its account, not the IP.
        key = await make_key()
        response = await http.get("/v1/products", headers=bearer(key))
        assert response.status_code == 200
        assert rate_headers(response) == (QUOTA, QUOTA - 1, RESET)


# --- headers on every response; errors count ---------------------------------------------------


async def test_every_status_carries_the_headers_and_errors_count(
    app: FastAPI, client: httpx.AsyncClient, clock: FakeClock, make_key: KeyFactory
) -> None:
    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/v1/boom", boom, methods=["GET"])
    key, other = await make_key(), await make_key()
    json_headers = {"Content-Type": "application/json"}

    # One account, five requests, five statuses: every one counts.
    responses = {
        200: await client.get("/v1/products", headers=bearer(key)),
        400: await client.get("/v1/products", params={"limit": 0}, headers=bearer(key)),
        403: await client.post(
            "/v1/products", json={"name": "x", "price": 1, "category": "c"}, headers=bearer(key)
        ),
        404: await client.get("/v1/no-such-route", headers=bearer(key)),
        405: await client.put("/v1/products", headers=bearer(key)),
    }
    for index, (status, response) in enumerate(responses.items()):
        assert response.status_code == status, response.text
        assert rate_headers(response) == (QUOTA, QUOTA - 1 - index, RESET), status
    refused = await client.get("/v1/products", headers=bearer(key))
    assert_rate_limited(refused, QUOTA, clock)

    # Another account: a body over 1 MiB and an unexpected error count too.
    too_large = await client.post(
        "/v1/products", content=b"x" * (MIB + 1), headers={**bearer(other), **json_headers}
    )
    assert_error(too_large, 413, "invalid_request")
    assert rate_headers(too_large) == (QUOTA, QUOTA - 1, RESET)
    crashed = await client.get("/v1/boom", headers=bearer(other))
    assert_error(crashed, 500, "server_error")
    assert rate_headers(crashed) == (QUOTA, QUOTA - 2, RESET)

    unauthorized = await client.get("/v1/products")
    assert_error(unauthorized, 401, "unauthorized")
    assert rate_headers(unauthorized) == (QUOTA, QUOTA - 1, RESET)

    for response in [*responses.values(), refused, too_large, crashed, unauthorized]:
        assert response.headers.get("x-request-id", "").startswith("req_")
        assert response.headers["x-ratelimit-reset"] == str(RESET)


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_health_endpoints_are_exempt(client: httpx.AsyncClient, path: str) -> None:
    for _ in range(QUOTA + 3):
        response = await client.get(path)
        assert response.status_code == 200, response.text
        assert not [name for name in RATE_HEADERS if name in response.headers]
        assert "retry-after" not in response.headers
    # Not counted either: this IP still has its whole quota.
    response = await client.get("/v1/products")
    assert rate_headers(response)[:2] == (QUOTA, QUOTA - 1)


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrent_requests_admit_exactly_the_quota(
    database_url: str, make_key: KeyFactory, store: dict[str, str]
) -> None:
    quota, total = 20, 50
    settings = make_settings(database_url, rate_limit_development=quota, **store)
    key = await make_key()
    clock = FakeClock()
    async with serving(settings, clock) as (limiter, http):
        responses = await asyncio.gather(
            *(http.get("/v1/products", headers=bearer(key)) for _ in range(total))
        )
        statuses = [response.status_code for response in responses]
        assert statuses.count(200) == quota, statuses
        assert statuses.count(429) == total - quota, statuses
        admitted = sorted(rate_headers(r)[1] for r in responses if r.status_code == 200)
        assert admitted == list(range(quota)), "each admitted request got its own count"
        assert {rate_headers(r) for r in responses if r.status_code == 429} == {(quota, 0, RESET)}
        assert limiter.store_errors == 0
    if store:
        prefix = store["redis_key_prefix"]
        keys = await redis_keys(store["redis_url"], prefix)
        assert len(keys) == 1, keys
        assert keys[0].decode().startswith(f"{prefix}ratelimit:{WINDOW_START}:")


async def test_redis_counters_expire_after_their_window(
    settings: Settings, make_key: KeyFactory, redis_prefix: tuple[str, str]
) -> None:
    url, prefix = redis_prefix
    key = await make_key()
    redis_settings = settings.model_copy(update={"redis_url": url, "redis_key_prefix": prefix})
    # The counter's name carries its window; its expiry (real time) only cleans it up.
    async with serving(redis_settings, FakeClock()) as (_, http):
        assert (await http.get("/v1/products", headers=bearer(key))).status_code == 200
    redis = Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        keys = await redis_keys(url, prefix)
        assert len(keys) == 1
        ttl = await redis.ttl(keys[0])
        assert 0 < ttl <= HOUR + 60, ttl
        assert keys[0].decode().startswith(f"{prefix}ratelimit:{WINDOW_START}:acct_"), keys
    finally:
        await redis.aclose()


async def test_unreachable_redis_still_serves_with_the_headers(
    settings: Settings, make_key: KeyFactory
) -> None:
    key = await make_key()
    clock = FakeClock()
    down = settings.model_copy(update={"redis_url": UNREACHABLE_REDIS_URL})
    async with serving(down, clock) as (limiter, http):
        # Served and counted in this process instead: the quota still holds.
        await exhaust_quota(http, key, clock, QUOTA)
        assert limiter.store_errors > 0
        assert (await http.get("/healthz")).status_code == 200


# --- the OpenAPI document ----------------------------------------------------------------------


async def test_openapi_documents_the_headers_and_the_429(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/openapi.json")
    assert response.status_code == 200
    assert rate_headers(response)[0] == QUOTA
    paths = response.json()["paths"]
    v1 = {path: ops for path, ops in paths.items() if path.startswith("/v1/")}
    assert v1, "the document lists /v1 paths"
    for path, operations in v1.items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            responses = operation["responses"]
            assert "429" in responses, where
            rate_limited = responses["429"]
            assert "Retry-After" in rate_limited["headers"], where
            assert rate_limited["headers"]["Retry-After"]["schema"]["type"] == "integer"
            schema = rate_limited["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith("/ErrorResponse"), where
            for status, documented in responses.items():
                headers = documented.get("headers", {})
                for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
                    assert name in headers, f"{where} {status} lacks {name}"
                    assert headers[name]["schema"]["type"] == "integer"
    for path in ("/healthz", "/readyz"):
        for operation in paths[path].values():
            assert "429" not in operation["responses"], path
            for documented in operation["responses"].values():
                assert "X-RateLimit-Limit" not in documented.get("headers", {}), path
