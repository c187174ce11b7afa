"""Test data: accounts, keys, products and orders, made the way each kind of test needs them.

* Through the service layer, on a :class:`Database` (in-process and both-backend tests):
  :func:`new_account`, :func:`new_key`, :func:`new_customer` (an account, a client key and its
  :class:`Principal`), :func:`new_products` / :func:`new_product` (catalogue rows written
  directly, any stock or time), :func:`place_order` (an order through the placement service).
* Over HTTP, on an ``httpx.AsyncClient`` of the app: :func:`create_product`,
  :func:`post_order`, :func:`place_ok`.
* Through the ``commerce-api`` command, for real-process tests: :func:`cli_env`,
  :func:`run_cli`, :func:`cli_admin_key`.

Request bodies: :data:`ADDRESS`, :func:`product_body`, :func:`order_body`, :func:`order_create`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from commerce_api.accounts import service as accounts
from commerce_api.accounts.service import Principal
from commerce_api.catalog import repository as catalog
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.orders import desk
from commerce_api.orders.schemas import OrderCreate
from commerce_api.settings import Environment, Tier
from commerce_api.storage.db import Database
from tests.helpers import bearer
from tests.server_process import COMMERCE_API

ADDRESS: dict[str, object] = {
    "street": "1 Main St",
    "city": "Springfield",
    "postal_code": "12345",
    "country": "US",
}
CLI_TIMEOUT_SECONDS = 60.0


@asynccontextmanager
async def opened(database_url: str) -> AsyncIterator[Database]:
    """A :class:`Database` on ``database_url`` for the block, disposed of after it."""
    database = Database(database_url)
    try:
        yield database
    finally:
        await database.dispose()


# --- accounts and keys (service layer) -----------------------------------------------------------


async def new_account(db: Database, name: str = "Test account", tier: Tier = "development") -> str:
    async with db.write() as conn:
        return await accounts.create_account(conn, name, tier)


async def new_key(
    db: Database,
    account_id: str | None = None,
    *,
    role: accounts.Role = "client",
    environment: Environment = "sandbox",
) -> accounts.CreatedKey:
    """A key of ``account_id`` (a client key), or with ``role="admin"`` an admin key."""
    async with db.write() as conn:
        return await accounts.create_key(conn, environment, account_id=account_id, role=role)


@dataclass(frozen=True)
class Customer:
    """A client account with one key."""

    account_id: str
    key: accounts.CreatedKey
    principal: Principal

    @property
    def secret(self) -> str:
        return self.key.secret


async def new_customer(
    db: Database,
    name: str = "Test account",
    *,
    tier: Tier = "development",
    environment: Environment = "sandbox",
) -> Customer:
    account_id = await new_account(db, name, tier)
    key = await new_key(db, account_id, environment=environment)
    principal = Principal(key_id=key.id, account_id=account_id, role="client", tier=tier)
    return Customer(account_id, key, principal)


# --- products ------------------------------------------------------------------------------------


def product_row(**overrides: Any) -> dict[str, Any]:
    """A catalogue row (as the repository inserts it): a widget in stock, made now."""
    now = utcnow()
    row: dict[str, Any] = {
        "id": new_id("prod"),
        "name": "Widget",
        "description": "",
        "price_minor": 1999,
        "category": "widgets",
        "inventory_count": 100,
        "created_at": now,
        "updated_at": now,
    }
    row.update(overrides)
    if "created_at" in overrides and "updated_at" not in overrides:
        row["updated_at"] = row["created_at"]
    return row


async def new_products(db: Database, *stocks: int, **fields: Any) -> list[str]:
    """Products with these stocks (and ``fields``), written directly; their ids sort in the
    order given (the order placement locks them in)."""
    ids = sorted(new_id("prod") for _ in stocks)
    rows = [
        product_row(id=product_id, name=f"Widget {product_id[-6:]}", inventory_count=stock) | fields
        for product_id, stock in zip(ids, stocks, strict=True)
    ]
    async with db.write() as conn:
        await catalog.insert_many(conn, rows)
    return ids


async def new_product(db: Database, stock: int = 100, **fields: Any) -> str:
    [product_id] = await new_products(db, stock, **fields)
    return product_id


def product_body(**overrides: object) -> dict[str, object]:
    """The JSON body of a ``POST /v1/products``."""
    body: dict[str, object] = {
        "name": "Notebook",
        "description": "",
        "price": 12.5,
        "category": "stationery",
        "inventory_count": 10,
    }
    body.update(overrides)
    return body


async def create_product(
    client: httpx.AsyncClient, admin_key: str, **overrides: object
) -> dict[str, Any]:
    """A product created over HTTP: the answer's record."""
    response = await client.post(
        "/v1/products", json=product_body(**overrides), headers=bearer(admin_key)
    )
    assert response.status_code == 201, response.text
    product: dict[str, Any] = response.json()
    return product


# --- orders --------------------------------------------------------------------------------------


def order_body(*items: tuple[str, object], **overrides: object) -> dict[str, object]:
    """The JSON body of a ``POST /v1/orders`` for ``(product id, quantity)`` lines."""
    body: dict[str, object] = {
        "customer_id": "cus_123",
        "items": [{"product_id": product_id, "quantity": qty} for product_id, qty in items],
        "shipping_address": dict(ADDRESS),
    }
    body.update(overrides)
    return body


def order_create(*items: tuple[str, int], **overrides: object) -> OrderCreate:
    """The service layer's order request for ``(product id, quantity)`` lines."""
    return OrderCreate.model_validate(order_body(*items, **overrides))


async def place_order(
    db: Database, principal: Principal, *items: tuple[str, int], currency: str = "USD"
) -> dict[str, Any]:
    """An order placed through the placement service (its record)."""
    async with db.write() as conn:
        return await desk.create_order(conn, principal, order_create(*items), currency)


async def post_order(
    client: httpx.AsyncClient, key: str, body: dict[str, object] | list[object]
) -> httpx.Response:
    return await client.post("/v1/orders", json=body, headers=bearer(key))


async def place_ok(
    client: httpx.AsyncClient, key: str, *items: tuple[str, object], **overrides: object
) -> dict[str, Any]:
    """An order placed over HTTP (its record); the answer must be a 201."""
    response = await post_order(client, key, order_body(*items, **overrides))
    assert response.status_code == 201, response.text
    order: dict[str, Any] = response.json()
    return order


# --- the command line (real-process tests) -------------------------------------------------------


def cli_env(database_url: str, **settings: str) -> dict[str, str]:
    """The caller's environment without its ``COMMERCE_*`` variables, plus the database URL and
    ``settings`` (so a developer's own settings never reach the processes under test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    env.update({"COMMERCE_DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"})
    env.update(settings)
    return env


def run_cli(env: Mapping[str, str], workdir: Path, *args: str) -> str:
    """Run a ``commerce-api`` command, which must succeed; its standard output."""
    done = subprocess.run(
        [str(COMMERCE_API), *args],
        cwd=workdir,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}): {done.stderr}"
    return done.stdout


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def cli_admin_key(database_url: str, workdir: Path) -> str:
    """A new admin key, made by ``commerce-api keys create --admin``."""
    return last_line(run_cli(cli_env(database_url), workdir, "keys", "create", "--admin"))


def timestamp(value: str) -> datetime:
    """A timestamp of the API (``…Z``) as a datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
