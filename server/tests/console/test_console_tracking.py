"""The order page's Fulfil form takes the parcel's tracking (issue 29), validated as the API's
body is, and the page shows it once fulfilled. Both backends."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests import factories
from tests.console.helpers import form_token, sign_in
from tests.helpers import bearer


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


async def _pending_order(client: httpx.AsyncClient, admin_key: str, client_key: str) -> str:
    product = await factories.create_product(client, admin_key)
    order: dict[str, Any] = await factories.place_ok(client, client_key, (product["id"], 1))
    return str(order["id"])


async def _fulfil(console: httpx.AsyncClient, order_id: str, **fields: str) -> httpx.Response:
    page = await console.get(f"/dashboard/orders/{order_id}")
    assert page.status_code == 200, page.text[:2000]
    data = {"csrf_token": form_token(page.text), **fields}
    return await console.post(f"/dashboard/orders/{order_id}/fulfil", data=data)


async def test_the_fulfil_form_records_the_tracking_and_the_page_shows_it(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(console, admin_key, client_key)
    page = await console.get(f"/dashboard/orders/{order_id}")
    for field in ("carrier", "tracking_number", "tracking_url"):
        assert f'name="{field}"' in page.text
    assert 'id="order-tracking"' not in page.text

    url = "https://ups.example/track?n=1Z999&lang=en"
    done = await _fulfil(
        console, order_id, carrier=" UPS ", tracking_number="1Z999", tracking_url=url
    )
    assert done.status_code == 303, done.text[:2000]
    page = await console.get(done.headers["location"])
    assert "Order fulfilled" in page.text
    assert 'id="order-tracking"' in page.text
    assert 'UPS <code class="id" title="1Z999">1Z999</code>' in page.text
    assert 'href="https://ups.example/track?n=1Z999&amp;lang=en"' in page.text
    assert 'name="carrier"' not in page.text  # the form is gone with the pending status

    api = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert api.json()["tracking"] == {"carrier": "UPS", "number": "1Z999", "url": url}


async def test_an_empty_tracking_form_fulfils_without_tracking(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(console, admin_key, client_key)
    done = await _fulfil(console, order_id, carrier="", tracking_number=" ", tracking_url="")
    assert done.status_code == 303, done.text[:2000]
    page = await console.get(done.headers["location"])
    assert 'id="order-tracking"' not in page.text
    api = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert (api.json()["status"], api.json()["tracking"]) == ("fulfilled", None)


async def test_an_invalid_tracking_shows_the_error_keeps_the_fields_and_changes_nothing(
    console: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(console, admin_key, client_key)
    refused = await _fulfil(
        console,
        order_id,
        carrier="UPS",
        tracking_number="1Z<b>999</b>",
        tracking_url="http://ups.example/1Z",
    )
    assert refused.status_code == 400
    assert "text/html" in refused.headers["content-type"]
    assert 'role="alert"' in refused.text
    assert "tracking.url" in refused.text
    assert "https" in refused.text
    assert 'value="1Z&lt;b&gt;999&lt;/b&gt;"' in refused.text  # kept, escaped
    assert 'value="http://ups.example/1Z"' in refused.text

    missing = await _fulfil(console, order_id, carrier="UPS")
    assert missing.status_code == 400
    assert "tracking.number" in missing.text
    api = await console.get(f"/v1/orders/{order_id}", headers=bearer(client_key))
    assert (api.json()["status"], api.json()["version"]) == ("pending", 1)
