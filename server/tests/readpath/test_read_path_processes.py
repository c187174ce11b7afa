"""The read path's caches across real ``commerce-api serve`` processes on one database.

Two servers share a database (a SQLite file in WAL mode, or PostgreSQL); each keeps its own
catalogue snapshot and key cache. A write through one process must be seen by that process's very
next request (read-your-writes). Another process (the other server, or the CLI) sees it: on
SQLite by the very next request; on PostgreSQL within ``CROSS_PROCESS_BOUND_SECONDS`` (100 ms:
the caches learn of other processes' commits from PostgreSQL's notifications, which arrive
after the commit). What is checked: a renamed product in the list and the detail, a revoked key
refused with 401, and a stock change; the last test measures the time each took to be seen.

Every wait is bounded; the servers get only ``COMMERCE_DATABASE_URL`` (see server_process.py),
and the CLI runs with the same single setting, in the test's temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from commerce_api.accounts import service as accounts
from commerce_api.storage.db import Database
from tests import factories
from tests.helpers import bearer
from tests.server_process import RunningServer, running_servers

pytestmark = pytest.mark.slow

REQUEST_TIMEOUT_SECONDS = 30.0
WARM_UP_TIMEOUT_SECONDS = 30.0
ROUNDS = 20
REVOKE_EVERY = 5  # a revocation round: 0, 5, 10, 15 (each CLI run costs ~2 s)
IMPORT_ROUNDS = frozenset({7})  # rounds that also rename through `products import`
CATEGORY = "read-path-e2e"
CROSS_PROCESS_BOUND_SECONDS = 0.1  # PostgreSQL (docs/performance.md, "Freshness")


def bound_for(database_url: str) -> float:
    """How long a process may take to see another process's commit."""
    return 0.0 if database_url.startswith("sqlite") else CROSS_PROCESS_BOUND_SECONDS


async def within(bound: float, check: Callable[[], Awaitable[bool]]) -> float:
    """Seconds until ``check()`` holds; fails when it still does not after ``bound`` (checked
    once more at the bound, so a bound of 0 means "the very next request")."""
    started = time.monotonic()
    while True:
        late = time.monotonic() - started >= bound
        if await check():
            return time.monotonic() - started
        assert not late, f"not seen within {bound * 1000:.0f} ms"
        await asyncio.sleep(0.002)


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def shared_database_url(request: pytest.FixtureRequest) -> str:
    """A clean migrated database for the servers, the CLI and the test to share."""
    url: str = request.getfixturevalue(f"{request.param}_database_url")
    return url


@pytest.fixture
async def shared_db(shared_database_url: str) -> AsyncIterator[Database]:
    async with factories.opened(shared_database_url) as database:
        yield database


async def cli(database_url: str, workdir: Path, *args: str) -> str:
    """Run ``commerce-api`` with only ``COMMERCE_DATABASE_URL`` set; its standard output."""
    return await asyncio.to_thread(
        factories.run_cli, factories.cli_env(database_url), workdir, *args
    )


async def set_up(db: Database) -> tuple[str, str, str, str]:
    """An admin key, a client account with a key, and a product: (admin secret, account id,
    product id, client secret)."""
    admin = await factories.new_key(db, role="admin")
    customer = await factories.new_customer(db, "Read path e2e")
    product_id = await factories.new_product(
        db, 1000, name="Original", price_minor=1250, category=CATEGORY
    )
    return admin.secret, customer.account_id, product_id, customer.secret


async def warm_up(
    http: httpx.AsyncClient, server: RunningServer, key: str, product_id: str
) -> None:
    """Until the server lists the product (its snapshot warm-up runs in the background)."""
    deadline = time.monotonic() + WARM_UP_TIMEOUT_SECONDS
    while True:
        response = await http.get(f"{server.base_url}/v1/products", headers=bearer(key))
        if response.status_code == 200 and any(
            item["id"] == product_id for item in response.json()["data"]
        ):
            return
        assert time.monotonic() < deadline, f"{server.base_url} never listed the product"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def two_warm_servers(
    database_url: str, workdir: Path, key: str, product_id: str
) -> AsyncIterator[tuple[RunningServer, RunningServer, httpx.AsyncClient]]:
    """Two servers on the database, each listing the product (their snapshots are warm), and an
    HTTP client, closed before the servers stop so that no idle connection delays their
    shutdown."""
    with running_servers(database_url, workdir, 2) as (first, second):
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_SECONDS) as http:
            for server in (first, second):
                await warm_up(http, server, key, product_id)
            yield first, second, http


async def read_name(
    http: httpx.AsyncClient, server: RunningServer, key: str, product_id: str
) -> tuple[str, str, str, str]:
    """The product's name in the full list, the category list, a list sorted by price (its
    other order), and the detail."""
    names: list[str] = []
    for query in ("?limit=100", f"?category={CATEGORY}", "?sort=-price&limit=100"):
        response = await http.get(f"{server.base_url}/v1/products{query}", headers=bearer(key))
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["data"]
        names.extend(item["name"] for item in items if item["id"] == product_id)
    response = await http.get(f"{server.base_url}/v1/products/{product_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    names.append(response.json()["name"])
    assert len(names) == 4, f"the product is missing from a list: {names}"
    return names[0], names[1], names[2], names[3]


async def has_name(
    http: httpx.AsyncClient, server: RunningServer, key: str, product_id: str, name: str
) -> bool:
    if await read_name(http, server, key, product_id) != (name, name, name, name):
        return False
    # and a search for its name's first word finds it under that name
    query = f"?q={name.split()[0]}&limit=100"
    response = await http.get(f"{server.base_url}/v1/products{query}", headers=bearer(key))
    assert response.status_code == 200, response.text
    return any(
        item["id"] == product_id and item["name"] == name for item in response.json()["data"]
    )


async def refused(http: httpx.AsyncClient, server: RunningServer, url: str, key: str) -> bool:
    response = await http.get(f"{server.base_url}{url}", headers=bearer(key))
    if response.status_code != 401:
        assert response.status_code == 200, f"{server.base_url}{url}: {response.text}"
        return False
    error = response.json()["error"]
    assert (error["code"], error["details"]) == ("unauthorized", "Authorization"), error
    return True


async def test_writes_and_revocations_are_seen_at_once_by_every_process(
    shared_database_url: str, shared_db: Database, tmp_path: Path
) -> None:
    admin_key, account_id, product_id, reader_key = await set_up(shared_db)
    bound = bound_for(shared_database_url)
    servers = two_warm_servers(shared_database_url, tmp_path, reader_key, product_id)
    async with servers as (first, second, http):
        for round_ in range(ROUNDS):
            writer, other = (first, second) if round_ % 2 == 0 else (second, first)

            # a rename through one process is seen by the very next read of the other
            name = f"Round {round_} {secrets.token_hex(3)}"
            response = await http.patch(
                f"{writer.base_url}/v1/products/{product_id}",
                json={"name": name},
                headers=bearer(admin_key),
            )
            assert response.status_code == 200, response.text
            assert await has_name(http, writer, reader_key, product_id, name)
            await within(bound, partial(has_name, http, other, reader_key, product_id, name))

            # a rename through the CLI (a third process) is seen by both
            if round_ in IMPORT_ROUNDS:
                name = f"Imported {round_} {secrets.token_hex(3)}"
                records = tmp_path / f"import-{round_}.json"
                records.write_text(json.dumps([{"id": product_id, "name": name}]))
                output = await cli(
                    shared_database_url, tmp_path, "products", "import", str(records)
                )
                assert "updated=1" in output, output
                for server in (other, writer):
                    await within(
                        bound, partial(has_name, http, server, reader_key, product_id, name)
                    )

            # a key revoked by the CLI is refused within the bound, in either process
            if round_ % REVOKE_EVERY == 0:
                doomed = await factories.new_key(shared_db, account_id)
                for server in (first, second):  # cached in both processes
                    for _ in range(3):
                        await read_name(http, server, doomed.secret, product_id)
                assert (
                    await cli(shared_database_url, tmp_path, "keys", "revoke", doomed.id)
                ).strip()
                order = (other, writer) if round_ % 10 == 0 else (writer, other)
                urls = ["/v1/products", f"/v1/products/{product_id}", "/v1/orders"]
                for server in order:
                    for url in urls:
                        await within(bound, partial(refused, http, server, url, doomed.secret))
                for server in order:  # the account's other key is unaffected
                    await read_name(http, server, reader_key, product_id)


async def inventory(
    http: httpx.AsyncClient, server: RunningServer, key: str, product_id: str
) -> int:
    response = await http.get(f"{server.base_url}/v1/products/{product_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    count: int = response.json()["inventory_count"]
    return count


async def has_stock(
    http: httpx.AsyncClient, server: RunningServer, key: str, product_id: str, units: int
) -> bool:
    return await inventory(http, server, key, product_id) == units


MEASURED_ROUNDS = 15


async def test_another_process_sees_a_stock_change_and_a_revocation_within_the_bound(
    shared_database_url: str, shared_db: Database, tmp_path: Path
) -> None:
    """Measured, not just checked: how long after the writer's answer (or commit) the other
    process first answered with the change, for each of ``MEASURED_ROUNDS`` stock changes and
    revocations; every one within the bound (on SQLite, the very next request)."""
    _, account_id, product_id, reader_key = await set_up(shared_db)
    bound = bound_for(shared_database_url)
    servers = two_warm_servers(shared_database_url, tmp_path, reader_key, product_id)
    async with servers as (first, second, http):
        stock_seen: list[float] = []
        revocation_seen: list[float] = []
        for round_ in range(MEASURED_ROUNDS):
            writer, other = (first, second) if round_ % 2 == 0 else (second, first)
            units = await inventory(http, other, reader_key, product_id)  # cached there
            response = await http.post(
                f"{writer.base_url}/v1/orders",
                json=factories.order_body((product_id, 1), customer_id="cus_bound"),
                headers=bearer(reader_key),
            )
            assert response.status_code == 201, response.text
            assert await has_stock(http, writer, reader_key, product_id, units - 1)
            stock_seen.append(
                await within(
                    bound, partial(has_stock, http, other, reader_key, product_id, units - 1)
                )
            )

            # revoked by this test's process: a third one, like the CLI
            doomed = await factories.new_key(shared_db, account_id)
            for server in (first, second):
                await read_name(http, server, doomed.secret, product_id)  # cached in both
            async with shared_db.write() as conn:
                assert await accounts.revoke_key(conn, doomed.id)
            url = f"/v1/products/{product_id}"
            revocation_seen.append(
                max(
                    [
                        await within(bound, partial(refused, http, s, url, doomed.secret))
                        for s in (other, writer)
                    ]
                )
            )
    print(
        f"{shared_database_url.split(':')[0]}: stock change seen after at most "
        f"{max(stock_seen) * 1000:.1f} ms, revocation after at most "
        f"{max(revocation_seen) * 1000:.1f} ms ({MEASURED_ROUNDS} rounds each)"
    )
