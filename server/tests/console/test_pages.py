"""The console's pages and actions at the HTTP level, on both backends: each action goes
through the API's service functions, and their errors are shown on the page."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from commerce_api.storage.db import Database
from commerce_api.storage.tables import webhook_endpoints
from tests import factories
from tests.conftest import KeyFactory
from tests.console.helpers import form_token, page_token, sign_in
from tests.helpers import bearer


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


async def _product(client: httpx.AsyncClient, admin_key: str, **fields: Any) -> dict[str, Any]:
    lamp = {"name": "Lamp", "category": "home", "inventory_count": 5} | fields
    return await factories.create_product(client, admin_key, **lamp)


async def _order(client: httpx.AsyncClient, client_key: str, product_id: str) -> dict[str, Any]:
    return await factories.place_ok(client, client_key, (product_id, 2), customer_id="cus_42")


async def test_create_edit_and_archive_a_product(
    console: httpx.AsyncClient, admin_key: str
) -> None:
    token = await page_token(console, "/dashboard/products/new")
    fields = {"name": "Teapot", "description": "Blue", "category": "kitchen"}
    created = await console.post(
        "/dashboard/products",
        data=fields | {"price": "19.99", "inventory_count": "7", "csrf_token": token},
    )
    assert created.status_code == 303
    path = created.headers["location"].split("?")[0]
    product_id = path.rsplit("/", 1)[1]
    api = (await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))).json()
    assert (api["name"], api["price"], api["inventory_count"]) == ("Teapot", 19.99, 7)

    page = await console.get(path)
    assert 'value="19.99"' in page.text
    saved = await console.post(
        path, data=fields | {"price": "21", "inventory_count": "3", "csrf_token": token}
    )
    assert saved.status_code == 303
    api = (await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))).json()
    assert (api["price"], api["inventory_count"]) == (21, 3)

    listing = await console.get("/dashboard/products?q=teap&category=kitchen")
    assert "Teapot" in listing.text
    assert ">3</td>" in listing.text  # the stock is shown
    assert "Teapot" not in (await console.get("/dashboard/products?category=books")).text

    archived = await console.post(f"{path}/archive", data={"csrf_token": token})
    assert archived.status_code == 303
    gone = await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))
    assert gone.status_code == 404


async def test_invalid_product_form_shows_the_services_messages(
    console: httpx.AsyncClient,
) -> None:
    token = await page_token(console, "/dashboard/products/new")
    response = await console.post(
        "/dashboard/products",
        data={"name": "", "price": "1.234", "category": "x", "csrf_token": token},
    )
    assert response.status_code == 400
    assert "Nothing was saved" in response.text
    assert "<code>name</code>" in response.text
    assert "<code>price</code>" in response.text


async def test_import_is_all_or_nothing_with_every_bad_record_named(
    console: httpx.AsyncClient, admin_key: str
) -> None:
    token = await page_token(console, "/dashboard/products")
    records = [
        {"name": "Good", "price": 1, "category": "a", "inventory_count": 1},
        {"name": "", "price": 1, "category": "a"},
        {"name": "Also good", "price": 2, "category": "a"},
        {"name": "Bad price", "price": -1, "category": "a"},
    ]
    files = {"file": ("products.json", json.dumps(records), "application/json")}
    response = await console.post(
        "/dashboard/products/import", data={"csrf_token": token}, files=files
    )
    assert response.status_code == 400
    assert "Nothing was imported" in response.text
    assert "record 2, field name: must be 1 to 200 characters long" in response.text
    assert "record 4, field price: must not be negative" in response.text
    listing = await console.get("/v1/products", headers=bearer(admin_key))
    assert listing.json()["pagination"]["total"] == 0

    csv = "name,description,price,category,inventory_count\nMug,,4.50,kitchen,9\nCup,,3,kitchen,2\n"
    files = {"file": ("products.csv", csv, "text/csv")}
    response = await console.post(
        "/dashboard/products/import", data={"csrf_token": token}, files=files
    )
    assert response.status_code == 303
    page = await console.get(response.headers["location"])
    assert "Imported: 2 created, 0 updated." in page.text
    listing = await console.get("/v1/products", headers=bearer(admin_key))
    assert listing.json()["pagination"]["total"] == 2


async def test_fulfil_an_order_and_see_its_event(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await _product(console, admin_key)
    order = await _order(console, client_key, product["id"])
    await console.post(
        "/v1/webhook_endpoints",
        json={"url": "http://127.0.0.1:9/hook"},
        headers=bearer(client_key),
    )
    listing = await console.get("/dashboard/orders?status=pending")
    assert order["id"] in listing.text
    page = await console.get(f"/dashboard/orders/{order['id']}")
    assert "1 Main St" in page.text
    assert "25.00" in page.text  # 2 units at 12.50
    assert "order.created" in page.text

    token = form_token(page.text)
    done = await console.post(f"/dashboard/orders/{order['id']}/fulfil", data={"csrf_token": token})
    assert done.status_code == 303
    page = await console.get(done.headers["location"])
    assert "Order fulfilled" in page.text
    assert 'id="order-status"' in page.text
    assert ">fulfilled</span>" in page.text
    assert "order.fulfilled" in page.text
    api = await console.get(f"/v1/orders/{order['id']}", headers=bearer(client_key))
    assert api.json()["status"] == "fulfilled"
    status = await console.get(f"/dashboard/orders/{order['id']}/status")
    assert status.json()["status"] == "fulfilled"

    # The service's refusal is shown on the page, not as a 500 or the API's JSON.
    again = await console.post(
        f"/dashboard/orders/{order['id']}/cancel", data={"csrf_token": token}
    )
    assert again.status_code == 409
    assert "text/html" in again.headers["content-type"]
    assert 'role="alert"' in again.text


async def test_cancel_an_order_returns_its_stock(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await _product(console, admin_key)
    order = await _order(console, client_key, product["id"])
    token = await page_token(console, f"/dashboard/orders/{order['id']}")
    response = await console.post(
        f"/dashboard/orders/{order['id']}/cancel", data={"csrf_token": token}
    )
    assert response.status_code == 303
    stock = await console.get(f"/v1/products/{product['id']}", headers=bearer(admin_key))
    assert stock.json()["inventory_count"] == 5


async def test_orders_filter_by_account(
    console: httpx.AsyncClient, admin_key: str, make_key: KeyFactory
) -> None:
    product = await _product(console, admin_key)
    first, second = await make_key(), await make_key()
    mine = await _order(console, first, product["id"])
    theirs = await _order(console, second, product["id"])
    account = (await console.get(f"/v1/orders/{mine['id']}", headers=bearer(first))).json()
    assert account["id"] == mine["id"]
    page = await console.get(f"/dashboard/orders/{mine['id']}")
    account_id = re.search(r"account_id=(acct_\w+)", page.text)
    assert account_id is not None
    listing = await console.get(f"/dashboard/orders?account_id={account_id.group(1)}")
    assert mine["id"] in listing.text
    assert theirs["id"] not in listing.text


async def test_webhooks_page_redeliver_and_re_enable(
    console: httpx.AsyncClient, admin_key: str, client_key: str, db: Database
) -> None:
    product = await _product(console, admin_key)
    endpoint = (
        await console.post(
            "/v1/webhook_endpoints",
            json={"url": "http://127.0.0.1:9/hook"},
            headers=bearer(client_key),
        )
    ).json()
    order = await _order(console, client_key, product["id"])
    async with db.write() as conn:
        await conn.execute(
            update(webhook_endpoints).values(enabled=False, disabled_reason="Receiver gone (410)")
        )
    page = await console.get("/dashboard/webhooks")
    assert "http://127.0.0.1:9/hook" in page.text
    assert "Receiver gone (410)" in page.text
    assert "order.created" in page.text
    event_id = re.search(r"/dashboard/events/(evt_\w+)", page.text)
    assert event_id is not None
    account_id = re.search(r"/dashboard/webhooks/(acct_\w+)/endpoints", page.text)
    assert account_id is not None

    token = form_token(page.text)
    enabled = await console.post(
        f"/dashboard/webhooks/{account_id.group(1)}/endpoints/{endpoint['id']}/enable",
        data={"csrf_token": token},
    )
    assert enabled.status_code == 303
    api = await console.get(f"/v1/webhook_endpoints/{endpoint['id']}", headers=bearer(client_key))
    assert api.json()["enabled"] is True

    event_page = await console.get(f"/dashboard/events/{event_id.group(1)}")
    assert order["id"] in event_page.text
    assert endpoint["id"] in event_page.text
    first = await console.post(
        f"/dashboard/events/{event_id.group(1)}/redeliver", data={"csrf_token": token}
    )
    assert first.status_code == 303
    # A second redelivery while the first waits is refused by the service: shown on the page.
    second = await console.post(
        f"/dashboard/events/{event_id.group(1)}/redeliver", data={"csrf_token": token}
    )
    assert second.status_code == 409
    assert "still queued" in second.text


async def test_create_account_and_key_shown_once_then_revoke(
    console: httpx.AsyncClient,
) -> None:
    token = await page_token(console, "/dashboard/accounts")
    await console.post("/dashboard/accounts", data={"name": "Acme", "csrf_token": token})
    page = await console.get("/dashboard/accounts")
    account_id = re.search(r'<option value="(acct_\w+)">client key: Acme', page.text)
    assert account_id is not None
    created = await console.post(
        "/dashboard/keys", data={"account_id": account_id.group(1), "csrf_token": token}
    )
    assert created.status_code == 201
    secret = re.search(r'id="new-key-secret" readonly value="(sk_sandbox_\w+)"', created.text)
    assert secret is not None
    assert 'data-copy="new-key-secret"' in created.text
    key = secret.group(1)
    assert (await console.get("/v1/products", headers=bearer(key))).status_code == 200
    assert key not in (await console.get("/dashboard/accounts")).text  # shown once

    key_id = re.search(r'<h2 id="new-key">New client key <code[^>]*>(key_\w+)</code>', created.text)
    assert key_id is not None
    revoked = await console.post(
        f"/dashboard/keys/{key_id.group(1)}/revoke", data={"csrf_token": token}
    )
    assert revoked.status_code == 303
    assert (await console.get("/v1/products", headers=bearer(key))).status_code == 401


async def test_create_a_publishable_key_shown_once_then_revoke(
    console: httpx.AsyncClient, client_key: str
) -> None:
    token = await page_token(console, "/dashboard/accounts")
    await console.post("/dashboard/accounts", data={"name": "Storefront", "csrf_token": token})
    page = await console.get("/dashboard/accounts")
    assert '<option value="publishable">' in page.text
    account_id = re.search(r'<option value="(acct_\w+)">client key: Storefront', page.text)
    assert account_id is not None
    created = await console.post(
        "/dashboard/keys",
        data={"account_id": account_id.group(1), "kind": "publishable", "csrf_token": token},
    )
    assert created.status_code == 201
    secret = re.search(r'id="new-key-secret" readonly value="(pk_sandbox_\w+)"', created.text)
    assert secret is not None
    assert "reads the catalogue (products and categories) and nothing else" in created.text
    key = secret.group(1)
    assert (await console.get("/v1/products", headers=bearer(key))).status_code == 200
    refused = await console.get("/v1/orders", headers=bearer(key))
    assert refused.status_code == 403
    assert refused.json()["error"]["reason"] == "publishable_key_not_allowed"
    listed = await console.get("/dashboard/accounts")
    assert key not in listed.text  # shown once
    key_id = re.search(
        r'<h2 id="new-key">New publishable key <code[^>]*>(key_\w+)</code>', created.text
    )
    assert key_id is not None
    row = listed.text[listed.text.index(key_id.group(1)) :]
    assert '<td data-label="Role">publishable</td>' in row[: row.index("</tr>")]

    revoked = await console.post(
        f"/dashboard/keys/{key_id.group(1)}/revoke", data={"csrf_token": token}
    )
    assert revoked.status_code == 303
    assert (await console.get("/v1/products", headers=bearer(key))).status_code == 401


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"account_id": "", "kind": "publishable"}, "A publishable key belongs to an account"),
        ({"account_id": "", "kind": "shiny"}, "A key&#39;s kind is"),
    ],
)
async def test_a_key_form_that_names_no_key_is_a_page_not_a_key(
    console: httpx.AsyncClient, form: dict[str, str], message: str
) -> None:
    token = await page_token(console, "/dashboard/accounts")
    before = (await console.get("/dashboard/accounts")).text.count(
        '<td data-label="Key"><code class="id"'
    )
    response = await console.post("/dashboard/keys", data={**form, "csrf_token": token})
    assert response.status_code == 400
    assert message in response.text
    assert 'id="new-key-secret"' not in response.text
    after = (await console.get("/dashboard/accounts")).text.count(
        '<td data-label="Key"><code class="id"'
    )
    assert after == before


async def test_overview_shows_pending_orders_and_the_outbox(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product = await _product(console, admin_key)
    await console.post(
        "/v1/webhook_endpoints", json={"url": "http://127.0.0.1:9/h"}, headers=bearer(client_key)
    )
    await _order(console, client_key, product["id"])
    page = await console.get("/dashboard")
    figures = re.findall(r'<p class="figure">(\d+)</p>', page.text)
    assert figures[:2] == ["1", "1"]  # one pending order; one delivery in the outbox


async def test_unknown_ids_are_a_page_not_a_500(console: httpx.AsyncClient) -> None:
    for path in ("/dashboard/orders/ord_nope", "/dashboard/products/x", "/dashboard/events/e"):
        response = await console.get(path)
        assert response.status_code == 404, path
        assert "text/html" in response.headers["content-type"]


async def test_values_are_escaped_on_the_pages(console: httpx.AsyncClient, admin_key: str) -> None:
    await _product(console, admin_key, name="<script>alert(1)</script>", category="x")
    page = await console.get("/dashboard/products")
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


async def test_the_orders_and_events_pages_show_the_newest_first(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    """As the API lists them (issue 31); the webhooks page shows the account's newest events."""
    product = await _product(console, admin_key)
    first = await _order(console, client_key, product["id"])
    second = await _order(console, client_key, product["id"])
    orders = (await console.get("/dashboard/orders")).text
    assert orders.index(second["id"]) < orders.index(first["id"])
    events = await console.get(f"/v1/events?order_id={second['id']}", headers=bearer(client_key))
    [newest] = events.json()["data"]
    page = (await console.get("/dashboard/webhooks")).text
    shown = re.findall(r"/dashboard/events/(evt_\w+)", page)
    assert shown[0] == newest["id"]
