"""Concurrent orders against real ``commerce-api serve`` processes: stock is never oversold.

docs/design.md ("Orders"): creating an order reserves inventory atomically; it never goes below
zero, even under concurrent requests on several processes; not enough stock → 409. And
("Idempotency"): the same key and request replay the stored response; the first one still
running → 409.

Two servers run on one database per backend (PostgreSQL, and SQLite: two processes on one WAL
file) for the whole module. Each test makes its own account and products, and counts orders
and events of that account only, so tests don't see each other's data. ``spread`` says over
how many of the two processes a test's requests are spread (alternating between the ports).
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from commerce_api.storage.db import Database
from commerce_api.storage.tables import events, order_items, orders
from tests import factories
from tests.conftest import empty_postgres
from tests.helpers import bearer
from tests.pgbouncer_process import RunningPgBouncer
from tests.server_process import RunningServer, running_servers

# One worker: the module's servers (``cluster``) start once per backend.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("order-concurrency")]

REQUEST_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Cluster:
    """Two server processes sharing one database."""

    database_url: str
    servers: list[RunningServer]


@pytest.fixture(
    scope="module",
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("pgbouncer", marks=pytest.mark.postgresql),
    ],
)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp(f"order-concurrency-{request.param}")
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, workdir / "commerce.db")
        database_url = f"sqlite:///{workdir / 'commerce.db'}"
    else:
        # The session's migrated database, emptied first: the servers read what is there at
        # start (a webhook endpoint another test of this worker left, its secret sealed with
        # another key, stops them); each test then scopes its checks to an account and
        # products of its own.
        database_url = request.getfixturevalue("postgres_url")
        asyncio.run(empty_postgres(database_url))
    settings = {}
    if request.param == "pgbouncer":  # the servers through PgBouncer, listening direct
        pgbouncer: RunningPgBouncer = request.getfixturevalue("pgbouncer")
        settings["COMMERCE_DATABASE_LISTEN_URL"] = database_url
        database_url = pgbouncer.url_for(database_url)
    with running_servers(database_url, workdir, 2, settings=settings) as servers:
        yield Cluster(database_url, servers)


@pytest.fixture
async def cluster_db(cluster: Cluster) -> AsyncIterator[Database]:
    database = Database(cluster.database_url)
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_SECONDS, limits=limits) as client:
        yield client


# --- set-up and checks, straight on the database ------------------------------------------------


async def new_client_key(db: Database) -> tuple[str, str]:
    """A new account and a client key for it: (account id, secret)."""
    customer = await factories.new_customer(db, "Concurrency test")
    return customer.account_id, customer.secret


async def new_products(db: Database, *stocks: int) -> list[str]:
    return await factories.new_products(db, *stocks, price_minor=1250, category="concurrency")


async def order_count(db: Database, account_id: str) -> int:
    async with db.read() as conn:
        count = await conn.scalar(
            select(func.count()).select_from(orders).where(orders.c.account_id == account_id)
        )
    return int(count or 0)


async def created_event_count(db: Database, account_id: str) -> int:
    async with db.read() as conn:
        count = await conn.scalar(
            select(func.count())
            .select_from(events)
            .where(events.c.account_id == account_id, events.c.type == "order.created")
        )
    return int(count or 0)


async def units_ordered(db: Database, product_id: str) -> int:
    async with db.read() as conn:
        total = await conn.scalar(
            select(func.coalesce(func.sum(order_items.c.quantity), 0)).where(
                order_items.c.product_id == product_id
            )
        )
    return int(total or 0)


# --- requests -----------------------------------------------------------------------------------


def order_body(*product_ids: str) -> dict[str, Any]:
    items = [(product_id, 1) for product_id in product_ids]
    return factories.order_body(*items, customer_id="cus_concurrency")


def base_urls(cluster: Cluster, spread: int) -> list[str]:
    return [server.base_url for server in cluster.servers[:spread]]


async def post_orders(
    http: httpx.AsyncClient,
    urls: Sequence[str],
    key: str,
    body: dict[str, Any],
    idempotency_keys: Sequence[str | None],
) -> list[httpx.Response]:
    """One POST /v1/orders per idempotency key (None: no header), all at once, alternating
    between ``urls``."""

    async def post(index: int, idempotency_key: str | None) -> httpx.Response:
        headers = bearer(key)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return await http.post(f"{urls[index % len(urls)]}/v1/orders", json=body, headers=headers)

    return list(await asyncio.gather(*(post(i, k) for i, k in enumerate(idempotency_keys))))


async def inventory(http: httpx.AsyncClient, url: str, key: str, product_id: str) -> int:
    response = await http.get(f"{url}/v1/products/{product_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    count: int = response.json()["inventory_count"]
    return count


def statuses(responses: Sequence[httpx.Response]) -> Counter[int]:
    return Counter(response.status_code for response in responses)


def assert_out_of_stock(response: httpx.Response, details: str) -> None:
    assert response.status_code == 409, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"code", "reason", "message", "details", "problems"}
    assert error["code"] == "invalid_request"
    assert error["reason"] == "insufficient_stock"
    assert isinstance(error["message"], str)
    assert error["message"]
    assert error["details"] == details
    assert error["problems"] == [
        {"parameter": details, "reason": "insufficient_stock", "message": error["message"]}
    ]


# --- the tests ----------------------------------------------------------------------------------

SPREAD = pytest.mark.parametrize("spread", [1, 2], ids=["one-process", "two-processes"])


@SPREAD
async def test_concurrent_orders_never_oversell(
    cluster: Cluster, cluster_db: Database, http: httpx.AsyncClient, spread: int
) -> None:
    """32 orders for 1 unit each, all at once, for a product with 5 left: 5 win, 27 get 409."""
    account_id, key = await new_client_key(cluster_db)
    (product_id,) = await new_products(cluster_db, 5)
    # Half with an Idempotency-Key (each its own), half without: both paths race.
    keys = [str(uuid.uuid4()) if i % 2 == 0 else None for i in range(32)]
    urls = base_urls(cluster, spread)

    responses = await post_orders(http, urls, key, order_body(product_id), keys)

    assert statuses(responses) == {201: 5, 409: 27}, [r.text for r in responses]
    created = [response.json() for response in responses if response.status_code == 201]
    assert len({order["id"] for order in created}) == 5
    for order in created:
        assert order["status"] == "pending"
        assert order["items"] == [
            {
                "product_id": product_id,
                "name": f"Widget {product_id[-6:]}",
                "quantity": 1,
                "unit_price": 12.5,
            }
        ]
    for response in responses:
        if response.status_code == 409:
            assert_out_of_stock(response, "items[0].quantity")
    for url in urls:
        assert await inventory(http, url, key, product_id) == 0
    assert await order_count(cluster_db, account_id) == 5
    assert await created_event_count(cluster_db, account_id) == 5
    assert await units_ordered(cluster_db, product_id) == 5


@SPREAD
async def test_concurrent_retries_with_one_idempotency_key_make_one_order(
    cluster: Cluster, cluster_db: Database, http: httpx.AsyncClient, spread: int
) -> None:
    """8 retries of one request at once: one order; the others replay it or are told to wait."""
    account_id, key = await new_client_key(cluster_db)
    (product_id,) = await new_products(cluster_db, 5)
    body = order_body(product_id)
    idempotency_key = str(uuid.uuid4())
    urls = base_urls(cluster, spread)

    responses = await post_orders(http, urls, key, body, [idempotency_key] * 8)

    order_ids = set()
    originals = 0
    for response in responses:
        if response.status_code == 201:
            order_ids.add(response.json()["id"])
            assert response.headers["location"] == f"/v1/orders/{response.json()['id']}"
            if response.headers.get("idempotent-replayed") != "true":
                originals += 1
        else:
            assert response.status_code == 409, response.text
            error = response.json()["error"]
            assert error["code"] == "invalid_request"
            assert error["details"] == "Idempotency-Key"
            assert "still being processed" in error["message"]
    assert originals == 1, [(r.status_code, dict(r.headers), r.text) for r in responses]
    assert len(order_ids) == 1
    (order_id,) = order_ids

    again = await post_orders(http, urls[-1:], key, body, [idempotency_key])
    assert again[0].status_code == 201, again[0].text
    assert again[0].headers["idempotent-replayed"] == "true"
    assert again[0].json()["id"] == order_id

    assert await order_count(cluster_db, account_id) == 1
    assert await created_event_count(cluster_db, account_id) == 1
    for url in urls:
        assert await inventory(http, url, key, product_id) == 4


@SPREAD
async def test_racing_multi_line_orders_leak_no_partial_reservation(
    cluster: Cluster, cluster_db: Database, http: httpx.AsyncClient, spread: int
) -> None:
    """16 orders for 1 A + 1 B at once, A: 10, B: 4. A is reserved first (its id sorts first),
    so 12 orders take a unit of A before B fails; each must give it back."""
    account_id, key = await new_client_key(cluster_db)
    product_a, product_b = await new_products(cluster_db, 10, 4)
    keys = [str(uuid.uuid4()) if i % 2 == 0 else None for i in range(16)]
    urls = base_urls(cluster, spread)

    responses = await post_orders(http, urls, key, order_body(product_a, product_b), keys)

    assert statuses(responses) == {201: 4, 409: 12}, [r.text for r in responses]
    for response in responses:
        if response.status_code == 409:
            assert_out_of_stock(response, "items[1].quantity")
    for url in urls:
        assert await inventory(http, url, key, product_a) == 6
        assert await inventory(http, url, key, product_b) == 0
    assert await order_count(cluster_db, account_id) == 4
    assert await created_event_count(cluster_db, account_id) == 4
    assert await units_ordered(cluster_db, product_a) == 4
    assert await units_ordered(cluster_db, product_b) == 4
