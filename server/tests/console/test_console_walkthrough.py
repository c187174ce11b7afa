"""Issue 29's walkthrough, as an operator in Debian's headless Chromium against a real server and
a real webhook receiver (SQLite; the pages' queries are tested on both backends elsewhere).

Orders placed over two days (yesterday's moved there in the database, as test_overview.py does)
→ the overview's charts have a bar for each day; the orders list narrowed by a customer search
and a day filter; its CSV export fetched with the session's cookie and its rows counted; a
bulk fulfil of three orders, one canceled before, refused as ``invalid_transition``; an
endpoint created in the console, its secret shown once, a test event sent and received with a
valid signature; the Audit page listing each of those changes with the session's key.

Screenshots at desktop (1280 px) and phone (390 px) width of the overview, orders, audit and
webhooks pages go to the test's temporary directory, or to ``COMMERCE_CONSOLE_SCREENSHOTS``
(``docs/console/`` holds the committed ones).
"""

from __future__ import annotations

import asyncio
import csv
import io
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from commerce_api.storage.tables import api_keys, orders
from tests.console import test_console_browser as console
from tests.console.test_console_phone import _assert_fits
from tests.factories import opened, order_body, timestamp
from tests.helpers import bearer
from tests.http import test_docs_browser as cdp
from tests.webhook_receiver import running_receiver

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
SHOT_PAGES = ("overview", "orders", "audit", "webhooks")

# The overview's bars: each one's <title> ("2026-11-25 (UTC): 3 orders").
_BAR_TITLES = "[...document.querySelectorAll('svg.chart g.bar title')].map((t) => t.textContent)"
# The orders list's order ids, as shown.
_LISTED = "[...document.querySelectorAll('tbody code.id')].map((e) => e.textContent)"
# The bulk result's rows: order id → its result and reason, as shown.
_OUTCOMES = """Object.fromEntries([...document.querySelectorAll('tbody tr')].map((r) => [
  r.querySelector('code').textContent, r.cells[1].innerText + ' ' + r.cells[2].innerText]))"""
# The Audit page's rows: actor, action and target as shown.
_AUDIT_ROWS = """[...document.querySelectorAll('tbody tr')].map((r) => ({
  actor: r.cells[1].innerText, action: r.cells[2].innerText, target: r.cells[3].innerText}))"""
# The filtered list's export, fetched by the page (so with the session's cookie).
# The export form's URL (a GET form: its fields in the query), fetched.
_EXPORT = """((form) => fetch(form.action + '?' + new URLSearchParams(new FormData(form))))(
  document.querySelector('form[action="/dashboard/orders/export"]'))
  .then(async (r) => ({status: r.status, type: r.headers.get('content-type'),
                        text: await r.text()}))"""


async def _move_and_find_key(
    database_url: str, moved: list[str], at: datetime, admin_last4: str
) -> str:
    """Move ``moved`` orders to ``at``; the id of the admin key ending in ``admin_last4``."""
    async with opened(database_url) as db:
        async with db.write() as conn:
            await conn.execute(update(orders).where(orders.c.id.in_(moved)).values(created_at=at))
        async with db.read() as conn:
            rows = await conn.execute(
                select(api_keys.c.id).where(
                    api_keys.c.role == "admin", api_keys.c.last4 == admin_last4
                )
            )
            key_ids = [row.id for row in rows]
    assert len(key_ids) == 1, key_ids
    return str(key_ids[0])


def _place(api: httpx.Client, key: str, product_id: str, customer: str) -> dict[str, Any]:
    body = order_body((product_id, 1), customer_id=customer)
    placed = api.post("/v1/orders", json=body, headers=bearer(key))
    assert placed.status_code == 201, placed.text
    order: dict[str, Any] = placed.json()
    return order


def _screenshots(page: cdp.Page, base_url: str, shots: Path, paths: dict[str, str]) -> None:
    """Each page at desktop width, then at phone width (where nothing scrolls sideways)."""
    for metrics, suffix in ((DESKTOP, ""), (console.PHONE, "-phone")):
        page.call("Emulation.setDeviceMetricsOverride", metrics)
        for name in SHOT_PAGES:
            console._open(page, f"{base_url}{paths[name]}")
            if suffix:
                _assert_fits(page, name)
            page.screenshot(shots / f"{name}{suffix}.png")
    page.call("Emulation.setDeviceMetricsOverride", DESKTOP)


def test_operator_walkthrough(tmp_path: Path) -> None:
    binary = cdp.chromium_or_skip()
    shots = console.screenshots_dir(tmp_path)
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"  # demo_console's
    with (
        running_receiver() as receiver,
        console.demo_console(tmp_path) as (server, api, client_key, admin_key),
    ):
        base = server.base_url
        product_id = api.get("/v1/products", headers=bearer(client_key)).json()["data"][0]["id"]

        # Orders over two days: three moved to yesterday, four placed today.
        old = [_place(api, client_key, product_id, c) for c in ("cus_walk_a",) * 2 + ("cus_b",)]
        new = [_place(api, client_key, product_id, c) for c in ("cus_walk_a",) * 3 + ("cus_b",)]
        now = timestamp(new[-1]["created_at"])
        yesterday, today = (now - timedelta(days=1)).date(), now.date()
        admin_key_id = asyncio.run(
            _move_and_find_key(
                database_url, [o["id"] for o in old], now - timedelta(days=1), admin_key[-4:]
            )
        )
        todays_a = [o["id"] for o in new[:3]]

        with cdp.chromium_page(binary, tmp_path) as page:
            dialogs = console._accept_dialogs(page)
            page.call("Emulation.setDeviceMetricsOverride", DESKTOP)
            console._open(page, f"{base}/dashboard")
            console._until(page, "location.pathname === '/dashboard/sign-in'", "the sign-in page")
            page.evaluate("document.querySelector('input[type=password]').focus()")
            page.call("Input.insertText", {"text": admin_key})
            console._submit(page, "form[action='/dashboard/sign-in']")
            console._until(page, "location.pathname === '/dashboard'", "the overview")

            # (1) The overview: a bar for each day, its <title> giving its number.
            titles = page.evaluate(_BAR_TITLES)
            assert f"{yesterday:%Y-%m-%d} (UTC): 3 orders" in titles, titles
            assert f"{today:%Y-%m-%d} (UTC): 4 orders" in titles, titles
            revenue = sum(order["total"] for order in old)
            assert f"{yesterday:%Y-%m-%d} (UTC): {revenue:.2f} USD" in titles, titles
            assert page.evaluate("document.querySelectorAll('svg.chart').length") == 4

            # (2) The orders list, narrowed by a customer search, then by a day.
            console._open(page, f"{base}/dashboard/orders")
            assert len(page.evaluate(_LISTED)) == 7
            console._fill(page, {"q": "cus_walk_a"})
            console._submit(page, "form.filters")
            listed = page.evaluate(_LISTED)
            assert sorted(listed) == sorted([o["id"] for o in old[:2]] + todays_a), listed
            page.evaluate(
                f"document.getElementById('created_from').value = '{today:%Y-%m-%d}';"
                f"document.getElementById('created_to').value = '{today:%Y-%m-%d}'"
            )
            console._submit(page, "form.filters")
            listed = page.evaluate(_LISTED)
            assert sorted(listed) == sorted(todays_a), listed
            assert page.evaluate("document.getElementById('q').value") == "cus_walk_a"
            filtered_url = page.evaluate("location.href")

            # (3) Its CSV export: as many rows as the list, the same orders.
            export = page.evaluate(_EXPORT)
            assert export["status"] == 200, export
            assert export["type"].startswith("text/csv"), export
            rows = list(csv.reader(io.StringIO(export["text"].lstrip("\ufeff"))))
            assert rows[0][:3] == ["id", "created_at", "status"], rows[0]
            assert len(rows[1:]) == len(listed) == 3, rows
            assert sorted(row[0] for row in rows[1:]) == sorted(listed)

            # (4) One of today's orders canceled on its page, then all three fulfilled in bulk:
            # a confirmation page, then two done and the canceled one refused.
            canceled = todays_a[2]
            console._open(page, f"{base}/dashboard/orders/{canceled}")
            console._submit(page, f"form[action='/dashboard/orders/{canceled}/cancel']")
            console._until(
                page,
                "document.getElementById('order-status')?.textContent === 'canceled'",
                "the order to read canceled",
            )
            assert any("Cancel order" in text for text in dialogs), dialogs
            console._open(page, filtered_url)
            for order_id in todays_a:
                page.click(
                    f"document.querySelector('input[type=checkbox][value=\"{order_id}\"]')",
                    order_id,
                )
            console._submit(page, "form[action='/dashboard/orders/bulk']")
            console._until(
                page,
                "document.querySelector('h1')?.textContent === 'Fulfil 3 orders?'",
                "the confirmation",
            )
            confirming = console._text(page)
            assert all(order_id in confirming for order_id in todays_a), confirming
            assert (
                api.get(f"/v1/orders/{todays_a[0]}", headers=bearer(client_key)).json()["status"]
                == "pending"
            )  # the confirmation changed nothing
            console._submit(page, "form[action='/dashboard/orders/bulk/run']")
            console._until(
                page, "document.querySelector('h1')?.textContent.includes('done')", "the result"
            )
            assert page.evaluate("document.querySelector('h1').textContent") == (
                "Fulfil orders: 2 done, 1 refused"
            )
            outcomes = page.evaluate(_OUTCOMES)
            assert outcomes[canceled].startswith("refused invalid_transition"), outcomes
            assert [outcomes[o].strip() for o in todays_a[:2]] == ["fulfilled"] * 2, outcomes

            # (5) An endpoint on the real receiver, its secret shown once; a test event it gets.
            console._open(page, f"{base}/dashboard/webhooks")
            console._fill(
                page, {"endpoint-url": receiver.url("/walk"), "endpoint-description": "Walk"}
            )
            console._submit(page, "form[action$='/endpoints']")
            secret = console._until(
                page, "document.getElementById('new-endpoint-secret')?.value", "the secret"
            )
            assert secret.startswith("whsec_"), secret
            endpoint_id = page.evaluate("document.querySelector('#new-endpoint code').textContent")
            console._open(page, f"{base}/dashboard/webhooks")
            assert not page.evaluate("!!document.getElementById('new-endpoint-secret')")
            assert secret not in page.evaluate("document.documentElement.outerHTML")
            console._submit(page, f"form[action$='/endpoints/{endpoint_id}/test']")
            console._until(
                page, "location.pathname.startsWith('/dashboard/events/')", "the event's page"
            )
            assert "webhook.test" in console._text(page), console._text(page)
            deadline = time.monotonic() + cdp.STEP_SECONDS
            while not [r for r in receiver.requests("/walk") if b"webhook.test" in r.body]:
                assert time.monotonic() < deadline, "no webhook.test reached the receiver"
                page.pump(0.1)
            test_delivery = next(r for r in receiver.requests("/walk") if b"webhook.test" in r.body)
            assert test_delivery.verify(secret)["type"] == "webhook.test"

            # (6) The Audit page: each of those changes, by the session's key.
            console._open(page, f"{base}/dashboard/audit?actor_id={admin_key_id}")
            audited = page.evaluate(_AUDIT_ROWS)
            actions = sorted(row["action"] for row in audited)
            assert actions == [
                *("endpoint.create", "endpoint.test", "key.sign_in"),
                *("order.cancel", "order.fulfill", "order.fulfill"),
            ]
            assert all(row["actor"] == f"key {admin_key_id}" for row in audited), audited
            targets = {row["action"]: row["target"] for row in audited}
            assert canceled in targets["order.cancel"], targets
            assert endpoint_id in targets["endpoint.create"], targets
            assert endpoint_id in targets["endpoint.test"], targets
            console._open(page, f"{base}/dashboard/audit")
            every = page.evaluate(_AUDIT_ROWS)
            assert [row for row in every if row["actor"] == f"key {admin_key_id}"] == audited
            assert {row["action"] for row in every} >= {"order.create", "key.create"}

            paths = {
                "overview": "/dashboard",
                "orders": filtered_url.removeprefix(base),
                "audit": "/dashboard/audit",
                "webhooks": "/dashboard/webhooks",
            }
            _screenshots(page, base, shots, paths)

            assert not [url for url in page.requested if not cdp._is_loopback(url)]
            assert not page.exceptions, page.exceptions
