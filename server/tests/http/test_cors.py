"""CORS for storefronts (``http/cors.py``): on every ``/v1`` route, for the origins of
``COMMERCE_CORS_ORIGINS`` only (a preflight from any other is refused in the envelope), on the
fast lane and on the routes alike, on both backends."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from commerce_api.app.services import Services
from commerce_api.http.cors import PREFLIGHT_MAX_AGE_SECONDS
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error
from tests.server_process import running_server

SHOP = "https://shop.example"
OTHER = "https://evil.example"
CORS_HEADERS = {
    "access-control-allow-origin",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-max-age",
    "access-control-expose-headers",
    "access-control-allow-credentials",
}


def preflight(origin: str, method: str = "GET") -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization",
    }


def cors_headers(response: httpx.Response) -> set[str]:
    return CORS_HEADERS & set(response.headers.keys())


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, cors_origins=f"{SHOP},http://localhost:3000")


@pytest.fixture
async def product_id(services: Services) -> str:
    return await factories.new_product(services.db, 5)


@pytest.fixture(params=["fast-lane", "routes"])
def path_taken(request: pytest.FixtureRequest, app: FastAPI) -> str:
    """Each test once as served (the fast lane answers catalogue reads) and once with every
    request on the routes."""
    if request.param == "routes":
        app.fast_lane = None  # type: ignore[attr-defined]
    taken: str = request.param
    return taken


async def test_a_preflight_from_a_listed_origin_is_answered_without_a_key(
    client: httpx.AsyncClient, product_id: str, path_taken: str
) -> None:
    for path in (
        "/v1/products",
        f"/v1/products/{product_id}",
        "/v1/products?limit=5",
        "/v1/categories",
    ):
        response = await client.options(path, headers=preflight(SHOP))
        assert response.status_code == 204, (path, response.text)
        assert response.content == b""
        assert response.headers["access-control-allow-origin"] == SHOP
        assert "GET" in response.headers["access-control-allow-methods"]
        assert "Authorization" in response.headers["access-control-allow-headers"]
        assert response.headers["access-control-max-age"] == str(PREFLIGHT_MAX_AGE_SECONDS)
        assert response.headers["vary"] == "Origin"
        assert "access-control-allow-credentials" not in response.headers


async def test_a_listed_origin_reads_the_catalogue_with_a_publishable_key(
    client: httpx.AsyncClient, publishable_key: str, product_id: str, path_taken: str
) -> None:
    headers = {**bearer(publishable_key), "Origin": "http://localhost:3000"}
    for path in ("/v1/products", f"/v1/products/{product_id}", "/v1/categories"):
        response = await client.get(path, headers=headers)
        assert response.status_code == 200, response.text
        assert response.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert response.headers["vary"] == "Origin"
        exposed = response.headers["access-control-expose-headers"]
        for name in ("X-Request-Id", "X-RateLimit-Remaining", "Retry-After"):
            assert name in exposed
        assert "x-ratelimit-remaining" in response.headers


async def test_errors_on_the_catalogue_carry_cors_so_the_page_can_read_them(
    client: httpx.AsyncClient, path_taken: str
) -> None:
    missing = await client.get("/v1/products", headers={"Origin": SHOP})
    assert_error(missing, 401, "unauthorized", reason="missing_api_key")
    assert missing.headers["access-control-allow-origin"] == SHOP
    unknown = await client.get(
        "/v1/products/prod_unknown", headers={**bearer("pk_sandbox_unknown"), "Origin": SHOP}
    )
    assert unknown.status_code == 401
    assert unknown.headers["access-control-allow-origin"] == SHOP


async def test_an_origin_not_listed_gets_no_cors_and_its_preflight_is_refused(
    client: httpx.AsyncClient, publishable_key: str, path_taken: str
) -> None:
    asked = await client.options("/v1/products", headers=preflight(OTHER))
    assert_error(asked, 403, "unauthorized", reason="origin_not_allowed")
    assert asked.json()["error"]["details"] == "Origin"
    assert OTHER in asked.json()["error"]["message"]
    assert cors_headers(asked) == set()
    read = await client.get("/v1/products", headers={**bearer(publishable_key), "Origin": OTHER})
    assert read.status_code == 200
    assert cors_headers(read) == set()
    assert read.headers["vary"] == "Origin"  # the answer depends on the origin all the same
    # An origin is matched whole: no prefix, no other scheme or port.
    for near in (SHOP + ".evil", "http://shop.example", SHOP + ":8443"):
        response = await client.options("/v1/products", headers=preflight(near))
        assert response.status_code == 403, near
        assert cors_headers(response) == set(), near


async def test_refused_origins_are_logged_once_a_minute_each(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, path_taken: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="commerce_api"):
        for _ in range(3):
            await client.options("/v1/orders", headers=preflight(OTHER, "POST"))
            await client.get("/v1/products", headers={"Origin": "https://other.example"})
        # The server's own pages (``/docs`` trying a request) are not a refused origin.
        own = f"{client.base_url.scheme}://{client.base_url.netloc.decode()}"
        await client.get("/v1/products", headers={"Origin": own})
    lines = [r.getMessage() for r in caplog.records if "CORS: refused" in r.getMessage()]
    assert len(lines) == 2, lines
    assert OTHER in lines[0]
    assert "preflight" in lines[0]
    assert "https://other.example" in lines[1]


async def test_every_v1_route_answers_cors_so_a_page_sees_its_refusals(
    client: httpx.AsyncClient,
    client_key: str,
    admin_key: str,
    publishable_key: str,
    path_taken: str,
) -> None:
    for path, method in (
        ("/v1/orders", "POST"),
        ("/v1/events", "GET"),
        ("/v1/webhook_endpoints", "POST"),
        ("/v1/nowhere", "GET"),
    ):
        asked = await client.options(path, headers=preflight(SHOP, method))
        assert asked.status_code == 204, path
        assert method in asked.headers["access-control-allow-methods"], path
        allowed = asked.headers["access-control-allow-headers"]
        for name in ("Authorization", "Content-Type", "Idempotency-Key"):
            assert name in allowed
    refused = await client.get("/v1/orders", headers={**bearer(publishable_key), "Origin": SHOP})
    assert_error(refused, 403, "unauthorized", reason="publishable_key_not_allowed")
    assert refused.headers["access-control-allow-origin"] == SHOP
    unknown = await client.get("/v1/nowhere", headers={**bearer(client_key), "Origin": SHOP})
    assert unknown.status_code == 404
    assert unknown.headers["access-control-allow-origin"] == SHOP
    created = await client.post(
        "/v1/products",
        json={"name": "Lamp", "price": 1, "category": "home", "inventory_count": 1},
        headers={**bearer(admin_key), "Origin": SHOP},
    )
    assert created.status_code == 201
    assert created.headers["access-control-allow-origin"] == SHOP
    # Off /v1 (health, the console, the docs): no CORS at all.
    for path in ("/healthz", "/nowhere"):
        read = await client.get(path, headers={"Origin": SHOP})
        assert cors_headers(read) == set(), path
        assert "vary" not in read.headers, path
        asked = await client.options(path, headers=preflight(SHOP))
        assert cors_headers(asked) == set(), path


async def test_preflights_are_not_counted_against_any_quota(
    database_url: str, publishable_key: str
) -> None:
    # A storefront's publishable key: counted in its own bucket (here 2 from this address).
    settings = make_settings(database_url, cors_origins=SHOP, rate_limit_publishable_per_client=2)
    async with running_app(settings) as (_, http):
        for _ in range(5):
            asked = await http.options("/v1/products", headers=preflight(SHOP))
            assert asked.status_code == 204
        read = await http.get("/v1/products", headers={**bearer(publishable_key), "Origin": SHOP})
        assert read.status_code == 200
        assert read.headers["x-ratelimit-remaining"] == "1"
        read = await http.get("/v1/products", headers={**bearer(publishable_key), "Origin": SHOP})
        over = await http.get("/v1/products", headers={**bearer(publishable_key), "Origin": SHOP})
        assert_error(over, 429, "rate_limited", reason="quota_exceeded")
        assert over.headers["access-control-allow-origin"] == SHOP  # the page sees Retry-After


async def test_without_origins_no_answer_has_a_cors_header_and_preflights_are_refused(
    database_url: str, publishable_key: str
) -> None:
    async with running_app(make_settings(database_url)) as (_, http):
        asked = await http.options("/v1/products", headers=preflight(SHOP))
        assert_error(asked, 403, "unauthorized", reason="origin_not_allowed")
        read = await http.get("/v1/products", headers={**bearer(publishable_key), "Origin": SHOP})
        assert read.status_code == 200
        plain = await http.options("/v1/products")  # not a preflight: the routes answer it
        assert_error(plain, 405, "invalid_request", reason="method_not_allowed")
        for response in (asked, read, plain):
            assert cors_headers(response) == set()
        assert "vary" not in read.headers


@pytest.mark.parametrize(
    ("given", "origins"),
    [
        ("", ()),
        ("https://Shop.Example/", ("https://shop.example",)),
        (
            " http://localhost:3000 , https://a.example:8443",
            ("http://localhost:3000", "https://a.example:8443"),
        ),
    ],
)
def test_origins_are_read_as_browsers_send_them(given: str, origins: tuple[str, ...]) -> None:
    assert Settings(_env_file=None, cors_origins=given).cors_origins == origins


@pytest.mark.parametrize(
    "given",
    [
        "*",
        "shop.example",
        "https://shop.example/store",
        "ftp://shop.example",
        "https://a:port",
        "https://u@a",
    ],
)
def test_anything_but_an_origin_is_refused_saying_what_to_write(given: str) -> None:
    with pytest.raises(ValueError, match=r"scheme://host\[:port\]|malformed port"):
        Settings(_env_file=None, cors_origins=given)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("https://*.shop.example", "has a wildcard"),
        ("https://shop.*", "has a wildcard"),
        ("https://shop.example:443", "default port"),
        ("http://shop.example:80", "default port"),
        ("https://a.example, https://café.example", "punycode"),
    ],
)
def test_an_origin_no_browser_sends_is_refused_naming_it(given: str, says: str) -> None:
    """A browser's ``Origin`` never has a wildcard, a scheme's default port or a host outside
    ASCII: such a setting could never match, so it is refused rather than silently unused."""
    with pytest.raises(ValueError, match=says) as refused:
        Settings(_env_file=None, cors_origins=given)
    assert given.split(", ")[-1].lower() in str(refused.value)


def test_an_explicit_port_other_than_the_default_is_kept() -> None:
    origins = Settings(_env_file=None, cors_origins="https://a.example:8443,http://b:443")
    assert origins.cors_origins == ("https://a.example:8443", "http://b:443")


async def test_a_served_instance_answers_a_storefronts_preflight_and_read(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    """End to end, through ``commerce-api serve`` (granian, the server guard, the fast lane):
    a browser's preflight and then its read with a publishable key."""
    account_id = await factories.new_account(db)
    key = (await factories.new_key(db, account_id, role="publishable")).secret
    product_id = await factories.new_product(db, 3)
    settings = {"COMMERCE_CORS_ORIGINS": SHOP, "COMMERCE_SECRET_KEY": "s" * 32}
    with running_server(database_url, tmp_path, settings=settings) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            asked = await http.options(f"/v1/products/{product_id}", headers=preflight(SHOP))
            read = await http.get(
                f"/v1/products/{product_id}", headers={**bearer(key), "Origin": SHOP}
            )
            orders = await http.get("/v1/orders", headers={**bearer(key), "Origin": SHOP})
    assert asked.status_code == 204
    assert asked.headers["access-control-allow-origin"] == SHOP
    assert "GET" in asked.headers["access-control-allow-methods"]
    assert read.status_code == 200
    assert read.json()["inventory_count"] == 3
    assert read.headers["access-control-allow-origin"] == SHOP
    assert read.headers["vary"] == "Origin"
    assert_error(orders, 403, "unauthorized", reason="publishable_key_not_allowed")
    assert orders.headers["access-control-allow-origin"] == SHOP  # the page can read it
