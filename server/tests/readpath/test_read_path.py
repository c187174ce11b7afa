"""The hot read path (``commerce_api.readpath``), on both backends.

What it promises:

- its caches are exact: no answer is ever stale once a write has committed (the catalogue
  snapshot and the key cache are stamped with versions that every write bumps);
- a revocation is seen by the very next request, even when the key is cached;
- the pure-ASGI fast path and the FastAPI routes give byte-identical success bodies, equal to
  ``orjson.dumps`` of what the catalogue service reads through the ORM;
- anything unusual falls through to FastAPI and gets its answer (errors, headers and all); an
  error the endpoint itself raises (an unknown product) is answered by the fast lane, equal to
  FastAPI's answer.

A spy wraps the middleware's two handlers (what it answered, or None when it fell through), the
snapshot's ``page`` and the service's ``list_products`` (the database path), so each test can say
which path served a response — and switch the fast path or the snapshot off to compare.
Every wait is a bounded poll.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from commerce_api.accounts import service as accounts
from commerce_api.accounts.keys import generate_key
from commerce_api.app.fastlane import FastLane
from commerce_api.app.services import Services
from commerce_api.catalog import importing, repository, search_repository
from commerce_api.catalog import service as catalog_service
from commerce_api.core.ids import new_id
from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, page
from commerce_api.http.context import RequestContext
from commerce_api.http.pipeline import Pipeline
from commerce_api.readpath.catalog_cache import CatalogCache
from commerce_api.readpath.service import ReadPath
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.freshness import Versions
from tests.conftest import make_settings
from tests.factories import ADDRESS
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error

# Through PgBouncer too (conftest.py): transaction pooling must not change an answer.
pytestmark = pytest.mark.pgbouncer

SNAPSHOT_TIMEOUT_SECONDS = 10.0
BASE_TIME = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
CATEGORIES = ("books", "toys", "garden", "café 日本")  # the last one percent-encoded
RATE_LIMIT_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")

# The database path's own functions, kept before the spy replaces the module attribute.
DB_LIST_PRODUCTS = catalog_service.list_products
ORIGINAL_CALL = FastLane.__call__
ORIGINAL_RESPOND = Pipeline.respond  # the fast lane's answers (the routes' go another way)
ORIGINAL_PAGE = CatalogCache.page
DB_LIST_CATEGORIES = catalog_service.list_categories
ORIGINAL_CATEGORIES = CatalogCache.categories


# --- the spy -----------------------------------------------------------------------------------


@dataclass
class Spy:
    """What served each request; switches to force the FastAPI route or the database."""

    fast: list[bytes | None] = field(default_factory=list)  # middleware answers (None: fell)
    db_lists: int = 0  # pages the FastAPI route read from the database
    middleware_off: bool = False
    cache_off: bool = False

    def reset(self) -> None:
        self.fast.clear()
        self.db_lists = 0

    @property
    def last_fast(self) -> bytes | None:
        assert self.fast, "the read-path middleware was not consulted"
        return self.fast[-1]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    record = Spy()

    async def spy_call(self: FastLane, scope: Scope, receive: Receive, send: Send) -> Any:
        if record.middleware_off:
            record.fast.append(None)
            return receive
        passed_on = await ORIGINAL_CALL(self, scope, receive, send)
        if passed_on is not None:
            record.fast.append(None)
        return passed_on

    def spy_respond(
        self: Pipeline,
        scope: Scope,
        ctx: RequestContext,
        send: Send,
        route: str,
        started: float,
        response: Response,
    ) -> Any:
        record.fast.append(bytes(response.body))
        return ORIGINAL_RESPOND(self, scope, ctx, send, route, started, response)

    async def spy_page(
        self: CatalogCache,
        versions: Versions | None,
        category: str | None,
        limit: int,
        offset: int,
        sort: str = "created_at",
    ) -> bytes | None:
        if record.cache_off:
            return None
        return await ORIGINAL_PAGE(self, versions, category, limit, offset, sort)

    async def spy_categories(self: CatalogCache, versions: Versions | None) -> bytes | None:
        return None if record.cache_off else await ORIGINAL_CATEGORIES(self, versions)

    async def spy_db_list(conn: AsyncConnection, **arguments: Any) -> dict[str, Any]:
        record.db_lists += 1
        return await DB_LIST_PRODUCTS(conn, **arguments)

    async def spy_db_categories(conn: AsyncConnection) -> dict[str, Any]:
        record.db_lists += 1
        return await DB_LIST_CATEGORIES(conn)

    monkeypatch.setattr(FastLane, "__call__", spy_call)
    monkeypatch.setattr(Pipeline, "respond", spy_respond)
    monkeypatch.setattr(CatalogCache, "page", spy_page)
    monkeypatch.setattr(catalog_service, "list_products", spy_db_list)
    monkeypatch.setattr(CatalogCache, "categories", spy_categories)
    monkeypatch.setattr(catalog_service, "list_categories", spy_db_categories)
    return record


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def settings(database_url: str) -> Settings:
    """The usual test settings, with a quota that the loops below cannot exhaust."""
    return make_settings(database_url, rate_limit_development=1_000_000)


@pytest.fixture
def read_path(services: Services) -> ReadPath:
    return services.read_path


@dataclass(frozen=True, slots=True)
class AccountKeys:
    account_id: str
    keys: list[accounts.CreatedKey]


async def new_account(db: Database, key_count: int = 1) -> AccountKeys:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Read path test")
        keys = [
            await accounts.create_key(conn, "sandbox", account_id=account_id, role="client")
            for _ in range(key_count)
        ]
    return AccountKeys(account_id, keys)


def product_row(index: int, category: str, created_at: datetime) -> dict[str, Any]:
    names = [
        f"Item {index}",
        f'Quoted "{index}" \\ back/slash',
        f"Ünïcödé {index} 😀 \u2028 line-sep",
        f"Tab\tand <html> & {index}",
    ]
    return {
        "id": new_id("prod"),
        "name": names[index % len(names)],
        "description": "" if index % 3 else f"Line one\nline two {index}",
        "price_minor": [0, 100, 1999, 5, 123_456_789, 1][index % 6],
        "category": category,
        "inventory_count": 10 + index,
        "created_at": created_at,
        "updated_at": created_at + timedelta(minutes=index),
    }


async def seed(db: Database, count: int = 30) -> list[str]:
    """``count`` products over three categories; some share a created_at (ties by id), some
    have sub-millisecond parts, and names need JSON escapes."""
    rows = [
        product_row(
            index,
            CATEGORIES[index % len(CATEGORIES)],
            BASE_TIME + timedelta(seconds=index // 3, microseconds=123_456 * (index % 2)),
        )
        for index in range(count)
    ]
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    return [str(row["id"]) for row in rows]


async def db_list(
    db: Database, category: str | None, limit: int, offset: int, sort: str = "created_at"
) -> bytes:
    """The list body as the database path renders it."""
    async with db.read() as conn:
        page = await DB_LIST_PRODUCTS(
            conn,
            category=category,
            limit=limit,
            offset=offset,
            sort=sort,  # type: ignore[arg-type]
        )
    return orjson.dumps(page)


async def db_detail(db: Database, product_id: str) -> bytes:
    async with db.read() as conn:
        return orjson.dumps(await catalog_service.get_product(conn, product_id))


async def wait_for_snapshot(read_path: ReadPath) -> str:
    """Until the snapshot is current (asking for a page starts a rebuild when it is not)."""
    deadline = time.monotonic() + SNAPSHOT_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        versions = await read_path.tracker.current()
        assert versions is not None
        assert versions.catalog is not None
        if await read_path.catalog.page(versions, None, 1, 0) is not None:
            return versions.catalog
        await asyncio.sleep(0.005)
    raise AssertionError(f"the snapshot was not current within {SNAPSHOT_TIMEOUT_SECONDS} s")


def list_url(
    category: str | None = None,
    limit: int | None = None,
    offset: int | None = None,
    sort: str | None = None,
) -> str:
    given = (("category", category), ("limit", limit), ("offset", offset), ("sort", sort))
    params = [f"{name}={quote(str(value), safe='')}" for name, value in given if value is not None]
    return "/v1/products" + ("?" + "&".join(params) if params else "")


def assert_common_headers(response: httpx.Response) -> None:
    assert response.headers.get("x-request-id", "").startswith("req_"), response.headers
    for name in RATE_LIMIT_HEADERS:
        assert response.headers.get(name), f"{name} missing: {response.headers}"


async def get_ok(client: httpx.AsyncClient, url: str, key: str) -> bytes:
    response = await client.get(url, headers=bearer(key))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert_common_headers(response)
    return response.content


# --- byte-identical bodies ---------------------------------------------------------------------

LIST_CASES: list[tuple[str | None, int | None, int | None]] = [
    (None, None, None),  # the defaults: limit 20, offset 0
    (None, 5, 0),
    (None, 5, 25),
    (None, 20, 29),  # the last item
    (None, 20, 30),  # exactly at the end
    (None, 10, 500),  # past the end
    (None, 101, 3),  # clamped to 100
    (None, 1000, 0),  # clamped to 100
    (None, 10**15, 0),  # the largest limit the fast path reads; clamped
    (None, None, 2**53 - 1),  # the largest offset
    ("books", 3, 1),
    ("toys", 100, 0),
    ("garden", None, None),
    ("garden", 4, 8),
    ("café 日本", 2, 1),
    ("café 日本", None, None),
    ("nope", 20, 0),  # unknown category
    ("books", 20, 2**53 - 1),
]


async def test_list_bodies_are_byte_identical_on_every_path(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    await seed(services.db)
    await wait_for_snapshot(services.read_path)
    for category, limit, offset in LIST_CASES:
        url = list_url(category, limit, offset)
        expected = await db_list(
            services.db,
            category,
            min(limit if limit is not None else DEFAULT_PAGE_SIZE, 100),
            offset or 0,
        )
        # 1. the middleware, from the snapshot
        spy.reset()
        fast = await get_ok(client, url, client_key)
        assert spy.last_fast is not None, f"{url} was not answered by the fast path"
        assert fast == expected, url
        # 2. the FastAPI route, from the snapshot
        spy.reset()
        spy.middleware_off = True
        assert await get_ok(client, url, client_key) == expected, url
        assert spy.db_lists == 0, "the snapshot is current: the route should use it"
        # 3. the FastAPI route, from the database
        spy.cache_off = True
        assert await get_ok(client, url, client_key) == expected, url
        assert spy.db_lists == 1
        spy.middleware_off = spy.cache_off = False


SORTS = ("created_at", "-created_at", "price", "-price", "name")
SORTED_CASES: list[tuple[str | None, int | None, int | None]] = [
    (None, None, None),
    (None, 7, 3),
    (None, 20, 25),  # the last page, short
    (None, 20, 29),  # the last item
    (None, 10, 500),  # past the end
    ("books", 3, 1),
    ("café 日本", None, None),
    ("nope", 20, 0),
]


@pytest.mark.parametrize("sort", SORTS)
async def test_sorted_list_bodies_are_byte_identical_on_every_path(
    sort: str, client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    """Each sort's pages: from the snapshot (through the fast lane and the route) and from
    the database, byte for byte."""
    await seed(services.db)
    await wait_for_snapshot(services.read_path)
    for category, limit, offset in SORTED_CASES:
        url = list_url(category, limit, offset, sort)
        expected = await db_list(
            services.db, category, limit or DEFAULT_PAGE_SIZE, offset or 0, sort
        )
        spy.reset()
        assert await get_ok(client, url, client_key) == expected, url
        assert spy.last_fast is not None, f"{url}: not from the fast lane"
        assert spy.db_lists == 0, f"{url}: not from the snapshot"
        spy.middleware_off = True
        assert await get_ok(client, url, client_key) == expected, url
        spy.cache_off = True
        assert await get_ok(client, url, client_key) == expected, url
        assert spy.db_lists == 1
        spy.middleware_off = spy.cache_off = False


SEARCHES = [
    "q=item",
    "q=ITEM&sort=-price&limit=3&offset=2",
    "q=line%20two&category=books",
    "q=%C3%BCn%C3%AFc%C3%B6d%C3%A9&sort=name",  # ünïcödé
    "q=item&offset=500",  # past the end: the total still counted
    "q=%22",  # no word
]


async def test_search_bodies_are_the_same_on_both_lanes(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    """A search reads the database's index, through the fast lane (here before the snapshot
    is built: its page from the database)."""
    await seed(services.db)
    for query in SEARCHES:
        url = f"/v1/products?{query}"
        spy.reset()
        fast = await get_ok(client, url, client_key)
        assert spy.last_fast is not None, f"{url} was not answered by the fast lane"
        assert spy.db_lists == 0
        spy.middleware_off = True
        assert await get_ok(client, url, client_key) == fast, url
        spy.middleware_off = False
    every = orjson.loads(await get_ok(client, "/v1/products?q=item&limit=100", client_key))
    assert len(every["data"]) == every["pagination"]["total"] == 8  # "Item <n>": every 4th
    past = orjson.loads(await get_ok(client, "/v1/products?q=item&offset=500", client_key))
    assert past["pagination"] == {"total": 8, "limit": 20, "offset": 500, "has_more": False}
    unicode = orjson.loads(await get_ok(client, f"/v1/products?{SEARCHES[3]}", client_key))
    assert unicode["pagination"]["total"] == 7  # "Ünïcödé <n>": every 4th from the 3rd


SNAPSHOT_SEARCHES: list[tuple[str, str | None, int, int]] = [
    ("item", None, 20, 0),
    ("item", None, 3, 2),
    ("item", None, 3, 7),  # the last one
    ("item", None, 20, 500),  # past the end: the total still counted
    ("line two", "books", 20, 0),
    ("ünïcödé", None, 2, 1),
    ("ünïcödé", "garden", 20, 0),
    ("item", "nope", 20, 0),  # unknown category
    ("nothing matches this", None, 20, 0),
]


@pytest.mark.parametrize("sort", SORTS)
async def test_a_search_from_the_snapshot_is_the_databases_page_byte_for_byte(
    sort: str, client: httpx.AsyncClient, client_key: str, services: Services
) -> None:
    """With a current snapshot a search takes only the matching ids from the index and pages
    them in the snapshot's orders (a deep page costs what the first does): the very page the
    database's own ``ORDER BY``, ``LIMIT`` and ``OFFSET`` give."""
    await seed(services.db)
    await wait_for_snapshot(services.read_path)
    read_path = services.read_path
    versions = await read_path.tracker.current()
    for q, category, limit, offset in SNAPSHOT_SEARCHES:
        words = search_repository.search_words(q)
        total, rows = await read_path.reader.search(words, category, sort, limit, offset)
        expected = orjson.dumps(
            page([catalog_service.list_item(row) for row in rows], total, limit, offset)
        )
        matched = await read_path.reader.search_ids(words)
        from_snapshot = await read_path.catalog.search_page(
            versions, matched, category, sort, limit, offset
        )
        assert from_snapshot == expected, (q, category, sort, limit, offset)


async def test_a_search_with_a_current_snapshot_reads_no_page_from_the_database(
    client: httpx.AsyncClient,
    client_key: str,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await seed(services.db)
    await wait_for_snapshot(services.read_path)

    async def no_page(*_args: object) -> None:
        raise AssertionError("a page read from the database")

    monkeypatch.setattr(services.read_path.reader, "search", no_page)
    found = orjson.loads(await get_ok(client, "/v1/products?q=item&sort=-price", client_key))
    assert found["pagination"]["total"] == 8


async def test_category_bodies_are_byte_identical_on_every_path(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    ids = await seed(services.db)
    async with services.db.write() as conn:  # an archived product leaves its category's count
        await repository.archive(conn, ids[0], BASE_TIME)
    await wait_for_snapshot(services.read_path)
    async with services.db.read() as conn:
        expected = orjson.dumps(await DB_LIST_CATEGORIES(conn))
    spy.reset()
    assert await get_ok(client, "/v1/categories", client_key) == expected
    assert spy.last_fast is not None
    assert spy.db_lists == 0
    spy.middleware_off = True
    assert await get_ok(client, "/v1/categories", client_key) == expected
    spy.cache_off = True
    assert await get_ok(client, "/v1/categories", client_key) == expected
    assert spy.db_lists == 1
    assert orjson.loads(expected) == {
        "data": [
            {"name": "books", "product_count": 7},
            {"name": "café 日本", "product_count": 7},
            {"name": "garden", "product_count": 7},
            {"name": "toys", "product_count": 8},
        ]
    }


async def test_detail_bodies_are_byte_identical_on_every_path(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    ids = await seed(services.db, 12)
    for product_id in ids:
        expected = await db_detail(services.db, product_id)
        spy.reset()
        fast = await get_ok(client, f"/v1/products/{product_id}", client_key)
        assert spy.last_fast is not None, "the detail was not answered by the fast path"
        assert fast == expected
        spy.middleware_off = True
        assert await get_ok(client, f"/v1/products/{product_id}", client_key) == expected
        spy.middleware_off = False


# --- read-your-writes --------------------------------------------------------------------------


async def test_every_http_write_is_seen_by_the_very_next_list(
    client: httpx.AsyncClient, client_key: str, admin_key: str, services: Services, spy: Spy
) -> None:
    db = services.db
    active = await seed(db, 9)
    for round_ in range(30):
        if round_ % 3 == 0:  # half the time the write lands on a warm, current snapshot
            await wait_for_snapshot(services.read_path)
        operation = round_ % 6
        target = active[round_ % len(active)]
        category = CATEGORIES[round_ % len(CATEGORIES)]
        marker = f"Edit {round_}"
        if operation == 0:
            response = await client.post(
                "/v1/products",
                json={
                    "name": marker,
                    "description": "",
                    "price": 3.5,
                    "category": category,
                    "inventory_count": 4,
                },
                headers=bearer(admin_key),
            )
            assert response.status_code == 201, response.text
            target = response.json()["id"]
            active.append(target)
        elif operation == 1:
            response = await client.patch(
                f"/v1/products/{target}", json={"name": marker}, headers=bearer(admin_key)
            )
        elif operation == 2:
            response = await client.patch(
                f"/v1/products/{target}", json={"price": 100 + round_}, headers=bearer(admin_key)
            )
        elif operation == 3:
            response = await client.patch(
                f"/v1/products/{target}", json={"category": category}, headers=bearer(admin_key)
            )
        elif operation == 4:
            response = await client.delete(f"/v1/products/{target}", headers=bearer(admin_key))
            assert response.status_code == 204, response.text
            active.remove(target)
        else:
            response = await client.patch(
                f"/v1/products/{target}",
                json={"name": marker, "price": 0.01, "category": category},
                headers=bearer(admin_key),
            )
        assert response.status_code in {200, 201, 204}, response.text

        spy.reset()
        page = await get_ok(client, list_url(limit=100), client_key)
        assert page == await db_list(db, None, 100, 0), f"stale list after round {round_}"
        by_category = await get_ok(client, list_url(category=category, limit=100), client_key)
        assert by_category == await db_list(db, category, 100, 0), f"round {round_}"
        listed = {item["id"]: item for item in orjson.loads(page)["data"]}
        if operation == 4:
            assert target not in listed
        else:
            assert target in listed
        if operation in {0, 1, 5}:
            assert listed[target]["name"] == marker
        if operation in {3, 5}:
            assert listed[target]["category"] == category
        detail = await client.get(f"/v1/products/{target}", headers=bearer(client_key))
        if operation == 4:
            assert_error(detail, 404, "not_found", "id")
        else:
            assert detail.status_code == 200, detail.text
            assert detail.content == await db_detail(db, target)
        # and once the snapshot has caught up, the fast path serves the same page
        await wait_for_snapshot(services.read_path)
        spy.reset()
        assert await get_ok(client, list_url(limit=100), client_key) == page
        assert spy.last_fast is not None


async def test_imports_and_raw_inserts_are_seen_by_the_very_next_list(
    client: httpx.AsyncClient, client_key: str, services: Services, db: Database
) -> None:
    """Writes through another connection pool (a separate Database, as the CLI would have)."""
    ids = await seed(db, 6)
    for round_ in range(10):
        await wait_for_snapshot(services.read_path)
        if round_ % 2 == 0:
            async with db.write() as conn:
                result = await importing.import_products(
                    conn,
                    None,
                    [
                        {
                            "name": f"Imported {round_}",
                            "description": "",
                            "price": 1.25,
                            "category": "imported",
                            "inventory_count": 1,
                        },
                        {"id": ids[round_ % len(ids)], "name": f"Renamed {round_}"},
                    ],
                )
            assert (result.created, result.updated) == (1, 1)
            expected_names = {f"Imported {round_}", f"Renamed {round_}"}
        else:
            row = product_row(round_, "imported", datetime.now(UTC))
            row["name"] = f"Inserted {round_}"
            async with db.write() as conn:
                await repository.insert_many(conn, [row])
            expected_names = {f"Inserted {round_}"}
        page = await get_ok(client, list_url(limit=100), client_key)
        assert page == await db_list(db, None, 100, 0), f"stale list after round {round_}"
        names = {item["name"] for item in orjson.loads(page)["data"]}
        assert expected_names <= names
        imported = await get_ok(client, list_url(category="imported", limit=100), client_key)
        assert imported == await db_list(db, "imported", 100, 0)


async def test_detail_shows_the_stock_left_after_each_order(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    (product_id,) = await seed(services.db, 1)
    stock = orjson.loads(await get_ok(client, f"/v1/products/{product_id}", client_key))[
        "inventory_count"
    ]
    for quantity in (1, 2, 3, 1, 1):
        response = await client.post(
            "/v1/orders",
            json={
                "customer_id": "cus_1",
                "items": [{"product_id": product_id, "quantity": quantity}],
                "shipping_address": ADDRESS,
            },
            headers=bearer(client_key),
        )
        assert response.status_code == 201, response.text
        stock -= quantity
        spy.reset()
        body = await get_ok(client, f"/v1/products/{product_id}", client_key)
        assert spy.last_fast is not None
        assert orjson.loads(body)["inventory_count"] == stock
        assert body == await db_detail(services.db, product_id)


# --- revocation --------------------------------------------------------------------------------


async def test_revocation_is_immediate_even_for_a_cached_key(
    client: httpx.AsyncClient, services: Services, db: Database
) -> None:
    (product_id,) = await seed(db, 1)
    for round_ in range(5):
        account = await new_account(db, 2)
        doomed, sibling = account.keys
        for _ in range(5):
            await get_ok(client, "/v1/products", doomed.secret)
        versions = await services.read_path.tracker.current()
        assert versions is not None
        assert services.read_path.keys.get(doomed.secret, versions.auth) is not None, (
            "the key should be in the key cache now"
        )
        # revoke through a different pool (the app's own would do as well)
        writer = db if round_ % 2 == 0 else services.db
        async with writer.write() as conn:
            assert await accounts.revoke_key(conn, doomed.id)
        urls = ["/v1/products", f"/v1/products/{product_id}", "/v1/orders"]
        first = urls[round_ % len(urls)]
        for url in [first, *urls]:
            response = await client.get(url, headers=bearer(doomed.secret))
            assert_error(response, 401, "unauthorized", "Authorization")
            assert response.json()["error"]["message"] == "Invalid API key (unknown or revoked)."
            assert_common_headers(response)
        await get_ok(client, "/v1/products", sibling.secret)
        await get_ok(client, f"/v1/products/{product_id}", sibling.secret)


# --- fall-through ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unusual:
    url: str
    status: int
    code: str | None  # None: a success
    details: str | None = None
    auth: str = "client"  # client | none | malformed | garbage | unknown
    endpoint_error: bool = False  # raised by the endpoint: the fast lane answers it (once)


UNUSUAL = [
    Unusual("/v1/products?limit=0", 400, "invalid_request", "limit"),
    Unusual("/v1/products?limit=abc", 400, "invalid_request", "limit"),
    Unusual("/v1/products?limit", 400, "invalid_request", "limit"),
    Unusual("/v1/products?limt=5", 400, "invalid_request", "limt"),
    Unusual("/v1/products?limit=1&limit=2", 200, None),  # FastAPI takes the last value
    Unusual("/v1/products?category=", 400, "invalid_request", "category"),
    Unusual("/v1/products?category=a%01b", 400, "invalid_request", "category"),
    Unusual("/v1/products?category=%C2%A0books", 200, None),  # not printable: FastAPI's
    Unusual(f"/v1/products?category={'c' * 101}", 400, "invalid_request", "category"),
    Unusual("/v1/products?offset=-1", 400, "invalid_request", "offset"),
    Unusual("/v1/products?offset=9007199254740992", 400, "invalid_request", "offset"),
    Unusual("/v1/products?limit=5&", 200, None),
    Unusual("/v1/products", 401, "unauthorized", "Authorization", auth="none"),
    Unusual("/v1/products", 401, "unauthorized", "Authorization", auth="malformed"),
    Unusual("/v1/products", 401, "unauthorized", "Authorization", auth="garbage"),
    Unusual("/v1/products", 401, "unauthorized", "Authorization", auth="unknown"),
    Unusual("/v1/products?limit=0", 401, "unauthorized", "Authorization", auth="none"),
    Unusual("/v1/products/{id}", 401, "unauthorized", "Authorization", auth="unknown"),
    Unusual("/v1/products/prod_unknown", 404, "not_found", "id", endpoint_error=True),
    Unusual("/v1/products/x%00", 404, "not_found", "id", endpoint_error=True),
    Unusual("/v1/products/{id}?expand=1", 400, "invalid_request", "expand"),
    Unusual("/v1/products/", 404, "not_found", "path"),
]


def auth_headers(kind: str, client_key: str) -> dict[str, str]:
    if kind == "client":
        return bearer(client_key)
    if kind == "none":
        return {}
    if kind == "malformed":
        return {"Authorization": "Basic abc"}
    if kind == "garbage":
        return bearer("not-a-key")
    assert kind == "unknown"
    return bearer(generate_key("sandbox").secret)


@pytest.mark.parametrize("case", UNUSUAL, ids=lambda case: f"{case.auth}:{case.url[:40]}")
async def test_unusual_requests_fall_through_to_fastapi(
    case: Unusual, client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    (product_id,) = await seed(services.db, 1)
    await wait_for_snapshot(services.read_path)
    url = case.url.replace("{id}", product_id)
    headers = auth_headers(case.auth, client_key)

    spy.reset()
    response = await client.get(url, headers=headers)
    if case.endpoint_error:  # the endpoint ran: its error is answered where it ran
        assert spy.fast == [response.content], "the fast path must answer its endpoint's error"
    elif case.code is not None:  # refused before the endpoint: the routes' to answer
        assert spy.fast == [] or spy.fast == [None], "the fast path must not answer this"
    assert_common_headers(response)
    if case.code is None:
        assert response.status_code == 200, response.text
    else:
        assert_error(response, case.status, case.code, case.details)

    spy.middleware_off = True
    reference = await client.get(url, headers=headers)
    assert_common_headers(reference)
    assert (reference.status_code, reference.content) == (response.status_code, response.content)
    if case.status == 401:
        assert response.headers.get("www-authenticate") == "Bearer"


async def test_fast_path_successes_carry_the_common_headers(
    client: httpx.AsyncClient, client_key: str, services: Services, spy: Spy
) -> None:
    (product_id,) = await seed(services.db, 1)
    await wait_for_snapshot(services.read_path)
    remaining: list[int] = []
    for url in [
        "/v1/products",
        "/v1/products?category=books&limit=2",
        f"/v1/products/{product_id}",
    ]:
        spy.reset()
        response = await client.get(url, headers=bearer(client_key))
        assert response.status_code == 200, response.text
        assert spy.last_fast is not None, f"{url} was not answered by the fast path"
        assert_common_headers(response)
        assert response.headers["content-length"] == str(len(response.content))
        remaining.append(int(response.headers["x-ratelimit-remaining"]))
    # fast-path requests count against the quota
    assert remaining == sorted(remaining, reverse=True)
    assert len(set(remaining)) == len(remaining)


# --- stale snapshots ---------------------------------------------------------------------------


async def test_a_change_is_applied_to_the_index_not_rebuilt(
    client: httpx.AsyncClient, client_key: str, services: Services, db: Database, spy: Spy
) -> None:
    """Each catalogue write moves the change counter; the next read applies the products it
    wrote to the same index (no build, no database page) and serves the new page."""
    ids = await seed(db, 8)
    read_path = services.read_path
    await wait_for_snapshot(read_path)
    index = read_path.catalog._index
    assert index is not None
    builds = 0

    def built() -> None:
        nonlocal builds
        builds += 1

    read_path.catalog.on_rebuilt = built
    for round_ in range(5):
        async with db.write() as conn:
            changed = await repository.update_active(
                conn, ids[round_], {"price_minor": 100_000 + round_, "name": f"Changed {round_}"}
            )
            assert changed
        versions = await read_path.tracker.current()
        assert versions is not None
        assert versions.catalog is not None
        spy.reset()
        category = None if round_ % 2 == 0 else "books"
        for sort in ("created_at", "-price", "name"):
            body = await get_ok(client, list_url(category=category, sort=sort), client_key)
            assert spy.db_lists == 0, "the index applies the change: no database page"
            assert body == await db_list(db, category, 20, 0, sort), (round_, sort)
        assert read_path.catalog._index is index
        assert index.applied == int(versions.catalog)
    assert builds == 0


# --- concurrent readers and writers ------------------------------------------------------------


async def test_concurrent_readers_never_see_a_page_older_than_the_last_commit(
    client: httpx.AsyncClient, client_key: str, admin_key: str, services: Services
) -> None:
    """A writer renames a product ``Rev <n>`` again and again; readers on both endpoints run
    alongside. A read that starts after rename ``n`` was acknowledged must show ``n`` or later,
    whether it was served from the snapshot (possibly mid-rebuild) or the database."""
    (product_id,) = await seed(services.db, 1)
    committed = -1
    done = False
    checked = 0

    async def writer() -> None:
        nonlocal committed, done
        try:
            for revision in range(40):
                # A 503 is a write the database did not finish within its deadline — on a
                # machine whose two cores run three test workers, the readers' load can starve
                # it, and the reads then refuse for ``UNREACHABLE_SECONDS`` — so it is sent
                # again (bounded). Whether or not it committed, a reader's floor only moves on
                # a 200, so the check below stays exact.
                for _attempt in range(8):
                    response = await client.patch(
                        f"/v1/products/{product_id}",
                        json={"name": f"Rev {revision}"},
                        headers=bearer(admin_key),
                    )
                    if response.status_code != 503:
                        break
                    await asyncio.sleep(0.5)
                assert response.status_code == 200, response.text
                committed = revision
                await asyncio.sleep(0)
        finally:
            done = True

    async def reader(detail: bool) -> None:
        nonlocal checked
        for _ in range(2000):  # bounded; stops as soon as the writer is done
            if done:
                return
            floor = committed
            url = f"/v1/products/{product_id}" if detail else "/v1/products"
            body = orjson.loads(await get_ok_when_reachable(client, url, client_key))
            name = body["name"] if detail else body["data"][0]["name"]
            seen = -1 if not name.startswith("Rev ") else int(name.removeprefix("Rev "))
            assert seen >= floor, f"saw revision {seen} after {floor} was committed"
            checked += 1

    await asyncio.gather(writer(), reader(False), reader(False), reader(True))
    assert committed == 39
    assert checked > 0


async def get_ok_when_reachable(client: httpx.AsyncClient, url: str, key: str) -> bytes:
    """``get_ok``, sent again (bounded) after a 503: three test workers on two cores can starve
    a database wait past its deadline, and the next ones then refuse for
    ``UNREACHABLE_SECONDS``. What is checked is the page's freshness, not the deadlines (their
    own tests are in storage/)."""
    for _attempt in range(8):
        response = await client.get(url, headers=bearer(key))
        if response.status_code != 503:
            break
        await asyncio.sleep(0.5)
    assert response.status_code == 200, response.text
    return response.content


# --- memory ------------------------------------------------------------------------------------


async def test_the_index_and_the_caches_hold_right_sized_bytes(
    db: Database, read_path: ReadPath, client: httpx.AsyncClient
) -> None:
    """orjson (>= 3.12) allocates >= 4 KiB for every result, however short; kept as they come,
    100,000 list items took ~400 MB. What the caches keep must be allocated at its size."""
    ids = await seed(db, 600)
    key = (await new_account(db)).keys[0].secret
    await wait_for_snapshot(read_path)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        read_path.catalog._forget()  # build a fresh one while tracing
        await wait_for_snapshot(read_path)
        for offset in range(0, 600, 100):  # every item rendered and kept
            await get_ok(client, f"/v1/products?limit=100&offset={offset}", key)
        for product_id in ids[:200]:
            await get_ok(client, f"/v1/products/{product_id}", key)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    index = read_path.catalog._index
    assert index is not None
    assert len(index.orders[None, "created_at"]) == 600
    # Items are ~170 bytes. At 4 KiB each, the 600 items (and on SQLite the 200 cached product
    # bodies) would keep more than 2.4 MB; right-sized, with the drivers' own caches warming
    # up on the side, well under 1.2 MB.
    assert kept < 1_200_000, kept


async def test_concurrent_detail_reads_each_get_their_own_product(
    db: Database, client: httpx.AsyncClient
) -> None:
    """On PostgreSQL the reads waiting at the same moment share one query (rounds.py): every
    request must still get its own product, an unknown id its 404, and current stock."""
    ids = await seed(db, 12)
    key = (await new_account(db)).keys[0].secret
    wanted = [ids[i % len(ids)] for i in range(60)] + [new_id("prod")] * 3
    responses = await asyncio.gather(
        *(client.get(f"/v1/products/{product_id}", headers=bearer(key)) for product_id in wanted)
    )
    for product_id, response in zip(wanted, responses, strict=True):
        if product_id in ids:
            assert response.status_code == 200, response.text
            assert response.content == await db_detail(db, product_id)
        else:
            assert_error(response, 404, "not_found", "id")


# --- the fast lane's memoised parsing ----------------------------------------------------------


async def test_concurrent_reads_each_get_their_own_context_and_caller(
    app: FastAPI, client: httpx.AsyncClient, make_key: Any, services: Services
) -> None:
    """The parsed query is memoised and shared by every request with the same query string:
    the arguments of one request must never reach another's endpoint (a first version filled
    the shared dict in, and a request whose key lookup awaited got the next one's context)."""
    await seed(services.db, 3)
    await wait_for_snapshot(services.read_path)
    keys = [await make_key() for _ in range(8)]
    seen: list[tuple[str, str]] = []
    lane = app.fast_lane  # type: ignore[attr-defined]
    assert isinstance(lane, FastLane)
    (route,) = [r for r in lane.routes if r.template == "/v1/products"]
    original = route.endpoint

    async def recording(**arguments: Any) -> Response:
        seen.append((arguments["ctx"].request_id, arguments["_principal"].key_id))
        return await original(**arguments)

    object.__setattr__(route, "endpoint", recording)
    try:
        responses = await asyncio.gather(
            *(client.get("/v1/products?limit=5", headers=bearer(key)) for key in keys)
        )
    finally:
        object.__setattr__(route, "endpoint", original)
    assert [response.status_code for response in responses] == [200] * len(keys)
    request_ids = {response.headers["x-request-id"] for response in responses}
    assert {request_id for request_id, _ in seen} == request_ids
    assert len({key_id for _, key_id in seen}) == len(keys)
    parsed = route.query(b"limit=5")
    assert parsed is not None
    assert set(parsed[0]) == {"limit", "offset", "category", "q", "sort"}
