"""An import naming one product on several records (the console's and the CLI's, on both
backends): accepted, one update made in the records' order (a later value of a field wins),
the product counted once."""

from __future__ import annotations

import json
from typing import Any

import httpx

from commerce_api.catalog import importing as catalog
from commerce_api.storage.db import Database
from tests import factories
from tests.console.helpers import page_token, sign_in
from tests.helpers import bearer


def _records(product_id: str) -> list[dict[str, Any]]:
    return [
        {"id": product_id, "inventory_count": 7, "price": 2},
        {"name": "Mug", "price": 1, "category": "kitchen", "inventory_count": 2},
        {"id": product_id, "price": 3},
    ]


async def _product(client: httpx.AsyncClient, admin_key: str, product_id: str) -> Any:
    return (await client.get(f"/v1/products/{product_id}", headers=bearer(admin_key))).json()


async def test_the_console_imports_two_records_for_one_product_as_one_update(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    lamp = await factories.create_product(client, admin_key, name="Lamp", inventory_count=5)
    assert (await sign_in(client, admin_key)).status_code == 303
    token = await page_token(client, "/dashboard/products")
    files = {"file": ("products.json", json.dumps(_records(lamp["id"])), "application/json")}
    response = await client.post(
        "/dashboard/products/import", data={"csrf_token": token}, files=files
    )
    assert response.status_code == 303, response.text
    page = await client.get(response.headers["location"])
    assert "Imported: 1 created, 1 updated." in page.text
    product = await _product(client, admin_key, lamp["id"])
    assert (product["name"], product["inventory_count"], product["price"]) == ("Lamp", 7, 3)


async def test_the_import_service_counts_a_product_named_twice_once(
    db: Database, client: httpx.AsyncClient, admin_key: str
) -> None:
    lamp = await factories.create_product(client, admin_key, name="Lamp", inventory_count=5)
    async with db.write() as conn:
        result = await catalog.import_products(conn, None, _records(lamp["id"]))
    assert result == catalog.ImportResult(created=1, updated=1)
    product = await _product(client, admin_key, lamp["id"])
    assert (product["inventory_count"], product["price"]) == (7, 3)
