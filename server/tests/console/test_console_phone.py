"""The console at phone width (390 px, issue 29 item 7), in Debian's headless Chromium: no page
scrolls sideways, a table's rows are stacked cells each labelled with its column's name, and
ids are cut with an ellipsis while the element keeps the whole id (its text and its title).
On the way, an order is fulfilled with a tracking number through the Fulfil form at that
width, and its page shows the tracking.

Screenshots (``*-phone.png``) go to the test's temporary directory, or to the directory named
by ``COMMERCE_CONSOLE_SCREENSHOTS``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.console.test_console_browser import (
    PHONE,
    _accept_dialogs,
    _fill,
    _open,
    _submit,
    _text,
    _until,
    demo_console,
    screenshots_dir,
)
from tests.factories import ADDRESS
from tests.helpers import bearer
from tests.http.test_docs_browser import Page, _is_loopback, chromium_or_skip, chromium_page

pytestmark = pytest.mark.slow

WIDTH = PHONE["width"]

# Whether anything is wider than the viewport: the document, or a box that scrolls sideways.
_OVERFLOW = """(() => {
  const scrollers = [...document.querySelectorAll('body *')]
    .filter((e) => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
      && e.scrollWidth > e.clientWidth + 1)
    .map((e) => e.tagName + '.' + e.className);
  return {document: document.documentElement.scrollWidth, scrollers};
})()"""

# The first row's cells of the page's first table: their layout, label, and right edge.
_CELLS = """[...document.querySelector('.table-wrap tbody tr').cells].map((td) => ({
  display: getComputedStyle(td).display,
  label: td.dataset.label,
  shown: getComputedStyle(td, '::before').content,
  right: td.getBoundingClientRect().right,
}))"""

# Every id cut to its cell: the whole id in its text and its title, the ellipsis, in view.
_IDS = """[...document.querySelectorAll('code.id')].map((e) => ({
  text: e.textContent,
  title: e.title,
  ellipsis: getComputedStyle(e).textOverflow,
  right: e.getBoundingClientRect().right,
}))"""


def _assert_fits(page: Page, what: str) -> None:
    overflow = page.evaluate(_OVERFLOW)
    assert overflow["document"] <= WIDTH, (what, overflow)
    assert overflow["scrollers"] == [], (what, overflow)


def _assert_stacked(page: Page, labels: list[str]) -> None:
    cells = page.evaluate(_CELLS)
    assert [cell["display"] for cell in cells] == ["block"] * len(labels), cells
    assert [cell["label"] for cell in cells] == labels, cells
    assert all(cell["shown"] not in ("none", "normal", "") for cell in cells), cells
    assert all(cell["right"] <= WIDTH for cell in cells), cells


def _assert_ids_cut(page: Page, expected: set[str]) -> None:
    ids = page.evaluate(_IDS)
    assert expected <= {entry["text"] for entry in ids}, ids
    for entry in ids:
        assert entry["title"] == entry["text"], entry
        assert entry["ellipsis"] == "ellipsis", entry
        assert entry["right"] <= WIDTH, entry


def test_every_console_page_fits_a_phone_and_stacks_its_tables(tmp_path: Path) -> None:
    binary = chromium_or_skip()
    shots = screenshots_dir(tmp_path)
    with demo_console(tmp_path) as (server, api, client_key, admin_key):
        product_id = api.get("/v1/products", headers=bearer(client_key)).json()["data"][0]["id"]
        order_ids = []
        for customer in ("cus_phone_1", "cus_with_a_rather_long_customer_identifier_0042"):
            placed = api.post(
                "/v1/orders",
                json={
                    "customer_id": customer,
                    "items": [{"product_id": product_id, "quantity": 1}],
                    "shipping_address": ADDRESS,
                },
                headers=bearer(client_key),
            )
            assert placed.status_code == 201, placed.text
            order_ids.append(placed.json()["id"])
        order_id = order_ids[-1]

        with chromium_page(binary, tmp_path) as page:
            dialogs = _accept_dialogs(page)
            page.call("Emulation.setDeviceMetricsOverride", PHONE)
            _open(page, f"{server.base_url}/dashboard/sign-in")
            _assert_fits(page, "sign-in")
            page.evaluate("document.querySelector('input[type=password]').focus()")
            page.call("Input.insertText", {"text": admin_key})
            _submit(page, "form[action='/dashboard/sign-in']")
            _until(page, "location.pathname === '/dashboard'", "the overview")
            _assert_fits(page, "overview")

            _open(page, f"{server.base_url}/dashboard/orders")
            _assert_fits(page, "orders")
            _assert_stacked(
                page, ["Select", "Order", "Status", "Customer", "Items", "Total", "Created"]
            )
            _assert_ids_cut(page, set(order_ids))
            page.screenshot(shots / "orders-phone.png")

            _open(page, f"{server.base_url}/dashboard/products")
            _assert_fits(page, "products")
            _assert_stacked(page, ["Select", "Name", "Category", "Price (USD)", "Stock", "Id"])
            _assert_ids_cut(page, {product_id})
            page.screenshot(shots / "products-phone.png")

            # Fulfil with a tracking number, through the form at phone width.
            _open(page, f"{server.base_url}/dashboard/orders/{order_id}")
            _assert_fits(page, "a pending order")
            _assert_stacked(page, ["Product", "Quantity", "Unit price", "Amount"])
            _fill(
                page,
                {
                    "carrier": "UPS",
                    "tracking_number": "1Z999AA10123456784",
                    "tracking_url": "https://ups.example/track?n=1Z999AA10123456784",
                },
            )
            _submit(page, f"form[action='/dashboard/orders/{order_id}/fulfil']")
            _until(
                page,
                "document.getElementById('order-tracking')?.textContent.includes('1Z999')",
                "the order's tracking",
            )
            assert any("Fulfil order" in text for text in dialogs), dialogs
            assert "UPS 1Z999AA10123456784" in _text(page)
            _assert_fits(page, "a fulfilled order")
            page.screenshot(shots / "order-tracking-phone.png")
            order = api.get(f"/v1/orders/{order_id}", headers=bearer(client_key)).json()
            assert order["tracking"] == {
                "carrier": "UPS",
                "number": "1Z999AA10123456784",
                "url": "https://ups.example/track?n=1Z999AA10123456784",
            }

            events = api.get("/v1/events", headers=bearer(client_key)).json()["data"]
            for path in (
                "/dashboard/webhooks",
                f"/dashboard/events/{events[0]['id']}",
                "/dashboard/accounts",
                f"/dashboard/products/{product_id}",
                "/dashboard/products/new",
            ):
                _open(page, f"{server.base_url}{path}")
                _assert_fits(page, path)
            _open(page, f"{server.base_url}/dashboard/webhooks")
            _assert_ids_cut(page, {events[0]["id"], order_id})
            _open(page, f"{server.base_url}/dashboard/accounts")
            _assert_stacked(page, ["Name", "Id", "Tier", "Created"])
            page.screenshot(shots / "accounts-phone.png")

            assert not [url for url in page.requested if not _is_loopback(url)]
            assert not page.exceptions, page.exceptions
