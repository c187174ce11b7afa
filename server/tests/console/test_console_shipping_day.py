"""A day of shipping in the console, at phone width (390 px), in Debian's headless Chromium
(issue 45): search ``bob`` and find cus_bob's orders; select all and fulfil the 25 of them in
bulk from the bar kept at the top of the list; download the orders' CSV, one row per line,
and read its lines; on the way, every page fits the phone without a sideways scroll, no
identifier is broken across lines, Cancel never sits next to Fulfil, the charts' labels read
at 11 px or more, a notice is gone after a reload, and ``/favicon.ico`` answers.

Screenshots (``*-shipping.png``) go to the test's temporary directory, or to the directory
named by ``COMMERCE_CONSOLE_SCREENSHOTS``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import httpx
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
from tests.console.test_console_phone import _assert_fits
from tests.factories import ADDRESS
from tests.helpers import bearer
from tests.http.test_docs_browser import Page, _is_loopback, chromium_or_skip, chromium_page

pytestmark = pytest.mark.slow

BOBS = 25
APART_PX = 24  # buttons of opposite effect: at least this far apart, across or down

_LISTED = "[...document.querySelectorAll('tbody code.id')].map((e) => e.textContent)"

# Code and cut identifiers laid out on more than one line (a word broken across lines), or
# past the viewport's right edge; code marked .wrap (a URL, a list) may break.
_BROKEN = """[...document.querySelectorAll('code:not(.wrap), .cut')]
  .filter((e) => e.getClientRects().length > 1
    || e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
  .map((e) => e.textContent)"""

# The two boxes' distance: the larger of the gap across and the gap down (0 if they touch).
_APART = """((a, b) => {
  const r = a.getBoundingClientRect(), s = b.getBoundingClientRect();
  const across = Math.max(s.left - r.right, r.left - s.right);
  const down = Math.max(s.top - r.bottom, r.top - s.bottom);
  return Math.max(across, down);
})(document.querySelector(%r), document.querySelector(%r))"""

# Where the bulk bar is on screen.
_BAR = """(() => { const r = document.querySelector('.bulk-bar').getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, height: innerHeight}; })()"""

# The smallest label of the page's charts as shown: its font size times the drawing's scale.
_SMALLEST_CHART_TEXT = """Math.min(...[...document.querySelectorAll('svg.chart text')].map(
  (t) => parseFloat(getComputedStyle(t).fontSize) * t.ownerSVGElement.getScreenCTM().a))"""

_EXPORT = """((form) => {
  const fields = new URLSearchParams(new FormData(form));
  fields.set('rows', %r);
  return fetch(form.action + '?' + fields).then(async (r) => ({
    status: r.status, disposition: r.headers.get('content-disposition'), text: await r.text()}));
})(document.querySelector('form[action="/dashboard/orders/export"]'))"""


def _assert_phone_fit(page: Page, what: str) -> None:
    _assert_fits(page, what)
    assert page.evaluate(_BROKEN) == [], what


def _apart(page: Page, first: str, second: str) -> float:
    distance: float = page.evaluate(_APART % (first, second))
    return distance


def _place(api: httpx.Client, key: str, customer: str, items: list[dict[str, Any]]) -> str:
    body = {"customer_id": customer, "items": items, "shipping_address": ADDRESS}
    placed = api.post("/v1/orders", json=body, headers=bearer(key))
    assert placed.status_code == 201, placed.text
    order_id: str = placed.json()["id"]
    return order_id


def _csv(export: dict[str, Any]) -> list[dict[str, str]]:
    assert export["status"] == 200, export
    return list(csv.DictReader(io.StringIO(export["text"].removeprefix("\ufeff"))))


def test_a_day_of_shipping_on_a_phone(tmp_path: Path) -> None:
    binary = chromium_or_skip()
    shots = screenshots_dir(tmp_path)
    with demo_console(tmp_path) as (server, api, client_key, admin_key):
        base = server.base_url
        products = []
        for name, price in (("Mug", 12.5), ("Tea, loose leaf", 4.25)):
            body = {"name": name, "description": "", "price": price, "category": "kitchen"}
            made = api.post(
                "/v1/products", json={**body, "inventory_count": 500}, headers=bearer(admin_key)
            )
            assert made.status_code == 201, made.text
            products.append(made.json()["id"])
        lines = [
            {"product_id": products[0], "quantity": 1},
            {"product_id": products[1], "quantity": 2},
        ]
        bobs = [_place(api, client_key, "cus_bob", lines) for _ in range(BOBS)]
        ann = _place(api, client_key, "cus_ann", lines[:1])
        if "bob" in ann.lower():  # its random part says "Bob": the search finds it too, rightly
            pytest.skip(f"cus_ann's order id {ann} contains 'bob' (about 1 run in 1,700)")
        tracking = {"carrier": "UPS", "number": "1Z999AA10123456784"}
        shipped = api.post(
            f"/v1/orders/{ann}/fulfill", json={"tracking": tracking}, headers=bearer(client_key)
        )
        assert shipped.status_code == 200, shipped.text

        icon = api.get("/favicon.ico")
        assert icon.status_code == 200
        assert icon.headers["content-type"] == "image/svg+xml"

        with chromium_page(binary, tmp_path) as page:
            dialogs = _accept_dialogs(page)
            page.call("Emulation.setDeviceMetricsOverride", PHONE)
            _open(page, f"{base}/dashboard/sign-in")
            _assert_phone_fit(page, "sign-in")
            page.evaluate("document.querySelector('input[type=password]').focus()")
            page.call("Input.insertText", {"text": admin_key})
            _submit(page, "form[action='/dashboard/sign-in']")
            _until(page, "location.pathname === '/dashboard'", "the overview")
            _assert_phone_fit(page, "overview")
            assert page.evaluate(_SMALLEST_CHART_TEXT) >= 11
            assert "COMMERCE_" not in _text(page)  # the shop's terms, not the server's settings
            page.screenshot(shots / "overview-shipping.png")

            # (1) Search "bob": cus_bob's orders, 25 of them over two pages; not cus_ann's.
            _open(page, f"{base}/dashboard/orders")
            _fill(page, {"q": "bob"})
            _submit(page, "form.filters")
            _until(page, "location.search.includes('q=bob')", "the search")
            listed = page.evaluate(_LISTED)
            assert len(listed) == 20, listed
            assert set(listed) <= set(bobs), listed
            assert ann not in listed
            assert f"All {BOBS} matching" in _text(page)
            _assert_phone_fit(page, "orders found")

            # (2) The bulk bar: in view at the top, and still there at the list's end.
            bar = page.evaluate(_BAR)
            assert bar["top"] >= 0, bar
            assert bar["bottom"] <= bar["height"], bar
            fulfil, cancel = ".bulk-bar button[value=fulfil]", ".bulk-bar button[value=cancel]"
            assert _apart(page, fulfil, cancel) >= APART_PX
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            page.pump(0.2)
            bar = page.evaluate(_BAR)
            assert bar["top"] >= 0, bar
            assert bar["bottom"] <= bar["height"], bar
            page.screenshot(shots / "orders-shipping.png")

            # Select all on the page: every box of the page; then all 25 matching.
            page.click("document.querySelector('[data-select-all]:not([name])')", "all on page")
            checked = "document.querySelectorAll('tbody input[name=id]:checked').length"
            assert page.evaluate(checked) == 20
            page.click("document.querySelector('input[name=matching]')", "all matching")
            _submit(page, "form.bulk")
            _until(
                page,
                f"document.querySelector('h1')?.textContent === 'Fulfil {BOBS} orders?'",
                "the confirmation",
            )
            confirming = _text(page)
            assert all(order_id in confirming for order_id in bobs)
            assert ann not in confirming
            _assert_phone_fit(page, "the confirmation")
            _submit(page, "form[action='/dashboard/orders/bulk/run']")
            _until(page, "document.querySelector('h1')?.textContent.includes('done')", "result")
            assert page.evaluate("document.querySelector('h1').textContent") == (
                f"Fulfil orders: {BOBS} done, 0 refused"
            )
            _assert_phone_fit(page, "the result")
            for order_id in bobs:
                order = api.get(f"/v1/orders/{order_id}", headers=bearer(client_key)).json()
                assert order["status"] == "fulfilled", order_id

            # (3) The CSV of the search, one row per line: each order's two lines.
            _open(page, f"{base}/dashboard/orders?q=bob")
            export = page.evaluate(_EXPORT % "line")
            assert "order-lines-" in export["disposition"], export
            rows = _csv(export)
            assert len(rows) == 2 * BOBS
            assert {row["id"] for row in rows} == set(bobs)
            for row in rows:
                assert row["status"] == "fulfilled"
                assert row["ship_city"] == ADDRESS["city"]
                expected = {"1": (products[0], "Mug", "1", "12.50")}
                expected["2"] = (products[1], "Tea, loose leaf", "2", "4.25")
                line = (row["product_id"], row["name"], row["quantity"], row["unit_price"])
                assert line == expected[row["line"]], row
            _open(page, f"{base}/dashboard/orders?q=ann")
            found = {row["id"]: row for row in _csv(page.evaluate(_EXPORT % "order"))}
            # cus_ann's order, and any of cus_bob's whose random id says "Ann" (~1 run in 70)
            assert set(found) == {ann} | {
                order_id for order_id in bobs if "ann" in order_id.lower()
            }
            order_row = found[ann]
            assert order_row["tracking_number"] == tracking["number"]
            assert order_row["lines"] == f"1 × Mug ({products[0]}) @ 12.50"

            # (4) An order's page: Cancel stands apart from Fulfil; its notice shows once.
            pending = _place(
                api, client_key, "cus_with_a_rather_long_customer_identifier_0042", lines
            )
            _open(page, f"{base}/dashboard/orders/{pending}")
            _assert_phone_fit(page, "a pending order")
            apart = _apart(page, ".fulfil button[type=submit]", "form.cancel button")
            assert apart >= APART_PX, apart
            page.screenshot(shots / "order-shipping.png")
            _submit(page, f"form[action='/dashboard/orders/{pending}/cancel']")
            _until(page, "document.body.innerText.includes('Order canceled')", "the notice")
            assert any("Cancel order" in text for text in dialogs), dialogs
            assert "notice" not in page.evaluate("location.search")
            page.call("Page.reload")
            _until(
                page,
                "document.readyState === 'complete' && !!document.getElementById('order-status')",
                "the reloaded page",
            )
            assert "Order canceled" not in _text(page)

            for path in ("/dashboard/audit", "/dashboard/webhooks", "/dashboard/accounts"):
                _open(page, f"{base}{path}")
                _assert_phone_fit(page, path)
            assert not [url for url in page.requested if not _is_loopback(url)]
            assert not page.exceptions, page.exceptions
